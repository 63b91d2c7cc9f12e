"""Atomic tools (``@tool(atomic=True)``): their writes commit with the call's outcome, or not at all.

The requesting process runs an atomic tool before its call row exists, and writes the row, every audit
event and the tool's effects in one transaction; a worker runs it after its claim committed, with the
outcome in the tool's transaction. A failure of any kind leaves no effect, and is recorded.
"""

import json
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from tests.helpers import assert_audit_intact, event_types, for_a_worker, principal_for
from tests.testapp.models import SideEffect
from toolhub import pipeline, sweeper, tool
from toolhub.claims import tool_call_claim
from toolhub.exceptions import ToolDefinitionError
from toolhub.execution import ATOMIC_ABORTED_MESSAGE, tool_call_execute, tool_call_run_claimed
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.sweeper import calls_reconcile_expired_leases
from toolhub.tools.context import ToolContext
from toolhub.tools.registry import registry

# Real commits: the requesting process takes the one-transaction path only outside a caller's transaction.
pytestmark = pytest.mark.django_db(transaction=True)

SETTLED_IN_PROCESS = ["call.requested", "call.queued", "call.running"]


def _request(user: User, tool_name: str = "atomic_effect", **arguments: Any) -> ToolCall:
    return tool_call_request(
        request=CallRequest(
            tool_name=tool_name,
            arguments=arguments,
            principal=principal_for(user, tenant="acme"),
            context=ToolContext(tenant="acme"),
        )
    )


def _effects(call: ToolCall) -> int:
    return SideEffect.objects.filter(call_id=str(call.pk)).count()


def test_an_atomic_call_in_process_commits_its_effect_its_row_and_every_event_together(alice: User) -> None:
    # when a low-risk atomic tool is called by a process that runs it itself
    call = _request(alice, note="kept")

    # then the call succeeded, its one effect is kept, and its trail is complete and verifies
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED
    assert call.result == {"effect_id": SideEffect.objects.get(call_id=str(call.pk)).pk}
    assert call.attempts == 1 and call.worker == "eager" and call.finished_at and call.lease_expires_at is None
    assert event_types(call) == [*SETTLED_IN_PROCESS, "call.succeeded"]
    assert assert_audit_intact() > 0


@pytest.mark.postgres
def test_an_atomic_call_in_process_costs_the_tools_statement_and_one_more(
    alice: User, settings: Any, django_assert_max_num_queries: Any
) -> None:
    # given one audit chain whose head exists already
    settings.TOOLHUB = {**settings.TOOLHUB, "AUDIT_CHAINS": 1}
    _request(alice, note="warm-up")

    # when one more atomic call is requested and run in process
    # BEGIN, the tool's INSERT, the call row with its four events, COMMIT: one commit where a call whose
    # tool is not atomic makes three (tests/unit/test_query_count.py)
    with django_assert_max_num_queries(4):
        call = _request(alice, note="measured")

    # then it did its work
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.SUCCEEDED
    assert _effects(call) == 1


def test_an_atomic_tool_that_fails_after_writing_leaves_no_effect_and_the_failure_is_recorded(alice: User) -> None:
    call = _request(alice, note="undone", fail_after_writing="the ledger is closed")

    call.refresh_from_db()
    assert call.status == CallStatus.FAILED
    assert "the ledger is closed" in call.error
    assert _effects(call) == 0  # written, then rolled back with the failure
    assert event_types(call) == [*SETTLED_IN_PROCESS, "call.failed"]
    assert assert_audit_intact() > 0


def test_an_atomic_tool_past_its_time_limit_leaves_no_effect(alice: User) -> None:
    call = _request(alice, note="too slow", work_seconds=1.3)  # the limit is 1 s (SIGALRM on the main thread)

    call.refresh_from_db()
    assert call.status == CallStatus.FAILED
    assert "time limit of 1 s" in call.error
    assert _effects(call) == 0


