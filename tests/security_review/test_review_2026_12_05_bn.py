"""Review of 2026-12-05 (bn): the commits of the last hour on the sagas' bulk actions, the agent loop's token stop
and model adapters, and the recorded audit export.

Each test fails on the reviewed code (main at bc53989) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. The confirmation page of the sagas' and compensations' "Retry" and "Resolve by hand" carried each listed
   compensation's mark in a hidden field of its own (``mark_<id>``). Django refuses a POST of more than
   ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` (1,000) fields, so confirming a page that lists about a thousand
   compensations (one list page of sagas with ten failed compensations each) answered a bare "Bad Request (400)":
   the operator could never retry or resolve them from the list. The marks now travel in one hidden field.

Checked and holding:

- Tenant scope of the confirmation pages: the confirming POST re-reads the selected rows from the admin's
  tenant-scoped queryset, so another tenant's ids in ``_selected_action`` act on nothing of theirs; a mark forged
  for another tenant's compensation is not among the scope's marks, so the comparison refuses the confirm.
- Double submit: the first confirm moves each compensation (status, attempts, ``updated_at``), so the second POST
  of the same page is refused as stale (review m's test).
- Four-eyes on resolve: ``compensations_resolve`` calls ``compensation_resolve(by=...)`` per row, which refuses the
  operator's own step (reported, left as it is) and resolves the others.
- The export header's signature is domain-separated from a checkpoint's: its signed text starts with
  ``toolhub-audit-export-header/1``, a checkpoint's body is JSON (``trusted_body`` parses it), so neither passes
  for the other. ``python -m toolhub.audit_file_verify`` runs with ``DJANGO_SETTINGS_MODULE`` unset.
- ``_stopped_on_tokens`` before asking ends the run through ``run_finish`` with its step released (lease and token
  cleared), the tool results appended that turn saved with it (``END_FIELDS`` holds ``messages``), as the
  immediate-return stop does; a run at exactly its budget after a turn still has that turn's calls run.
"""

import uuid

import pytest
from django.contrib.auth.models import User

from tests.helpers import action_confirmation, console
from tests.tenancy.conftest import AcmeData
from toolhub.models import ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Saga, SagaStatus

SAGAS = "/admin/sagas/saga/"

#: More compensations than Django's ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` (1,000) counts fields of one POST.
MANY = 1000


def _many_failed(acme: AcmeData) -> list[Compensation]:
    """acme's saga with ``MANY`` more steps whose compensation failed (each step its own call, as recorded)."""
    template = acme.artifact_call
    calls = []
    for i in range(MANY):
        call = ToolCall.objects.get(pk=template.pk)
        call.id, call.key = uuid.uuid4(), f"bn-step-{i}"
        calls.append(call)
    ToolCall.objects.bulk_create(calls)
    Saga.objects.filter(pk=acme.saga.pk).update(status=SagaStatus.NEEDS_ATTENTION)
    return Compensation.objects.bulk_create(
        Compensation(
            saga=acme.saga,
            sequence=acme.compensation.sequence + 1 + i,
            step_call=call,
            step_tool=call.tool_name,
            tool_name="credit",
            status=CompensationStatus.FAILED,
            last_error="the bank timed out",
        )
        for i, call in enumerate(calls)
    )


@pytest.mark.django_db(transaction=True)
def test_a_confirmation_page_of_a_thousand_compensations_can_be_confirmed(acme: AcmeData, acme_operator: User) -> None:
    """Found: "Resolve by hand" on acme's saga with a thousand failed compensations showed its page, but confirming
    it posted a field per compensation and Django refused the POST ("Bad Request (400)"): nothing could be resolved
    from the list.

    Expect: the confirm is read and acts: every listed compensation resolved by the operator with their note.
    """
    failed = _many_failed(acme)
    client = console(acme_operator)
    confirmation = action_confirmation(client, SAGAS, "resolve_selected", [acme.saga.pk])

    answer = client.post(SAGAS, {**confirmation, "note": "refunded by hand"}, follow=True)

    assert answer.status_code == 200, answer.status_code
    assert f"{MANY} compensation(s) resolved." in [str(m) for m in answer.context["messages"]]
    resolved = Compensation.objects.filter(pk__in=[c.pk for c in failed], status=CompensationStatus.RESOLVED)
    assert resolved.count() == MANY
    assert set(resolved.values_list("resolved_by", flat=True)) == {"user:acme-operator"}
