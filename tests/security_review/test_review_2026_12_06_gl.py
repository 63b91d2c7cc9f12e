"""Review 2026-12-06 (gl): the two fixes of the last hour, again: review gh's numbers stored as the database gives
them back (``toolhub.storable.stored_numbers``, ``StorableJSONParser``) and review gc's saga trail pages
(``toolhub.sagas.admin_trail``, ``/admin/sagas/saga/{id}/audit-events/?after=``, ``saga_audit_events``).

Each finding's test fails on the code as found (main at b4a99d8) and says what was found and what is expected.

Findings:

1. A saga trail page's ``?after=`` that is not an event of the saga's trail was either a 500 or silently ignored:
   ``trail_page`` took any text ``str.isdigit`` accepts and called ``int()`` on it, so ``?after=²`` (a superscript
   digit, which ``isdigit`` accepts and ``int`` refuses) or an id of more than 4,300 digits raised ``ValueError``
   (500); any other value (another saga's event, another tenant's, garbage, a negative number, an id past the
   table's range) showed the trail from its start as if it were the page asked for, saying nothing, so an auditor
   following a stale or edited link read the first events as the ones after the event named. Now only an id
   written in ASCII digits within the table's range is looked up, on the saga's own trail; anything else shows the
   start with a note saying the page asked for names no event of this trail (nothing of the named event shown).

Checked and holding (tests below where marked):

- Keyset paging by (created_at, id) over ``saga_audit_events``: events with equal ``created_at`` and
  ids that run against time are each shown once, in the trail's order, whatever the page boundaries
  (``test_the_trail_pages_show_each_event_once_when_times_tie_and_ids_run_backwards``); a later page reads six
  statements (the trail's call ids in two, the named event, the page, the count before it, the total), the saga's
  own page four (call ids in two, page, total when cut).
- ``stored_numbers`` against PostgreSQL's jsonb (probed by writing and reading back a ``ToolCall.arguments``):
  ``1e16``, ``1.5e300``, ``-1.5e300``, ``1.7976931348623157e308``, ``-0.0``, ``1e-7``, ``5e-324``, ``2**53 + 1``,
  a 4,000-digit integer, ``123456789012345.6``, nested lists and objects: what it returns equals, by type and text,
  what PostgreSQL gives back. SQLite keeps the text Django wrote (``json.dumps``), so it gives back the same.
- ``stored_numbers`` against 7,993 random finite doubles (every bit pattern, and values across 50 decades) sent
  to PostgreSQL as one jsonb array: no difference in type or text.
- A call held for approval before gh's change (its binding made over ``1e+16`` while the row holds
  ``10000000000000000``) cannot be approved as it is: the approval answers "The arguments under approval no longer
  match ...; Reject this request and ask for the call again" (clear, nothing recorded). An edit that changes a value
  re-binds the version read back (``approvals.services._edit``); an edit to the same values is no edit
  (``approvals.editing``). Not changed: accepting a second, legacy form of the binding would weaken it for a
  transitional case the desk already answers (read in code).
- Compensation retries and the approval desk bind pages by marks of status, attempts and times, never by a
  digest of JSON values; a desk's ``expected_hash`` is compared as the stored text.
- Hashes over values before they are stored: the idempotency fingerprint is kept as text and compared with the
  fingerprint of the retry's request (never recomputed from the row); the audit hash covers ``data`` kept as text
  exactly as hashed; ``result_sha256`` of an external or subagent result is over the result as posted (documented
  nowhere as recomputable from the row). The langgraph adapter binds both sides through ``storable_arguments``.
"""

import itertools
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from tests.security_review.conftest import client_for
from toolhub import tool
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.sagas.admin_trail import TRAIL_PAGE, trail_page
from toolhub.sagas.models import Compensation, Saga
from toolhub.sagas.selectors import saga_audit_events
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db


@tool
def unbook_gl_seat(seat: str) -> dict[str, Any]:
    """Give a seat back."""
    return {"released": seat}


@tool(compensate_with="unbook_gl_seat", compensation_mapping=lambda arguments, result: {"seat": result["seat"]})
def book_gl_seat(seat: str) -> dict[str, Any]:
    """Book a seat; given back by ``unbook_gl_seat``."""
    return {"seat": seat}


