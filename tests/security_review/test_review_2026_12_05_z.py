"""Review of 2026-12-05 (z): the interop surfaces driven by real clients (MCP server and client, the adapters).

Each test fails on the reviewed code (main at a0c4d88) and states what was found and what is expected. Driven by
the official ``mcp`` SDK's wire format (raw 2026-07-28 posts, as its client sends them) against the live ASGI app.

Findings:

1. The SDK checks a ``tools/call``'s ``Mcp-Param-*`` headers against the arguments only for the schemas
   ``get_tool_input_schema`` gives it, which it asks on the event loop; toolhub's lookup offered only code tools.
   An accepted remote tool declaring ``x-mcp-header`` was never checked: a header saying ``c-1`` passed whatever
   gateway routes or authorizes on it while the remote server was called with ``c-2``.
2. The authentication wrapper read ``X-Toolhub-Tenant`` as the last of repeated headers (a dict of them) while
   the handlers read the first (Starlette's ``Headers.get``). A member of acme and globex sending both got the
   header schemas of globex (where the tool is denied: no check) and the call made in acme, so the same
   mismatched header reached a code tool unchecked.

Both are closed in ``toolhub.mcp_headers`` / ``toolhub.mcp_caller``: the wrapper works out, in its one thread hop
with the token's user, the schemas of every tool declaring a header (code and remote) that the caller may call,
and the lookup answers from them; the tenant header is read once, repeated fields joined as RFC 9110 says
(``acme, globex`` names no tenant and is refused), and the handlers read that reading.

Checked and found holding (no test here; probe g, h, l, v and the MCP suites hold most as tests):

- ``tools/list`` and the stable pair (``toolhub_find_tools``, ``toolhub_describe_tool``) read only the caller's
  principal (token user, tenant header); a cursor is ignored, nothing else is listed (no resources, prompts).
- ``tools/call`` is authorized for the token's principal; ``tenant``, ``user``, ``user_id``, ``run_id`` in
  ``_meta`` are refused with an error naming the key, ``Tenant`` and ``io.toolhub/tenant`` dropped, never used.
- Sessions: the server is stateless (no ``Mcp-Session-Id`` is issued or read), every request authenticates its own
  token, so there is no session to take over. ``toolhub_cancel_call`` and ``toolhub_call_status`` read
  ``tool_calls_operable_by`` / ``tool_calls_visible_to``: alice's held call is "no call ... among yours" to carol
  (acme) and bob (globex) alike, and stays held.
- Protocol versions: 2024-11-05 to 2025-11-25 are served statelessly; an unknown or the 2026 version without its
  ``_meta`` envelope answers 400 (-32602) and runs nothing. The SDK answers handler crashes "Internal error".
- Outbound: the SDK client follows a redirect only within the endpoint's origin; 301/302/303/307/308 to another
  origin are not followed and no header (``Authorization`` nor a custom ``X-Api-Key``) reaches the target;
  the error names the location without its query and the server by its name.
- Remote tools are governed like code tools (grants, per-tenant credentials, pinned definitions, risk).
- The OpenAI Agents adapter's ``governed_call`` joins an existing call by its derived id without comparing the
  tool (LangGraph's ``_own_call`` does), but the SDK itself refuses a model reusing a completed tool call id in a
  run (``ModelBehaviorError``), so no second tool reads the first one's result; nothing runs unrequested.
"""

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User

from tests.mcp.conftest import live_asgi, token  # noqa: F401 - fixtures
from tests.security_review.test_probe_2026_12_03_g import LOOKUP, EvilServer, accept_offered, evil  # noqa: F401
from toolhub.mcp_client.models import RemoteMcpServer
from toolhub.models import Grant, GrantEffect, Tenant, TenantMembership, ToolCall
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

