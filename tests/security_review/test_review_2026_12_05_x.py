"""Review of 2026-12-05 (x): privilege escalation through subagents, agentic tools and progressive disclosure.

Each test fails on the reviewed code (main at a0c4d88) and states who reaches what, where, and what is expected.

Findings: the agentic tools named, described and offered tools of a tool group not eligible for the run (a group
bound to another tenant): a playbook's and a state machine's guide listed them, a locked tool's refusal named one
as what unlocks it, a state machine's refusal offered one among "the tools available now", and a
``SimpleAgenticTool``'s inner model was given its definition. They filtered names by grants only
(``runstate.granted_for`` / ``_granted``: ``authorize_tools``), not by the one rule every other listing goes
through (``unfolding.usable_tools`` with the run's context), which probe 2026-12-04 (o) applied to facades.
Fixed in ``runstate._granted`` / ``granted_for`` (now ``unfolding.usable_in_call``, the facade's own rule).

Checked and found holding (no test here): a child run takes its user, tenant and context from the parent run's
row (``_calling_run`` reads the run id and tenant from the boundary's context, never the arguments) and its agent
by name among the parent tenant's and the global agents, as ``run_start`` would; its calls carry the child's run id
and agent, so the worker's re-check (``principal_of_call`` / ``run_call_agent_tools_sql``) reads the child's agent
tools, its standing is checked before every step, and its audit events land in the parent's tenant chain; an
agentic tool's inner calls are requested with ``principal_of_context`` (the run's user, tenant and agent from the
boundary's keys, ``parent_call_id``/``parent_tool`` laid over by the pipeline, reserved keys never overridden) and
authorized, held for approval and audited like the run's own; ``InnerState.load`` replays only ``inner`` calls of the
run and tenant; ``turn_calls`` applies only the run's own (``call``) rows to its disclosure state. The stored
disclosure state is read-only in the API (``RunSerializer``) and the admin; it changes only by settled calls of the
registered meta tools (results made by code), facades (their validated arguments) and agentic tools, and is cut by
``seen_state`` each turn. Visibility is not a permission (README): a granted tool not shown (an inner tool of a facade
not unfolded, a tool of a group put away or not eligible) runs when called, while a denied one reads as unknown to
the model (run turns, inner calls); capabilities are enforced at request and on the worker. Fan-out: every model turn
with calls counts against ``max_tool_calls`` (invalid and gated calls too), a ``SimpleAgenticTool`` is bounded by
``max_iterations``/``max_calls`` and, in a budgeted child, by the run's budget; subagents by depth and the shared
budget (reviews f, g and probe b). Model-chosen text never reaches governance: a chained object is rebuilt from a
producer call's result validated as its class, and a ``SimpleAgenticTool``'s ``state`` in its result is built by code.
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
from toolhub.models import CallKind, CallStatus, ToolCall, ToolGroup
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

# The agentic suite's fixtures (a recording model, agents, runs).
recorder = agentic_fixtures.recorder
make_agent = agentic_fixtures.make_agent
start_run = agentic_fixtures.start_run

#: A tool group bound to another tenant than the runs' (alice's tenant is acme).
GLOBEX_ONLY = [{"tenants": ["globex"]}]


@pytest.fixture(autouse=True)
def agentic_tools() -> Iterator[None]:
    """The agentic suite's sample tools (playbook ``researcher``, state machine ``order_processor``, ``math``)."""
    sample_tools.RAN.clear()
    with registry.temporarily(*sample_tools.ALL):
        yield


def _calls(run: Any) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run_id=run.id, kind=CallKind.CALL).order_by("turn", "position"))


def test_a_playbook_names_no_tool_of_a_group_not_eligible_for_the_run(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found: with ``analyze`` in a group bound to globex, acme's model is not shown it, yet the playbook's guide
    ``researcher`` lists it (name, description, what unlocks it) and the refusal of ``summarize`` (unlocked
    after any of ``analyze``) says "call one of 'analyze' successfully first". / Expect: neither the guide nor a
    refusal names a tool of a group not eligible for the run; ``summarize`` reads as one that cannot be unlocked.
    """
    ToolGroup.objects.create(name="globex_research", activation_rules=GLOBEX_ONLY, extra_tools=["analyze"])
    agent = make_agent(script=[call("researcher"), call("summarize"), answer()], tools=["researcher"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    assert "analyze" not in recorder.names(0)  # the run's tools already leave it out
    guide, locked = _calls(run)
    assert guide.status == CallStatus.SUCCEEDED
    assert [step["name"] for step in guide.result["tools"]] == ["search", "write_report", "summarize", "publish"]
    assert "analyze" not in str(guide.result["tools"])  # the playbook's own description is the developer's words
    assert locked.status == CallStatus.INVALID
    assert "analyze" not in locked.error and "cannot be unlocked" in locked.error, locked.error


def test_a_state_machine_names_no_tool_of_a_group_not_eligible_for_the_run(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found: with ``add_item`` in a group bound to globex, the state machine's guide lists it under its state and
    a refused call of a tool of another state answers "Tools available now: add_item, confirm_order, ...".
    / Expect: neither names it.
    """
    ToolGroup.objects.create(name="globex_orders", activation_rules=GLOBEX_ONLY, extra_tools=["add_item"])
    agent = make_agent(script=[call("order_processor"), call("ship_order"), answer()], tools=["order_processor"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    assert "add_item" not in recorder.names(0)
    guide, refused = _calls(run)
    assert guide.status == CallStatus.SUCCEEDED and "add_item" not in str(guide.result["states"]), guide.result
    assert [tool["name"] for tool in guide.result["states"]["draft"]] == ["confirm_order"]
    assert refused.status == CallStatus.INVALID and "confirm_order" in refused.error
    assert "add_item" not in refused.error, refused.error


def test_an_agentic_tools_inner_model_is_not_offered_a_tool_of_a_group_not_eligible_for_the_run(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: with ``multiply`` in a group bound to globex, ``math_orchestrator``'s inner model (acme's run) is
    sent its definition, though the run's own model is never shown it (``inner_definitions`` asked grants only).
    / Expect: the inner model is offered what the run may be shown: ``add`` alone.
    """
    from agents_app.models_adapters.scripted import ScriptedAdapter

    ToolGroup.objects.create(name="globex_math", activation_rules=GLOBEX_ONLY, extra_tools=["multiply"])
    offered: list[list[str]] = []
    original = ScriptedAdapter.complete

    def spying(self: Any, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **options: Any) -> Any:
        offered.append([t["function"]["name"] for t in tools])
        return original(self, messages=messages, tools=tools, **options)

    monkeypatch.setattr(ScriptedAdapter, "complete", spying)
    agent_create(name="math-brain", provider="scripted", script=[answer("4")], tools=[])
    agent = make_agent(script=[call("math_orchestrator", task="2*2"), answer()], tools=["math_orchestrator"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    assert offered[1] == ["add"], offered  # offered[0] is the run's model's turn
