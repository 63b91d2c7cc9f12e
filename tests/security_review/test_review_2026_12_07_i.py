"""Review 2026-12-07 i: a call queued without needing approval escaped an approval rule added while it waited.

Findings:

1. The policy judged a call only when it was asked for: a call queued as needing no approval (workers down or busy)
   ran as it was decided even when an operator added an ``ApprovalRule`` for its tool, or raised the tool's risk
   override to ``high``, while it waited; the worker checked grants, the enabled flag and the user's standing again,
   not the policy (README, "Approval policy", documented as design). Permissions are checked when a call executes:
   the pipeline now records the stamp the policy decided under on every queued call (``ToolCall.approved_under``;
   ``approvals.governing.approval_stamp`` moved to ``toolhub.policy.decision_stamp``, one stamp for both decisions),
   and the worker, finding the stamp moved, judges the call again with the request path's policy
   (``toolhub.policy.policy_moved_verdict`` -> ``recorded_call_verdict`` -> ``approval_verdict``): held now, it goes
   to the approval desk (``tool_call_require_reapproval`` with the verdict's terms: ``call.pending_approval`` by the
   worker, saying why; its claim given back) and runs once approved, by someone other than who asked. An unchanged
   stamp reads nothing. Migration ``toolhub 0056`` (help text only). Tests:
   ``test_a_rule_added_while_a_call_waits_in_the_queue_sends_it_to_the_desk``,
   ``test_a_risk_override_raised_to_high_while_a_call_waits_sends_it_to_the_desk``,
   ``test_a_compensation_queued_before_a_rule_for_its_tool_waits_for_approval_and_still_runs``,
   ``test_a_runs_queued_call_sent_to_the_desk_suspends_the_run_until_approved`` (the run was left ``running`` while
   its call waited at the desk, since nothing wakes a run with an open call: the send-back now sends
   ``call_suspended``, whose receiver moves the run to ``waiting``, and the runs sweep's repair
   ``runs_waiting_on_parked_calls`` counts a call pending approval as parked too); README.

Checked and holding:
- A change that does not hold the call (a rule for another tool) moves the stamp: the worker judges the call again,
  finds nothing to hold it and runs it once (test).
- Compensations (decided): a saga's compensation is judged again as any queued call: held now, its call waits at the
  desk with the compensation still running (it cannot be cancelled), and runs once approved; compensated once
  (test). An approved call keeps its own re-check (``approvals.shortfall``); a compensation's retry queues the call
  without a stamp, so its worker judges it again (the policy for a call never held, the approvals for one approved).
- Statement counts unchanged (the stamp is written with the row, compared with the scope's: no read):
  tests/approvepath (approve -> completed 9), tests/governance/test_changes_seen_at_once.py and
  test_governance_cache.py, tests/unit/test_claim_hints.py and test_audit_writes.py,
  tests/posture/test_api_query_counts.py.
- A queued call whose arguments no longer validate is still denied, not sent to the desk (validation comes first).
- Not changed, noted: a call already running is not stopped; an atomic tool run by the asking process whose last,
  unchecked write saw governance move re-checks refusals only (``_holds_after_write``), as before.
"""

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import AgentRun, RunStatus
from agents_app.subagents import runs_waiting_on_parked_calls
from approvals.models import ApprovalRequest, ApprovalRule
from approvals.services import approval_approve
from tests.approvals.released import run_held, sent_back
from tests.helpers import for_a_worker, principal_for
from tests.security_review.conftest import client_for
from tests.testapp.models import SideEffect
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall, ToolDefinition
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.sagas.models import Compensation, CompensationStatus
from toolhub.tasks import execute_tool_call_task
from toolhub.tools.context import ToolContext

pytestmark = pytest.mark.django_db


def _queued(user: User, note: str, capture: Any) -> tuple[ToolCall, list[Callable[[], Any]]]:
    """A low-risk call of ``user``'s queued for a worker as needing no approval; its dispatch held."""
    request = CallRequest(
        tool_name="record_effect",
        arguments={"note": note},
        principal=principal_for(user, tenant="acme"),
        context=ToolContext({"tenant": "acme", "user": user.username, "user_id": user.pk}),
    )
    with for_a_worker(), capture(execute=False) as callbacks:
        call = tool_call_request(request=request)
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.QUEUED
    return call, list(callbacks)


