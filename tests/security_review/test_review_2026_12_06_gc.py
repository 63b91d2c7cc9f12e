"""Review gc (2026-12-06): the saga/compensation work of the last hours, reviewed again: ``on_commit_once``,
``rollback_reopened``, the calls held on behalf of a compensation (``held_inner_outcome``, ``withdraw_held_inner``,
``_wait_for_held``), an agentic compensation's model turns, and the saga's audit trail (``saga_audit_events``).

Findings (each test failed on the code as found, main at 2c06cf9, and passes now):

1. ``saga_audit_events`` listed the events of at most 10,000 calls made undoing the saga's steps: it read their ids
   into a Python list cut at 10,000 (in no order), so a saga past that (several steps' agentic compensations, 200
   inner calls an attempt, retried) showed an auditor a trail with calls silently missing, which ones arbitrary.
   Now every call's id is read (no cap; first written as subqueries of the events' one statement, which PostgreSQL
   planned from statistics older than the calls and ran for over 30 minutes in CI), the caller pages the events
   (``test_the_sagas_trail_lists_every_undoing_calls_events_past_ten_thousand``).
2. The saga's admin page ("Audit events") showed the first 500 of the saga's events and nothing said so: an auditor
   read a cut trail as whole. The page now says when its table is cut (how many of how many) and where the whole
   trail is (``test_the_saga_page_says_when_its_audit_table_is_cut``).

Checked and holding (regression tests below where marked):
- An agentic compensation's model that keeps asking for tools is bounded: its desk's ``max_iterations`` model turns
  (and ``max_calls`` inner calls) an attempt, the saga's ``SAGA_MAX_ATTEMPTS`` attempts; the stop fails the attempt
  with a reason naming the limit, which is the compensation's ``last_error`` and in its ``compensation.*`` trail,
  each turn an ``agentic.model_turn`` event of its call; the compensation ends ``failed`` (an operator's attention)
  once its attempts are spent (``test_a_compensation_model_that_keeps_asking_stops_at_its_turns_with_a_reason``).
  Tokens are bounded through turns (each answer by its provider's completion limit); a run's token budget does not
  apply by design (review er: the undo is the saga's work).
- ``on_commit_once``: keys name the signal, the run and the rollback's primary key (global), so two sagas' or
  tenants' reopened rollbacks in one transaction wake each their own run; outside a transaction the action runs at
  once (``test_on_commit_once_keys_do_not_collide``, ``test_on_commit_once_runs_at_once_outside_a_transaction``).
  A rollback reopened twice in one transaction wakes its run once (review fu's test).
- Tenant scoping: ``held_inner_outcome`` and ``withdraw_held_inner`` read the call's tenant's rows;
  ``saga_audit_events`` reads calls of the saga's tenant (the events of the steps and compensation calls by their
  ids, which are the saga's); the ``saga.*`` events by the run's id (runs' ids are unique primary keys, and only a
  run's saga carries one).
- The run cancelled while compensating: ``run_cancel_locked`` withdraws no compensation nor a call made on its
  behalf (``undoing``), and ``tool_call_cancel`` refuses them (resolve by hand instead); a compensation's model is
  not the run's (``_RecordedOnCall``), so it is not stopped by the run's end: the undo goes on, by design.
- A held inner call approved / rejected / expiring / withdrawn: reviews fl and fs test each outcome.
"""

import html
import itertools
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from agents_app.services import agent_create
from tests.security_review.conftest import client_for
from tests.testapp.tools import record_effect
from toolhub import tool
from toolhub.agentic import SimpleAgenticTool
from toolhub.commit_once import on_commit_once
from toolhub.conf import toolhub_settings
from toolhub.models import AuditEvent, CallKind, CallStatus, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Saga
from toolhub.sagas.selectors import saga_audit_events
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db


@tool
def unbook_gc_seat(seat: str) -> dict[str, Any]:
    """Give a seat back."""
    return {"released": seat}


@tool(compensate_with="unbook_gc_seat", compensation_mapping=lambda arguments, result: {"seat": result["seat"]})
def book_gc_seat(seat: str) -> dict[str, Any]:
    """Book a seat; given back by ``unbook_gc_seat``."""
    return {"seat": seat}


