"""Review of 2026-12-05 (br): a state machine's transition within one model turn, and an inner model's refused answer.

Each test fails on the reviewed code (main at a7202f1); its docstring says "Found: ..." and "Expect: ...".

Findings:

1. (review bm) The calls of one turn of the run's model were all checked against the state the turn started in,
   so ``[confirm_order, add_item]`` in ``draft`` ran ``add_item`` after the order was confirmed, and
   ``[ship_order, ship_order]`` in ``confirmed`` shipped twice. Now, once a call of a state machine holds a
   transition (its tool moves the machine out of the turn's state and the call was not refused when requested),
   the machine's later calls in the turn, in the order of the model's answer, are refused (``invalid``, actor
   ``agentic``, nothing run; ``GatedTools.held_refusal``), in parallel and in serial execution alike. An agentic
   tool's inner model shared the flaw while such a call waited for approval (its state moves only on success):
   ``InnerState`` now holds the machine while a transition of it is open.
2. (review bp) A ``RefusedTurn`` (billed, not used: cut off, too big) of an agentic tool's inner model was not
   charged to the run (``_ChargedToRun`` charged only answers it returned), so a subagent's ``max_tokens`` budget
   missed it. Now it is charged through ``model_answers.billed_tokens``, the helper the loop's ``failure`` uses.

Checked and found holding: a turn with one transition still runs calls of another state machine, of a playbook,
of plain tools and the machine's global tools; a transition call refused when requested (bad arguments) holds
nothing; the refusal names only the machine, the state and the earlier call's tool (bounded, no arguments); the
inner model's transition that succeeded moves its state at once, as before.
"""

import enum
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

import tests.agentic.conftest as agentic_fixtures
from agents_app.agentic import _ChargedToRun
from agents_app.models import AgentRun, RunStatus
from agents_app.models_adapters import RefusedTurn
from agents_app.services import agent_create
from approvals.models import ApprovalRule
from tests.agentic import sample_tools
from tests.agentic.conftest import Recorder, answer, call
from toolhub import tool
from toolhub.agentic import StateMachineTool, Transition
from toolhub.agentic.inner import inner_calls_of
from toolhub.exceptions import ModelError
from toolhub.models import AuditEvent, CallKind, CallStatus, ToolCall
from toolhub.tools.definition import Risk
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

recorder = agentic_fixtures.recorder
make_agent = agentic_fixtures.make_agent
start_run = agentic_fixtures.start_run


class Door(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"


@tool(risk=Risk.LOW)
def open_door() -> str:
    """Open the door."""
    sample_tools.RAN.append("open_door")
    return "open"


DOORS = StateMachineTool(
    "door", "A door.", Door, start=Door.CLOSED, states={Door.CLOSED: [Transition(open_door, to=Door.OPEN)]}
)


@pytest.fixture(autouse=True)
def agentic_tools() -> Iterator[None]:
    sample_tools.RAN.clear()
    with registry.temporarily(*sample_tools.ALL, DOORS):
        yield


def _calls(run: Any) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run_id=run.id, kind=CallKind.CALL).order_by("turn", "position"))


def _turn(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [c["tool_calls"][0] for c in calls]}


# --- 1. a transition within one turn ---------------------------------------------------------------------------


@pytest.mark.parametrize("serial", [False, True])
def test_a_step_after_a_transition_in_the_same_turn_is_refused(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder, serial: bool
) -> None:
    """Found: ``[confirm_order, add_item]`` in ``draft``: both were checked against ``draft`` and both ran, so an
    item was added to a confirmed order. / Expect: ``add_item`` refused (not run, audited, actor ``agentic``),
    with a message naming the earlier transition; serial execution (a fresh gate per step) alike.
    """
    script = [_turn(call("confirm_order"), call("add_item", sku="a1")), answer()]
    agent = make_agent(script=script, tools=["order_processor"], serial_tool_execution=serial)

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    confirmed, added = _calls(run)
    assert confirmed.status == CallStatus.SUCCEEDED
    assert added.status == CallStatus.INVALID, added.status
    assert "an earlier call ('confirm_order') moves 'order_processor' out of state 'draft'" in added.error
    assert len(added.error) < 400
    assert sample_tools.RAN == ["confirm_order"]
    assert AuditEvent.objects.filter(call_id=added.id, event_type="call.invalid", actor="agentic").exists()
    assert run.disclosure["agentic"]["order_processor"] == {"state": "confirmed"}


