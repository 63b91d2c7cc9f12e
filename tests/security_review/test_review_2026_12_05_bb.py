"""Review of 2026-12-05 (bb): progressive disclosure and tool search, adversarially.

Each test fails on the reviewed code (main at 317e64f) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. An agent's tool provider hook (``Agent.tool_provider``) was checked against ``TOOLHUB["TOOL_PROVIDERS"]`` only
   when the agent was saved (admin, API); ``agents_app.disclosure.provided_tools`` imported and called whatever
   path the row named on every turn. A hook an administrator withdrew from the list (or a path written to the row
   by any other way: a fixture, a shell, a data migration) went on running in every run. Fixed: the hook is
   checked against the list each turn, and one no longer listed adds nothing (logged).

Checked and found holding (no test here):

- Search indexes: ``principal_index`` is keyed by (provider, tenant, user id, agent, the searchable names) under the
  governance stamp; the names already reflect grants, disabled tools, capabilities, remote tools' refusals and the
  run's group eligibility, so a revoked grant or a disabled tool leaves the next search (a new key). The lexical,
  embedding and expansion caches are keyed by text and hold immutable values; the PostgreSQL rows are keyed by
  the content hash of the principal's own documents.
- PostgreSQL query syntax: FTS operators (``!&|()<->``, ``':*``), quotes, backslashes, NUL, zero-width and
  compatibility characters, full-width and mathematical letters, 500-character words, queries of PostgreSQL stop
  words only: each answers a list (possibly empty), never an error (words reach ``to_tsquery`` only as quoted runs
  of ASCII letters, digits or CJK). Lone surrogates are refused before the search by the JSON parsers (REST, MCP)
  and by the stored-arguments check of a run's call.
- The stored disclosure state is cut by ``seen_state`` (``usable_tools`` with the run's context) on every turn:
  a search hit revoked since, or of a group no longer eligible, is neither shown nor stored.
"""

import logging
from typing import Any

import pytest
from django.contrib.auth.models import User

import tests.disclosure.conftest as disclosure_fixtures
from agents_app.models import RunStatus
from tests.disclosure.conftest import Recorder, answer

pytestmark = pytest.mark.django_db

disclosure_tools = disclosure_fixtures.disclosure_tools
recorder = disclosure_fixtures.recorder
make_agent = disclosure_fixtures.make_agent
start_run = disclosure_fixtures.start_run

_CALLED: list[str] = []


def withdrawn_provider(run: Any, latest_user_message: str) -> list[str]:
    """A hook that was listed when its agent was saved, and is no longer."""
    _CALLED.append(latest_user_message)
    return ["get_weather"]


def test_a_tool_provider_hook_withdrawn_from_the_list_no_longer_runs(
    settings: Any, make_agent: Any, start_run: Any, alice: User, recorder: Recorder, caplog: Any
) -> None:
    """Found: ``provided_tools`` imports and calls ``Agent.tool_provider`` whatever it names; the list of hooks
    administrators allow (``TOOLHUB["TOOL_PROVIDERS"]``) is read only when the agent is saved, so a hook withdrawn
    from it still runs on every turn of every run of agents saved with it, and still adds tools.
    / Expect: a hook not listed now is not called and adds nothing (logged, naming the agent's setting).
    """
    path = f"{__name__}.withdrawn_provider"
    settings.TOOLHUB = {**settings.TOOLHUB, "TOOL_PROVIDERS": [path]}
    agent = make_agent(script=[answer()], tools=["clock", "get_weather"], tool_search=True, tool_provider=path)
    settings.TOOLHUB = {**settings.TOOLHUB, "TOOL_PROVIDERS": []}  # the administrator withdraws it
    _CALLED.clear()

    with caplog.at_level(logging.WARNING, logger="agents_app.disclosure"):
        run = start_run(agent, alice, text="weather please")

    assert run.status == RunStatus.COMPLETED, run.error
    assert _CALLED == [], "the withdrawn hook ran"
    assert "get_weather" not in recorder.names(0)
    assert any("TOOL_PROVIDERS" in record.getMessage() for record in caplog.records)
