"""Probe of 2026-12-05 (c): the framework adapters (Pydantic AI, LangGraph, OpenAI Agents SDK) as a governance boundary.

Each test fails on the code as probed; its docstring says what was found ("Found: ...") and what is expected
("Expect: ..."). Tried and found holding (no test here): every adapter call is a ``direct_call_request`` (grants
before arguments, interceptors, the tenant-argument check, approval policy, authorization again on the worker,
the audit trail with the adapter's ``client``); a ``tenant``/``tenant_id`` argument naming globex is denied;
reserved context keys (``run_id``, ``tenant``, ``user``) refused in ``ToolhubToolset(context=...)``; a member of
two tenants must name one; a framework-only approval (HITL ``approve``, Pydantic ``ToolApproved`` without
toolhub's metadata, ``state.approve`` in the SDK) runs nothing; an HITL ``edit`` to other arguments than the
approved ones runs nothing; a call id from a message history or a paused run is read only among the user's own
calls in their tenant and of the same tool (another user's or tenant's refused, nothing shown); a paused SDK run
is resumed once, by its own user, within their tenants; unknown and denied tool names are refused by the
frameworks before toolhub (their own "unknown tool" lists show only the listed tools); Pydantic AI answers a
hidden tool's denial as an unknown tool; the run-bound tools (``run_history``, blackboard) refuse outside a run.
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import DeferredToolRequests, ToolDenied
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import tests.interceptors.conftest as interceptor_fixtures
import tests.interop.openai_agents.test_openai_agents_adapter as openai_agents_suite
from approvals.models import ApprovalRequest, ApprovalRule
from tests.disclosure import sample_tools
from tests.interceptors.conftest import Configure, recorder
from tests.interop.openai_agents.test_openai_agents_adapter import NO_TRACING, agent_for, run, tool_call
from tests.security_review.conftest import client_for
from tests.testapp.models import SideEffect
from tests.unit.fake_openai import FakeModel, completion
from toolhub.adapters._pydantic_ai_bridge import granted_tools
from toolhub.adapters.langgraph import LangGraphToolhub
from toolhub.adapters.openai_agents import governed_tools, resume_governed, run_governed
from toolhub.adapters.pydantic_ai import ToolhubToolset, operator_decisions
from toolhub.direct import caller_principal
from toolhub.models import AuditEvent, CallStatus, Grant, GrantEffect, ToolCall
from toolhub.tools.registry import registry

# The interceptor suite's fixture (its test tools, TOOLHUB["INTERCEPTORS"]) and the SDK suite's fake endpoint.
interceptors = interceptor_fixtures.interceptors
fake = openai_agents_suite.fake

# The frameworks run tools in threads of their own: committed for real, as in tests/interop/.
pytestmark = pytest.mark.django_db(transaction=True)


class _ChatModel(GenericFakeChatModel):
    """LangChain's fake chat model from a script; records every list of messages it is given (what it reads)."""

    read: list[str] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> "_ChatModel":
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.read.append(json.dumps([message.model_dump() for message in messages], default=str))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def _asks(name: str, args: dict[str, Any], call_id: str = "call_1") -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


def _graph(hub: LangGraphToolhub, model: _ChatModel, tools: list[str] | None, gated: list[str] | None) -> Any:
    return create_agent(model, tools=hub.tools(tools), middleware=[hub.middleware(gated)], checkpointer=InMemorySaver())


def _start(agent: Any, config: dict[str, Any]) -> Any:
    return agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config, version="v2")


def _tool_messages(result: Any) -> list[str]:
    return [str(m.content) for m in result.value["messages"] if isinstance(m, ToolMessage)]


# --- interceptors' rewrites through LangGraph ----------------------------------------------------------------------


