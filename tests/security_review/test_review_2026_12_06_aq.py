"""Review of 2026-12-06 (aq): progressive disclosure never surfaces a tool the principal is not granted.

Each test fails on the reviewed code (main at 819d82f) and states who sees what, where, and what is expected.

Findings:
- ``usable_tools`` judged a facade by its leaves however deep, ignoring the nested facades between: a facade whose
  only granted tools sit inside a nested facade denied to the user was shown (and its context tool), though its
  unfold lists nothing and the nested facade's call is refused; a by-category facade offered a category holding
  only such a nested facade. Now a nested facade's tools count only through it (``UnfoldingTool.reaches``).
- A playbook's (or state machine's) own tool, a guide allowed in runs on the agent's say like a facade, was not
  held to the facades' listing rule: one whose every member is denied was shown to the run's model and its call
  answered (an empty guide), and a creator without the catalogue's roles, under ``DEFAULT_TOOL_ACCESS = "deny"``,
  could not name on an agent a playbook holding tools granted to them ("Unknown tool 'researcher'") though their
  runs show it. Decided from the README ("a facade holding no tool the user may use is left out with its context
  tool"; the playbook's tool "is a guide"): every guide reaching a usable tool is usable and nameable, one reaching
  none is left out everywhere (``usable_tools``) and its call refused (``tool_seen_by``), for both.
- An agent read through the API (``CallerView.tools_seen``) judged a creator without the catalogue's roles by the
  tools they may call with no agent: a facade they named on it (accepted at creation) was left out of the answer
  and every read, so saving back what they read dropped it. Both now read ``pipeline.nameable_tool_names``.

Checked and found holding (no test here):
- a denied facade nested in an allowed one: the outer's unfold and context tool list neither the nested facade nor
  its tools, its context tool is refused, the stored state names none of them;
- a selectable facade's selector building tools from the arguments: only names the facade declares are revealed,
  each filtered by ``usable_in_call``; the unfold stored again from the arguments is cut by ``seen_state``;
- ``tool_search``: the index holds only ``searchable_names`` (``usable_tools``), hits are cut to it
  (``OwnNamesIndex``), its answers carry no count or hint about other tools; unknown-tool suggestions come from
  the visible/callable names;
- a group's ``system_prompt_addition`` is sent only while one of its tools is shown to the run (visible tools'
  active groups), rebuilt each turn;
- capabilities are checked by ``authorize_tools`` when listed, requested and on the worker; a revoked grant leaves
  the stored state next turn (``seen_state``) and the call is refused at execution; exclusive mode of a revoked
  facade keeps the run confined; the API and admin show ``shown_state`` cut to the run's user.
"""

from typing import Annotated, Any

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.test import APIClient

import tests.agentic.conftest as agentic_fixtures
import tests.disclosure.conftest as disclosure_fixtures
from agents_app.services import unknown_tools_problem
from tests.disclosure.conftest import Recorder, answer, call
from toolhub import Param, Risk, tool
from toolhub.authorization import CallPrincipal
from toolhub.disclosure import UnfoldingTool
from toolhub.disclosure.unfolding import tool_seen_by
from toolhub.models import CallStatus, Grant, GrantEffect, ToolCall
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

disclosure_tools = disclosure_fixtures.disclosure_tools
agentic_tools = agentic_fixtures.agentic_tools
recorder = disclosure_fixtures.recorder
make_agent = disclosure_fixtures.make_agent
start_run = disclosure_fixtures.start_run


def _calls(run: Any) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run_id=run.id).order_by("turn", "position"))


