"""Approval services: who may decide, exactly one outcome, edits, rejection and expiry reach the model."""

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from agents_app.models import Agent, AgentRun, RunStatus
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus, DecisionKind
from approvals.services import approval_approve, approval_reject
from approvals.unanswered import approvals_expire_due
from tests.helpers import RequestCall, assert_audit_intact, event_types
from tests.testapp.models import SideEffect
from toolhub import registry, tool
from toolhub.audit import REDACTED
from toolhub.exceptions import AlreadyDecidedError, ApprovalError, DecisionNotAllowedError
from toolhub.models import AuditEvent, CallStatus, ToolCall, ToolDefinition

pytestmark = pytest.mark.django_db

Settle = Callable[..., Any]

REVIEW_SCRIPT = [
    {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "wire money"}}]},
    {"content": "Outcome: {last_tool_result}"},
]


@pytest.fixture
def held(request_call: RequestCall, alice: User) -> ApprovalRequest:
    """A high-risk call alice asked for, waiting for an operator."""
    call = request_call("risky_effect", {"note": "original"}, user=alice, tenant="acme")
    return ApprovalRequest.objects.get(call=call)


@pytest.fixture
def review_run(make_agent: Callable[..., Agent], start_run: Callable[..., AgentRun], alice: User) -> AgentRun:
    """A run of alice's that waits on the approval of a high-risk call."""
    agent = make_agent("reviewer", script=REVIEW_SCRIPT, tools=["risky_effect"])
    run = start_run(agent, alice, "send it")
    assert run.status == RunStatus.WAITING
    return run


def _call(request: ApprovalRequest) -> ToolCall:
    return ToolCall.objects.get(pk=request.call_id)


def test_approval_runs_the_call_once(held: ApprovalRequest, operator: User, committed: Settle) -> None:
    # when
    decided = committed(approval_approve, request_id=held.pk, user=operator, comment="ok")

    # then
    assert decided.status == ApprovalStatus.APPROVED
    assert decided.decided_at is not None
    call = _call(held)
    assert call.status == CallStatus.SUCCEEDED
    assert SideEffect.objects.filter(call_id=str(call.id)).count() == 1
    decision = ApprovalDecision.objects.get(request=held)
    assert (decision.decision, decision.decided_by_name, decision.comment) == ("approve", "operator", "ok")
    assert event_types(call) == [
        "call.requested",
        "call.pending_approval",
        "approval.approve",
        "call.queued",
        "call.running",
        "call.succeeded",
    ]
    assert AuditEvent.objects.get(call_id=call.id, event_type="approval.approve").actor == "operator:operator"
    assert_audit_intact()


def test_the_requester_cannot_decide_their_own_call(request_call: RequestCall, operator: User) -> None:
    # given an operator who asked for the call themself
    call = request_call("risky_effect", {"note": "mine"}, user=operator, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)

    # when / then
    with pytest.raises(DecisionNotAllowedError, match="You started this call"):
        approval_approve(request_id=request.pk, user=operator)
    with pytest.raises(DecisionNotAllowedError, match="You started this call"):
        approval_reject(request_id=request.pk, user=operator)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    assert not request.decisions.exists()
    assert SideEffect.objects.count() == 0


@pytest.mark.parametrize("who", ["viewer", "alice"])
def test_deciding_needs_the_permission(held: ApprovalRequest, who: str, request: pytest.FixtureRequest) -> None:
    user = request.getfixturevalue(who)

    with pytest.raises(DecisionNotAllowedError, match="permission"):
        approval_approve(request_id=held.pk, user=user)
    with pytest.raises(DecisionNotAllowedError, match="permission"):
        approval_reject(request_id=held.pk, user=user)

    held.refresh_from_db()
    assert held.status == ApprovalStatus.PENDING
    assert _call(held).status == CallStatus.PENDING_APPROVAL


def test_a_decided_request_cannot_be_decided_again(
    held: ApprovalRequest, operator: User, second_operator: User, committed: Settle
) -> None:
    committed(approval_approve, request_id=held.pk, user=operator)

    with pytest.raises(AlreadyDecidedError, match="already approved"):
        approval_reject(request_id=held.pk, user=second_operator, comment="too late")
    with pytest.raises(AlreadyDecidedError):
        approval_approve(request_id=held.pk, user=second_operator)

    assert ApprovalDecision.objects.filter(request=held).count() == 1
    assert SideEffect.objects.count() == 1