def test_langgraph_resume_hands_the_model_a_sensitive_value_an_interceptor_put_in(
    alice: User, operator: User, interceptors: Configure
) -> None:
    """Found: ``toolhub.adapters.langgraph._decision`` compares the model's arguments with the call's stored ones
    (``call.arguments``: after the ``before`` interceptors) and, when they differ, resumes the graph with an HITL
    ``edit`` carrying ``call.arguments`` verbatim. An interceptor that sets a sensitive argument (the suite's own
    ``Tokenizer``: ``token`` of ``send_email``, ``sensitive=("token",)``) therefore has its value handed to the
    graph: LangChain's middleware tells the model "a human reviewer replaced this tool call ... Executed instead:
    send_email with arguments {..., "token": "rotated-secret-2"}", which it reads on its next turn. The
    operator approved without editing, and the approvals API shows the token ``***redacted***``; a toolhub run's
    model never reads a rewrite, let alone a sensitive value it did not send.
    Expect: the resumed graph never carries a sensitive value the model did not send (nor an interceptor's
    rewrite: an approval without edit resumes as ``approve``); nothing the model reads after the resume holds the
    token; the call still runs once with it.
    """
    interceptors("tests.interceptors.conftest.Tokenizer")
    ApprovalRule.objects.create(name="mail-needs-a-look", tool_name="send_email")
    hub = LangGraphToolhub(user=alice, wait_seconds=5)
    model = _ChatModel(messages=iter([_asks("send_email", {"to": "bob@example.com", "body": "hi"}), AIMessage("ok")]))
    model.read.clear()
    agent, config = _graph(hub, model, ["send_email"], ["send_email"]), {"configurable": {"thread_id": "t-secret"}}
    paused = _start(agent, config)
    hub.request_approvals(paused.interrupts, config)
    request = ApprovalRequest.objects.get()
    shown = client_for(operator).post(f"/api/v1/approvals/{request.pk}/approve/", {}, format="json")
    assert shown.status_code == 200, shown.content
    assert shown.json()["arguments"]["token"] == "***redacted***"  # operators never read it

    command = hub.resume_command(paused.interrupts, config, wait=5)
    assert command is not None
    agent.invoke(command, config, version="v2")

    assert list(SideEffect.objects.values_list("note", flat=True)) == ["bob@example.com"]  # ran once
    assert not any("rotated-secret-2" in read for read in model.read), "the model read the interceptor's token"
    assert "rotated-secret-2" not in json.dumps(command.resume), command.resume


def test_langgraph_tells_the_model_a_call_that_ran_was_not_run(alice: User, interceptors: Configure) -> None:
    """Found: ``LangGraphToolhub._call`` checks ``_same_arguments``: the model's arguments, validated, must equal the
    call's stored arguments, which are the arguments after the ``before`` interceptors. For any call an interceptor
    rewrites (here ``Recorder(append=True)`` appends ``|audit`` to ``body``: a normalizer, a tagger), the call is
    requested, runs (``SideEffect`` written, status ``succeeded``) and the model is then told "Error: these
    arguments are not the ones approved for call ...; the call was not run again. Ask for a new call." No
    approval was involved; the model, told to ask again, sends the e-mail a second time.
    Expect: a call that ran answers with its result ("sent to bob@example.com"), never with an error saying it
    was not run; the comparison is made with the arguments the model asked for (before interceptors), or on the
    approval's binding.
    """
    interceptors(recorder("audit", append=True))
    hub = LangGraphToolhub(user=alice, wait_seconds=5)
    model = _ChatModel(messages=iter([_asks("send_email", {"to": "bob@example.com", "body": "hi"}), AIMessage("ok")]))
    agent = _graph(hub, model, ["send_email"], ["send_email"])

    finished = _start(agent, {"configurable": {"thread_id": "t-rewrite"}})

    call = ToolCall.objects.get()
    assert (call.status, call.arguments["body"]) == (CallStatus.SUCCEEDED, "hi|audit")
    assert SideEffect.objects.count() == 1
    (message,) = _tool_messages(finished)
    assert "not run" not in message, f"the call ran, the model read: {message}"
    assert "sent to bob@example.com" in message


# --- what the adapters list --------------------------------------------------------------------------------------


@pytest.fixture
def denied_writes(alice: User) -> Iterator[None]:
    """The disclosure suite's facades; alice is denied the ``write`` category of ``file_operations`` and more."""
    with registry.temporarily(*sample_tools.PLAIN, *sample_tools.FACADES):
        for name in ("insert_record", "delete_record", "create_user", "find_user"):
            Grant.objects.create(effect=GrantEffect.DENY, tool_name=name, user=alice)
        yield


def _pydantic_offered(user: User) -> dict[str, dict[str, Any]]:
    """The tool definitions a Pydantic AI model is sent by ``ToolhubToolset(user=...)``."""
    offered: dict[str, dict[str, Any]] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.update({tool.name: tool.parameters_json_schema for tool in info.function_tools})
        return ModelResponse(parts=[TextPart("nothing to do")])

    PydanticAgent(FunctionModel(model), toolsets=[ToolhubToolset(user=user)]).run_sync("hello")
    return offered


def _offered(adapter: str, user: User) -> dict[str, dict[str, Any]]:
    if adapter == "pydantic_ai":
        return _pydantic_offered(user)
    if adapter == "langgraph":
        tools = LangGraphToolhub(user=user).tools()
        return {tool.name: convert_to_openai_tool(tool)["function"]["parameters"] for tool in tools}
    return {tool.name: tool.params_json_schema for tool in governed_tools(user=user)}


