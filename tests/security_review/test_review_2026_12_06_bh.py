"""Review of 2026-12-06 (bh): toolhub as a client of hostile remote MCP servers.

Each test fails on the reviewed code (main at bbb66f4) and states what was found and what is expected.

Findings:

1. An input schema whose ``$ref`` resolves only to itself (``{"$defs": {"a": {"$ref": "#/$defs/a"}}}``, or a
   cycle of references with no schema in between) passed ``checked_object_schema`` (every reference resolves),
   so an administrator could accept it; validating a model's arguments then recursed until ``RecursionError``.

2. A schema nested 96 objects deep (still under the MCP SDK's JSON depth limit) made ``Tool.create`` raise
   ``RecursionError`` rather than ``ToolDefinitionError``; the remote tool provider caught only the latter, and
   its caller took the ``RecursionError`` (a ``RuntimeError``) for "no database": one accepted tool of one
   server took every remote tool of every server out of the registry. 2,000 ``$ref`` s each to the next (flat
   JSON) were accepted though validation recurses through them. Schemas now nest at most ``MAX_SCHEMA_DEPTH``
   (64) schemas deep, ``$ref`` chains included, checked without recursion; the provider leaves out a tool whose
   build recurses too deeply, alone.

Checked and holding (no test here):

- Secrets: a JSON-RPC error (``MCPError``) from ``tools/call`` echoing the ``Authorization`` header, 5,000
  characters long, reaches the call's error and the server log as ``Bearer [secret]``; an ``isError`` result and
  ``structuredContent`` echoing it likewise (existing tests). The error names the server, not its URL.
- Server-to-client requests: the SDK ``Client`` is made without sampling, elicitation or roots callbacks, so
  its defaults answer each with an error; a streamable-HTTP stateless server has no back-channel at all
  (``NoBackChannelError``) and the call still succeeds with nothing sampled.
- ``structuredContent`` not matching the listed ``outputSchema``, or missing where one is declared (an image or a
  resource link only): the SDK refuses it; the call fails with a bounded message, nothing kept. Without an
  output schema, only text blocks are kept (images, resource links, embedded resources are dropped).
- Rug pull: the call lists the tools in the same session right before ``tools/call`` and sends nothing unless the
  first listing of the name hashes to the accepted pin (a name listed twice with two definitions fails closed).
- Names: a listed name too long, or one confusable with a held name (``a.b``/``A-b``/zero-width becoming
  ``_``) is skipped; code tools win over remote ones; a remote ``tools`` keeps its name over the facade.
- Two tenants on one server: each call's headers come from the call row's tenant; one SDK session per call,
  none shared; ``_meta`` never carries reserved or secret-looking keys.
- Floods: progress and log notifications are ignored by the client and bounded by the per-use byte cap and
  the session timeout.
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


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    node = schema
    for _ in range(depth):
        node["properties"] = {"x": {"type": "object"}}
        node = node["properties"]["x"]
    return schema


def _chain(length: int) -> dict[str, Any]:
    """References each to the next, ``length`` long: flat as JSON (the wire's depth limit does not see it)."""
    defs: dict[str, Any] = {f"a{i}": {"$ref": f"#/$defs/a{i + 1}"} for i in range(length)}
    defs[f"a{length}"] = {"type": "object"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": defs}


@pytest.mark.parametrize("schema", [_nested(100), _chain(2000)], ids=["nested", "chain"])
def test_a_schema_nested_too_deeply_is_refused_as_no_schema(schema: dict[str, Any]) -> None:
    """Found: a schema nested 100 objects deep, or 2,000 references each to the next, made ``Tool.create`` raise
    ``RecursionError``, not ``ToolDefinitionError``, so callers that leave out an invalid tool did not catch it.

    Expect: ``ToolDefinitionError`` naming the depth; a schema of ordinary depth is still built.
    """
    with pytest.raises(ToolDefinitionError, match="nested|references"):
        Tool.create("crm__deep", "Deep.", schema, lambda arguments: arguments, allow_any=True)
    assert Tool.create("crm__ok", "Ok.", _nested(20), lambda arguments: arguments, allow_any=True).validate_arguments(
        {"x": {}}
    ) == {"x": {}}


@pytest.mark.parametrize("schema", [_nested(96), _chain(2000)], ids=["nested", "chain"])
def test_one_accepted_deeply_nested_schema_does_not_take_every_remote_tool_away(
    schema: dict[str, Any], tenant: Tenant, operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: the provider left out only a tool raising ``ToolDefinitionError``; a schema nested 96 deep (under
    the wire's JSON depth limit) raised ``RecursionError`` out of its load, which the provider took for "no
    database": every remote tool of every server vanished (and the load ran again on each registry lookup).
    2,000 chained references built, and was offered, though validation would recurse through them.

    Expect: the deep tool alone is left out; the server's other accepted tool stays callable.
    """
    fake = FakeCrm()
    fake.extra_tools = [{"name": "deep", "description": "Deep.", "inputSchema": schema}]
    monkeypatch.setenv("CRM_TOKEN_ACME", "token-acme")
    with serving(fake) as url:
        server = RemoteMcpServer.objects.create(
            name="crm", url=url, risk="low", select_names=["lookup_customer", "deep"]
        )
        RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="CRM_TOKEN_ACME")
        remote_server_sync(server=server, actor="operator:operator")
    for row in RemoteMcpTool.objects.all():
        remote_tool_accept(row=row, actor="operator:operator", user=operator)

    assert registry.get("crm__deep") is None
    assert registry.get("crm__lookup_customer") is not None
    assert "crm__lookup_customer" in registry.names()