def test_rejection_reaches_the_model_and_the_run_completes(
    review_run: AgentRun, operator: User, committed: Settle
) -> None:
    # given
    request = ApprovalRequest.objects.get(call__run_id=review_run.id)

    # when
    decided = committed(approval_reject, request_id=request.pk, user=operator, comment="not today")

    # then the model reads the operator's comment and the loop goes on
    assert decided.status == ApprovalStatus.REJECTED
    call = _call(request)
    assert call.status == CallStatus.REJECTED
    assert call.error == "Rejected by operator: not today"
    review_run.refresh_from_db()
    assert review_run.status == RunStatus.COMPLETED
    tool_messages = [m for m in review_run.messages if m["role"] == "tool"]
    assert tool_messages == [
        {"role": "tool", "tool_call_id": call.model_call_id, "content": "Rejected by operator: not today"}
    ]
    assert review_run.output == "Outcome: Rejected by operator: not today"
    assert SideEffect.objects.count() == 0
    assert event_types(call)[-2:] == ["approval.reject", "call.rejected"]
    assert_audit_intact()


def test_rejection_without_a_comment(held: ApprovalRequest, operator: User, committed: Settle) -> None:
    committed(approval_reject, request_id=held.pk, user=operator)

    assert _call(held).error == "Rejected by operator (no comment given)."


def test_approval_resumes_a_waiting_run(review_run: AgentRun, operator: User, committed: Settle) -> None:
    request = ApprovalRequest.objects.get(call__run_id=review_run.id)

    committed(approval_approve, request_id=request.pk, user=operator)

    review_run.refresh_from_db()
    assert review_run.status == RunStatus.COMPLETED
    effect = SideEffect.objects.get()
    assert review_run.output == f'Outcome: {{"effect_id": {effect.pk}}}'


def test_critical_calls_need_two_distinct_approvers(
    request_call: RequestCall, alice: User, operator: User, second_operator: User, committed: Settle
) -> None:
    # given a tool an operator raised to critical
    ToolDefinition.objects.filter(name="risky_effect").update(risk_override="critical")
    call = request_call("risky_effect", {"note": "big"}, user=alice, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)
    assert (request.risk, request.required_approvals) == ("critical", 2)

    # when one operator approves, it still waits, and they cannot approve twice
    first = committed(approval_approve, request_id=request.pk, user=operator)
    assert first.status == ApprovalStatus.PENDING
    assert _call(request).status == CallStatus.PENDING_APPROVAL
    with pytest.raises(DecisionNotAllowedError, match="second, different operator"):
        approval_approve(request_id=request.pk, user=operator)
    assert SideEffect.objects.count() == 0

    # when a second, different operator approves
    second = committed(approval_approve, request_id=request.pk, user=second_operator)

    # then it runs, once
    assert second.status == ApprovalStatus.APPROVED
    assert _call(request).status == CallStatus.SUCCEEDED
    assert SideEffect.objects.count() == 1
    assert list(request.decisions.values_list("decided_by_name", flat=True)) == ["operator", "operator2"]


def test_a_critical_call_can_be_rejected_by_the_second_operator(
    request_call: RequestCall, alice: User, operator: User, second_operator: User, committed: Settle
) -> None:
    ToolDefinition.objects.filter(name="risky_effect").update(risk_override="critical")
    request = ApprovalRequest.objects.get(call=request_call("risky_effect", {"note": "big"}, user=alice, tenant="acme"))

    committed(approval_approve, request_id=request.pk, user=operator)
    decided = committed(approval_reject, request_id=request.pk, user=second_operator, comment="no")

    assert decided.status == ApprovalStatus.REJECTED
    assert _call(request).status == CallStatus.REJECTED
    assert SideEffect.objects.count() == 0


def test_edited_arguments_are_validated(held: ApprovalRequest, operator: User) -> None:
    with pytest.raises(ApprovalError, match="- note: Input should be a valid string"):
        approval_approve(request_id=held.pk, user=operator, arguments={"note": 5})
    with pytest.raises(ApprovalError, match="- surprise: Extra inputs are not permitted"):
        approval_approve(request_id=held.pk, user=operator, arguments={"surprise": True})

    held.refresh_from_db()
    assert held.status == ApprovalStatus.PENDING
    assert not held.decisions.exists()
    assert SideEffect.objects.count() == 0


def test_edited_arguments_are_what_runs(held: ApprovalRequest, operator: User, committed: Settle) -> None:
    # when the operator approves with an edit
    committed(approval_approve, request_id=held.pk, user=operator, comment="fixed", arguments={"note": "edited"})

    # then the edited version ran, and the edit is on record
    call = _call(held)
    assert call.status == CallStatus.SUCCEEDED
    assert call.arguments == {"note": "edited"}
    assert SideEffect.objects.get().note == "edited"
    decision = held.decisions.get()
    assert decision.decision == DecisionKind.EDIT
    assert decision.edited_arguments == {"note": "edited"}
    assert decision.diff == {"note": {"before": "original", "after": "edited"}}
    edit_event = AuditEvent.objects.get(call_id=call.id, event_type="approval.edit")
    assert edit_event.payload["diff"] == {"note": {"before": "original", "after": "edited"}}
    queued = AuditEvent.objects.get(call_id=call.id, event_type="call.queued")
    assert queued.payload["arguments"] == {"note": "edited"}
    assert_audit_intact()


