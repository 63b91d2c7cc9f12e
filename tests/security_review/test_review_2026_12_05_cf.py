"""Review of 2026-12-05 (cf): the MCP server's tenancy, swept generically (tests/tenancy/test_mcp_sweep.py).

Findings:

1. Cancelling one's own refused call told a denied tool from a missing one: ``tool_call_cancel`` named the row's
   true status ("This call is denied" vs "This call is invalid"), so globex's member learnt that acme's tool
   exists by cancelling the call they had made of it (``toolhub_cancel_call``, ``POST /api/v1/calls/{id}/cancel/``),
   while every other answer (the call, its status, its detail) reads as a missing tool's (``CallerView``).

Checked and found holding (the sweep keeps them as tests, built from the server's declared capabilities and own
tools): for globex's member, operator and auditor, a user with no tenant, alice after leaving acme, and (for the
catalogue) the platform user without naming acme, nothing of acme is listed (``tools/list``), found by
``toolhub_find_tools`` (words, near-miss names, prefixes), described (also near-misses, other spellings: upper
case, padded, dashes, a zero-width space), called (with valid, missing, mistyped, extra, tenant-naming and huge
arguments), statused or cancelled by id; every answer for acme's tool or call is the answer for a missing one;
unknown-tool hints name only the caller's tools; no resources, prompts or completions are served; a deactivated
member of acme is refused (401) before any method; ``X-Toolhub-Tenant`` naming acme, acme twice, acme with globex
and a retired tenant answers as a missing tenant; ``_meta`` naming a tenant, user, run, agent or idempotency key is
refused or dropped, the call made as the caller in their tenant; ``notifications/cancelled`` and
``notifications/progress`` naming acme's call ids change nothing. Not a leak, noted: the status and cancel tools
read the caller's calls in all their tenants whatever ``X-Toolhub-Tenant`` says (a member of two tenants reaches
their own calls in both).
"""

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - fixtures
from tests.security_review.conftest import client_for
from toolhub.models import Grant, GrantEffect, Tenant, ToolCall
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "acme_payroll_export"
MISSING = "acme_payroll_exporQ"


@pytest.fixture
def acme_only_tool(settings: Any, tenant: Tenant) -> Iterator[None]:
    """A tool only acme is granted (default access: deny)."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    schema = {"type": "object", "properties": {"who": {"type": "string"}}}
    with registry.temporarily(Tool.create(SECRET, "Export acme's payroll.", schema, lambda arguments: "payroll")):
        Grant.objects.create(tool_name=SECRET, tenant=tenant, effect=GrantEffect.ALLOW)
        yield


def _own_call_ids(user: User) -> dict[str, str]:
    return {name: str(pk) for pk, name in ToolCall.objects.filter(user=user).values_list("id", "tool_name")}


def test_cancelling_ones_call_of_another_tenants_tool_answers_as_for_a_missing_tool_over_mcp(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    acme_only_tool: None,
    globex_user: User,
) -> None:
    """Found: globex's member calls acme's tool and a missing one (both "Unknown tool"), then cancels each call by
    its id (their own calls, listed by the REST API): "This call is denied" for acme's tool, "This call is invalid"
    for the missing one, so the tool exists. Expect: the same answer, the name aside."""

    async def make(client: Client) -> None:
        for name in (SECRET, MISSING):
            with pytest.raises(MCPError):  # both answer "Unknown tool"; the rows are what matters
                await client.call_tool(name, {"who": "w"})

    with_client(live_asgi, token(globex_user), make)
    ids = _own_call_ids(globex_user)

    async def cancel(client: Client) -> list[str]:
        answers = []
        for name in (SECRET, MISSING):
            result = await client.call_tool("toolhub_cancel_call", {"call_id": ids[name]})
            answers.append(result.content[0].text.replace(ids[name], "ID"))  # type: ignore[union-attr]
        return answers

    theirs, missing = with_client(live_asgi, token(globex_user), cancel)
    assert theirs == missing


def test_cancelling_ones_call_of_another_tenants_tool_answers_as_for_a_missing_tool_over_rest(
    acme_only_tool: None, globex_user: User
) -> None:
    """Found: the same over ``POST /api/v1/calls/{id}/cancel/``: 409 "This call is denied" for acme's tool, "This
    call is invalid" for a missing one. Expect: the same answer."""
    client = client_for(globex_user)
    for name in (SECRET, MISSING):
        made = client.post("/api/v1/calls/", {"tool": name, "arguments": {"who": "w"}}, format="json")
        assert made.status_code == 404, made.content
    ids = _own_call_ids(globex_user)

    theirs = client.post(f"/api/v1/calls/{ids[SECRET]}/cancel/", {}, format="json")
    missing = client.post(f"/api/v1/calls/{ids[MISSING]}/cancel/", {}, format="json")

    assert (theirs.status_code, theirs.json()) == (missing.status_code, missing.json())
