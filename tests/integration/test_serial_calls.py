"""Serial execution on real workers: one turn's calls run one after another, in order, never overlapping."""

import pytest
from django.contrib.auth.models import User

from agents_app.models import AgentRun, RunStatus
from agents_app.services import agent_create, run_start
from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.integration.workers import Worker, wait_for
from toolhub.models import CallStatus, ToolCall

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TURN = [
    {"name": "slow_effect", "arguments": {"seconds": 0.6}},
    {"name": "slow_effect", "arguments": {"seconds": 0.4}},
    {"name": "risky_effect", "arguments": {"note": "held"}},
    {"name": "slow_effect", "arguments": {"seconds": 0.2}},
]


def test_a_serial_agents_calls_run_one_after_another_on_workers(
    celery_worker: Worker, alice: User, operator: User
) -> None:
    # given a serial agent (the worker has two pool processes, so parallel calls would overlap)
    agent = agent_create(
        name="serial-worker",
        script=[{"content": "", "tool_calls": TURN}, {"content": "done"}],
        tools=["slow_effect", "risky_effect"],
        serial_tool_execution=True,
    )
    run = run_start(agent=agent, user=alice, input="four things, one at a time")

    # then the two slow calls ran one after the other, and the held call holds the last one back
    wait_for(
        lambda: ToolCall.objects.filter(run_id=run.pk, position=2, status=CallStatus.PENDING_APPROVAL).exists(),
        what="the third call held for approval",
    )
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    assert not ToolCall.objects.filter(run_id=run.pk, position=3).exists()

    # when an operator approves it
    held = ApprovalRequest.objects.get(call__run_id=run.pk)
    approval_approve(request_id=held.pk, user=operator, comment="fine")

    # then the rest ran and the run completed
    done = wait_for(
        lambda: (r := AgentRun.objects.get(pk=run.pk)).status == RunStatus.COMPLETED and r, what="run completed"
    )
    assert done.turn == 2 and done.deferred_calls == []
    calls = list(ToolCall.objects.filter(run_id=run.pk).order_by("position"))
    assert [c.status for c in calls] == ["succeeded"] * 4
    # in the model's order, each created and started only after the one before it finished: no overlap
    for before, after in zip(calls, calls[1:], strict=False):
        assert before.finished_at is not None and after.started_at is not None
        assert after.created_at >= before.finished_at, (before.position, after.position)
        assert after.started_at >= before.finished_at, (before.position, after.position)
    held.refresh_from_db()
    assert held.decided_at is not None and calls[3].created_at >= held.decided_at
