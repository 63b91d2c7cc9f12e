"""The LangGraph / LangChain v1 adapter, run with the real libraries offline (a scripted fake chat model).

A high-risk call pauses the graph and becomes a toolhub approval request; the operator decides through
toolhub's API; the graph resumes with the matching decision and the tool runs once, audited.
"""

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Interrupt
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest, ApprovalRule
from approvals.services import approval_approve
from tests.interceptors.conftest import send_email
from tests.testapp.models import SideEffect
from toolhub.adapters.langgraph import LangGraphBridgeError, LangGraphToolhub, langgraph_call_id
from toolhub.interceptors import InterceptedCall, Interceptor
from toolhub.models import AuditEvent, Tenant, TenantMembership, ToolCall
from toolhub.pipeline import approval_hash_matches
from toolhub.tools.registry import registry

# Committed for real: the embedded mode runs a call when the request's transaction commits.
pytestmark = pytest.mark.django_db(transaction=True)


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, answering from a script; tools are bound by ignoring them."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> "ScriptedChatModel":
        return self


def asks(name: str, args: dict[str, Any], call_id: str = "call_1") -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


Agent = Callable[..., Any]


@pytest.fixture
def agent_for(alice: User) -> Agent:
    """An agent acting for alice with the given script, its toolhub bridge, and its thread's config."""

    def build(
        *script: AIMessage, thread: str = "thread-1", wait_seconds: float = 5
    ) -> tuple[Any, LangGraphToolhub, dict[str, Any]]:
        hub = LangGraphToolhub(user=alice, wait_seconds=wait_seconds)
        model = ScriptedChatModel(messages=iter([*script, AIMessage(content="done")]))
        agent = create_agent(
            model,
            tools=hub.tools(["risky_effect", "record_effect"]),
            middleware=[hub.middleware(["risky_effect", "record_effect"])],
            checkpointer=InMemorySaver(),
        )
        return agent, hub, {"configurable": {"thread_id": thread}}

    return build


def start(agent: Any, config: dict[str, Any]) -> Any:
    return agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config, version="v2")


def tool_messages(result: Any) -> list[ToolMessage]:
    return [message for message in result.value["messages"] if isinstance(message, ToolMessage)]


def test_a_high_risk_call_pauses_and_runs_once_with_the_operators_edit(
    agent_for: Agent, operator_client: APIClient, operator: User
) -> None:
    agent, hub, config = agent_for(asks("risky_effect", {"note": "wire 100"}))

    paused = start(agent, config)

    assert len(paused.interrupts) == 1
    assert paused.interrupts[0].value["type"] == "tool_approval"
    reviews = hub.request_approvals(paused.interrupts, config)
    (review,) = reviews
    approval = ApprovalRequest.objects.get()
    assert (review.approval_id, review.status) == (approval.pk, "pending_approval")
    assert review.call_id == langgraph_call_id("thread-1", "call_1")
    assert not SideEffect.objects.exists()
    assert hub.resume_command(paused.interrupts, config) is None  # nobody decided yet
    assert hub.request_approvals(paused.interrupts, config) == reviews  # asking again makes no second call

    response = operator_client.post(
        f"/api/v1/approvals/{approval.pk}/approve/",
        {"arguments": {"note": "wire 10"}, "comment": "lower it"},
        format="json",
    )
    assert response.status_code == 200, response.content

    command = hub.resume_command(paused.interrupts, config)
    assert command is not None
    assert command.resume == {
        paused.interrupts[0].id: {
            "type": "edit",
            "edited_action": {"name": "risky_effect", "args": {"note": "wire 10"}},
        }
    }
    finished = agent.invoke(command, config, version="v2")

    effect = SideEffect.objects.get()  # ran once, with the edited arguments
    assert effect.note == "wire 10"
    (message,) = tool_messages(finished)
    assert json.dumps({"effect_id": effect.pk}) in message.content
    assert finished.value["messages"][-1].content == "done"
    call = ToolCall.objects.get()
    assert (call.id, call.status, call.arguments, call.user_id) == (
        review.call_id,
        "succeeded",
        {"note": "wire 10"},
        hub.user.pk,
    )
    events = list(AuditEvent.objects.filter(call_id=call.id).values_list("event_type", "actor"))
    assert ("approval.edit", "operator:operator") in events  # the approver's identity, on the call's trail
    assert sum(1 for kind, _ in events if kind == "call.succeeded") == 1
    requested = AuditEvent.objects.get(call_id=call.id, event_type="call.requested")
    client = requested.payload["client"]
    # The model's own arguments are bound (keyed, before interceptors), so the resumed tool recognizes them.
    assert approval_hash_matches(
        client.pop("asked_arguments_hash"), "risky_effect", call.tool_version, {"note": "wire 100"}
    )
    assert client == {"channel": "langgraph", "thread_id": "thread-1"}