def _rolled_back_saga(alice: User, acme_operator: User, capture: Any, key: str = "gc") -> Saga:
    """Alice's direct saga ``key``: one step booked, then rolled back by an operator (its compensation succeeded)."""
    with capture(execute=True):
        made = client_for(alice).post(
            "/api/v1/calls/", {"tool": "book_gc_seat", "arguments": {"seat": "12A"}, "saga_id": key}, format="json"
        )
    assert ToolCall.objects.get(pk=made.json()["id"]).status == CallStatus.SUCCEEDED, made.content
    with capture(execute=True):
        saga_rollback_on_demand(saga_key=key, tenant="acme", actor="user:acme-operator", by=acme_operator)
    return Saga.objects.get(key=key, tenant="acme")


_chain_seq = itertools.count(1)


def _undoing_calls_with_events(saga: Saga, how_many: int) -> set[Any]:
    """``how_many`` calls made on behalf of the saga's compensation (as an agentic desk's inner calls are), one
    ``call.requested`` event each; written in bulk, as many rows as a long undo leaves."""
    step = Compensation.objects.get(saga=saga).step_call
    now = timezone.now()
    calls = ToolCall.objects.bulk_create(
        ToolCall(
            kind=CallKind.INNER,
            tool_name="record_effect",
            status=CallStatus.SUCCEEDED,
            tenant="acme",
            user_id=step.user_id,
            context={"compensates": str(step.pk), "parent_call_id": "x"},
            position=n,
        )
        for n in range(how_many)
    )
    AuditEvent.objects.bulk_create(
        AuditEvent(
            chain=987_654_321,
            seq=next(_chain_seq),
            event_type="call.requested",
            call_id=call.pk,
            tool_name="record_effect",
            tenant="acme",
            actor="agentic",
            created_at=now,
            hash="0" * 64,
        )
        for call in calls
    )
    return {call.pk for call in calls}