def test_a_facade_whose_tools_are_reachable_only_through_a_denied_nested_facade_is_not_shown(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found: admin_operations (status + nested user_management) was shown with status and user_management
    denied to alice, because create_user/find_user (inside the denied nested facade) counted as its tools.
    Expect: neither it nor its context tool is shown, and its call is refused like any facade holding nothing."""
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="user_management", user=alice)
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="status", user=alice)
    agent = make_agent(script=[call("admin_operations"), answer()], tools=["clock", "admin_operations"])

    run = start_run(agent, alice)

    assert recorder.names(0) == ["clock"]
    [unfold] = _calls(run)
    assert unfold.status == CallStatus.DENIED
    assert "admin_operations" not in str(run.disclosure)


@tool(risk=Risk.LOW)
def aq_rotate_key(key: Annotated[str, Param("Key id")]) -> str:
    """Rotate a key."""
    return "rotated"


@tool(risk=Risk.LOW)
def aq_read_log() -> str:
    """Read the log."""
    return "log"


AQ_KEYS = UnfoldingTool.of("aq_key_operations", "Key operations.", [aq_rotate_key])
AQ_OPS = UnfoldingTool.by_category("aq_operations", "Operations by area.", {"keys": [AQ_KEYS], "logs": [aq_read_log]})


def test_a_category_holding_only_a_denied_nested_facade_is_not_offered(alice: User) -> None:
    """Found: aq_operations offered category 'keys', which holds only aq_key_operations (denied to alice), because
    the rotate tool inside counted. Expect: the facade's enum offers 'logs' only, as for a category of denied tools."""
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="aq_key_operations", user=alice)
    principal = CallPrincipal(user_id=alice.pk, username="alice", tenant="acme", agent_tools=None)
    with registry.temporarily(AQ_OPS):
        facade = registry.get("aq_operations")
        assert facade is not None
        seen = tool_seen_by(facade, principal)

    assert seen is not None
    assert seen.json_schema["properties"]["category"]["enum"] == ["logs"]


def test_a_playbook_whose_every_member_is_denied_is_not_shown_nor_answered(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found: the playbook 'researcher' was shown to alice's run and its call succeeded (an empty guide) with all
    its tools denied to her, where a facade holding nothing of hers is left out and refused.
    Expect: the same rule as a facade: not shown, not stored, its call refused."""
    for name in ["search", "write_report", "analyze", "summarize", "publish"]:
        Grant.objects.create(effect=GrantEffect.DENY, tool_name=name, user=alice)
    agent = make_agent(script=[call("researcher"), answer()], tools=["clock", "researcher"])

    run = start_run(agent, alice)

    assert recorder.names(0) == ["clock"]
    [guide] = _calls(run)
    assert guide.status == CallStatus.DENIED
    assert "researcher" not in str(run.disclosure)


def test_a_creator_may_name_a_playbook_holding_a_tool_granted_to_them(alice: User, settings: Any) -> None:
    """Found: under the default deny, alice (granted 'search' only, no catalogue role) was told "Unknown tool
    'researcher'" when naming the playbook holding it, though her runs show it (a guide, on the agent's say).
    Expect: accepted, like a facade holding a tool of hers; a state machine holding none of hers still unknown."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    Grant.objects.create(effect=GrantEffect.ALLOW, tool_name="search", user=alice)

    assert unknown_tools_problem(["researcher"], by=alice, tenant="acme") is None
    problem = unknown_tools_problem(["order_processor"], by=alice, tenant="acme")
    assert problem is not None and problem.startswith("Unknown tool 'order_processor'")


def test_an_agent_read_by_its_creator_lists_the_facade_they_named_on_it(alice: User, settings: Any) -> None:
    """Found: under the default deny, alice (may create agents, granted query_table, no catalogue role) created an
    agent with database_operations (accepted: a facade holding a tool of hers), but the API's answer and every read
    of the agent left it out (the read judged facades by a grant of their own), so saving back what she read
    dropped it. Expect: the read lists what creating it accepted from her (``nameable_tool_names``, one rule)."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    for codename in ["add_agent", "view_agent", "change_agent"]:
        alice.user_permissions.add(Permission.objects.get(codename=codename))
    Grant.objects.create(effect=GrantEffect.ALLOW, tool_name="query_table", user=alice)
    client = APIClient()
    client.force_authenticate(User.objects.get(pk=alice.pk))
    payload = {"name": "aq", "tenant": "acme", "model": {"provider": "scripted", "script": []}}

    created = client.post(
        "/api/v1/agents/", {**payload, "tools": ["database_operations", "query_table"]}, format="json"
    )
    read = client.get(f"/api/v1/agents/{created.json()['id']}/")

    assert created.status_code == 201, created.json()
    assert created.json()["tools"] == ["database_operations", "query_table"]
    assert read.json()["tools"] == ["database_operations", "query_table"]
    assert unknown_tools_problem(["api_operations"], by=alice, tenant="acme") is None
    assert "send_email" not in read.json()["tools"]
