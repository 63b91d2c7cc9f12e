"""Review of 2026-12-06 (r): review of review (i)'s ``OwnNamesIndex``, and the run state shown to people.

Each test fails on the reviewed code (main at 3af5acc) and states who sees what, where, and what is expected.

Findings:
- ``OwnNamesIndex`` asked the provider for ``k`` names and dropped duplicates and foreign ones after: a provider
  answering those first left a search short of ``k`` (or empty) though own names ranked just below.
- A run's stored state (``AgentRun.disclosure``) is cut to the principal's grants only when the model takes a turn:
  an ended (or waiting) run's API ``disclosure`` and admin "Visible tools" kept naming hits, the tools last shown,
  the exclusive facade and unfolded facades of tools revoked since, as current state. Fixed in one place
  (``visibility.shown_state``: ``seen_state``'s ``usable_tools`` rule over every field), read by both.
- ``usable_tools`` answered a facade's ``<name>_context`` tool as usable when the facade itself was denied (only
  its groups were checked for it), so the revoked facade's name stayed in what was shown; a context tool now goes
  with its facade, as the README's listing rule says.
- Agent creation (API and admin form, ``unknown_tools_problem``) refused only names not registered: a creator
  without the catalogue's roles told a denied tool (accepted) from a non-existent one ("Unknown tool").

Checked and found holding (no test here):
- ``OwnNamesIndex`` keeps the provider's order (rank); a normal provider (distinct own names, fewer than ``k``
  only when it has no more) is asked once with ``k``, so ``tool_search`` and ``toolhub_find_tools`` answer as
  before for the built-in providers (lexical, expanded, embedding, hybrid, postgres); the category is passed on;
- MCP's ``toolhub_find_tools`` filtered by ``callable_names`` before; ``principal_index``'s names
  (``searchable_names``: ``usable_tools`` without a run context) are a subset of it, so nothing is lost;
- ``tool_search``'s ``max_results`` is still bounded (1-20) by its parameter schema before the handler runs;
- recall (tests/search, the labeled sets) and the search benchmark use the providers directly: the wrapper is not
  on their path; over the main labeled set (163 queries, k 1/5/20, with and without a category) the wrapped
  lexical, lexical-expanded, embedding and hybrid indexes answer exactly what the bare ones do;
- the model's state (``seen_state``) keeps exclusive mode of a revoked facade, so the run stays confined (it is
  only the shown state that leaves the name out).
"""

from typing import Any

import pytest
from django.contrib.admin.sites import site
from django.contrib.auth.models import User
from django.urls import reverse
from rest_framework.test import APIClient

import tests.disclosure.conftest as disclosure_fixtures
from agents_app.models import AgentRun, RunStatus
from tests.disclosure.conftest import Recorder, answer, call
from toolhub.disclosure.search import OwnNamesIndex
from toolhub.models import Grant, GrantEffect

pytestmark = pytest.mark.django_db

disclosure_tools = disclosure_fixtures.disclosure_tools
recorder = disclosure_fixtures.recorder
make_agent = disclosure_fixtures.make_agent
start_run = disclosure_fixtures.start_run


class _CrowdedIndex:
    """A provider's index whose best answers are another catalogue's names and a repeated one of its own."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def search(self, query: str, *, k: int = 5, category: str | None = None) -> list[str]:
        self.asked.append(k)
        return ["elsewhere_a", "get_weather", "get_weather", "elsewhere_b", "clock", "sales_report"][:k]


class _PlainIndex:
    def __init__(self) -> None:
        self.asked: list[int] = []

    def search(self, query: str, *, k: int = 5, category: str | None = None) -> list[str]:
        self.asked.append(k)
        return ["clock", "get_weather"][:k]


def test_own_names_index_answers_k_own_names_when_the_provider_has_them() -> None:
    """Found: ``OwnNamesIndex`` asked for ``k`` and filtered after, so with ``k=3`` a provider answering a foreign
    name and a duplicate among its first three gave one tool (``get_weather``), though ``clock`` and
    ``sales_report`` came next. Expect: the wrapper asks deeper until it has ``k`` own names or the provider has no
    more, in the provider's order; a provider answering only distinct own names is asked once, with ``k``.
    """
    crowded = _CrowdedIndex()
    found = OwnNamesIndex(crowded, ["get_weather", "clock", "sales_report"]).search("weather", k=3)

    assert found == ["get_weather", "clock", "sales_report"]

    plain = _PlainIndex()
    assert OwnNamesIndex(plain, ["clock", "get_weather"]).search("time", k=5) == ["clock", "get_weather"]
    assert OwnNamesIndex(plain, ["clock", "get_weather"]).search("time", k=1) == ["clock"]
    assert plain.asked == [5, 1]


def _disclosure_shown(run: AgentRun, client: APIClient) -> tuple[dict[str, Any], str]:
    """The run's state as its API and its admin page show it."""
    response = client.get(reverse("run-detail", args=[run.id]))
    assert response.status_code == 200
    run.refresh_from_db()
    page = site._registry[AgentRun].shown_disclosure(run)
    return response.json()["disclosure"], str(page)