def test_an_approval_without_edit_resumes_with_approve_and_runs_once(
    agent_for: Agent, operator_client: APIClient
) -> None:
    agent, hub, config = agent_for(asks("risky_effect", {"note": "as asked"}))
    paused = start(agent, config)
    hub.request_approvals(paused.interrupts, config)
    approval = ApprovalRequest.objects.get()

    assert operator_client.post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json").status_code == 200
    command = hub.resume_command(paused.interrupts, config)
    assert command is not None
    assert command.resume == {paused.interrupts[0].id: {"type": "approve"}}
    agent.invoke(command, config, version="v2")

    assert list(SideEffect.objects.values_list("note", flat=True)) == ["as asked"]
    assert ToolCall.objects.get().status == "succeeded"


def test_a_rejection_reaches_the_model_as_the_operators_comment(agent_for: Agent, operator_client: APIClient) -> None:
    agent, hub, config = agent_for(asks("risky_effect", {"note": "wire everything"}))
    paused = start(agent, config)
    hub.request_approvals(paused.interrupts, config)
    approval = ApprovalRequest.objects.get()

    response = operator_client.post(
        f"/api/v1/approvals/{approval.pk}/reject/", {"comment": "not this month"}, format="json"
    )
    assert response.status_code == 200, response.content
    command = hub.resume_command(paused.interrupts, config)
    assert command is not None
    finished = agent.invoke(command, config, version="v2")

    (message,) = tool_messages(finished)
    assert "not this month" in message.content
    assert message.status == "error"
    assert not SideEffect.objects.exists()
    call = ToolCall.objects.get()
    assert call.status == "rejected"
    assert AuditEvent.objects.filter(call_id=call.id, event_type="approval.reject").exists()


def test_a_low_risk_call_runs_directly_and_is_audited(agent_for: Agent, alice: User) -> None:
    agent, _, config = agent_for(asks("record_effect", {"note": "harmless"}))

    finished = start(agent, config)

    assert not finished.interrupts
    effect = SideEffect.objects.get()
    assert effect.note == "harmless"
    (message,) = tool_messages(finished)
    assert json.loads(message.content) == {"effect_id": effect.pk}
    call = ToolCall.objects.get()
    assert (call.status, call.user_id, call.tenant, call.kind) == ("succeeded", alice.pk, "acme", "api")
    assert not ApprovalRequest.objects.exists()
    kinds = set(AuditEvent.objects.filter(call_id=call.id).values_list("event_type", flat=True))
    assert {"call.requested", "call.succeeded"} <= kinds


def test_bad_arguments_are_refused_with_the_governed_message_and_run_nothing(agent_for: Agent) -> None:
    agent, _, config = agent_for(asks("record_effect", {"wrong": 1}))

    finished = start(agent, config)

    (message,) = tool_messages(finished)
    assert message.content.startswith("Error:")
    assert "note" in message.content
    assert not SideEffect.objects.exists()
    assert ToolCall.objects.get().status == "invalid"


def test_a_tool_the_user_may_not_use_is_not_offered(alice: User) -> None:
    hub = LangGraphToolhub(user=alice)

    with pytest.raises(LangGraphBridgeError, match="not allowed"):
        hub.tools(["no_such_tool"])
    assert "risky_effect" in {tool.name for tool in hub.tools()}


def test_another_tenants_call_is_never_joined(
    agent_for: Agent, operator_client: APIClient, other_tenant: Tenant
) -> None:
    agent, hub, config = agent_for(asks("risky_effect", {"note": "mine"}))
    paused = start(agent, config)
    hub.request_approvals(paused.interrupts, config)
    bob = User.objects.create_user("bob", "bob@example.com", "x")
    TenantMembership.objects.create(user=bob, tenant=other_tenant)
    intruder = LangGraphToolhub(user=bob)

    with pytest.raises(LangGraphBridgeError, match="another call"):
        intruder.resume_command(paused.interrupts, config)
    assert ApprovalRequest.objects.count() == 1
    assert not SideEffect.objects.exists()


def test_a_resume_needs_a_thread_id(agent_for: Agent) -> None:
    agent, hub, config = agent_for(asks("risky_effect", {"note": "x"}))
    paused = start(agent, config)

    with pytest.raises(LangGraphBridgeError, match="thread id"):
        hub.request_approvals(paused.interrupts, {})
    assert not ToolCall.objects.exists()


