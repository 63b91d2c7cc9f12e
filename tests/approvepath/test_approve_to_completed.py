"""The whole approve -> executed -> run completed path stays few statements (in process, eager tasks).

On PostgreSQL: the approval (the request locked, its decisions, one write), the worker's claim (which returns
the call and its agent's tools: no read of either; nor of the approvals it was released on while governance is
the one they were judged under: ``approvals.shortfall``), the tool's own insert, the outcome, and the loop step (the
run locked, its turn's calls, one write of the run).
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.services import run_start
from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.testapp.models import SideEffect
from toolhub.audit_verify import verify_audit_chains
from toolhub.models import CallStatus, ToolCall

pytestmark = pytest.mark.django_db

#: 11 before the claim returned the call and its agent's tools (a read of each); 10 when the worker read the
#: approvals it was released on whatever the governance (review fj), before the call kept the stamp they were
#: judged under (``ToolCall.approved_under``).
APPROVE_TO_COMPLETED_STATEMENTS_POSTGRESQL = 9

SCRIPT = [
    {"content": "", "tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]},
    {"content": "done: {last_tool_result}"},
]


@pytest.mark.postgres
def test_approve_to_completed_is_nine_statements(
    alice: User, operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    # given a run waiting for the approval of its one call
    agent = Agent.objects.create(name="approve-path", script=SCRIPT, tools=["risky_effect"])
    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(agent=agent, user=alice, input="go")
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    request = ApprovalRequest.objects.get(call__run_id=run.pk)
    decider = User.objects.get(pk=operator.pk)
    with django_capture_on_commit_callbacks(execute=True):
        approval_approve(request_id=request.pk, user=decider, comment="warm")  # warms the decider's caches
        run = run_start(agent=agent, user=alice, input="go again")  # and holds another call
    request = ApprovalRequest.objects.get(call__run_id=run.pk)

    # when the operator approves and the call runs and the run completes (eager: all in this process)
    with CaptureQueriesContext(connection) as captured, django_capture_on_commit_callbacks(execute=True):
        approval_approve(request_id=request.pk, user=decider, comment="go")

    # then it took nine statements, and every effect happened once
    statements = [q["sql"] for q in captured.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))]
    assert len(statements) <= APPROVE_TO_COMPLETED_STATEMENTS_POSTGRESQL, "\n".join(statements)
    run.refresh_from_db()
    call = ToolCall.objects.get(run_id=run.pk)
    effect = SideEffect.objects.get(call_id=str(call.pk))
    assert call.status == CallStatus.SUCCEEDED
    assert run.status == RunStatus.COMPLETED and run.output == f'done: {{"effect_id": {effect.pk}}}'
    assert SideEffect.objects.filter(tool="risky_effect").count() == 2
    assert verify_audit_chains()[1] == []
