"""Review of 2026-12-06 (x): review of review (r) (shown_state, usable_tools' context rule, OwnNamesIndex's deeper
asks, agent creation answering a denied tool like an unknown one).

Each test fails on the reviewed code (main at 011e94d) and states who sees what, where, and what is expected.

Findings:
- Agent creation (API and admin form, ``unknown_tools_problem``) judged a creator without the catalogue's roles by
  the tools they may call with no agent: under the default ``DEFAULT_TOOL_ACCESS = "deny"`` a facade holding tools
  they are granted (allowed in their runs on the agent's say, as every navigation tool is) was refused as
  "Unknown tool", so they could no longer list it on an agent of theirs, though their runs of such an agent show it.
- A run whose user was deleted was shown (API ``disclosure``, admin "Visible tools") through a principal without a
  user, trusted code's: names that user was denied came back once their grants went with them, where a
  deactivated user's run shows nothing usable.
- ``usable_tools`` judged a name no longer registered (a tool removed from the code since a run's state named it)
  by its grants alone: under ``DEFAULT_TOOL_ACCESS = "allow"`` (or a stale grant by name) the shown state kept it
  as usable now. A name not registered is never usable (the one rule, so every listing leaves it out).

Checked and found holding (no test here):
- Query counts (tests/posture/test_api_query_counts.py, test_admin_query_counts.py) pass on PostgreSQL: the run
  list (``RunSummarySerializer``) and the admin change list do not read the state; only a run's detail and change
  page do, once per run, through the governance-cached lookups;
- the shown state is cut to the run user's grants, not the viewer's: who may read another user's run (staff of
  its tenant) reads its transcript and calls, which name the same tools; the cut only ever removes names from
  what was stored, so it shows a viewer nothing the stored row did not;
- a deactivated user's run shows nothing usable (``authorize_tools``' standing refusal), no crash; an agent is
  ``PROTECT``ed while it has runs, so no run outlives its agent;
- state stored by older versions (missing keys, non-list fields, a string ``done``, an unknown chained type, a
  non-facade ``exclusive``, ``{}``, a number) reads through ``DisclosureState.from_json`` without error;
- ``OwnNamesIndex`` asks at most 10 times (k, doubled, capped at 500; 8 for k=5) per search whatever it answers,
  and the built-in providers (lexical, embedding, hybrid, postgres), built over the principal's names only, are
  asked once;
- ``usable_tools``: a facade granted with its context tool denied still lists the facade and its inner tools (the
  context tool alone is left out); a context tool of a denied facade is left out, as the README's listing rule
  ("a facade holding no tool the user may use is left out with its context tool") says; runs take the agent's say
  for both, so a run's tools do not change under the default deny;
- tests/agentic, tests/disclosure, tests/governance, tests/mcp pass with the changes (playbooks, state machines,
  chaining, facades).
"""

from typing import Any

import pytest
from django.contrib.admin.sites import site
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from rest_framework.test import APIClient

import tests.disclosure.conftest as disclosure_fixtures
from agents_app.models import AgentRun, RunStatus
from tests.disclosure.conftest import Recorder, answer, call
from toolhub.models import Grant, GrantEffect

pytestmark = pytest.mark.django_db

disclosure_tools = disclosure_fixtures.disclosure_tools
recorder = disclosure_fixtures.recorder
make_agent = disclosure_fixtures.make_agent
start_run = disclosure_fixtures.start_run


