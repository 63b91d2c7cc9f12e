"""Legal status moves are declared once; the guarded transition refuses any other before writing anything."""

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.transitions import RUN_TRANSITIONS, run_transition
from approvals.models import APPROVAL_TRANSITIONS, ApprovalRequest, ApprovalStatus
from approvals.services import approval_approve
from tests.helpers import event_types
from toolhub.calls import CALL_TRANSITIONS, call_transition
from toolhub.exceptions import InvalidTransitionError
from toolhub.models import CallStatus, ToolCall
from toolhub.sagas.records import COMPENSATION_TRANSITIONS
from toolhub.transitions import guarded_save

pytestmark = pytest.mark.django_db


def test_an_undeclared_move_is_refused_and_nothing_is_written(request_call: Any, alice: User) -> None:
    # given a succeeded call
    call = request_call("record_effect", {"note": "x"}, alice)
    assert call.status == CallStatus.SUCCEEDED
    before = event_types(call)

    # when code asks to move it back to running (no such transition is declared)
    with pytest.raises(InvalidTransitionError, match="succeeded to running is not a declared transition"):
        call_transition(call, to=CallStatus.RUNNING, allowed_from={CallStatus.SUCCEEDED}, actor="test")

    # then neither the row nor the trail changed
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.SUCCEEDED
    assert event_types(call) == before


def test_settled_calls_only_move_on_through_compensation_or_a_retry() -> None:
    assert CALL_TRANSITIONS.allows(CallStatus.SUCCEEDED, CallStatus.COMPENSATED)
    for settled in (CallStatus.DENIED, CallStatus.INVALID, CallStatus.REJECTED, CallStatus.EXPIRED):
        assert not any(CALL_TRANSITIONS.allows(settled, target) for target in CallStatus)
    assert not COMPENSATION_TRANSITIONS.allows("succeeded", "running")
    assert not COMPENSATION_TRANSITIONS.allows("resolved", "pending")


# --- approvals and runs go through the same tables and the same guarded write ---------------------------

REVIEW_SCRIPT = [
    {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "wire money"}}]},
    {"content": "Outcome: {last_tool_result}"},
]


def test_decided_approvals_and_ended_runs_do_not_move_on() -> None:
    for decided in (ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED, ApprovalStatus.CANCELLED):
        assert not any(APPROVAL_TRANSITIONS.allows(decided, target) for target in ApprovalStatus)
    assert APPROVAL_TRANSITIONS.allows(ApprovalStatus.APPROVED, ApprovalStatus.PENDING)  # a new round
    for ended in (RunStatus.COMPLETED, RunStatus.CANCELLED):
        assert not any(RUN_TRANSITIONS.allows(ended, target) for target in RunStatus)
    assert RUN_TRANSITIONS.allows(RunStatus.FAILED, RunStatus.RUNNING)  # a retry


def test_an_undeclared_run_move_is_refused_and_nothing_is_written(
    make_agent: Callable[..., Agent], start_run: Callable[..., AgentRun], alice: User
) -> None:
    # given a completed run
    agent = make_agent("answers", script=[{"content": "done"}], tools=[])
    run = start_run(agent, alice, "go")
    assert run.status == RunStatus.COMPLETED

    # when code asks to move it back to running, with a change of its output
    run.output = "rewritten"
    with pytest.raises(InvalidTransitionError, match="completed to running is not a declared transition"):
        run_transition(run, RunStatus.RUNNING)

    # then the row is untouched
    stored = AgentRun.objects.get(pk=run.pk)
    assert (stored.status, stored.output) == (RunStatus.COMPLETED, "done")


def test_a_stale_status_is_not_overwritten(request_call: Any, alice: User) -> None:
    # given a held call's approval request, read while pending, then rejected behind the reader's back
    call = request_call("risky_effect", {"note": "x"}, user=alice, tenant="acme")
    stale = ApprovalRequest.objects.get(call=call)
    ApprovalRequest.objects.filter(pk=stale.pk).update(status=ApprovalStatus.REJECTED)

    # when the stale reader tries to approve it through the guarded write
    stale.decided_at = timezone.now()
    written = guarded_save(
        stale,
        table=APPROVAL_TRANSITIONS,
        to=ApprovalStatus.APPROVED,
        allowed_from={ApprovalStatus.PENDING},
        update_fields=["decided_at"],
    )

    # then nothing was written and the object keeps the status it was read with
    assert written is False
    assert stale.status == ApprovalStatus.PENDING
    stored = ApprovalRequest.objects.get(pk=stale.pk)
    assert (stored.status, stored.decided_at) == (ApprovalStatus.REJECTED, None)


def test_a_run_waits_for_approval_and_completes_through_declared_moves(
    make_agent: Callable[..., Agent],
    start_run: Callable[..., AgentRun],
    alice: User,
    operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    # given a run waiting on a held call
    agent = make_agent("reviewer", script=REVIEW_SCRIPT, tools=["risky_effect"])
    run = start_run(agent, alice, "send it")
    assert run.status == RunStatus.WAITING
    request = ApprovalRequest.objects.get(call__run_id=run.pk)

    # when an operator approves
    with django_capture_on_commit_callbacks(execute=True):
        approval_approve(request_id=request.pk, user=operator)

    # then the request and the run moved on, and the run's other fields were written with its status
    request.refresh_from_db()
    run.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED and request.decided_at is not None
    assert run.status == RunStatus.COMPLETED
    assert run.output.startswith("Outcome:")
