"""Probe of built-in tools, remote MCP servers as clients, roles and run-time disclosure (2026-12-04, f).

Two findings, both in the remote MCP client (``toolhub/mcp_client``):

1. A remote server's endpoint URL (platform configuration no tenant's staff may read, see
   ``test_provider_and_remote_server_pages_show_tenant_staff_no_endpoint_or_key_name``) is written into the
   error of a failing call: the member who made it, the model, the tenant's staff and the audit trail read it,
   with whatever key the URL carries. A plain member provokes it at will with arguments the server answers
   with a JSON-RPC error.
2. A server that echoes the caller's credential in its ``tools/list`` answer (a tool description saying who
   you are) has the token stored in clear in ``RemoteMcpTool.current_definition`` (the database, the admin's
   diff) as soon as any tenant's call lists the tools, and in the append-only audit trail once accepted. The
   README promises the value never reaches the database, the admin or the audit trail, echoes included.

Both are closed: errors name the server by its name (the URL and the detail go to the server log), and a
listed definition is kept (and hashed) without the credential, so it never matches what the server lists.
"""

import json
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from django.contrib.auth.models import User
from mcp.server import Server
from mcp.shared.exceptions import MCPError

from tests.helpers import RequestCall
from tests.mcpclient.fake_server import FakeCrm, serving
from tests.security_review.conftest import client_for
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.services import remote_server_sync, remote_tool_accept
from toolhub.models import AuditEvent, Tenant

TOOL = "crm__lookup_customer"
URL_KEY = "urlkey-7f3a9c1e5b"
TOKEN = "token-acme-5d2e8b7c4a"


class _CrmServer(FakeCrm):
    """One tool; ``call_tool`` refuses an unknown customer with a JSON-RPC error; ``echo`` puts the caller's
    Authorization header into the tool's description (a careless 'you are logged in as ...')."""

    echo = False

    def server(self) -> Server[Any]:
        fake = self

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            description = fake.description
            if fake.echo:
                description += f" (you are {ctx.request.headers.get('authorization')})"
            return types.ListToolsResult.model_validate(
                {
                    "tools": [
                        {
                            "name": "lookup_customer",
                            "description": description,
                            "inputSchema": {"type": "object", "properties": {"customer_id": {"type": "string"}}},
                        }
                    ]
                }
            )

        async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
            raise MCPError(-32602, "unknown customer id")

        return Server("probe-crm", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.fixture
def crm_server(tenant: Tenant, operator: User, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[_CrmServer, str]]:
    """The server configured by the platform (its URL carrying a key), acme's credential, the tool accepted."""
    fake = _CrmServer()
    with serving(fake) as url:
        monkeypatch.setenv("CRM_TOKEN_ACME", TOKEN)
        server = RemoteMcpServer.objects.create(name="crm", url=f"{url}?key={URL_KEY}", risk="low")
        RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="CRM_TOKEN_ACME")
        remote_server_sync(server=server, actor="operator:platform")
        remote_tool_accept(row=RemoteMcpTool.objects.get(tool_name=TOOL), actor="operator:platform", user=operator)
        yield fake, url


def test_a_members_failing_remote_call_shows_nobody_the_servers_endpoint_or_its_key(
    crm_server: tuple[_CrmServer, str], alice: User, request_call: RequestCall
) -> None:
    """alice (a plain member of acme) calls the remote tool with a customer id the server refuses (a JSON-RPC
    error). Her call fails: its error, what she reads through the API (and what the model is told) and the
    audit trail name the platform's endpoint, key included:
    "The MCP server at http://127.0.0.1:<port>/mcp?key=urlkey-... failed: ExceptionGroup: ...".
    Same for an unreachable server or a timeout (toolhub/mcp_client/remote.py, ``_run``)."""
    _, url = crm_server
    host_and_path = url.split("://", 1)[1]

    call = request_call(TOOL, {"customer_id": "nobody"}, alice, tenant="acme")

    assert call.status == "failed"
    answer = client_for(alice).get(f"/api/v1/calls/{call.id}/").content.decode()
    stored = json.dumps(list(AuditEvent.objects.filter(call_id=call.id).values_list("data", flat=True)))
    for where, text in (("call.error", call.error), ("API", answer), ("audit", stored)):
        assert URL_KEY not in text, (where, call.error)
        assert host_and_path not in text, (where, call.error)


def test_a_credential_echoed_in_the_servers_tool_list_is_never_stored(
    crm_server: tuple[_CrmServer, str], alice: User, operator: User, request_call: RequestCall
) -> None:
    """After acceptance the server starts echoing the caller's Authorization header in the tool's description.
    alice's next call lists the tools, sees the change and quarantines the tool (right), but the offered
    definition is stored as received: acme's token in clear in the database and on the admin's diff, then in
    the append-only audit trail (remote_mcp.tool_accepted's diff) when an administrator accepts the change,
    and from there in the description every tenant's model and catalogue read. A call of globex would store
    globex's token the same way (toolhub/mcp_client/provider.py ``_call_remote`` -> services ``_record_seen``;
    ``remote_server_sync`` likewise)."""
    fake, _ = crm_server
    fake.echo = True

    call = request_call(TOOL, {"customer_id": "c-1"}, alice, tenant="acme")

    assert call.status == "failed" and "quarantined" in call.error
    row = RemoteMcpTool.objects.get(tool_name=TOOL)
    assert TOKEN not in json.dumps(row.current_definition), row.current_definition
    remote_tool_accept(row=row, actor="operator:platform", user=operator)
    audit = json.dumps(list(AuditEvent.objects.values_list("data", flat=True)))
    assert TOKEN not in audit
