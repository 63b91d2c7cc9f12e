"""Review 2026-12-06 (ge): the two robustness items the last note left (review fu's wakes, review ft's catalogue).

Each finding's test fails on the code as found (main at 2c06cf9) and says what was found and what is expected.

Findings:

1. Cancelling a run that withdrew N waiting calls sent N ``advance_run_task`` messages for it (measured: 200 for
   N=200), all for a run that had ended: each withdrawn call's transition registered its own after-commit
   ``call_settled``, and the agents' receiver sent one wake per call. The same held for a subagent tree's cancel and
   a failed compensation's withdrawn inner calls. Now ``toolhub.calls.settling_together`` (used by
   ``run_cancel_locked`` and ``withdraw_held_inner``) tells the block's settled calls together after commit, and the
   receiver's wake goes through ``toolhub.signals.once_for_calls_settled_together``: one message per run. Each call
   keeps its own ``call.cancelled``/``approval.cancelled`` events and its listeners' per-call notice (the sagas).

Checked and holding:

- Waiters on a withdrawn call (``?wait=`` long-polls, MCP's follow) poll the call's row (``toolhub.direct.call_wait``),
  not a message: batching the notices delays none of them.
- Cancelling one tenant's run withdraws and wakes nothing of another tenant's (its run, held call, request stay).
- The approvals' per-request ``approval.cancelled`` webhook (when ``WEBHOOK_URL`` is set) stays one per request:
  it is the receiver's per-request contract, not a wake; with no webhook configured nothing else goes to the broker.
"""

from collections.abc import Callable
from typing import Any

import pytest
from celery import Task
from django.contrib.auth.models import User

from agents_app.cancelling import run_cancel
from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.services import agent_create
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.agents.conftest import start_run  # noqa: F401 - a fixture, registered by being imported here
from tests.helpers import RequestCall, assert_audit_intact
from tests.tenancy.conftest import make_user
from toolhub.direct import call_wait
from toolhub.models import AuditEvent, CallStatus, Tenant, ToolCall

pytestmark = pytest.mark.django_db

StartRun = Callable[..., AgentRun]

#: A held call first (risky_effect waits for an operator), then the answer.
HELD = [{"tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]}, {"content": "done"}]

N = 200


def _agent(name: str, tenant: str) -> Agent:
    return agent_create(name=name, provider="scripted", tools=["risky_effect"], tenant=tenant, script=HELD)


def _held_run(start: StartRun, request_call: RequestCall, user: User, tenant: str, calls: int) -> AgentRun:
    """A run of ``user`` in ``tenant`` waiting on ``calls`` calls held for an operator."""
    run = start(_agent(f"held-{tenant}", tenant), user, context={"tenant": tenant})
    assert run.status == RunStatus.WAITING
    for number in range(calls - 1):
        held = request_call("risky_effect", {"note": f"n{number}"}, user, run.pk, tenant=tenant)
        assert held.status == CallStatus.PENDING_APPROVAL
    assert ToolCall.objects.filter(run_id=run.pk, status=CallStatus.PENDING_APPROVAL).count() == calls
    return run


def test_cancelling_a_run_with_many_waiting_calls_wakes_it_once(
    start_run: StartRun,  # noqa: F811 - the imported fixture
    request_call: RequestCall,
    alice: User,
    other_tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: cancelling a run that withdrew N calls woke it N times: each withdrawn call's ``call_settled`` sent its
    own ``advance_run_task`` message after commit (200 broker messages for one cancelled run, each a worker's run
    lock and read), all for a run that had ended.

    Expect: one wake per run however many calls it withdrew; every call still withdrawn with its own audit events
    and approval request cancelled (a waiter on any of them reads it settled at once); another tenant's run and its
    held call neither woken nor withdrawn.
    """
    run = _held_run(start_run, request_call, alice, "acme", N)
    bob = make_user("bob-ge", tenant=other_tenant)
    theirs = _held_run(start_run, request_call, bob, "globex", 1)
    sent: list[tuple[str, tuple[Any, ...]]] = []

    def apply_async(task: Task, args: Any = None, *more: Any, **options: Any) -> None:
        sent.append((task.name, tuple(args or ())))

    monkeypatch.setattr(Task, "apply_async", apply_async)  # every broker message, none run

    with django_capture_on_commit_callbacks(execute=True):
        assert run_cancel(run_id=run.pk, actor="user:alice", reason="wrong customer")

    assert len(sent) <= 1, f"{len(sent)} broker messages for one cancelled run"
    assert all(args == (str(run.pk),) for _, args in sent)  # nothing of globex woken
    calls = ToolCall.objects.filter(run_id=run.pk)
    assert calls.count() == N and set(calls.values_list("status", flat=True)) == {CallStatus.CANCELLED}
    for each in calls[:3]:  # a waiter on any of them returns at once: it reads the row
        assert call_wait(call=each, seconds=0).status == CallStatus.CANCELLED
    events = AuditEvent.objects.filter(run_id=run.pk)
    assert events.filter(event_type="call.cancelled").count() == N
    assert events.filter(event_type="approval.cancelled").count() == N
    assert not ApprovalRequest.objects.filter(call__run_id=run.pk, status=ApprovalStatus.PENDING).exists()
    assert ToolCall.objects.get(run_id=theirs.pk).status == CallStatus.PENDING_APPROVAL
    assert AgentRun.objects.get(pk=theirs.pk).status == RunStatus.WAITING
    assert ApprovalRequest.objects.get(call__run_id=theirs.pk).status == ApprovalStatus.PENDING
    assert_audit_intact()
