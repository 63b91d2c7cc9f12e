"""Review of 2026-12-05 (cs): review bn's changes (the confirmation pages' one ``marks`` field, ``lock_sagas``,
``RecordedExport.fail``), the export events, the login pair locks, the small-order key refusal, the adapters'
reasoning and refusal, and the README statements of the last hour.

Each test fails on the reviewed code (main at 1f8d8e8) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. Review bn moved the lists' confirmation pages to one hidden ``marks`` field, as Django refuses a POST of more
   than ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` (1,000) fields; the saga's own page kept its Retry form with one ``seen``
   field per compensation needing attention. On a saga with a thousand of them the button answered "Bad Request
   (400)" and nothing could be retried from it. The form now carries the marks in the same one field, read by the
   same function (``_seen``): one way for every page bound to what it showed.

Checked and holding:

- Lock order: every place that locks several sagas in one transaction goes through ``lock_sagas`` (id order): the
  lists' Retry and Resolve (``_hold_as_seen``) and ``run_rollback_with_subagents``. The other ``select_for_update``
  of sagas (``locked_saga``, ``lock_saga_of``, ``saga_rollback``, ``saga_record_step``, ``saga_advance``) take one
  saga each; ``compensation_retry``/``compensation_resolve`` lock the compensation's saga, which the bulk caller
  already holds; toolhub/calls.py and toolhub/sweeper.py lock no saga; the agent loop locks the run, then its
  own saga only (``saga_rollback_on_failure``).
- The ``marks`` field: compared as a sorted list with the scope's marks under the sagas' locks, so garbage, a
  duplicate (one mark twice and one missing), an extra or a missing mark is refused as stale with nothing done; a
  mark holds no space (id, status, attempts, ISO time), so splitting on spaces loses nothing; its size is bounded
  by ``DATA_UPLOAD_MAX_MEMORY_SIZE``.
- ``RecordedExport.fail`` closes the reading before recording; ``close`` (the console's streamed response, WSGI and
  ASGI alike call the response's ``close``) goes through ``fail``; a reading that raised has ended its transaction
  (rolled back) before ``fail`` records; ``complete`` runs after the generator's transaction ended.
- The export events: no allow-list of event types exists (the console's filter lists the trail's types by a skip
  scan, or takes them typed); ``verify_audit``, checkpoints and the offline verifier check every event by its hash
  whatever its type; ``audit.export_started`` is written before the reading, so it is in the file it describes.
- ``_pair_held``: the stripe lock and the advisory lock are released by ``with`` on every exception; the stripe is
  let go after the transaction commits; ``AXES_ENABLED`` False is a plain transaction as before.
- ``parse_public_key``: the hex and base64 spellings both reach ``_degenerate_key_problem`` (a 64-character text
  that is not hex is refused, not read as base64); ``header_signature_problem`` checks the key it is given too;
  the eight small-order points' y values (and sign-bit spellings) and any y at or above p are refused.
- ``reasoning_texts`` returns at most one text; a whole answer's text is content then refusal, as a stream's.
- README statements since 18:00: ``audit_export --actor`` (default ``cli:<OS user>``), ``audit_public_key``
  failing with no checkpoint key, the verifier's exits (2 for a malformed key, key file or ``--head``, a
  degenerate key; ``--key-env`` refused), ``TOOLHUB_LOGIN_FAILURE_LIMIT``, the governed commands' list
  (``axes_reset_ip_username`` included, listed before the apps they override), ``command:uid-<n>``, the provider
  URL refusal (user info, query, fragment), ``pair_stripe``, the password-change page's lockout when opened:
  each matches the code. One was false and is corrected (no test: documentation): "``audit.export_started`` ...
  is in the file" holds only when the range reaches it; a ``--to-seq`` or ``--until`` ending before it leaves it
  out (``audit_export_open`` clips the spans to them).

Noted, not changed:

- The approval desk's "Approve/Reject selected" confirmation page carries two fields per request
  (``arguments_hash_<id>``, ``fields_version_<id>``) besides ``_selected_action``: "select all" of about 333
  pending requests or more is refused by Django (400) at the confirm. Decisions are limited to 60 a minute
  (``TOOLHUB_THROTTLE_DECISIONS``) anyway, so a batch of that size is not one the desk means to decide at once;
  MCP's "Accept the definition offered now" carries one field per row likewise (about 500 rows).

- ``reasoning_texts`` keeps the first non-empty field, not the longest: an endpoint sending two different
  reasonings would have only ``reasoning_content`` counted against the bound.
"""

import re

import pytest
from django.contrib.auth.models import User

from tests.helpers import console
from tests.security_review.test_review_2026_12_05_bn import MANY, _many_failed
from tests.tenancy.conftest import AcmeData
from toolhub.models import AuditEvent


def _posted(html: str, form_id: str) -> list[tuple[str, str]]:
    """The hidden inputs of the form ``form_id`` (its CSRF token included), in order, as the browser posts them."""
    form = re.search(rf'<form[^>]*id="{form_id}"[^>]*>(.*?)</form>', html, re.S)
    assert form, f"no form #{form_id} on the page"
    return re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form.group(1))


@pytest.mark.django_db(transaction=True)
def test_the_saga_pages_retry_of_a_thousand_compensations_is_one_field(acme: AcmeData, acme_operator: User) -> None:
    """Found: acme's saga page, with a thousand failed compensations, showed its Retry button, but the form carried
    one ``seen`` field per compensation and Django refused the POST ("Bad Request (400)"): nothing was retried.

    Expect: the form posts its marks in one field, and pressing Retry retries every compensation it showed.
    """
    _many_failed(acme)
    client = console(acme_operator)
    page = client.get(f"/admin/sagas/saga/{acme.saga.pk}/change/").content.decode()
    posted: dict[str, list[str]] = {}
    for name, value in _posted(page, "saga-retry"):
        posted.setdefault(name, []).append(value)

    answer = client.post(f"/admin/sagas/saga/{acme.saga.pk}/retry/", posted, follow=True)

    assert answer.status_code == 200, answer.status_code
    messages = [str(m) for m in answer.context["messages"]]
    assert f"{MANY} compensation(s) retried." in messages, messages
    retried = AuditEvent.objects.filter(event_type="compensation.retry_requested", tenant="acme")
    assert retried.count() == MANY
