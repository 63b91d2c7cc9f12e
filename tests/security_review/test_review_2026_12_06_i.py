"""Review of 2026-12-06 (i): what a principal can see of tools it is not granted (search, disclosure, MCP, API).

Each test fails on the reviewed code (main at 8153f98) and states who sees what, where, and what is expected.

Findings:
- ``tool_search`` (a run's meta tool) answered the model with whatever the configured provider's index returned:
  a provider that does not keep to the documents it was built over (a custom one by dotted path over a shared,
  catalogue-wide store) put a tool denied to the run's user in the call's result, which the model reads and the
  API shows. MCP's ``toolhub_find_tools`` re-checked hits against the caller's grants; the run did not. Fixed in
  the shared place: ``disclosure.search.principal_index`` answers only names it was built over, for both.

Checked and found holding (no test here):
- the per-principal index (``principal_index``) is keyed by provider, tenant, user, agent and the exact names it
  holds, cached per governance stamp: another tenant's index is never reused, a revoked grant leaves at the next
  stamp; the embedding vector cache is keyed by tool text only (no names, no tenants, no queries);
- the PostgreSQL provider's rows are keyed by the SHA-256 of the documents, and a search reads only its own key;
- ``seen_state`` cuts stored hits, unfolded facades and their inner tools to ``usable_tools`` every turn, so a
  revocation mid-run leaves the next turn's definitions, and the pipeline re-authorizes every call;
- unknown-tool suggestions (runs, API, MCP, agentic inner calls) come from ``visible_tool_names``/``callable_names``;
  a denied call reads as an unknown one to the model, the API caller and the MCP client;
- MCP: ``tools/list``, ``toolhub_describe_tool``, the ``Mcp-Param-*`` header schemas and a refused
  ``tools/call`` name only tools the caller may call; no resources, prompts, completion or list cursors are served;
- ``GET /api/v1/tools/`` and the exports list only the caller's tools (per tenant); ``/api/schema/`` names no tool;
- ``search_eval`` reads only the files it is given (no database catalogue, no tenant's grants).
"""

from collections.abc import Iterable
from typing import Any

import pytest
from django.contrib.auth.models import User

import tests.disclosure.conftest as disclosure_fixtures
from agents_app.models import RunStatus
from tests.disclosure.conftest import Recorder, answer, call
from toolhub.models import CallStatus, Grant, GrantEffect, ToolCall
from toolhub.search import SearchDocument
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

disclosure_tools = disclosure_fixtures.disclosure_tools
recorder = disclosure_fixtures.recorder
make_agent = disclosure_fixtures.make_agent
start_run = disclosure_fixtures.start_run

SHARED_PROVIDER = f"{__name__}.SharedStoreProvider"


class _SharedStoreIndex:
    """An index over a catalogue-wide store (as a shared vector database would be), not the documents given."""

    def search(self, query: str, *, k: int = 5, category: str | None = None) -> list[str]:
        words = set(query.lower().split())
        return [name for name in registry.names() if words & set(name.split("_"))][:k]


class SharedStoreProvider:
    name = "shared-store"

    def build(self, documents: Iterable[SearchDocument]) -> _SharedStoreIndex:
        return _SharedStoreIndex()


def test_tool_search_never_answers_a_denied_tool_whatever_the_provider_returns(
    make_agent: Any, start_run: Any, alice: User, recorder: Recorder, settings: Any
) -> None:
    """Found: ``tool_search`` put in its result every name the provider's index returned, unchecked, so a provider
    whose index reaches beyond the documents it was given (a shared store) named ``refund_payment``, denied to
    alice, to her run's model (MCP's ``toolhub_find_tools`` filtered the same hits by grants).
    Expect: a search answers only tools the principal's index was built over (granted, usable, eligible).
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "TOOL_SEARCH_PROVIDER": SHARED_PROVIDER}
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="refund_payment", user=alice)
    script = [call("tool_search", query="refund payment weather", max_results=20), answer()]
    agent = make_agent(script=script, tools=["clock", "get_weather", "refund_payment"], tool_search=True)

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED, run.error
    [search] = ToolCall.objects.filter(run_id=run.id)
    assert search.status == CallStatus.SUCCEEDED
    assert "get_weather" in search.result["tools"]
    assert "refund_payment" not in search.result["tools"], search.result
    assert all("refund_payment" not in str(message.get("content")) for message in recorder.turns[1]["messages"])
