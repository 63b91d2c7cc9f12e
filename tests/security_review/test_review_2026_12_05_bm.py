"""Review of 2026-12-05 (bm): agentic tools, attacked by the run's model and its inner model.

Each test fails on the reviewed code (main at 2c4a08d); its docstring says "Found: ..." and "Expect: ...".

Findings:

1. The run's model skipped the steps of a playbook or state machine held by a ``SimpleAgenticTool``: the
   members come with the agent (``expand_agentic``), so they are granted, but the run's gate only looked at
   playbooks and state machines named in the agent's own tools; calling ``ship_order`` directly in ``draft``
   ran it. Now the gate refuses such a member (``runstate.held_inside``) unless the agent has it otherwise.
2. A cancelled (or failed) run did not stop an agentic tool's inner model: ``_ChargedToRun`` checked only the
   run's token budget, so a running agentic call went on for all its turns and inner calls. Now a turn is
   refused once the run has ended, and a turn answered after the end runs none of its calls.
3. A ``PlaybookTool`` whose ``Unlock`` prerequisites form a cycle (or a tool after itself) was accepted, and its
   tools were refused forever in a run. Now it fails at definition with a ``ToolDefinitionError`` naming the tool.

Checked and found holding (no test here): a locked playbook tool and another state's tool are refused in the
run's own turns and in the inner model's (``InnerState.gate`` refuses any name not its owner's); the gate runs
after authorization, so a refusal never confirms a denied tool; the calls of one outer turn are checked against
the state the turn started in (documented); inner state is replayed only from ``inner`` calls of the run and
tenant whose ``parent_tool`` the pipeline laid over (the run's context cannot set it); the ``agentic`` entries a
``SimpleAgenticTool``'s result writes are keyed ``<tool>.<machine>`` and built by code, and the run's gate reads
only its own gated tools' keys, so a tool result or model text forges no done step or state; inner calls carry
the run's principal (``principal_of_context``), are authorized, held for approval and audited, and their model
turns and calls are charged to the run; errors the inner model reads are the pipeline's sanitized texts; bad
definitions (unknown prerequisites, no tools, out-of-range limits, duplicate names) fail at import with
``ToolDefinitionError`` naming the tool.
"""

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

import tests.agentic.conftest as agentic_fixtures
from agents_app.models import RunStatus
from agents_app.services import agent_create
from tests.agentic import sample_tools
from tests.agentic.conftest import Recorder, answer, call
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

# The agentic suite's fixtures (a recording model, agents, runs).
recorder = agentic_fixtures.recorder
make_agent = agentic_fixtures.make_agent
start_run = agentic_fixtures.start_run


@pytest.fixture(autouse=True)
def agentic_tools() -> Iterator[None]:
    """The agentic suite's sample tools (``order_desk`` holds the state machine ``order_processor``)."""
    sample_tools.RAN.clear()
    with registry.temporarily(*sample_tools.ALL):
        yield


def _calls(run: Any) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run_id=run.id, kind=CallKind.CALL).order_by("turn", "position"))


