"""SimpleAgenticTool: an inner model orchestrates sub-tools; each inner call is governed, audited and linked."""

from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import RunStatus
from agents_app.services import agent_create
from tests.agentic import sample_tools
from tests.agentic.conftest import Recorder, answer, call
from tests.helpers import event_types
from toolhub.agentic import SimpleAgenticTool, inner_calls_of
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import AuditEvent, CallKind, CallStatus, Grant, GrantEffect, ToolCall

pytestmark = pytest.mark.django_db


def _brain(script: list[Any]) -> None:
    agent_create(name="math-brain", provider="scripted", script=script, tools=[])


def _outer(run: Any) -> ToolCall:
    return ToolCall.objects.get(run_id=run.id, kind=CallKind.CALL, tool_name="math_orchestrator")


def test_inner_calls_go_through_the_pipeline_audited_and_linked_to_the_outer_call(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    # given an inner model that adds, then multiplies, then answers
    _brain([call("add", a=2, b=3), call("multiply", a=5, b=4), answer("20")])
    agent = make_agent(
        script=[call("math_orchestrator", task="(2+3)*4"), answer("{last_tool_result}")], tools=["math_orchestrator"]
    )

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    outer = _outer(run)
    assert outer.status == CallStatus.SUCCEEDED
    assert outer.result["answer"] == "20" and outer.result["iterations"] == 3
    added, multiplied = inner_calls_of(outer.id, user=alice)
    assert [added.tool_name, multiplied.tool_name] == ["add", "multiply"]
    assert [added.result, multiplied.result] == [5, 20]
    for inner in (added, multiplied):
        # same principal and run as the outer call, its own audited call, linked by parent_call_id
        assert inner.kind == CallKind.INNER and inner.run_id == run.id and inner.turn == outer.turn
        assert inner.user_id == alice.id and inner.tenant == outer.tenant and inner.agent_name == outer.agent_name
        assert inner.context["parent_call_id"] == str(outer.id)
        assert event_types(inner) == ["call.requested", "call.queued", "call.running", "call.succeeded"]
        requested = AuditEvent.objects.get(call_id=inner.id, event_type="call.requested")
        assert str(outer.id) in requested.data
    # the run's model saw only the agentic tool; the inner tools were not added to its turn
    assert recorder.names(0) == ["math_orchestrator"]
    assert list(ToolCall.objects.filter(run_id=run.id, kind=CallKind.CALL)) == [outer]
    assert sample_tools.RAN == ["add", "multiply"]


def test_the_inner_loop_is_bounded_by_max_iterations(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    _brain([call("add", a=1, b=1)] * 10)
    agent = make_agent(script=[call("math_orchestrator", task="forever"), answer()], tools=["math_orchestrator"])

    run = start_run(agent, alice)

    outer = _outer(run)
    assert outer.status == CallStatus.FAILED
    assert "stopped after 3 model turns" in outer.error
    assert len(inner_calls_of(outer.id, user=alice)) == 3
    assert sample_tools.RAN == ["add"] * 3


def test_a_turn_beyond_max_calls_is_refused_whole(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    many = {"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}} for i in range(21)]}
    _brain([many, answer("never")])
    agent = make_agent(script=[call("math_orchestrator", task="a lot"), answer()], tools=["math_orchestrator"])

    run = start_run(agent, alice)

    outer = _outer(run)
    assert outer.status == CallStatus.FAILED and "beyond its limit of 20" in outer.error
    assert inner_calls_of(outer.id, user=alice) == [] and sample_tools.RAN == []


def test_denied_inner_tool_is_not_offered_and_stays_denied(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given multiply is denied to alice, and an inner model that tries it anyway, then a tool outside the set
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="multiply", user=alice)
    offered: list[list[str]] = []
    from agents_app.models_adapters.scripted import ScriptedAdapter

    original = ScriptedAdapter.complete

    def spying(self: Any, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **options: Any) -> Any:
        offered.append([t["function"]["name"] for t in tools])
        return original(self, messages=messages, tools=tools, **options)

    monkeypatch.setattr(ScriptedAdapter, "complete", spying)
    _brain([call("multiply", a=2, b=2), call("ship_order"), answer("could not")])
    agent = make_agent(script=[call("math_orchestrator", task="2*2"), answer()], tools=["math_orchestrator"])

    run = start_run(agent, alice)

    outer = _outer(run)
    denied, outside = inner_calls_of(outer.id, user=alice)
    assert denied.status == CallStatus.DENIED
    assert outside.status in (CallStatus.DENIED, CallStatus.INVALID)
    assert offered[1] == ["add"]  # the inner model's first turn (offered[0] is the run's model's)
    assert sample_tools.RAN == []


def test_the_agentic_tool_itself_is_governed(make_agent: Any, start_run: Any, alice: User, recorder: Recorder) -> None:
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="math_orchestrator", user=alice)
    _brain([call("add", a=1, b=1), answer("2")])
    agent = make_agent(script=[call("math_orchestrator", task="1+1"), answer()], tools=["math_orchestrator"])

    run = start_run(agent, alice)

    assert _outer(run).status == CallStatus.DENIED
    assert not ToolCall.objects.filter(kind=CallKind.INNER).exists()


def test_a_missing_model_fails_the_call_with_a_message_for_the_model(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    agent = make_agent(script=[call("math_orchestrator", task="1+1"), answer()], tools=["math_orchestrator"])

    run = start_run(agent, alice)

    outer = _outer(run)
    assert outer.status == CallStatus.FAILED
    assert "agent 'math-brain'" in outer.error and "ask an administrator" in outer.error


def test_a_state_machine_inside_governs_the_inner_model_and_its_state_carries_to_the_next_call(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given an inner model that confirms the order in each call of order_desk, and a run that calls it twice
    offered: list[list[str]] = []
    from agents_app.models_adapters.scripted import ScriptedAdapter

    original = ScriptedAdapter.complete

    def spying(self: Any, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **options: Any) -> Any:
        offered.append([t["function"]["name"] for t in tools])
        return original(self, messages=messages, tools=tools, **options)

    monkeypatch.setattr(ScriptedAdapter, "complete", spying)
    agent_create(name="desk-brain", provider="scripted", tools=[], script=[call("confirm_order"), answer("ok")])
    script = [call("order_desk", task="confirm"), call("order_desk", task="confirm again"), answer()]
    agent = make_agent(script=script, tools=["order_desk"])

    run = start_run(agent, alice)

    # then the first call moved the inner machine to confirmed; the inner model saw the draft state's tools
    first, second = ToolCall.objects.filter(run_id=run.id, kind=CallKind.CALL).order_by("turn")
    assert first.status == CallStatus.SUCCEEDED, first.error
    assert first.result["state"] == {"order_processor": {"state": "confirmed"}}
    assert offered[1] == ["search", "order_processor", "add_item", "confirm_order", "order_status"]
    assert run.disclosure["agentic"]["order_desk.order_processor"] == {"state": "confirmed"}
    # and the second call continued in confirmed: confirming again is a tool of another state, refused
    [again] = inner_calls_of(second.id, user=alice)
    assert again.status == CallStatus.INVALID and "state 'confirmed'" in again.error
    assert offered[4] == ["search", "order_processor", "charge_card", "ship_order", "order_status"]
    assert sample_tools.RAN == ["confirm_order"]

    # a run of its own starts from the start state (the state is per run)
    other = start_run(
        make_agent("agentic-2", script=[call("order_desk", task="x"), answer()], tools=["order_desk"]), alice
    )
    [fresh] = ToolCall.objects.filter(run_id=other.id, kind=CallKind.INNER)
    assert fresh.tool_name == "confirm_order" and fresh.status == CallStatus.SUCCEEDED


def test_definition_mistakes_are_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="max_iterations"):
        SimpleAgenticTool("m", "d", tools=[sample_tools.add], max_iterations=0)
    with pytest.raises(ToolDefinitionError, match="max_calls"):
        SimpleAgenticTool("m", "d", tools=[sample_tools.add], max_calls=0)
    with pytest.raises(ToolDefinitionError, match="not both"):
        SimpleAgenticTool("m", "d", tools=[sample_tools.add], agent="a", provider="p")
    with pytest.raises(ToolDefinitionError, match="no tools"):
        SimpleAgenticTool("m", "d", tools=[])
    with pytest.raises(ToolDefinitionError, match="named twice"):
        SimpleAgenticTool("m", "d", tools=[sample_tools.add, sample_tools.add])


def test_inner_calls_of_another_tenant_never_show(
    make_agent: Any, start_run: Any, alice: User, other_tenant: Any, recorder: Recorder
) -> None:
    from toolhub.models import TenantMembership

    _brain([call("add", a=1, b=2), answer("3")])
    agent = make_agent(script=[call("math_orchestrator", task="1+2"), answer()], tools=["math_orchestrator"])
    run = start_run(agent, alice)
    outsider = User.objects.create_user("olga", "olga@example.com", "olga-password")
    TenantMembership.objects.create(user=outsider, tenant=other_tenant)

    assert len(inner_calls_of(_outer(run).id, user=alice)) == 1
    assert inner_calls_of(_outer(run).id, user=outsider) == []


def test_the_inner_models_tokens_are_the_runs(
    make_agent: Any, start_run: Any, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every model turn taken for a run counts in its usage, the inner model's too (so against a budget too)."""
    from agents_app.models_adapters.scripted import ScriptedAdapter

    spent: list[int] = []
    complete = ScriptedAdapter.complete

    def counted(self: Any, **kwargs: Any) -> Any:
        turn = complete(self, **kwargs)
        spent.append(turn.prompt_tokens + turn.completion_tokens)
        return turn

    monkeypatch.setattr(ScriptedAdapter, "complete", counted)
    _brain([call("add", a=2, b=3), answer("5")])
    agent = make_agent(
        script=[call("math_orchestrator", task="2+3"), answer("{last_tool_result}")], tools=["math_orchestrator"]
    )

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    assert len(spent) == 4  # the run's two turns and its inner model's two
    assert run.prompt_tokens + run.completion_tokens == sum(spent)


def test_an_inner_model_stops_once_the_runs_token_budget_is_spent(make_agent: Any, alice: User) -> None:
    """A run given a token budget by its parent: its agentic tool's next inner turn is refused, nothing run."""
    from agents_app.agentic import agentic_model
    from agents_app.models import AgentRun
    from toolhub.exceptions import ModelError
    from toolhub.tools.context import ToolContext

    agent = make_agent(script=[answer()], tools=["math_orchestrator"])
    run = AgentRun.objects.create(
        agent=agent, user=alice, tenant="", input="go", limits={"max_tokens": 10}, prompt_tokens=8, completion_tokens=2
    )
    model = agentic_model(ToolContext({"run_id": str(run.id), "tenant": ""}))
    with pytest.raises(ModelError, match="token budget"):
        model.adapter.complete(messages=[{"role": "user", "content": "x"}], tools=[])
    run.refresh_from_db()
    assert run.prompt_tokens + run.completion_tokens == 10