def test_a_resume_that_skips_the_operator_runs_nothing(agent_for: Agent) -> None:
    """HITL's own approve is no authorization: the tool joins the held call, which still waits for toolhub."""
    agent, hub, config = agent_for(asks("risky_effect", {"note": "sneak"}), wait_seconds=0)
    paused = start(agent, config)
    hub.request_approvals(paused.interrupts, config)

    finished = agent.invoke(Command(resume={paused.interrupts[0].id: {"type": "approve"}}), config, version="v2")

    (message,) = tool_messages(finished)
    assert "waiting for an operator's approval" in message.content
    assert not SideEffect.objects.exists()
    assert ToolCall.objects.get().status == "pending_approval"


def test_a_resume_with_other_arguments_than_approved_runs_nothing_more(
    agent_for: Agent, operator_client: APIClient
) -> None:
    agent, hub, config = agent_for(asks("risky_effect", {"note": "wire 100"}))
    paused = start(agent, config)
    hub.request_approvals(paused.interrupts, config)
    approval = ApprovalRequest.objects.get()
    operator_client.post(f"/api/v1/approvals/{approval.pk}/approve/", {"arguments": {"note": "wire 10"}}, format="json")
    forged = {"type": "edit", "edited_action": {"name": "risky_effect", "args": {"note": "wire 1000"}}}

    finished = agent.invoke(Command(resume={paused.interrupts[0].id: forged}), config, version="v2")

    (message,) = tool_messages(finished)
    assert "not the ones approved" in message.content
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["wire 10"]  # the approved version, once


def test_without_the_middleware_a_held_call_tells_the_model_it_waits(alice: User) -> None:
    hub = LangGraphToolhub(user=alice, wait_seconds=0)
    model = ScriptedChatModel(messages=iter([asks("risky_effect", {"note": "x"}), AIMessage(content="done")]))
    agent = create_agent(model, tools=hub.tools(["risky_effect"]), checkpointer=InMemorySaver())

    finished = start(agent, {"configurable": {"thread_id": "t"}})

    (message,) = tool_messages(finished)
    assert "waiting for an operator's approval" in message.content
    assert ApprovalRequest.objects.get().status == "pending"
    assert not SideEffect.objects.exists()


@pytest.mark.postgres
def test_resume_command_waits_for_the_decision_and_the_run(agent_for: Agent, operator: User) -> None:
    agent, hub, config = agent_for(asks("risky_effect", {"note": "later"}))
    paused = start(agent, config)
    (review,) = hub.request_approvals(paused.interrupts, config)

    def decide_later() -> None:
        try:
            time.sleep(0.5)
            approval_approve(request_id=review.approval_id, user=operator, comment="ok")
        finally:
            connection.close()

    thread = threading.Thread(target=decide_later)
    thread.start()
    command = hub.resume_command(paused.interrupts, config, wait=10)
    thread.join(10)

    assert command is not None
    assert command.resume == {paused.interrupts[0].id: {"type": "approve"}}
    assert ToolCall.objects.get().status == "succeeded"  # released and run before the graph resumes
    finished = agent.invoke(command, config, version="v2")
    (message,) = tool_messages(finished)
    assert json.loads(message.content) == {"effect_id": SideEffect.objects.get().pk}


def test_a_tool_call_without_a_thread_id_is_refused_with_a_clear_message(alice: User) -> None:
    hub = LangGraphToolhub(user=alice, wait_seconds=0)
    model = ScriptedChatModel(messages=iter([asks("record_effect", {"note": "x"}), AIMessage(content="done")]))
    agent = create_agent(model, tools=hub.tools(["record_effect"]))

    finished = agent.invoke({"messages": [{"role": "user", "content": "go"}]}, version="v2")

    (message,) = tool_messages(finished)
    assert message.content.startswith("Error: A governed LangGraph tool call needs a thread id")
    assert not ToolCall.objects.exists()
    assert not SideEffect.objects.exists()


def test_only_the_tools_handed_to_the_agent_are_paused_and_filed(alice: User) -> None:
    """``tools(names)`` is the agent's set: a call of another tool is not paused (its ToolNode refuses the name),
    and an interrupt naming one is refused by ``request_approvals`` before anything is filed."""
    hub = LangGraphToolhub(user=alice, wait_seconds=0)
    model = ScriptedChatModel(messages=iter([asks("risky_effect", {"note": "x"}), AIMessage(content="done")]))
    config = {"configurable": {"thread_id": "narrowed"}}
    agent = create_agent(
        model, tools=hub.tools(["record_effect"]), middleware=[hub.middleware()], checkpointer=InMemorySaver()
    )

    finished = start(agent, config)

    assert not finished.interrupts
    (message,) = tool_messages(finished)
    assert "risky_effect is not a valid tool" in message.content
    forged = Interrupt(
        value={"type": "tool_approval", "name": "risky_effect", "tool_call_id": "call_9", "args": {"note": "x"}},
        id="forged",
    )
    with pytest.raises(LangGraphBridgeError, match="not one this hub gave the agent"):
        hub.request_approvals([forged], config)
    assert not ToolCall.objects.exists()
    assert not SideEffect.objects.exists()