def _rolled_back_saga(alice: User, acme_operator: User, capture: Any, key: str) -> Saga:
    """Alice's direct saga ``key``: one step booked, then rolled back by an operator."""
    with registry.temporarily(book_gl_seat, unbook_gl_seat), capture(execute=True):
        made = client_for(alice).post(
            "/api/v1/calls/", {"tool": "book_gl_seat", "arguments": {"seat": "12A"}, "saga_id": key}, format="json"
        )
    assert ToolCall.objects.get(pk=made.json()["id"]).status == CallStatus.SUCCEEDED, made.content
    with registry.temporarily(book_gl_seat, unbook_gl_seat), capture(execute=True):
        saga_rollback_on_demand(saga_key=key, tenant="acme", actor="user:acme-operator", by=acme_operator)
    return Saga.objects.get(key=key, tenant="acme")


_chain_seq = itertools.count(1)


def _more_events(
    saga: Saga, how_many: int, *, tenant: str = "acme", tied: int = 3, event_type: str = "call.gl_marker"
) -> list[int]:
    """``how_many`` events of the saga's step call, ``tied`` at a time sharing a moment, ids running against time
    (another tenant's are of no call)."""
    step = Compensation.objects.get(saga=saga).step_call_id if tenant == "acme" else None
    start = timezone.now() + timedelta(hours=1)
    made = AuditEvent.objects.bulk_create(
        AuditEvent(
            chain=876_543_210,
            seq=next(_chain_seq),
            event_type=event_type,
            call_id=step,
            tool_name="book_gl_seat",
            tenant=tenant,
            actor="gl",
            created_at=start + timedelta(seconds=(how_many - n) // tied),
            hash="0" * 64,
        )
        for n in range(how_many)
    )
    return [event.pk for event in made]


def test_the_trail_pages_show_each_event_once_when_times_tie_and_ids_run_backwards(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any, django_assert_max_num_queries: Any
) -> None:
    """Holding: the trail is paged by the last event read while it is ordered by (created_at, id).

    Found: each page starts strictly after the named event in that order (ties broken by id), so no event is
    skipped or repeated, though many share a moment and later ids are earlier in time.
    Expect: walking every page lists the whole trail once, in its order; a page costs at most six statements.
    """
    saga = _rolled_back_saga(alice, acme_operator, django_capture_on_commit_callbacks, key="gl-pages")
    _more_events(saga, 2 * TRAIL_PAGE + 7)
    whole = list(saga_audit_events(saga).values_list("id", flat=True))

    with django_assert_max_num_queries(4):
        page = trail_page(saga)
    seen = [event.pk for event in page.events]
    while page.next_after is not None:
        with django_assert_max_num_queries(6):
            page = trail_page(saga, str(page.next_after))
        assert page.before == len(seen)
        seen += [event.pk for event in page.events]

    assert seen == whole and len(set(seen)) == len(whole) > 2 * TRAIL_PAGE


def test_a_trail_page_after_no_event_of_the_trail_says_so_and_never_fails(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """An operator opens ``/admin/sagas/saga/{id}/audit-events/?after=X`` with X not an event of this saga's trail.

    Found: ``?after=²`` (``isdigit`` accepts it, ``int`` does not) and an id of 5,000 digits answered 500; another
    saga's event, another tenant's, ``-1``, ``abc`` or an id past the table's range showed the trail's start as if
    it were the page after X, saying nothing.
    Expect: 200, the start of this saga's trail and a note that the page asked for names no event of it; nothing of
    the other saga's or tenant's event is shown.
    """
    saga = _rolled_back_saga(alice, acme_operator, django_capture_on_commit_callbacks, key="gl-bad-after")
    other = _rolled_back_saga(alice, acme_operator, django_capture_on_commit_callbacks, key="gl-other")
    (elsewhere,) = _more_events(other, 1, event_type="call.gl_other_saga")
    (foreign,) = _more_events(saga, 1, tenant="globex", event_type="call.gl_other_tenant")
    desk = Client(raise_request_exception=False)
    desk.force_login(acme_operator)
    url = f"/admin/sagas/saga/{saga.pk}/audit-events/"

    for after in ("²", "9" * 5000, str(elsewhere), str(foreign), "-1", "abc", "9" * 25, " 1", "0"):
        answer = desk.get(url, {"after": after})
        assert answer.status_code == 200, (after[:20], answer.status_code)
        text = answer.content.decode()
        assert 'id="saga-audit-events-unknown"' in text, after[:20]
        assert "call.gl_other" not in text, after[:20]
        assert "book_gl_seat" in text, after[:20]

    first = next(iter(saga_audit_events(saga).values_list("id", flat=True)))
    good = desk.get(url, {"after": str(first)})
    assert good.status_code == 200 and 'id="saga-audit-events-unknown"' not in good.content.decode()
