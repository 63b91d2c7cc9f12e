"""Several calls in one model turn with different fates resume the run once, with every result in order."""

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.services import run_start
from approvals.models import ApprovalRequest
from approvals.services import approval_approve, approval_reject
from tests.integration.workers import Worker, wait_for
from tests.testapp.models import SideEffect
from toolhub.models import AuditEvent, CallStatus, ToolCall

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TURN = [
    {"name": "record_effect", "arguments": {"note": "runs at once"}},
    {"name": "risky_effect", "arguments": {"note": "approved later"}},
    {"name": "risky_effect", "arguments": {"note": "rejected later"}},
    {"name": "record_efect", "arguments": {"note": "misspelt"}},
    {"name": "record_effect", "arguments": '{"note": '},
]


def test_a_turn_with_mixed_fates_resumes_the_run_once_with_results_in_order(
    celery_worker: Worker, alice: User, operator: User
) -> None:
    # given a model that asks for five calls in one turn
    agent = Agent.objects.create(
        name="parallel",
        script=[{"content": "", "tool_calls": TURN}, {"content": "summary: {last_tool_result}"}],
        tools=["record_effect", "risky_effect"],
    )
    run = run_start(agent=agent, user=alice, input="do five things")

    # then the run waits while two calls wait for operators; the others settled already
    wait_for(lambda: AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING, what="run waiting")
    wait_for(lambda: ToolCall.objects.get(run_id=run.pk, position=0).status == CallStatus.SUCCEEDED, what="call 0")
    statuses = list(ToolCall.objects.filter(run_id=run.pk).order_by("position").values_list("status", flat=True))
    assert statuses == ["succeeded", "pending_approval", "pending_approval", "invalid", "invalid"]
    assert AgentRun.objects.get(pk=run.pk).turn == 1

    # when one is approved and the other rejected, in the opposite order of their positions
    held = {r.call.position: r for r in ApprovalRequest.objects.filter(call__run_id=run.pk).select_related("call")}
    approval_reject(request_id=held[2].pk, user=operator, comment="not this one")
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    approval_approve(request_id=held[1].pk, user=operator, comment="fine")

    # then the run resumes once, after the last call settled, with every result in position order
    done = wait_for(
        lambda: (r := AgentRun.objects.get(pk=run.pk)).status == RunStatus.COMPLETED and r, what="run completed"
    )
    assert done.turn == 2  # exactly one more model turn
    tool_messages = [message for message in done.messages if message["role"] == "tool"]
    assert [message["tool_call_id"] for message in tool_messages] == [f"call_1_{index}" for index in range(1, 6)]
    assert '"effect_id"' in tool_messages[0]["content"] and '"effect_id"' in tool_messages[1]["content"]
    assert tool_messages[2]["content"] == "Rejected by operator: not this one"
    assert "Unknown tool 'record_efect'" in tool_messages[3]["content"]
    assert "not valid JSON" in tool_messages[4]["content"]
    assert SideEffect.objects.count() == 2  # position 0 and the approved position 1, each once
    executed = AuditEvent.objects.filter(run_id=run.pk, event_type="call.running").count()
    assert executed == 2
