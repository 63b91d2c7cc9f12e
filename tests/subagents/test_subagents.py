"""Subagents: an agent called as a tool runs as a child run of the caller's principal, held and limited with it."""

from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pydantic import BaseModel, Field
from rest_framework.test import APIClient

from agents_app.models import AgentRun, RunStatus, StopReason
from agents_app.subagents import Subagent, SubagentLimits
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.helpers import assert_audit_intact, event_types
from tests.subagents.conftest import MakeAgent, StartRun
from tests.testapp.models import SideEffect
from tests.testapp.tools import ask_researcher
from toolhub import Param, ToolContext, ToolSuspend, registry
from toolhub.models import AuditEvent, CallStatus, ToolCall

pytestmark = pytest.mark.django_db


class Task(BaseModel):
    """What the researcher is asked to do."""

    task: Annotated[str, Param("The task for the researcher."), Field(max_length=500)]


class TenantTask(BaseModel):
    """A task that also names a tenant (as a model might try)."""

    task: Annotated[str, Param("The task.")]
    tenant: Annotated[str, Param("A tenant.")] = ""


#: The test app's subagent tool for the agent named ``researcher`` (registered for the workers too).
RESEARCHER = ask_researcher


def _parent_script(tool: str = "ask_researcher") -> list[dict[str, Any]]:
    return [
        {"content": "", "tool_calls": [{"name": tool, "arguments": {"task": "find it"}}]},
        {"content": "Parent got: {last_tool_result}"},
    ]


HELD_CHILD_SCRIPT = [
    {"content": "", "tool_calls": [{"name": "risky_effect", "arguments": {"note": "from the child"}}]},
    {"content": "child done: {last_tool_result}"},
]