#: The 2026-07-28 envelope every modern request carries in ``_meta`` (what the SDK client sends).
_ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _post(
    base: str, user: User, name: str, arguments: dict[str, Any], headers: list[tuple[str, str]]
) -> httpx.Response:
    """A 2026-07-28 ``tools/call`` with the given extra headers (a list: repeated names are sent repeated)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": _ENVELOPE},
    }
    sent = [
        ("Authorization", f"Bearer {token(user)}"),
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", name),
        *headers,
    ]
    return httpx.post(f"{base}/mcp", content=json.dumps(body).encode(), headers=sent, timeout=30)


def test_a_remote_tool_declaring_an_mcp_param_header_has_it_checked_against_the_arguments(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    evil: tuple[EvilServer, RemoteMcpServer],  # noqa: F811 - the fixture imported above
    alice: User,
) -> None:
    """Found: alice may call the accepted remote tool ``probeg__lookup``, whose schema mirrors ``q`` into the
    ``Mcp-Param-Q`` header. She sends ``Mcp-Param-Q: c-1`` with ``{"q": "c-2"}``: the SDK got no schema for a remote
    tool (``header_declaring_tools`` read code tools only), checked nothing, and the server was called with c-2.
    Expect: refused before toolhub sees the call (HTTP 400, -32020), as for a code tool; nothing reaches the server.
    """
    fake, server = evil
    fake.tools = [
        {
            **LOOKUP,
            "inputSchema": {**LOOKUP["inputSchema"], "properties": {"q": {"type": "string", "x-mcp-header": "Q"}}},
        }
    ]
    accept_offered(server)

    mismatched = _post(live_asgi, alice, "probeg__lookup", {"q": "c-2"}, [("Mcp-Param-Q", "c-1")])

    assert mismatched.status_code == 400, mismatched.text
    assert mismatched.json()["error"]["code"] == -32020
    assert fake.calls == []
    assert not ToolCall.objects.exists()
    # The check does not refuse the honest call: the header and the argument agree.
    matching = _post(live_asgi, alice, "probeg__lookup", {"q": "c-1"}, [("Mcp-Param-Q", "c-1")])
    assert matching.status_code == 200, matching.text
    assert fake.calls == [("lookup", {"q": "c-1"})]


@pytest.fixture
def payroll(alice: User, other_tenant: Tenant) -> Iterator[None]:
    """alice belongs to acme and globex; a code tool mirroring ``employee`` into a header is denied in globex."""
    TenantMembership.objects.create(user=alice, tenant=other_tenant)
    Grant.objects.create(tool_name="review_z_payroll", tenant=other_tenant, effect=GrantEffect.DENY)
    schema = {
        "type": "object",
        "properties": {"employee": {"type": "string", "x-mcp-header": "Employee"}},
        "required": ["employee"],
    }
    tool = Tool.create(
        "review_z_payroll", "Export one employee's payroll.", schema, lambda arguments: "ok", allow_any=True
    )
    with registry.temporarily(tool):
        yield


def test_a_repeated_tenant_header_does_not_switch_the_mcp_param_check_off(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    payroll: None,
    alice: User,
) -> None:
    """Found: with ``X-Toolhub-Tenant: acme`` and ``X-Toolhub-Tenant: globex`` the wrapper worked out the header
    schemas for globex (the last; the tool is denied there: no schema, no check) while the call was made in acme
    (the first): ``Mcp-Param-Employee: e-1`` with ``{"employee": "e-2"}`` ran ``review_z_payroll`` for e-2.
    Expect: nothing runs; the repeated header names no tenant (one reading, RFC 9110's list ``acme, globex``).
    """
    repeated = [("X-Toolhub-Tenant", "acme"), ("X-Toolhub-Tenant", "globex"), ("Mcp-Param-Employee", "e-1")]

    answer = _post(live_asgi, alice, "review_z_payroll", {"employee": "e-2"}, repeated)

    assert not ToolCall.objects.filter(status="succeeded").exists(), answer.text
    assert "not a member of tenant 'acme, globex'" in answer.text, answer.text
    # Naming acme once, the same mismatch is refused by the SDK's check, and the matching call runs there.
    once = [("X-Toolhub-Tenant", "acme"), ("Mcp-Param-Employee", "e-1")]
    refused = _post(live_asgi, alice, "review_z_payroll", {"employee": "e-2"}, once)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32020, refused.text
    ran = _post(live_asgi, alice, "review_z_payroll", {"employee": "e-1"}, once)
    assert ran.status_code == 200 and '"isError":false' in ran.text, ran.text
    assert list(ToolCall.objects.values_list("tenant", "arguments")) == [("acme", {"employee": "e-1"})]