def test_a_creator_lists_a_facade_of_tools_granted_to_them(
    settings: Any, make_agent: Any, start_run: Any, alice: User, recorder: Recorder
) -> None:
    """Found: with the default ``DEFAULT_TOOL_ACCESS = "deny"``, alice (``add_agent``, no catalogue role) granted
    ``database_operations``' inner tools got "Unknown tool 'database_operations'" creating an agent listing the
    facade, while her run of an agent listing it (created by trusted code) is shown and unfolds it: agent
    creation judged the facade without an agent, whose say a run takes for it. Expect: a creator may list a
    facade holding a tool they may use (and is still refused one holding none, as an unknown tool).
    """
    from agents_app.services import RunInputError, agent_create

    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    alice.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="agents_app", codename__in=["add_agent", "change_agent"])
    )
    alice = User.objects.get(pk=alice.pk)
    for name in ("clock", "query_table", "insert_record", "delete_record"):
        Grant.objects.create(effect=GrantEffect.ALLOW, tool_name=name, user=alice)

    by_code = make_agent(script=[call("database_operations"), answer()], tools=["clock", "database_operations"])
    run = start_run(by_code, alice)
    assert run.status == RunStatus.COMPLETED, run.error
    assert "database_operations" in run.disclosure["unfolded"]  # her run uses it

    mine = agent_create(name="mine", tenant="acme", tools=["clock", "database_operations"], created_by=alice)
    assert mine.tools == ["clock", "database_operations"]
    with pytest.raises(RunInputError, match="Unknown tool 'admin_operations'"):
        agent_create(name="theirs", tenant="acme", tools=["admin_operations"], created_by=alice)


def test_a_deleted_users_run_shows_nothing_as_usable(
    make_agent: Any, start_run: Any, alice: User, operator_client: APIClient, recorder: Recorder
) -> None:
    """Found: alice's run found ``get_weather``; her grant on it was revoked (a deny), so its shown state left it
    out; once alice was deleted her deny went with her and the run (no user left) was shown through a principal
    without a user: ``get_weather`` was back in ``hits`` and ``visible`` of the API and the admin page. Expect: a
    run whose user is gone shows nothing as usable now, as a deactivated user's run does.
    """
    agent = make_agent(
        script=[call("tool_search", query="weather"), answer()], tools=["clock", "get_weather"], tool_search=True
    )
    run = start_run(agent, alice)
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.disclosure["hits"] == ["get_weather"]
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="get_weather", user=alice)
    url = reverse("run-detail", args=[run.id])
    assert "get_weather" not in str(operator_client.get(url).json()["disclosure"])

    alice.delete()
    response = operator_client.get(url)
    run.refresh_from_db()
    page = str(site._registry[AgentRun].shown_disclosure(run))

    assert response.status_code == 200 and run.user_id is None
    shown = response.json()["disclosure"]
    assert shown["hits"] == [] and shown["visible"] == [] and shown["unfolded"] == {}, shown
    assert "get_weather" not in page and "clock" not in page


def test_a_run_state_shows_no_tool_removed_from_the_catalogue(
    make_agent: Any, start_run: Any, alice: User, alice_client: APIClient, recorder: Recorder
) -> None:
    """Found: a run's state names ``forecast``, a tool registered then and removed from the code since (a deploy):
    ``usable_tools`` judged it by the grants alone (``DEFAULT_TOOL_ACCESS = "allow"`` here, or a stale grant by
    name), so the API's ``disclosure`` and the admin's "Visible tools" still showed it as what the run can use now.
    Expect: a name no longer registered is never usable, so neither shows it.
    """
    from toolhub.tools import tool
    from toolhub.tools.registry import registry

    @tool
    def forecast(city: str) -> str:
        """Weather forecast for a city."""
        return city

    agent = make_agent(script=[call("tool_search", query="forecast"), answer()], tools=["clock"], tool_search=True)
    with registry.temporarily(forecast):
        agent.tools = ["clock", "forecast"]
        agent.save(update_fields=["tools"])
        run = start_run(agent, alice)
    assert run.status == RunStatus.COMPLETED, run.error
    assert "forecast" in run.disclosure["hits"] and "forecast" in run.disclosure["visible"]

    response = alice_client.get(reverse("run-detail", args=[run.id]))
    page = str(site._registry[AgentRun].shown_disclosure(run))

    assert "forecast" not in str(response.json()["disclosure"]), response.json()["disclosure"]
    assert "forecast" not in page and "clock" in page
