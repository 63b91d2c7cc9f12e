"""Review of 2026-12-06 (bh): toolhub as a client of hostile remote MCP servers.

Each test fails on the reviewed code (main at bbb66f4) and states what was found and what is expected.

Findings:

1. An input schema whose ``$ref`` resolves only to itself (``{"$defs": {"a": {"$ref": "#/$defs/a"}}}``, or a
   cycle of references with no schema in between) passed ``checked_object_schema`` (every reference resolves),
   so an administrator could accept it; validating a model's arguments then recursed until ``RecursionError``.

Checked and holding (no test here): see the report.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.helpers import RequestCall
from tests.mcpclient.fake_server import FakeCrm, serving
from toolhub.exceptions import ToolDefinitionError
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.services import remote_server_sync, remote_tool_accept
from toolhub.models import Tenant
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

LOOPS = [
    {"$defs": {"a": {"$ref": "#/$defs/a"}}},
    {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}},
]


@pytest.mark.parametrize("defs", LOOPS)
def test_a_schema_whose_reference_loops_to_itself_is_no_schema(defs: dict[str, Any]) -> None:
    """Found: a ``$ref`` cycle with no schema in between was accepted; validation recursed to ``RecursionError``.

    Expect: the tool is refused when built (``ToolDefinitionError``), as a dangling reference is.
    """
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, **defs}
    with pytest.raises(ToolDefinitionError, match="refers to itself"):
        Tool.create("crm__loop", "Loops.", schema, lambda arguments: arguments, allow_any=True)


def test_a_recursive_type_through_properties_is_still_a_schema() -> None:
    """A tree (a node whose children are nodes) is a real recursive type, not a loop: still accepted."""
    schema = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/node"}},
        "$defs": {
            "node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
        },
    }
    tool = Tool.create("crm__tree", "Trees.", schema, lambda arguments: arguments, allow_any=True)
    assert tool.validate_arguments({"root": {"kids": [{"kids": []}]}}) == {"root": {"kids": [{"kids": []}]}}


def test_an_accepted_remote_tool_with_a_looping_schema_is_left_out(
    tenant: Tenant, operator: User, alice: User, request_call: RequestCall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: a server listing a schema whose reference loops had it accepted and offered; a call crashed the
    boundary's validation with ``RecursionError``.

    Expect: the tool is unusable (left out of the registry as any invalid schema is); a call is refused cleanly.
    """
    fake = FakeCrm()
    fake.extra_tools = [
        {
            "name": "loop",
            "description": "Loops.",
            "inputSchema": {
                "type": "object",
                "properties": {"x": {"$ref": "#/$defs/a"}},
                "$defs": {"a": {"$ref": "#/$defs/a"}},
            },
        }
    ]
    monkeypatch.setenv("CRM_TOKEN_ACME", "token-acme")
    with serving(fake) as url:
        server = RemoteMcpServer.objects.create(name="crm", url=url, risk="low", select_names=["loop"])
        RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="CRM_TOKEN_ACME")
        remote_server_sync(server=server, actor="operator:operator")
        remote_tool_accept(row=RemoteMcpTool.objects.get(), actor="operator:operator", user=operator)

        call = request_call("crm__loop", {"x": {}}, alice, tenant="acme")

    assert call.status == "invalid" and "RecursionError" not in (call.error or ""), call.error
    assert registry.get("crm__loop") is None
    assert fake.calls == []
