"""Review of 2026-12-05 (av): subagents and the blackboard (main at 317e64f).

Each test fails on the reviewed code and states what was found and what is expected.

Findings: cancelling a subagent tool's call (``POST /api/v1/calls/{id}/cancel/``, the admin's *Cancel calls*,
MCP's cancel tool: all ``waiting.tool_call_cancel``) withdrew the parent's waiting call and left its child run
going: the parent resumed and completed while the child kept running, and its held call stayed on the desk to be
approved and run in the user's name for a run nobody waited for (the invariant probe b and review f set: no child
outlives its parent's call). Now refused (409) naming the child run, whose cancellation settles the call.

Checked and found holding (no test here): a child's user, tenant and context come from the parent's row
(``_calling_run`` reads the boundary's run id and tenant, never arguments) and its agent among the parent
tenant's and the global ones; its held calls are requested for the parent's user, so the four-eyes rule
excludes that user on the desk; the blackboard tools and ``blackboard_entries`` read only the calling run and
its ancestors within its tenant (the walk filters by tenant at every hop); ``blackboard_put`` stores the row's
tenant, never a caller's; a subagent's ``sensitive`` arguments reach the child redacted
(``redacted_arguments_text``); nobody can post a result for a subagent call (400); its suspension never
expires (``expires=False``); cancelling a parent run cancels its going children first (their ends settle the
parent's call) and withdraws their held calls; ``_budget_left`` refuses past ``max_depth`` and once the shared
calls or tokens are spent, and ``budget_of`` ignores a non-integer (or boolean) budget in ``AgentRun.limits``.
"""

from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from pydantic import BaseModel
from rest_framework.test import APIClient

from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.services import agent_create, run_start
from agents_app.subagents import Subagent
from approvals.models import ApprovalRequest, ApprovalStatus
from toolhub import Param, registry
from toolhub.models import CallStatus, ToolCall

pytestmark = pytest.mark.django_db

GOING = (RunStatus.RUNNING, RunStatus.WAITING)


class _Task(BaseModel):
    """What a subagent is asked to do."""

    task: Annotated[str, Param("The task.")]


def _start(agent: Agent, user: User, capture: Any) -> AgentRun:
    with capture(execute=True):
        run = run_start(agent=agent, user=user, input="go")
    run.refresh_from_db()
    return run


def _client_of(user: User) -> APIClient:
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(user)
    return client


def test_cancelling_a_subagent_call_leaves_its_child_running_after_the_parent_ended(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: ``waiting.tool_call_cancel`` withdraws any ``awaiting_result`` call, a subagent's too, and nothing
    there knows a child run waits behind it. Alice cancels the parent's ``ask_av_slow`` call (``POST
    /api/v1/calls/{id}/cancel/``, 200): the parent's model reads "Not executed", the parent completes, and the child
    stays ``waiting`` with its approval request pending on the desk; an operator approving it later runs the child's
    tool in alice's name for a run that has ended.
    Expect: a subagent call is settled only by its child run: cancelling the call is refused (409) naming the child
    run to cancel instead, and the parent and child are untouched.
    """
    tool = Subagent.of("av-slow", "Ask the slow helper.", _Task, name="ask_av_slow")
    with registry.temporarily(tool):
        agent_create(
            name="av-slow",
            provider="scripted",
            tools=["risky_effect"],
            script=[
                {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "from the child"}}]},
                {"content": "helper done"},
            ],
        )
        parent_agent = agent_create(
            name="av-waiter",
            provider="scripted",
            tools=["ask_av_slow"],
            script=[
                {"tool_calls": [{"name": "ask_av_slow", "arguments": {"task": "do it"}}]},
                {"content": "parent answered: {last_tool_result}"},
            ],
        )
        parent = _start(parent_agent, alice, django_capture_on_commit_callbacks)
        child = AgentRun.objects.get(parent_run=parent)
        call = ToolCall.objects.get(run_id=parent.id, tool_name="ask_av_slow")
        assert call.status == CallStatus.AWAITING_RESULT and child.status == RunStatus.WAITING

        with django_capture_on_commit_callbacks(execute=True):
            answer = _client_of(alice).post(f"/api/v1/calls/{call.pk}/cancel/", {"reason": "too slow"}, format="json")

    parent.refresh_from_db()
    child.refresh_from_db()
    call.refresh_from_db()
    held = ApprovalRequest.objects.get(call__run_id=child.id)
    assert answer.status_code == 409, (answer.status_code, answer.json())
    assert str(child.id) in answer.json()["detail"]
    assert call.status == CallStatus.AWAITING_RESULT
    assert parent.status == RunStatus.WAITING and child.status == RunStatus.WAITING
    assert held.status == ApprovalStatus.PENDING