def test_off_the_main_thread_an_atomic_tool_runs_in_the_callers_transaction_and_an_overrun_is_undone(
    alice: User,
) -> None:
    # given calls made from a thread other than the main one (a threaded web server), where no alarm can stop a tool
    outcomes: dict[str, ToolCall] = {}

    def in_a_thread(name: str, **arguments: Any) -> None:
        try:
            outcomes[name] = _request(alice, **arguments)
        finally:
            connection.close()

    for name, arguments in {"quick": {"note": "quick"}, "slow": {"note": "slow", "work_seconds": 1.3}}.items():
        thread = threading.Thread(target=in_a_thread, args=(name,), kwargs=arguments)
        thread.start()
        thread.join(20)

    # then the quick one's effect is kept; the slow one ran to its end but its effect was rolled back
    quick, slow = (ToolCall.objects.get(pk=outcomes[name].pk) for name in ("quick", "slow"))
    assert quick.status == CallStatus.SUCCEEDED and _effects(quick) == 1
    assert slow.status == CallStatus.FAILED and "time limit of 1 s" in slow.error
    assert _effects(slow) == 0


def test_an_atomic_tool_that_suspends_keeps_its_effect_with_the_suspension_unless_the_payload_fails_it(
    alice: User,
) -> None:
    parked = _request(alice, note="parked", suspend="storable")
    refused = _request(alice, note="refused", suspend="unstorable")

    parked.refresh_from_db()
    refused.refresh_from_db()
    # the suspension commits with the tool's effect: both are what the outside executor builds on
    assert parked.status == CallStatus.AWAITING_RESULT and parked.suspension["payload"] == {"note": "parked"}
    assert _effects(parked) == 1
    assert event_types(parked) == [*SETTLED_IN_PROCESS, "call.awaiting_result"]
    # a payload that cannot be stored fails the call, and a failed atomic call keeps nothing
    assert refused.status == CallStatus.FAILED and "cannot be stored as JSON" in refused.error
    assert _effects(refused) == 0


@pytest.mark.postgres  # SQLite does not abort a transaction on a failed statement
def test_an_atomic_tool_that_swallows_a_database_error_fails_and_keeps_nothing(alice: User) -> None:
    call = _request(alice, "atomic_swallowing_effect")

    call.refresh_from_db()
    assert call.status == CallStatus.FAILED
    assert call.error == ATOMIC_ABORTED_MESSAGE
    assert "error occurred in the current transaction" in call.error_detail  # for auditors, not the model
    assert _effects(call) == 0
    assert event_types(call) == [*SETTLED_IN_PROCESS, "call.failed"]


@pytest.fixture
def held_dispatch(monkeypatch: pytest.MonkeyPatch) -> list[ToolCall]:
    """Calls queued for a worker keep their broker message here: no worker (not even a session's) sees them."""
    held: list[ToolCall] = []
    monkeypatch.setattr(pipeline, "dispatch_call", held.append)
    return held


def _queued(user: User, held: list[ToolCall], **arguments: Any) -> ToolCall:
    """An atomic call queued for a worker, its broker message held back."""
    with for_a_worker():
        call = _request(user, **arguments)
    assert held[-1].pk == call.pk
    return call


def test_on_a_worker_the_effect_commits_with_the_outcome_and_a_failure_undoes_it(
    alice: User, held_dispatch: list[ToolCall]
) -> None:
    kept = _queued(alice, held_dispatch, note="kept")
    undone = _queued(alice, held_dispatch, note="undone", fail_after_writing="no")

    for call in (kept, undone):
        tool_call_execute(call_id=call.pk, worker="w1")

    kept.refresh_from_db()
    undone.refresh_from_db()
    assert (kept.status, _effects(kept)) == (CallStatus.SUCCEEDED, 1)
    assert (undone.status, _effects(undone)) == (CallStatus.FAILED, 0)
    for call in (kept, undone):
        assert event_types(call)[-2:] == ["call.running", f"call.{call.status}"]
    assert assert_audit_intact() > 0