def test_run_state_shown_names_no_tool_revoked_since(
    make_agent: Any, start_run: Any, alice: User, alice_client: APIClient, recorder: Recorder
) -> None:
    """Found: a completed run's ``disclosure`` (API) and "Visible tools" (admin) kept ``get_weather`` in ``hits``
    and ``visible`` after alice's grant on it was revoked: the state is cut only on the model's next turn, which an
    ended run never takes. Expect: both show the state cut to the run principal's current grants (the audit trail
    and the transcript keep the history).
    """
    agent = make_agent(
        script=[call("tool_search", query="weather"), answer()], tools=["clock", "get_weather"], tool_search=True
    )
    run = start_run(agent, alice)
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.disclosure["hits"] == ["get_weather"]

    Grant.objects.create(effect=GrantEffect.DENY, tool_name="get_weather", user=alice)
    shown, page = _disclosure_shown(run, alice_client)

    assert shown["hits"] == [] and shown["visible"] == ["clock", "tool_search"], shown
    assert "get_weather" not in page


def test_run_state_shown_names_no_revoked_exclusive_facade(
    make_agent: Any, start_run: Any, alice: User, alice_client: APIClient, recorder: Recorder
) -> None:
    """Found: after the exclusive facade ``change_personality`` was revoked for alice, her ended run's API and admin
    still showed it as ``exclusive`` (``seen_state`` keeps exclusive mode so the model stays confined, and the
    facade's unfold and last shown tools until a turn). Expect: no field shown names it.
    """
    agent = make_agent(script=[call("change_personality"), answer()], tools=["clock", "change_personality"])
    run = start_run(agent, alice)
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.disclosure["exclusive"] == "change_personality"

    Grant.objects.create(effect=GrantEffect.DENY, tool_name="change_personality", user=alice)
    shown, page = _disclosure_shown(run, alice_client)

    assert "change_personality" not in str(shown), shown
    assert "change_personality" not in page
    assert shown["exclusive"] == "" and shown["unfolded"] == {}


def test_agent_creation_answers_a_denied_tool_as_an_unknown_one(alice: User) -> None:
    """Found: a user who may create agents (``agents_app.add_agent``) but not read the catalogue got "Unknown tool"
    for a name that does not exist and a created agent for one that exists but is denied to them: agent creation
    told them which names the catalogue holds. Expect: for such a creator a tool they may not use is answered
    exactly as an unknown one (names already on an agent being changed stay accepted).
    """
    from django.contrib.auth.models import Permission

    from agents_app.services import RunInputError, agent_create, agent_update
    from toolhub.authorization import CallPrincipal
    from toolhub.feedback import unknown_tool_message
    from toolhub.pipeline import visible_tool_names

    alice.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="agents_app", codename__in=["add_agent", "change_agent"])
    )
    alice = User.objects.get(pk=alice.pk)
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="refund_payment", user=alice)

    nameable = visible_tool_names(CallPrincipal(user_id=alice.pk, username="alice", tenant="acme"))
    assert "refund_payment" not in nameable and "clock" in nameable
    for name in ("refund_payment", "refund_paymant"):  # denied; does not exist
        with pytest.raises(RunInputError) as refused:
            agent_create(name=f"helper-{name}", tenant="acme", tools=["clock", name], created_by=alice)
        assert str(refused.value) == unknown_tool_message(name, nameable)

    kept = agent_create(name="kept", tenant="acme", tools=["clock", "refund_payment"])
    agent_update(agent=kept, changes={"tools": ["refund_payment", "get_weather"]}, changed_by=alice)
    kept.refresh_from_db()
    assert kept.tools == ["refund_payment", "get_weather"]