@pytest.mark.parametrize("adapter", ["pydantic_ai", "langgraph", "openai_agents"])
def test_the_adapters_offer_a_by_category_facade_with_the_categories_of_denied_tools(
    alice: User, denied_writes: None, adapter: str
) -> None:
    """Found: every adapter builds its tools' schemas from ``registry.get(name).json_schema`` (Pydantic AI's
    ``ToolhubToolset.get_tools``, ``LangGraphToolhub._tool``, OpenAI's ``sdk._function_tool``), never from
    ``unfolding.tool_seen_by``. alice is denied the whole ``write`` category of ``file_operations``; a toolhub
    run, the provider exports, the JSON catalogue and MCP offer her ``"enum": ["read"]`` (probe 2026-12-03:
    "a category of denied tools reads exactly like one that does not exist, wherever the facade shows"), the
    three adapters ``["read", "write"]``: the model learns the category and that it holds tools she may not use.
    Expect: the facade's schema as ``tool_seen_by`` gives it for the adapter's principal: ``["read"]``.
    """
    offered = _offered(adapter, alice)

    assert offered["file_operations"]["properties"]["category"]["enum"] == ["read"]


def test_pydantic_ai_offers_facades_that_hold_no_tool_the_user_may_use(alice: User, denied_writes: None) -> None:
    """Found: ``_pydantic_ai_bridge.granted_tools`` lists what ``authorize_tools`` passes, not what
    ``visible_tool_names``/``unfolding.usable_tools`` (the one rule of every listing) passes. A facade is a
    navigation tool whose inner tools decide whether it shows; alice is denied every tool inside
    ``user_management`` (``create_user``, ``find_user``) and ``change_personality`` (``insert_record``), yet the
    Pydantic AI model is offered both facades and their ``_context`` tools, with their descriptions ("User
    management operations.") and schemas; calling one then answers "unknown tool". The LangGraph and OpenAI
    adapters (``visible_tool_names``) and MCP leave them out.
    Expect: the toolset offers exactly the tools ``visible_tool_names`` gives the principal: none of the four.
    """
    offered = set(_pydantic_offered(alice))
    hidden = {"user_management", "user_management_context", "change_personality", "change_personality_context"}

    assert not offered & hidden, sorted(offered & hidden)
    assert {tool.name for tool in granted_tools(caller_principal(alice))}.isdisjoint(hidden)


# --- LangGraph: the agent's tools and the approval gate ------------------------------------------------------------


def test_langgraph_gate_turns_a_tool_the_agent_was_not_given_into_a_call_that_runs_on_approval(
    alice: User, operator: User
) -> None:
    """Found: ``LangGraphToolhub.tools(names)`` narrows what the agent is given, but ``middleware()`` (the README's
    default) gates every tool the user may see, and ``request_approvals`` makes a governed call of whatever tool an
    interrupt names. An agent given only ``record_effect`` whose model asks for ``risky_effect`` is paused by the
    HITL middleware (it runs before the ToolNode, which would refuse the name); ``request_approvals`` files a
    toolhub request for ``risky_effect`` in alice's name, and the operator's approval runs it (a ``SideEffect``),
    though the agent never had the tool. A toolhub run enforces its agent's tools in the pipeline; the adapter's
    narrowing is only a listing.
    Expect: a tool call outside the tools the hub handed to the agent never becomes a toolhub call (not gated,
    or refused by ``request_approvals``): nothing is filed, nothing runs.
    """
    hub = LangGraphToolhub(user=alice, wait_seconds=5)
    model = _ChatModel(messages=iter([_asks("risky_effect", {"note": "wire 900"}), AIMessage("ok")]))
    agent, config = _graph(hub, model, ["record_effect"], None), {"configurable": {"thread_id": "t-narrow"}}

    paused = _start(agent, config)
    try:
        hub.request_approvals(paused.interrupts, config)
    except Exception:  # noqa: BLE001 - a refusal is the expected outcome
        pass
    for request in ApprovalRequest.objects.all():
        client_for(operator).post(f"/api/v1/approvals/{request.pk}/approve/", {}, format="json")

    assert not SideEffect.objects.exists(), "a tool the agent was never given ran on the operator's approval"
    assert not ToolCall.objects.filter(tool_name="risky_effect").exists()


# --- a call its requester withdrew, resumed as approved -------------------------------------------------------------