def _rolled_back_for_a_worker(
    client: Any, saga_id: str, monkeypatch: pytest.MonkeyPatch, committed: Any
) -> tuple[str, list[tuple[str, Any]]]:
    """A saga of one succeeded ``saga_step`` rolled back: its compensation queued for a worker, the dispatch kept.

    Returns the step's call id and the dispatches held (call id, hint)."""
    with committed(execute=True):
        assert client.post("/api/v1/sagas/", {"saga_id": saga_id}, format="json").status_code == 201
        step = client.post(
            "/api/v1/calls/", {"tool": "saga_step", "arguments": {"label": saga_id}, "saga_id": saga_id}, format="json"
        )
    assert ToolCall.objects.get(pk=step.json()["id"]).status == CallStatus.SUCCEEDED, step.content
    dispatched: list[tuple[str, Any]] = []
    monkeypatch.setattr(execute_tool_call_task, "delay", lambda call_id, hint=None: dispatched.append((call_id, hint)))
    with for_a_worker(), committed(execute=True):
        assert client.post(f"/api/v1/sagas/{saga_id}/rollback/", format="json").status_code == 202
    return step.json()["id"], dispatched


def _held_then_approved(call: ToolCall, operator: User, alice: User, capture: Any) -> None:
    """The call waits at the desk, nothing ran; alice may not decide it, the operator's approval runs it once."""
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    assert SideEffect.objects.count() == 0
    reason = sent_back(call.pk)["reason"]
    assert "policy changed after the call was queued" in reason, reason
    request = ApprovalRequest.objects.get(call=call)
    assert request.status == "pending"
    with pytest.raises(Exception):  # noqa: B017, PT011 - four eyes: who asked never decides
        approval_approve(request_id=request.pk, user=alice, expected_round=request.round)
    with capture(execute=True):
        approval_approve(request_id=request.pk, user=operator, expected_round=request.round)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED, (call.status, call.error)
    assert SideEffect.objects.count() == 1


def test_a_rule_added_while_a_call_waits_in_the_queue_sends_it_to_the_desk(
    alice: User, operator: User, tenant: Tenant, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a call of ``record_effect`` (low risk) was queued as needing no approval; an operator then added an
    ``ApprovalRule`` for the tool (misuse); the worker claimed the call and ran it: the rule did not apply to it.
    Expect: the worker sends it to the approval desk (awaiting approval, its audit event saying the policy changed
    after it was queued), nothing runs, and an operator's approval (not alice's own) runs it once."""
    call, callbacks = _queued(alice, "transfer 1", django_capture_on_commit_callbacks)
    ApprovalRule.objects.create(name="stop record_effect", tool_name="record_effect")
    run_held(callbacks, django_capture_on_commit_callbacks)
    _held_then_approved(call, operator, alice, django_capture_on_commit_callbacks)


def test_a_risk_override_raised_to_high_while_a_call_waits_sends_it_to_the_desk(
    alice: User, operator: User, tenant: Tenant, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a queued call of ``record_effect`` ran after an operator raised the tool's risk override to ``high``.
    Expect: the worker sends it to the desk (held at the risk of now), it runs once an operator approves it."""
    call, callbacks = _queued(alice, "transfer 2", django_capture_on_commit_callbacks)
    ToolDefinition.objects.filter(name="record_effect").update(risk_override="high")
    run_held(callbacks, django_capture_on_commit_callbacks)
    _held_then_approved(call, operator, alice, django_capture_on_commit_callbacks)
    assert ApprovalRequest.objects.get(call=call).risk == "high"


def test_an_unrelated_change_while_a_call_waits_leaves_it_to_run(
    alice: User, tenant: Tenant, django_capture_on_commit_callbacks: Any
) -> None:
    """Expect (holds): a rule added for another tool moves the stamp; the worker judges the call again, nothing
    holds it, and it runs once, as before."""
    call, callbacks = _queued(alice, "transfer 3", django_capture_on_commit_callbacks)
    ApprovalRule.objects.create(name="other tool", tool_name="risky_effect")
    run_held(callbacks, django_capture_on_commit_callbacks)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED, (call.status, call.error)
    assert SideEffect.objects.count() == 1
    assert not ApprovalRequest.objects.filter(call=call).exists()