def test_an_edit_by_the_first_of_two_approvers_is_what_runs(
    request_call: RequestCall, alice: User, operator: User, second_operator: User, committed: Settle
) -> None:
    # given a critical call the first operator corrects
    ToolDefinition.objects.filter(name="risky_effect").update(risk_override="critical")
    request = ApprovalRequest.objects.get(
        call=request_call("risky_effect", {"note": "5000"}, user=alice, tenant="acme")
    )
    committed(approval_approve, request_id=request.pk, user=operator, arguments={"note": "500"})

    # when the second operator approves the corrected version (the round the edit opened)
    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=2)

    # then the corrected arguments ran, not the original ones
    assert _call(request).arguments == {"note": "500"}
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["500"]


def test_arguments_changed_behind_the_approval_are_refused(
    held: ApprovalRequest, operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    # given an approved call whose worker has not started yet
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        approval_approve(request_id=held.pk, user=operator)

    # when someone changes its arguments in the database
    ToolCall.objects.filter(pk=held.call_id).update(arguments={"note": "tampered"})
    for callback in callbacks:
        callback()

    # then it does not run
    call = _call(held)
    assert call.status == CallStatus.DENIED
    assert call.error == "The arguments differ from what was approved; nothing was executed."
    assert SideEffect.objects.count() == 0


def test_expiry_settles_the_call_and_tells_the_model(review_run: AgentRun, committed: Settle) -> None:
    # given a request past its deadline
    request = ApprovalRequest.objects.get(call__run_id=review_run.id)
    ApprovalRequest.objects.filter(pk=request.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    # when the periodic task runs
    expired = committed(approvals_expire_due)

    # then the request and the call expired, and the run went on with the news
    assert expired == 1
    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXPIRED
    call = _call(request)
    assert call.status == CallStatus.EXPIRED
    message = "The approval request expired before an operator decided; the call was not executed."
    assert call.error == message
    review_run.refresh_from_db()
    assert review_run.status == RunStatus.COMPLETED
    assert review_run.output == f"Outcome: {message}"
    assert SideEffect.objects.count() == 0
    assert event_types(call)[-2:] == ["call.expired", "approval.expired"]
    assert committed(approvals_expire_due) == 0
    assert_audit_intact()


def test_requests_not_yet_due_do_not_expire(held: ApprovalRequest, committed: Settle) -> None:
    assert committed(approvals_expire_due) == 0

    held.refresh_from_db()
    assert held.status == ApprovalStatus.PENDING


def test_deciding_an_overdue_request_expires_it(review_run: AgentRun, operator: User, committed: Settle) -> None:
    request = ApprovalRequest.objects.get(call__run_id=review_run.id)
    ApprovalRequest.objects.filter(pk=request.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    with pytest.raises(AlreadyDecidedError, match="expired"):
        committed(approval_approve, request_id=request.pk, user=operator)

    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXPIRED
    assert _call(request).status == CallStatus.EXPIRED
    assert not request.decisions.exists()
    review_run.refresh_from_db()
    assert review_run.status == RunStatus.COMPLETED
    assert SideEffect.objects.count() == 0


@tool(sensitive=("password",), risk="high")
def rotate_password(username: str, password: str) -> dict[str, Any]:
    """Set a new password for a user of a downstream system."""
    SideEffect.objects.create(call_id="", tool="rotate_password", note=username)
    return {"rotated": username}


def test_edited_sensitive_values_stay_out_of_the_trail(
    request_call: RequestCall, alice: User, operator: User, committed: Settle
) -> None:
    with registry.temporarily(rotate_password):
        request = ApprovalRequest.objects.get(
            call=request_call(
                "rotate_password", {"username": "bob", "password": "old-secret-1"}, user=alice, tenant="acme"
            )
        )

        committed(approval_approve, request_id=request.pk, user=operator, arguments={"password": "new-secret-2"})

        call = _call(request)
        assert call.status == CallStatus.SUCCEEDED
    trail = "\n".join(AuditEvent.objects.values_list("data", flat=True))
    assert "old-secret-1" not in trail and "new-secret-2" not in trail
    edit = AuditEvent.objects.get(call_id=call.id, event_type="approval.edit")
    assert edit.payload["diff"] == {"password": {"before": REDACTED, "after": REDACTED}}
    decision = request.decisions.get()
    assert decision.diff == {"password": {"before": REDACTED, "after": REDACTED}}
    assert decision.edited_arguments == {"username": "bob", "password": "new-secret-2"}