def _cancel(user: User, call: ToolCall) -> None:
    answer = client_for(user).post(f"/api/v1/calls/{call.pk}/cancel/", {"reason": "changed my mind"}, format="json")
    assert answer.status_code == 200, answer.content
    call.refresh_from_db()
    assert call.status == CallStatus.CANCELLED and not call.approval_request.decisions.exists()


def test_openai_agents_resume_records_the_requesters_own_withdrawn_call_as_approved(
    fake: FakeModel, alice: User
) -> None:
    """Found: ``openai_agents.store._decision`` counts ``cancelled`` among ``_RELEASED`` ("an operator's decision
    still lets the call run"), so a held call that alice herself withdrew (``POST /api/v1/calls/{id}/cancel/``;
    its approval request ``cancelled``, no operator decided) makes the paused run "ready", ``resume_governed``
    calls ``state.approve`` on it, and ``paused_run_claim`` writes ``openai_agents.resumed`` with ``"decision":
    "approve"`` and actor ``user:alice`` into the call's audit chain: the trail reads as the requester approving
    her own held call, which no operator approved (the four-eyes rule).
    Expect: a call no operator approved is resumed as rejected, with its message ("Not executed: cancelled by
    user:alice: ..."); the resumed event says ``"decision": "reject"``.
    """
    fake.queue(tool_call("risky_effect", {"note": "wire 900"}), completion(content="Understood."))
    agent = agent_for(fake, alice, "risky_effect")
    outcome = run(run_governed(agent, "do it", user=alice, run_config=NO_TRACING))
    assert outcome.paused is not None
    call = ToolCall.objects.get()
    _cancel(alice, call)

    run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=NO_TRACING))

    resumed = AuditEvent.objects.get(call_id=call.pk, event_type="openai_agents.resumed")
    assert resumed.actor == "user:alice"
    assert resumed.payload["decision"] == "reject", resumed.payload
    assert not SideEffect.objects.exists()


def test_langgraph_resume_answers_the_requesters_own_withdrawn_call_as_approved(alice: User) -> None:
    """Found: ``toolhub.adapters.langgraph._decision`` answers ``approve`` for every status outside ``_REFUSED``
    (rejected, denied, invalid, expired); ``cancelled`` is not in it. A held call alice withdrew herself (no
    operator decided) resumes the graph with HITL ``{"type": "approve"}``: the graph's checkpoint records an
    approval nobody gave. (Nothing runs: the tool then reads the cancellation.)
    Expect: ``{"type": "reject", "message": "Not executed: cancelled by user:alice: ..."}``.
    """
    hub = LangGraphToolhub(user=alice, wait_seconds=0)
    model = _ChatModel(messages=iter([_asks("risky_effect", {"note": "wire 900"}), AIMessage("ok")]))
    agent, config = _graph(hub, model, ["risky_effect"], ["risky_effect"]), {"configurable": {"thread_id": "t-cx"}}
    paused = _start(agent, config)
    (review,) = hub.request_approvals(paused.interrupts, config)
    _cancel(alice, ToolCall.objects.get(pk=review.call_id))

    command = hub.resume_command(paused.interrupts, config)

    assert command is not None
    decision = command.resume[paused.interrupts[0].id]
    assert decision["type"] == "reject", decision
    assert "cancelled" in decision["message"]


def test_pydantic_ai_operator_decisions_approve_the_requesters_own_withdrawn_call(alice: User) -> None:
    """Found: ``toolhub.adapters.pydantic_ai.operator_decisions`` denies only ``NOT_RUN_STATUSES`` (rejected,
    expired, denied, invalid); a held call alice withdrew herself (``cancelled``, no operator decided) becomes
    ``ToolApproved()`` in the ``DeferredToolResults`` the run resumes with, with no ``answered_by``: Pydantic
    AI's record of the run shows an approval nobody gave.
    Expect: ``ToolDenied("Not executed: cancelled by user:alice: ...")``, as for any call that never ran.
    """

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("risky_effect", {"note": "wire 900"}, tool_call_id="call-1")])

    agent = PydanticAgent(
        FunctionModel(model),
        toolsets=[ToolhubToolset(user=alice, tools={"risky_effect"})],
        output_type=[str, DeferredToolRequests],
    )
    first = agent.run_sync("Wire it.")
    assert isinstance(first.output, DeferredToolRequests)
    _cancel(alice, ToolCall.objects.get())

    decisions = operator_decisions(first.output, user=alice)

    assert decisions.complete
    decided = decisions.results.approvals["call-1"]
    assert isinstance(decided, ToolDenied), decided
    assert "cancelled" in decided.message