def test_the_runs_model_cannot_skip_the_state_machine_of_its_agentic_tool(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found: an agent whose tool is ``order_desk`` (a ``SimpleAgenticTool`` holding the state machine
    ``order_processor``) gets the machine's members among its tools (``expand_agentic``), but the run's gate only
    looks at playbooks and state machines named in the agent's own tools: the run's model called ``ship_order``
    directly, in the draft state nobody left, and it ran. / Expect: a member of a state machine (or playbook)
    held by an agentic tool is gated by that machine in the run as well: refused, not run.
    """
    agent_create(name="desk-brain", provider="scripted", script=[answer("ok")], tools=[])
    agent = make_agent(script=[call("ship_order"), answer()], tools=["order_desk"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    (shipped,) = _calls(run)
    assert shipped.status == CallStatus.INVALID, (shipped.status, shipped.result)
    assert "runs only as a step inside another tool" in shipped.error and "call 'order_desk'" in shipped.error
    assert "ship_order" not in sample_tools.RAN


def test_a_state_machine_the_agent_holds_itself_still_gates_its_members_as_before(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found with the first test (the fix must not over-refuse): an agent listing both ``order_desk`` and the
    machine ``order_processor`` gates ``ship_order`` by its own run state. / Expect: refused as another state's
    tool (not as a step of ``order_desk``); ``add_item`` of the draft state runs.
    """
    agent_create(name="desk-brain", provider="scripted", script=[answer("ok")], tools=[])
    agent = make_agent(
        script=[call("ship_order"), call("add_item", sku="x"), answer()], tools=["order_desk", "order_processor"]
    )

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    shipped, added = _calls(run)
    assert shipped.status == CallStatus.INVALID and "not available in state 'draft'" in shipped.error
    assert added.status == CallStatus.SUCCEEDED
    assert sample_tools.RAN == ["add_item"]


def test_a_cancelled_run_stops_its_agentic_tools_inner_model(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: an agentic tool's inner model, charged to its run (``agentic._ChargedToRun``), looked only at the
    run's token budget: with the run cancelled while the agentic call ran (by its user, an operator or
    governance), the inner model went on taking turns and its calls ran (``add`` here), although a cancelled run
    "spends no more model turns" (``agents_app.cancelling``). / Expect: once the run has ended, the inner model's
    next turn is refused and a turn it answered after the end runs none of its calls; the outer call fails.
    """
    from agents_app.models import AgentRun
    from agents_app.models_adapters.scripted import ScriptedAdapter

    turns: list[int] = []

    class CancelledWhileThinking:
        """The math brain: the run is cancelled (elsewhere) while it answers its first turn."""

        def __init__(self, agent: Any) -> None:
            self.inner = ScriptedAdapter(script=agent.script)

        def complete(self, **kwargs: Any) -> Any:
            turns.append(1)
            AgentRun.objects.filter(agent__name="agentic").update(status=RunStatus.CANCELLED)
            return self.inner.complete(**kwargs)

    monkeypatch.setattr("agents_app.agentic.adapter_for", CancelledWhileThinking)
    agent_create(name="math-brain", provider="scripted", script=[call("add", a=1, b=2)] * 3, tools=[])
    agent = make_agent(script=[call("math_orchestrator", task="1+2"), answer()], tools=["math_orchestrator"])

    run = start_run(agent, alice)

    outer = ToolCall.objects.get(run_id=run.id, kind=CallKind.CALL, tool_name="math_orchestrator")
    assert outer.status == CallStatus.FAILED and "ended" in outer.error, (outer.status, outer.error)
    assert sample_tools.RAN == [] and turns == [1]
    assert not ToolCall.objects.filter(run_id=run.id, kind=CallKind.INNER).exists()


def test_a_playbook_whose_prerequisites_form_a_cycle_is_refused_when_defined() -> None:
    """Found: ``PlaybookTool`` checked that prerequisites are its tools, not that they can ever happen: ``analyze``
    after ``summarize`` and ``summarize`` after ``analyze`` (or a tool after itself) was accepted, and in a run each
    call was refused forever with "call 'summarize' successfully first". / Expect: a ``ToolDefinitionError`` at
    import naming the playbook and the tool; an acyclic chain is still accepted.
    """
    from toolhub.agentic import PlaybookTool, Unlock
    from toolhub.exceptions import ToolDefinitionError

    search, analyze, summarize = sample_tools.search, sample_tools.analyze, sample_tools.summarize
    with pytest.raises(ToolDefinitionError, match="'analyze' can never unlock"):
        PlaybookTool(
            "p",
            "d",
            tools=[search],
            locked={analyze: Unlock(after_all=["summarize"]), summarize: Unlock(after_any=["analyze"])},
        )
    with pytest.raises(ToolDefinitionError, match="'analyze' can never unlock"):
        PlaybookTool("p", "d", tools=[search], locked={analyze: Unlock(after_all=["analyze"])})
    PlaybookTool(
        "p",
        "d",
        tools=[search],
        locked={analyze: Unlock(after_all=["search"]), summarize: Unlock(after_any=["analyze", "search"])},
    )