def test_a_held_call_in_the_child_suspends_the_parent_until_the_operator_approves(
    make_agent: MakeAgent,
    start: StartRun,
    alice: User,
    operator_client: APIClient,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with registry.temporarily(RESEARCHER):
        make_agent(name="researcher", tools=["risky_effect"], script=HELD_CHILD_SCRIPT)
        parent_agent = make_agent(tools=["ask_researcher"], script=_parent_script())
        parent = start(parent_agent, alice, context={"project": "apollo"})

        # the parent's call waits on the child run, which waits for an operator
        call = ToolCall.objects.get(run_id=parent.id)
        child = AgentRun.objects.get(parent_run=parent)
        held = ToolCall.objects.get(run_id=child.id)
        assert call.status == CallStatus.AWAITING_RESULT
        assert call.suspension["payload"]["subagent_run"] == str(child.id)
        assert held.status == CallStatus.PENDING_APPROVAL
        assert (parent.status, child.status) == (RunStatus.WAITING, RunStatus.WAITING)
        # the child is the parent's principal and context, linked to the parent's call, one level deeper
        assert (child.user_id, child.tenant, child.context) == (alice.pk, "acme", {"project": "apollo"})
        assert (child.parent_call_id, child.depth) == (call.id, 1)
        assert held.tenant == "acme" and held.user_id == alice.pk and held.context["run_id"] == str(child.id)
        assert not SideEffect.objects.exists()

        # the API shows the nesting both ways
        shown = operator_client.get(f"/api/v1/runs/{parent.id}/").json()
        assert shown["children"] == [
            {"run": str(child.id), "agent": "researcher", "status": "waiting", "call": str(call.id)}
        ]
        assert shown["tool_calls"][0]["child_run"] == str(child.id)
        assert operator_client.get(f"/api/v1/runs/{child.id}/").json()["parent"] == {
            "run": str(parent.id),
            "call": str(call.id),
        }

        # when the operator approves the child's call over the API
        request = ApprovalRequest.objects.get(call=held)
        with django_capture_on_commit_callbacks(execute=True):
            response = operator_client.post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
        assert response.status_code == 200, response.content

    # both runs complete, the child's answer being the parent call's result
    parent.refresh_from_db()
    child.refresh_from_db()
    call.refresh_from_db()
    assert request.__class__.objects.get(pk=request.pk).status == ApprovalStatus.APPROVED
    assert child.status == RunStatus.COMPLETED and child.output.startswith("child done: ")
    assert call.status == CallStatus.SUCCEEDED and call.result == child.output
    assert parent.status == RunStatus.COMPLETED and parent.output == f"Parent got: {child.output}"
    assert SideEffect.objects.count() == 1
    # the parent's call is settled by the child run, audited as such
    settled = AuditEvent.objects.get(call_id=call.id, event_type="call.succeeded")
    assert settled.actor == f"agent:researcher run:{child.id}" and settled.payload["child_run"] == str(child.id)
    assert event_types(call)[-2:] == ["call.awaiting_result", "call.succeeded"]
    assert assert_audit_intact() > 0


def test_the_admin_run_page_lists_child_runs_with_links(
    make_agent: MakeAgent, start: StartRun, alice: User, operator: User
) -> None:
    with registry.temporarily(RESEARCHER):
        make_agent(name="researcher", tools=["risky_effect"], script=HELD_CHILD_SCRIPT)
        parent = start(make_agent(tools=["ask_researcher"], script=_parent_script()), alice)
    child = AgentRun.objects.get(parent_run=parent)
    client = Client()
    client.force_login(operator)
    page = client.get(f"/admin/agents_app/agentrun/{parent.id}/change/").content.decode()
    assert 'id="run-children"' in page and f"/admin/agents_app/agentrun/{child.id}/change/" in page
    child_page = client.get(f"/admin/agents_app/agentrun/{child.id}/change/").content.decode()
    assert f"/admin/agents_app/agentrun/{parent.id}/change/" in child_page


def test_the_child_inherits_tenant_and_user_whatever_the_model_passes(
    make_agent: MakeAgent, start: StartRun, alice: User, other_tenant: Any
) -> None:
    tool = Subagent.of("helper", "Ask the helper.", TenantTask, name="ask_helper")
    with registry.temporarily(tool):
        make_agent(name="helper", tools=[], script=[{"content": "helped"}])
        script = [
            {"content": "", "tool_calls": [{"name": "ask_helper", "arguments": {"task": "x", "tenant": "globex"}}]},
            {"content": "{last_tool_result}"},
        ]
        parent = start(make_agent(tools=["ask_helper"], script=script), alice)
        # naming another tenant is refused before anything runs: no child in any tenant
        call = ToolCall.objects.get(run_id=parent.id)
        assert call.status == CallStatus.DENIED and "tenant" in call.error
        assert not AgentRun.objects.filter(parent_run=parent).exists()

        # naming its own tenant is allowed, and the child is the run's principal either way
        script[0]["tool_calls"][0]["arguments"] = {"task": "x", "tenant": "acme"}
        parent = start(make_agent(tools=["ask_helper"], script=script), alice)
    child = AgentRun.objects.get(parent_run=parent)
    assert (child.tenant, child.user_id) == ("acme", alice.pk)
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED and parent.output == "helped"


def test_depth_limit_refuses_clearly(make_agent: MakeAgent, start: StartRun, alice: User) -> None:
    shallow = Subagent.of("nested", "Ask nested.", Task, name="ask_nested", limits=SubagentLimits(max_depth=1))
    with registry.temporarily(shallow):
        # the child calls the same subagent again: one level too deep
        make_agent(
            name="nested",
            tools=["ask_nested"],
            script=[
                {"content": "", "tool_calls": [{"name": "ask_nested", "arguments": {"task": "deeper"}}]},
                {"content": "inner saw: {last_tool_result}"},
            ],
        )
        parent = start(
            make_agent(
                tools=["ask_nested"],
                script=[
                    {"content": "", "tool_calls": [{"name": "ask_nested", "arguments": {"task": "go"}}]},
                    {"content": "{last_tool_result}"},
                ],
            ),
            alice,
        )
    child = AgentRun.objects.get(parent_run=parent)
    refused = ToolCall.objects.get(run_id=child.id)
    assert refused.status == CallStatus.FAILED
    assert "nest at most 1 level" in refused.error and "depth 1" in refused.error
    assert not AgentRun.objects.filter(parent_run=child).exists()
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED and parent.output.startswith("inner saw: Subagent 'nested' refused")


def test_call_limit_of_the_parent_stops_the_child_and_tells_the_parent(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    tight = Subagent.of("busy", "Ask busy.", Task, name="ask_busy", limits=SubagentLimits(max_calls=1))
    with registry.temporarily(tight):
        make_agent(
            name="busy",
            tools=["record_effect"],
            script=[
                {
                    "content": "",
                    "tool_calls": [
                        {"name": "record_effect", "arguments": {"note": "a"}},
                        {"name": "record_effect", "arguments": {"note": "b"}},
                    ],
                },
                {"content": "never"},
            ],
        )
        parent = start(make_agent(tools=["ask_busy"], script=_parent_script("ask_busy")), alice)
    child = AgentRun.objects.get(parent_run=parent)
    assert child.limits["max_tool_calls"] == 1
    assert child.status == RunStatus.FAILED and child.stop_reason == StopReason.MAX_TOOL_CALLS
    assert "parent run's limit of 1" in child.error
    assert not SideEffect.objects.exists()
    call = ToolCall.objects.get(run_id=parent.id)
    assert call.status == CallStatus.FAILED and "did not finish" in call.error and "limit of 1" in call.error
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED and "did not finish" in parent.output


def test_a_spent_budget_refuses_the_next_subagent_and_tokens_are_limited(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    stingy = Subagent.of("talker", "Ask talker.", Task, name="ask_talker", limits=SubagentLimits(max_tokens=1))
    with registry.temporarily(stingy):
        make_agent(
            name="talker",
            tools=["record_effect"],
            script=[{"content": "", "tool_calls": [{"name": "record_effect", "arguments": {"note": "a"}}]}],
        )
        parent = start(
            make_agent(
                tools=["ask_talker"],
                script=[
                    {"content": "", "tool_calls": [{"name": "ask_talker", "arguments": {"task": "one two"}}]},
                    {"content": "", "tool_calls": [{"name": "ask_talker", "arguments": {"task": "again"}}]},
                    {"content": "{last_tool_result}"},
                ],
            ),
            alice,
        )
    first, second = ToolCall.objects.filter(run_id=parent.id).order_by("turn")
    child = AgentRun.objects.get(parent_run=parent)
    assert child.stop_reason == StopReason.MAX_TOKENS and "beyond the 1" in child.error
    assert first.status == CallStatus.FAILED and "token" in first.error
    # the budget is spent: the second subagent call is refused before any child starts
    assert second.status == CallStatus.FAILED and "used all 1 tokens" in second.error
    assert AgentRun.objects.filter(parent_run=parent).count() == 1
    assert not SideEffect.objects.exists()


def test_a_subagent_call_outside_a_run_and_a_missing_agent_are_refused(
    request_call: Any, make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    with registry.temporarily(RESEARCHER):
        outside = request_call("ask_researcher", {"task": "x"}, alice, tenant="acme")
        assert outside.status == CallStatus.FAILED and outside.error == "A subagent can only be called by an agent run."
        # no agent named researcher exists: the model is told, nothing waits
        parent = start(make_agent(tools=["ask_researcher"], script=_parent_script()), alice)
    call = ToolCall.objects.get(run_id=parent.id)
    assert call.status == CallStatus.FAILED and "not available" in call.error
    assert not AgentRun.objects.filter(parent_run=parent).exists()


def test_nobody_posts_a_result_for_a_subagent_call(
    make_agent: MakeAgent, start: StartRun, alice: User, alice_client: APIClient
) -> None:
    with registry.temporarily(RESEARCHER):
        make_agent(name="researcher", tools=["risky_effect"], script=HELD_CHILD_SCRIPT)
        parent = start(make_agent(tools=["ask_researcher"], script=_parent_script()), alice)
    call = ToolCall.objects.get(run_id=parent.id)
    response = alice_client.post(f"/api/v1/calls/{call.id}/result/", {"result": "forged"}, format="json")
    assert response.status_code == 400, response.content
    assert "subagent run" in response.json()["detail"]
    call.refresh_from_db()
    assert call.status == CallStatus.AWAITING_RESULT and call.result is None


def test_a_retried_subagent_call_waits_on_the_same_child(make_agent: MakeAgent, start: StartRun, alice: User) -> None:
    with registry.temporarily(RESEARCHER):
        make_agent(name="researcher", tools=["risky_effect"], script=HELD_CHILD_SCRIPT)
        parent = start(make_agent(tools=["ask_researcher"], script=_parent_script()), alice)
        call = ToolCall.objects.get(run_id=parent.id)
        # a worker that died after creating the child runs the tool again for the same call
        with pytest.raises(ToolSuspend) as suspended:
            RESEARCHER.invoke({"task": "find it"}, ToolContext(call.context).with_values(call_id=str(call.id)))
    assert suspended.value.payload["subagent_run"] == call.suspension["payload"]["subagent_run"]
    assert AgentRun.objects.filter(parent_run=parent).count() == 1


def test_cancelling_the_parent_cancels_its_child_and_withdraws_the_childs_held_call(
    make_agent: MakeAgent, start: StartRun, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    with registry.temporarily(RESEARCHER):
        make_agent(name="researcher", tools=["risky_effect"], script=HELD_CHILD_SCRIPT)
        parent = start(make_agent(tools=["ask_researcher"], script=_parent_script()), alice)
        child = AgentRun.objects.get(parent_run=parent)
        held = ApprovalRequest.objects.get(call__run_id=child.id)
        client = APIClient()
        client.force_authenticate(alice)

        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(f"/api/v1/runs/{parent.id}/cancel/", {"reason": "not needed"}, format="json")

    assert response.status_code == 200, response.content
    parent.refresh_from_db()
    child.refresh_from_db()
    assert (parent.status, child.status) == (RunStatus.CANCELLED, RunStatus.CANCELLED)
    assert child.error == f"Cancelled by user:alice: its parent run {parent.id} was cancelled"
    assert ApprovalRequest.objects.get(pk=held.pk).status == ApprovalStatus.CANCELLED
    assert ToolCall.objects.get(pk=held.call_id).status == CallStatus.CANCELLED
    # the parent's call was settled by its child's end, as when a child fails on its own
    parent_call = ToolCall.objects.get(run_id=parent.id)
    assert parent_call.status == CallStatus.FAILED and "did not finish: Cancelled by user:alice" in parent_call.error
    assert parent.turn == 1 and not SideEffect.objects.exists()
    assert assert_audit_intact() > 0


def test_children_asked_for_in_one_turn_share_the_budget_equally(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    """Each child of a turn gets its part of what is left (reserved while it runs), not the whole remainder."""
    shared = Subagent.of("pair", "Ask pair.", Task, name="ask_pair", limits=SubagentLimits(max_calls=5))
    with registry.temporarily(shared):
        make_agent(name="pair", tools=[], script=[{"content": "pair done"}])
        parent = start(
            make_agent(
                tools=["ask_pair"],
                script=[
                    {
                        "content": "",
                        "tool_calls": [
                            {"name": "ask_pair", "arguments": {"task": "one"}},
                            {"name": "ask_pair", "arguments": {"task": "two"}},
                        ],
                    },
                    {"content": "{last_tool_result}"},
                ],
            ),
            alice,
        )
    budgets = sorted(run.limits["max_tool_calls"] for run in AgentRun.objects.filter(parent_run=parent))
    assert budgets == [2, 3]  # 5 shared: the first of two gets the ceiling of half, the second the rest
    assert parent.status == RunStatus.COMPLETED


def test_run_budget_counts_what_the_runs_children_hold(make_agent: MakeAgent, start: StartRun, alice: User) -> None:
    """A child's budget covers its own calls and its children's; ``run_budget`` tells it so."""
    outer = Subagent.of("middle", "Ask middle.", Task, name="ask_middle", limits=SubagentLimits(max_calls=6))
    inner = Subagent.of("leaf", "Ask leaf.", Task, name="ask_leaf")
    with registry.temporarily(outer, inner):
        make_agent(
            name="leaf",
            tools=["record_effect"],
            script=[
                {"content": "", "tool_calls": [{"name": "record_effect", "arguments": {"note": "leaf"}}]},
                {"content": "leaf done"},
            ],
        )
        make_agent(
            name="middle",
            tools=["run_budget", "ask_leaf"],
            script=[
                {"content": "", "tool_calls": [{"name": "ask_leaf", "arguments": {"task": "a"}}]},
                {"content": "", "tool_calls": [{"name": "run_budget", "arguments": {}}]},
                {"content": "{last_tool_result}"},
            ],
        )
        parent = start(make_agent(tools=["ask_middle"], script=_parent_script("ask_middle")), alice)
    middle = AgentRun.objects.get(parent_run=parent)
    assert middle.status == RunStatus.COMPLETED, middle.error
    assert AgentRun.objects.get(parent_run=middle).limits["max_tool_calls"] == 5  # 6 less the call that asked
    # its own two calls (ask_leaf, run_budget) and the leaf's one
    assert '"tool_calls": {"left": 3, "limit": 6, "used": 3}' in middle.output


def test_a_sensitive_argument_reaches_the_child_redacted(make_agent: MakeAgent, start: StartRun, alice: User) -> None:
    """The child's input and first message are shown to the run's readers: a sensitive value is replaced there."""

    class Vault(BaseModel):
        """A task with a secret."""

        task: Annotated[str, Param("The task.")]
        pin: Annotated[str, Param("A PIN.")]

    vault = Subagent.of("keeper", "Ask keeper.", Vault, name="ask_keeper", sensitive=("pin",))
    with registry.temporarily(vault):
        make_agent(name="keeper", tools=[], script=[{"content": "kept"}])
        parent = start(
            make_agent(
                tools=["ask_keeper"],
                script=[
                    {
                        "content": "",
                        "tool_calls": [{"name": "ask_keeper", "arguments": {"task": "t", "pin": "8812-4470"}}],
                    },
                    {"content": "{last_tool_result}"},
                ],
            ),
            alice,
        )
    child = AgentRun.objects.get(parent_run=parent)
    assert child.status == RunStatus.COMPLETED
    assert "8812-4470" not in child.input and "8812-4470" not in str(child.messages)
    assert '"task":"t"' in child.input.replace(" ", "")