class Tagger(Interceptor):
    """Appends a tag to ``note``: a rewrite of toolhub's, never the model's nor an operator's."""

    name = "tagger"

    def before(self, call: InterceptedCall) -> dict[str, Any] | None:
        return {**call.arguments, "note": f"{call.arguments['note']}|tagged"} if "note" in call.arguments else None


def test_a_call_an_interceptor_rewrote_answers_with_its_result(
    agent_for: Agent, operator_client: APIClient, settings: Any
) -> None:
    """The model's own arguments are recognized after a rewrite: the call ran, and the model is told its result."""
    settings.TOOLHUB = {**settings.TOOLHUB, "INTERCEPTORS": [f"{__name__}.Tagger"]}
    agent, hub, config = agent_for(asks("risky_effect", {"note": "wire 100"}))
    paused = start(agent, config)
    hub.request_approvals(paused.interrupts, config)
    approval = ApprovalRequest.objects.get()
    operator_client.post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json")

    finished = agent.invoke(Command(resume={paused.interrupts[0].id: {"type": "approve"}}), config, version="v2")

    effect = SideEffect.objects.get()  # ran once, rewritten
    assert effect.note == "wire 100|tagged"
    (message,) = tool_messages(finished)
    assert json.loads(message.content) == {"effect_id": effect.pk}


def test_an_interceptors_rewrite_resumes_as_approve(
    agent_for: Agent, operator_client: APIClient, settings: Any
) -> None:
    """A rewrite is not an operator's edit: the approval without edit resumes as ``approve``."""
    settings.TOOLHUB = {**settings.TOOLHUB, "INTERCEPTORS": [f"{__name__}.Tagger"]}
    agent, hub, config = agent_for(asks("risky_effect", {"note": "wire 100"}))
    paused = start(agent, config)
    hub.request_approvals(paused.interrupts, config)
    operator_client.post(f"/api/v1/approvals/{ApprovalRequest.objects.get().pk}/approve/", {}, format="json")

    command = hub.resume_command(paused.interrupts, config, wait=5)

    assert command is not None and command.resume == {paused.interrupts[0].id: {"type": "approve"}}
    (message,) = tool_messages(agent.invoke(command, config, version="v2"))
    assert json.loads(message.content) == {"effect_id": SideEffect.objects.get(note="wire 100|tagged").pk}


def test_an_operators_edit_reaches_the_graph_as_the_caller_sees_it(alice: User, operator_client: APIClient) -> None:
    """The HITL ``edit`` carries the edited arguments with sensitive values redacted, as the approvals API shows
    them; the resumed tool still joins the call, which ran once with the operator's value."""
    with registry.temporarily(send_email):
        ApprovalRule.objects.create(name="mail-needs-a-look", tool_name="send_email")
        hub = LangGraphToolhub(user=alice, wait_seconds=5)
        model = ScriptedChatModel(
            messages=iter([asks("send_email", {"to": "bob@example.com", "body": "hi"}), AIMessage(content="done")])
        )
        agent = create_agent(
            model, tools=hub.tools(["send_email"]), middleware=[hub.middleware()], checkpointer=InMemorySaver()
        )
        config = {"configurable": {"thread_id": "edited-secret"}}
        paused = start(agent, config)
        hub.request_approvals(paused.interrupts, config)
        approval = ApprovalRequest.objects.get()
        edited = {"to": "bob@example.com", "body": "hi", "token": "operator-secret-7"}
        answer = operator_client.post(f"/api/v1/approvals/{approval.pk}/approve/", {"arguments": edited}, format="json")
        assert answer.status_code == 200, answer.content

        command = hub.resume_command(paused.interrupts, config, wait=5)
        assert command is not None
        finished = agent.invoke(command, config, version="v2")

    shown = {"to": "bob@example.com", "body": "hi", "token": "***redacted***"}
    assert command.resume == {
        paused.interrupts[0].id: {"type": "edit", "edited_action": {"name": "send_email", "args": shown}}
    }
    assert "operator-secret-7" not in json.dumps([m.model_dump() for m in finished.value["messages"]], default=str)
    (message,) = tool_messages(finished)
    assert json.dumps("sent to bob@example.com") in message.content and "not the ones" not in message.content
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["bob@example.com"]