def test_the_sagas_trail_lists_every_undoing_calls_events_past_ten_thousand(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: ``saga_audit_events`` read the ids of the calls made undoing the saga's steps into a list cut at 10,000
    rows (in no order), so the events of every call past that were silently missing from the saga's trail.
    Expect: every such call's events are listed, with the saga's own."""
    with registry.temporarily(book_gc_seat, unbook_gc_seat, record_effect):
        saga = _rolled_back_saga(alice, acme_operator, django_capture_on_commit_callbacks)
    made = _undoing_calls_with_events(saga, 10_001)
    shown = set(saga_audit_events(saga).filter(call_id__in=made).values_list("call_id", flat=True))
    assert len(shown) == len(made), f"{len(made) - len(shown)} undoing calls' events are missing"
    undo = Compensation.objects.get(saga=saga)
    listed = set(saga_audit_events(saga).values_list("call_id", flat=True))
    assert {undo.step_call_id, undo.call_id} <= listed


def test_the_saga_page_says_when_its_audit_table_is_cut(
    alice: User, acme_operator: User, globex_auditor: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: the saga's admin page listed the first 500 of its audit events and said nothing of the rest: an
    auditor read a cut trail as the whole of it, and no page showed the rest.
    Expect: the page says the table is cut and how many of how many events it shows, and links the next page,
    which shows the rest (each event once, the last page saying which part it is); a trail that fits says nothing of
    the kind; another tenant's staff reach no page of it."""
    with registry.temporarily(book_gc_seat, unbook_gc_seat, record_effect):
        saga = _rolled_back_saga(alice, acme_operator, django_capture_on_commit_callbacks)
        other = _rolled_back_saga(alice, acme_operator, django_capture_on_commit_callbacks, key="gc-small")
    _undoing_calls_with_events(saga, 600)
    total = saga_audit_events(saga).count()
    desk = client_for(acme_operator)
    desk.force_login(acme_operator)
    page = desk.get(f"/admin/sagas/saga/{saga.pk}/change/").content.decode()
    assert 'id="saga-audit-events-cut"' in page, "the cut table says nothing"
    assert f"the first 500 of {total:,} events" in page
    following = re.search(r'href="(/admin/sagas/saga/\d+/audit-events/\?after=\d+)"', page)
    assert following is not None, "no link to the rest of the trail"
    rest = desk.get(html.unescape(following.group(1)))
    assert rest.status_code == 200
    text = rest.content.decode()
    assert f"events 501 to {total} of {total:,}" in text and "The next" not in text
    shown = re.findall(r"call\.requested", page + text)
    assert len(shown) == AuditEvent.objects.filter(id__in=saga_audit_events(saga), event_type="call.requested").count()
    small = desk.get(f"/admin/sagas/saga/{other.pk}/change/").content.decode()
    assert 'id="saga-audit-events-cut"' not in small
    outsider = client_for(globex_auditor)
    outsider.force_login(globex_auditor)
    refused = outsider.get(html.unescape(following.group(1)))
    assert "call.requested" not in refused.content.decode() and refused.status_code in (302, 404)


STUBBORN_DESK = SimpleAgenticTool(
    "undo_gc_stubborn_desk",
    "Undo a trip; its model never stops asking for a tool.",
    tools=[record_effect],
    max_iterations=3,
    agent="gc-stubborn",
)


@tool(compensate_with="undo_gc_stubborn_desk", compensation_mapping=lambda arguments, result: {"task": "undo"})
def reserve_gc_trip(city: str) -> dict[str, Any]:
    """Reserve a trip; undone by a desk whose model keeps asking for tools."""
    return {"trip": f"T-{city}"}


def test_a_compensation_model_that_keeps_asking_stops_at_its_turns_with_a_reason(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Holds: an agentic compensation's model is charged to no run, so no run budget stops it.
    Expect: a model that asks for a tool at every turn is stopped at its desk's ``max_iterations`` turns an attempt,
    each an ``agentic.model_turn`` event of its call; the attempt fails with a reason naming the limit, which is the
    compensation's ``last_error`` and in its trail (``compensation.retry_scheduled``), one of its bounded attempts."""
    agent_create(
        name="gc-stubborn",
        provider="scripted",
        script=[{"tool_calls": [{"name": "record_effect", "arguments": {"note": "again"}}]}] * 40,
        tools=[],
    )
    with registry.temporarily(reserve_gc_trip, record_effect, *STUBBORN_DESK.__toolhub_tools__()):
        with django_capture_on_commit_callbacks(execute=True):
            made = client_for(alice).post(
                "/api/v1/calls/",
                {"tool": "reserve_gc_trip", "arguments": {"city": "oslo"}, "saga_id": "gc-s"},
                format="json",
            )
        step = ToolCall.objects.get(pk=made.json()["id"])
        with django_capture_on_commit_callbacks(execute=True):
            saga_rollback_on_demand(saga_key="gc-s", tenant="acme", actor="user:acme-operator", by=acme_operator)
    undo = Compensation.objects.select_related("call").get(step_call=step)
    assert undo.call is not None and undo.call.status == CallStatus.FAILED, undo.call and undo.call.status
    assert "stopped after 3 model turns" in undo.call.error
    turns = AuditEvent.objects.filter(call_id=undo.call_id, event_type="agentic.model_turn")
    assert turns.count() == 3
    assert ToolCall.objects.filter(kind=CallKind.INNER, context__parent_call_id=str(undo.call_id)).count() == 3
    assert undo.status == CompensationStatus.RETRY_SCHEDULED, (undo.status, undo.last_error)
    assert undo.attempts == 1 and undo.max_attempts == toolhub_settings().SAGA_MAX_ATTEMPTS
    assert "stopped after 3 model turns" in undo.last_error
    trail = AuditEvent.objects.filter(call_id=step.pk, event_type__startswith="compensation.").order_by("id")
    assert any("stopped after 3 model turns" in event.data for event in trail), [e.event_type for e in trail]


def test_on_commit_once_keys_do_not_collide(django_capture_on_commit_callbacks: Any) -> None:
    """Holds: ``on_commit_once`` keys its action by what it is for.
    Expect: within one transaction a second request for the same key is dropped, another key (another run, another
    rollback) runs too, in the order asked."""
    ran: list[str] = []
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        on_commit_once(("wake", "run-1", 1), lambda: ran.append("run-1/1"))
        on_commit_once(("wake", "run-1", 1), lambda: ran.append("run-1/1 again"))
        on_commit_once(("wake", "run-1", 2), lambda: ran.append("run-1/2"))
        on_commit_once(("wake", "run-2", 1), lambda: ran.append("run-2/1"))
        assert ran == []
    assert ran == ["run-1/1", "run-1/2", "run-2/1"]


@pytest.mark.django_db(transaction=True)
def test_on_commit_once_runs_at_once_outside_a_transaction() -> None:
    """Holds: outside a transaction there is nothing to wait for.
    Expect: the action runs at once, each time it is asked (no commit will come to run a pending one)."""
    ran: list[str] = []
    on_commit_once(("wake", "run-1", 1), lambda: ran.append("outside"))
    on_commit_once(("wake", "run-1", 1), lambda: ran.append("outside again"))
    assert ran == ["outside", "outside again"]
