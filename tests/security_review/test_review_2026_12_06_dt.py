"""Review of 2026-12-06 (dt): progressive disclosure under revocation, what a run's stored state keeps mid-run.

Runs are driven by the scripted model (``tests.disclosure.conftest``: a recording adapter, sample tools and
facades); a tool of the test, ``world_changes``, changes the world between two turns of the run (a grant revoked,
a tool disabled, a group's capability or rule changed, a role taken away), and what the model is sent on the next
turns is read. Each finding's test fails on the reviewed code (main at dc76274) and passes after the fix.

Findings:

1. A playbook's guide tool is shown to the model with its run state in its description (``Done so far: search,
   analyze.``, ``runstate.agentic_description``), read from the run's stored state as it is: a done step whose
   tool was revoked since (a deny grant, or its group no longer eligible for the run) stayed named there on every
   later turn, though the tool itself left the tools sent, the unknown-tool suggestions and what people read of the
   state (``shown_state`` cuts ``done``). The run's own state keeps every done step (its gate needs them); the
   description is now written from the state with the done steps cut to what the principal may use now
   (``DisclosureState.done_among``, used by ``visibility._disclose`` and ``naming_only`` alike).

Checked and found holding (tests below where noted, the rest probed here and not kept):

- A search hit stored on the run (``DisclosureState.hits``) leaves the very next turn's tools, and its group's
  ``system_prompt_addition`` leaves the system message, when mid-run its grant is denied, the tool is disabled
  (``ToolDefinition.enabled``), its group is given a capability the user lacks, its group's rules stop matching
  the run (another tenant, a role taken away); the same holds for tools listed on the agent and for a group
  equipped with ``reset_equipped_tools``; the call of a revoked hit is refused at execution (test below).
- The user removed from the run's tenant mid-run: the run is cancelled before its next turn.
- An unfolded facade's stored children (plain, by-category and selectable facades): a child denied mid-run leaves
  the next turn's tools, the guide's repeated unfold and the ``<name>_context`` listing; its call is refused.
- A remote MCP tool quarantined or its server disabled reaches ``authorize_tools`` through ``registry.refusal``
  (governance-cached rows), the same path as a disabled tool, so it leaves search, hits and unfolds alike.
- ``tool_search``'s ``max_results`` of 0, -1, 10**9, 2.5, ``"x"``, ``[5]`` or ``null``, and a query over 500
  characters (100 000 of them: the run's 100 kB arguments limit) are refused before the search with a message
  naming the field, and no index is built (test below). (``"5"`` and ``true`` are taken as 5 and 1, as every
  tool's arguments are validated in pydantic's lax mode; MCP's ``toolhub_find_tools`` is strict.)
- The lexical tokenizer (CJK bigrams, identifier splitting, Snowball) on 500-character hostile queries (one CJK
  run, one 500-letter word, camelCase runs, control and zero-width characters, 250 distinct words) answers in
  milliseconds over 300 tools; control characters only separate words.
- A ``category`` held only by tools denied to the principal answers exactly as a category that does not exist
  (``No tool matched``): indexes, their statistics (BM25 IDF, expansion vocabulary) and category codes are built
  from the principal's own documents only.
- Design, not changed: a plain tool of a group no longer eligible for the run (its rules stop matching) is hidden
  but still runs when the model names it, as the README says (visibility is not a permission; grants and
  capabilities are); only guides of such a group are refused (``tool_seen_by``).
"""

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

import tests.disclosure.conftest as disclosure_fixtures
from tests.agentic import sample_tools as agentic_tools
from tests.disclosure.conftest import Recorder, answer, call
from tests.disclosure.providers import WordProvider
from toolhub.models import CallStatus, Grant, GrantEffect, ToolCall, ToolDefinition, ToolGroup
from toolhub.tools import tool
from toolhub.tools.definition import Risk
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

# The progressive-disclosure suite's fixtures (sample tools and facades, a recording model, agents, runs).
disclosure_tools = disclosure_fixtures.disclosure_tools
recorder = disclosure_fixtures.recorder
make_agent = disclosure_fixtures.make_agent
start_run = disclosure_fixtures.start_run

#: What ``world_changes`` does when the run's model calls it (set by each test).
CHANGES: list[Callable[[], None]] = []


@tool(risk=Risk.LOW)
def world_changes() -> str:
    """Change the world between two turns of the run (the test says how)."""
    for change in CHANGES:
        change()
    return "changed"


def _calls(run: Any) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run_id=run.id).order_by("turn", "position"))


def _deny(user: User, name: str) -> Callable[[], None]:
    return lambda: Grant.objects.create(effect=GrantEffect.DENY, tool_name=name, user=user)