def test_a_compensation_queued_before_a_rule_for_its_tool_waits_for_approval_and_still_runs(
    alice: User, acme_operator: User, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a saga's compensation queued as needing no approval ran after an operator added a rule for its tool.
    Expect (decided here): the worker sends its call to the desk like any call (the compensation still running, not
    failed, and not cancellable), and an operator's approval runs it once: the step is compensated once."""
    committed = django_capture_on_commit_callbacks
    client = client_for(alice)
    _, dispatched = _rolled_back_for_a_worker(client, "saga-i1", monkeypatch, committed)
    call = ToolCall.objects.get(kind=CallKind.COMPENSATION, tool_name="undo_saga_step")
    assert call.status == CallStatus.QUEUED and [str(call.pk)] == [call_id for call_id, _ in dispatched]
    ApprovalRule.objects.create(name="hold undo_saga_step", tool_name="undo_saga_step")
    with committed(execute=True):
        execute_tool_call_task(dispatched[0][0], hint=dispatched[0][1])
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    assert "policy changed after the call was queued" in sent_back(call.pk)["reason"]
    assert Compensation.objects.get(call=call).status == CompensationStatus.RUNNING
    assert not SideEffect.objects.filter(tool="undo_saga_step").exists()
    request = ApprovalRequest.objects.get(call=call)
    with committed(execute=True):
        approval_approve(request_id=request.pk, user=acme_operator, expected_round=request.round)
    assert len(dispatched) == 2  # released: queued for the worker again
    with committed(execute=True):
        execute_tool_call_task(dispatched[1][0], hint=dispatched[1][1])
    call.refresh_from_db()
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)
    assert Compensation.objects.get(call=call).status == CompensationStatus.SUCCEEDED
    assert SideEffect.objects.filter(tool="undo_saga_step").count() == 1


def test_a_runs_queued_call_sent_to_the_desk_suspends_the_run_until_approved(
    alice: User,
    operator: User,
    make_agent: Any,
    start: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: a run's call queued as needing no approval ran after a rule for its tool was added.
    Expect: the worker sends it to the desk and the run waits (``waiting`` at once: ``call_suspended``, as for a call
    held when asked; it was ``running`` while its call was queued); the operator's approval runs the call once and
    lets the run go on to its answer."""
    committed = django_capture_on_commit_callbacks
    dispatched: list[tuple[str, Any]] = []
    monkeypatch.setattr(execute_tool_call_task, "delay", lambda call_id, hint=None: dispatched.append((call_id, hint)))
    monkeypatch.setattr("toolhub.pipeline.runs_in_this_process", lambda: False)  # queued for a worker
    script = [
        {"content": "", "tool_calls": [{"name": "record_effect", "arguments": {"note": "run 1"}}]},
        {"content": "done"},
    ]
    run = start(make_agent(tools=["record_effect"], script=script, tenant="acme"), alice)
    call = ToolCall.objects.get(run_id=run.pk)
    assert call.status == CallStatus.QUEUED and len(dispatched) == 1
    ApprovalRule.objects.create(name="stop record_effect", tool_name="record_effect")
    with committed(execute=True):
        execute_tool_call_task(dispatched[0][0], hint=dispatched[0][1])
    call.refresh_from_db()
    run.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL and SideEffect.objects.count() == 0
    assert run.status == RunStatus.WAITING, run.status
    # The sweep's repair, for a receiver lost (a worker died after the commit): the run is moved the same way.
    AgentRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    assert runs_waiting_on_parked_calls() == 1
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    request = ApprovalRequest.objects.get(call=call)
    with committed(execute=True):
        approval_approve(request_id=request.pk, user=operator, expected_round=request.round)
        execute_tool_call_task(dispatched[-1][0], hint=dispatched[-1][1])
    call.refresh_from_db()
    run.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and SideEffect.objects.count() == 1
    assert (run.status, run.output) == (RunStatus.COMPLETED, "done")