@pytest.fixture
def lost_worker(monkeypatch: pytest.MonkeyPatch) -> Callable[[ToolCall], ToolCall]:
    """Make a claimed call's lease run out; the reconciler queues it again and a second worker claims it.

    Returns the second worker's claim. The reconciler's message is held back, so that the second claim
    happens here, while the first worker still holds its (stale) claimed call.
    """
    monkeypatch.setattr(sweeper, "dispatch_call", lambda call: None)

    def reclaim(first: ToolCall) -> ToolCall:
        ToolCall.objects.filter(pk=first.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        assert calls_reconcile_expired_leases() == {"requeued": 1, "needs_attention": 0}
        second = tool_call_claim(call_id=first.pk, worker="w2")
        assert second is not None and second.attempts == first.attempts + 1
        return second

    return reclaim


def _claimed(user: User, held: list[ToolCall], tool_name: str, **arguments: Any) -> ToolCall:
    with for_a_worker():
        call = _request(user, tool_name, **arguments)
    assert held[-1].pk == call.pk
    first = tool_call_claim(call_id=call.pk, worker="w1")
    assert first is not None and first.attempts == 1
    return first


def test_a_lost_workers_atomic_call_is_retried_and_a_late_outcome_is_refused_with_its_effect(
    alice: User, held_dispatch: list[ToolCall], lost_worker: Callable[[ToolCall], ToolCall]
) -> None:
    # given an atomic call whose first worker lost its lease (the reconciler retried it on a second worker)
    first = _claimed(alice, held_dispatch, "atomic_effect", note="late")
    second = lost_worker(first)
    tool = registry.get("atomic_effect")

    # when the first worker, which was only slow, finishes running it
    tool_call_run_claimed(call=first, tool=tool, arguments={"note": "late"}, worker="w1")

    # then its outcome is refused and its effect rolled back: the call belongs to the second attempt
    current = ToolCall.objects.get(pk=first.pk)
    assert (current.status, current.attempts, current.worker) == (CallStatus.RUNNING, 2, "w2")
    assert _effects(first) == 0

    # and the second attempt's run takes effect once
    tool_call_run_claimed(call=second, tool=tool, arguments={"note": "late"}, worker="w2")
    assert ToolCall.objects.get(pk=first.pk).status == CallStatus.SUCCEEDED
    assert _effects(first) == 1
    reconciled = AuditEvent.objects.get(call_id=first.pk, actor="reconciler")
    assert json.loads(reconciled.data)["reason"] == "lease expired; atomic tool is retried"
    assert assert_audit_intact() > 0


def test_a_late_outcome_of_a_non_atomic_call_is_refused_too(
    alice: User, held_dispatch: list[ToolCall], lost_worker: Callable[[ToolCall], ToolCall]
) -> None:
    # given an idempotent call taken over by a second attempt while the first still ran
    first = _claimed(alice, held_dispatch, "slow_idempotent", seconds=0.0)
    lost_worker(first)

    # when the first attempt's outcome arrives
    tool_call_run_claimed(call=first, tool=registry.get("slow_idempotent"), arguments={"seconds": 0.0}, worker="w1")

    # then it does not settle the call the second attempt runs
    current = ToolCall.objects.get(pk=first.pk)
    assert (current.status, current.attempts) == (CallStatus.RUNNING, 2)
    assert event_types(first)[-1] == "call.running"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: tool(atomic="yes")(echo_note), "atomic must be True or False"),
        (lambda: tool(atomic=True)(echo_note_later), "an external or async tool cannot be atomic"),
    ],
    ids=["not-a-bool", "async"],
)
def test_an_atomic_tool_that_cannot_share_the_transaction_is_refused_when_defined(
    make: Callable[[], Any], message: str
) -> None:
    with pytest.raises(ToolDefinitionError, match=message):
        make()


def echo_note(note: str) -> str:
    """Return the note."""
    return note


async def echo_note_later(note: str) -> str:
    """Return the note, later."""
    return note