def _bind_group_to_globex(name: str) -> Callable[[], None]:
    def bind() -> None:
        ToolGroup.objects.update_or_create(name=name, defaults={"activation_rules": [{"tenants": ["globex"]}]})

    return bind


@pytest.mark.parametrize("revoke", ["deny", "group_rules"])
def test_a_playbook_guide_names_no_done_step_revoked_since(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder, revoke: str
) -> None:
    """Found: the playbook's guide description (``Done so far: ...``) is read from the run's stored state as it
    is, so ``analyze``, done and then denied to alice (or moved into a group bound to another tenant), stayed
    named in it on every later turn, while the tool itself left the tools sent.
    / Expect: the guide names only done steps the principal may use now; the run's state keeps them all.
    """
    if revoke == "deny":
        CHANGES[:] = [_deny(alice, "analyze")]
    else:
        CHANGES[:] = [
            lambda: ToolGroup.objects.create(
                name="analysis", extra_tools=["analyze"], activation_rules=[{"tenants": ["globex"]}]
            )
        ]
    script = [call("search", topic="tides"), call("analyze"), call("world_changes"), answer()]
    with registry.temporarily(world_changes, *agentic_tools.ALL):
        agent = make_agent(script=script, tools=["researcher", "world_changes"])
        run = start_run(agent, alice)

    assert [c.status for c in _calls(run)] == [CallStatus.SUCCEEDED] * 3
    assert "Done so far: search, analyze." in recorder.tool(2, "researcher")["description"]
    assert "analyze" not in recorder.names(3)
    guide = recorder.tool(3, "researcher")["description"]
    assert "Done so far: search." in guide, guide
    # The run's own state keeps the step (its gate reads it); people read it cut (``shown_state``).
    assert run.disclosure["agentic"]["researcher"]["done"] == ["search", "analyze"]


CHANGE_OF = {
    "deny": lambda alice: _deny(alice, "refund_payment"),
    "disable": lambda alice: (
        lambda: ToolDefinition.objects.update_or_create(name="refund_payment", defaults={"enabled": False})
    ),
    "capability": lambda alice: (
        lambda: ToolGroup.objects.filter(name="payments").update(capabilities=["money_movement"])
    ),
    "group_rules": lambda alice: _bind_group_to_globex("payments"),
    "role_removed": lambda alice: lambda: alice.groups.clear(),
}


@pytest.mark.parametrize("how", list(CHANGE_OF))
def test_a_search_hit_revoked_mid_run_leaves_the_next_turn_with_its_groups_addition(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder, how: str
) -> None:
    """Holds (regression): a stored hit whose tool the world took away mid-run is not sent on the next turn, nor
    is its group's prompt addition; the model's call of it is refused when a grant or capability took it away.
    """
    alice.groups.add(Group.objects.create(name="finance"))
    ToolGroup.objects.create(
        name="payments", system_prompt_addition="PAYMENTS-ADDITION", activation_rules=[{"roles": ["finance"]}]
    )
    CHANGES[:] = [CHANGE_OF[how](alice)]
    script = [
        call("tool_search", query="refund payment"),
        call("world_changes"),
        call("refund_payment", payment="p1"),
        answer(),
    ]
    with registry.temporarily(world_changes):
        agent = make_agent(script=script, tools=["clock", "refund_payment", "world_changes"], tool_search=True)
        run = start_run(agent, alice)

    search, changed, refund = _calls(run)
    assert search.result["tools"] == ["refund_payment"] and changed.status == CallStatus.SUCCEEDED
    assert "refund_payment" in recorder.names(1) and "PAYMENTS-ADDITION" in recorder.turns[1]["system"]
    for turn in (2, 3):
        assert "refund_payment" not in json.dumps(recorder.turns[turn]["tools"])
        assert "PAYMENTS-ADDITION" not in recorder.turns[turn]["system"]
    assert "refund_payment" not in run.disclosure["hits"]
    if how in ("deny", "disable", "capability"):
        assert refund.status == CallStatus.DENIED


@pytest.mark.parametrize("value", [0, -1, 10**9, 2.5, "x", [5], None])
def test_max_results_out_of_bounds_is_refused_before_any_search(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder, value: Any
) -> None:
    """Holds (regression): a bad ``max_results`` is answered naming the field, and nothing is searched."""
    script = [call("tool_search", query="weather", max_results=value), answer()]
    agent = make_agent(script=script, tools=["clock", "get_weather", "send_email"], tool_search=True)

    run = start_run(agent, alice)

    [search] = _calls(run)
    assert search.status == CallStatus.INVALID
    assert "max_results" in search.error and "nothing was executed" in search.error
    assert WordProvider.built == []
