"""StateMachineTool: tools per state, transitions, global tools; the state is kept with the run."""

import enum
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import RunStatus
from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.agentic import sample_tools
from tests.agentic.conftest import Recorder, answer, call
from toolhub.agentic import StateMachineTool, Transition
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import CallStatus, Grant, GrantEffect, ToolCall

pytestmark = pytest.mark.django_db


def _calls(run: Any) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run_id=run.id).order_by("turn", "position"))


def test_tools_follow_the_state_and_a_call_of_another_state_is_answered_with_the_available_ones(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    script = [call("ship_order"), call("add_item", sku="a1"), call("confirm_order"), call("ship_order"), answer()]
    agent = make_agent(script=script, tools=["order_processor"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    early, added, confirmed, shipped = _calls(run)
    assert early.status == CallStatus.INVALID
    assert "not available in state 'draft'" in early.error
    assert "Tools available now: add_item, confirm_order, order_status." in early.error
    assert [added.status, confirmed.status, shipped.status] == [CallStatus.SUCCEEDED] * 3
    assert sample_tools.RAN == ["add_item", "confirm_order", "ship_order"]
    # the model sees the current state's tools and the global ones, and the state in the guide's description
    assert recorder.names(0) == ["order_processor", "add_item", "confirm_order", "order_status"]
    assert recorder.names(3) == ["order_processor", "charge_card", "ship_order", "order_status"]
    assert "Current state: confirmed." in recorder.tool(3, "order_processor")["description"]
    assert run.disclosure["agentic"] == {"order_processor": {"state": "shipped"}}


def test_a_run_resumed_after_an_approval_continues_in_the_same_state(
    make_agent: Any, start_run: Any, alice: User, operator: User, recorder: Recorder, committed: Any
) -> None:
    # given a run that waits for approval of charge_card in state confirmed
    script = [call("confirm_order"), call("charge_card"), call("add_item", sku="late"), call("ship_order"), answer()]
    agent = make_agent(script=script, tools=["order_processor"])
    run = start_run(agent, alice)
    assert run.status == RunStatus.WAITING
    assert run.disclosure["agentic"]["order_processor"]["state"] == "confirmed"

    # when an operator approves it and the run resumes
    charge = ToolCall.objects.get(run_id=run.id, tool_name="charge_card")
    committed(approval_approve, request_id=ApprovalRequest.objects.get(call=charge).pk, user=operator)
    run.refresh_from_db()

    # then the run went on in state confirmed: a draft tool is refused, shipping moves on
    assert run.status == RunStatus.COMPLETED, run.error
    late = ToolCall.objects.get(run_id=run.id, tool_name="add_item")
    assert late.status == CallStatus.INVALID and "state 'confirmed'" in late.error
    assert run.disclosure["agentic"]["order_processor"]["state"] == "shipped"
    assert sample_tools.RAN == ["confirm_order", "charge_card", "ship_order"]


def test_denied_tool_of_the_current_state_stays_denied_and_is_never_named(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="confirm_order", user=alice)
    agent = make_agent(script=[call("confirm_order"), call("ship_order"), answer()], tools=["order_processor"])

    run = start_run(agent, alice)

    denied, refused = _calls(run)
    assert denied.status == CallStatus.DENIED
    assert refused.status == CallStatus.INVALID and "confirm_order" not in refused.error
    assert "confirm_order" not in recorder.names(0)
    assert "agentic" not in run.disclosure  # nothing moved the machine from its start state


def test_a_failed_transition_call_does_not_move_the_state(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    agent = make_agent(
        script=[call("confirm_order", unexpected=1), call("ship_order"), answer()], tools=["order_processor"]
    )

    run = start_run(agent, alice)

    invalid, refused = _calls(run)
    assert invalid.status == CallStatus.INVALID and "state" not in invalid.error
    assert refused.status == CallStatus.INVALID and "state 'draft'" in refused.error


class Light(enum.Enum):
    RED = "red"
    GREEN = "green"


class Other(enum.Enum):
    X = "x"


def test_state_machine_definition_mistakes_are_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="start must be a Light"):
        StateMachineTool("m", "d", Light, start=Other.X, states={Light.RED: [sample_tools.add_item]})
    with pytest.raises(ToolDefinitionError, match="not a Light"):
        StateMachineTool("m", "d", Light, start=Light.RED, states={Other.X: [sample_tools.add_item]})
    with pytest.raises(ToolDefinitionError, match="moves to"):
        StateMachineTool(
            "m", "d", Light, start=Light.RED, states={Light.RED: [Transition(sample_tools.add_item, to=Other.X)]}
        )
    with pytest.raises(ToolDefinitionError, match="must be an Enum"):
        StateMachineTool("m", "d", str, start=Light.RED)  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="no tools"):
        StateMachineTool("m", "d", Light, start=Light.RED)


def test_calls_of_one_turn_are_checked_against_the_state_the_turn_started_in(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    both = {"tool_calls": [{"name": "confirm_order", "arguments": {}}, {"name": "ship_order", "arguments": {}}]}
    agent = make_agent(script=[both, answer()], tools=["order_processor"])

    run = start_run(agent, alice)

    confirmed, shipped = _calls(run)
    assert confirmed.status == CallStatus.SUCCEEDED
    assert shipped.status == CallStatus.INVALID and "state 'draft'" in shipped.error
    assert run.disclosure["agentic"]["order_processor"]["state"] == "confirmed"