def test_a_transition_twice_in_one_turn_runs_once(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found: ``[ship_order, ship_order]`` in ``confirmed``: both were checked against ``confirmed``, and the
    order was shipped twice. / Expect: the second refused, not run.
    """
    script = [call("confirm_order"), _turn(call("ship_order"), call("ship_order")), answer()]
    agent = make_agent(script=script, tools=["order_processor"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    _, first, second = _calls(run)
    assert first.status == CallStatus.SUCCEEDED
    assert second.status == CallStatus.INVALID and "('ship_order') moves 'order_processor'" in second.error
    assert sample_tools.RAN == ["confirm_order", "ship_order"]
    assert run.disclosure["agentic"]["order_processor"] == {"state": "shipped"}


def test_a_transition_leaves_other_machines_plain_tools_and_global_tools_running(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found: (guard for the fix) refusing after a transition must hold only its own machine.
    Expect: with ``confirm_order`` first, another machine's transition, a playbook's open tool, a plain tool and
    the machine's global tool all run; a transition call refused when requested holds nothing.
    """
    first = _turn(
        call("confirm_order"),
        call("open_door"),
        call("search", topic="t"),
        call("find_customer", id="c1"),
        call("order_status"),
    )
    refused_first = _turn(call("ship_order", unexpected=1), call("charge_card"))
    agent = make_agent(
        script=[first, refused_first, answer()], tools=["order_processor", "door", "researcher", "find_customer"]
    )

    run = start_run(agent, alice)

    calls = _calls(run)
    assert [c.status for c in calls[:5]] == [CallStatus.SUCCEEDED] * 5, [(c.tool_name, c.error) for c in calls]
    assert run.disclosure["agentic"]["door"] == {"state": "open"}
    invalid, charge = calls[5:]
    assert invalid.status == CallStatus.INVALID and "moves" not in invalid.error
    assert charge.status == CallStatus.PENDING_APPROVAL, charge.error


def test_the_inner_model_is_held_while_its_transition_waits_for_approval(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found: the inner model's state moves only when a call succeeds; ``[confirm_order, add_item]`` with
    ``confirm_order`` held for approval let ``add_item`` run in ``draft``, before a confirmation that would
    then run once approved (and ``[ship_order, ship_order]`` held twice would ship twice).
    Expect: while a transition of the machine is open, its later calls are refused (not run).
    """
    ApprovalRule.objects.create(name="confirm-needs-a-look", tool_name="confirm_order")
    inner = _turn(call("confirm_order"), call("add_item", sku="a1"))
    agent_create(name="desk-brain", provider="scripted", tools=[], script=[inner, answer("ok")])
    agent = make_agent(script=[call("order_desk", task="confirm"), answer()], tools=["order_desk"])

    run = start_run(agent, alice)

    (outer,) = _calls(run)
    confirm, added = inner_calls_of(outer.id, user=alice)
    assert confirm.status == CallStatus.PENDING_APPROVAL
    assert added.status == CallStatus.INVALID and "('confirm_order') moves 'order_processor'" in added.error
    assert sample_tools.RAN == []


# --- 2. an inner model's refused answer ------------------------------------------------------------------------


class _CutOff:
    def complete(self, **kwargs: Any) -> Any:
        raise RefusedTurn("cut off at its token limit", prompt_tokens=70, completion_tokens=40)


def test_an_inner_models_refused_answer_is_charged_to_the_run(alice: User) -> None:
    """Found: ``_ChargedToRun.complete`` charged only the answers the adapter returned; a ``RefusedTurn`` (billed
    by the endpoint, cut off) propagated uncharged, so a child given ``max_tokens=100`` spent 110 tokens per inner
    turn and was never stopped. / Expect: its tokens counted on the run (as the loop's ``_fail_step`` does), the
    refusal still raised, and the next inner turn refused for the spent budget.
    """
    agent = agent_create(name="review-br-budget", provider="scripted", tools=[], script=[{"content": "x"}])
    run = AgentRun.objects.create(
        agent=agent, user_id=alice.id, tenant="", input="go", status=RunStatus.RUNNING, limits={"max_tokens": 100}
    )

    with pytest.raises(RefusedTurn):
        _ChargedToRun(_CutOff(), run.id).complete(messages=[], tools=[])

    run.refresh_from_db()
    assert (run.prompt_tokens, run.completion_tokens) == (70, 40)
    with pytest.raises(ModelError, match="token budget"):
        _ChargedToRun(_CutOff(), run.id).complete(messages=[], tools=[])
