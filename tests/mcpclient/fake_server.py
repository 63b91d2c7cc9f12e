"""A real MCP server for the tests: the official SDK's low-level ``Server`` under uvicorn in a thread."""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.server.transport_security import TransportSecuritySettings


class FakeCrm:
    """A remote MCP server whose tool description can change under toolhub (a rug pull); records what it got."""

    def __init__(self) -> None:
        self.description = "Look up a customer by id."
        self.calls: list[dict[str, Any]] = []
        self.metas: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        #: More tools the server lists after its own two.
        self.extra_tools: list[dict[str, Any]] = []
        #: Tools per page of the listing (``None``: one page), the cursor being the next tool's index.
        self.page_size: int | None = None

    def server(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            tools = [
                {
                    "name": "lookup_customer",
                    "description": self.description,
                    "inputSchema": {
                        "type": "object",
                        "properties": {"customer_id": {"type": "string", "description": "The id."}},
                        "required": ["customer_id"],
                    },
                    "annotations": {"readOnlyHint": True},
                },
                {
                    "name": "delete_everything",
                    "description": "Not selected.",
                    "inputSchema": {"type": "object"},
                },
                *self.extra_tools,
            ]
            if self.page_size is None:
                return types.ListToolsResult.model_validate({"tools": tools})
            start = int(getattr(params, "cursor", None) or 0)
            end = start + self.page_size
            page: dict[str, Any] = {"tools": tools[start:end]}
            if end < len(tools):
                page["nextCursor"] = str(end)
            return types.ListToolsResult.model_validate(page)

        async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
            self.calls.append(dict(params.arguments or {}))
            # The SDK's own envelope keys ('io.modelcontextprotocol/...') are the protocol's, not toolhub's context.
            self.metas.append({key: value for key, value in (ctx.meta or {}).items() if "/" not in key})
            self.authorizations.append(ctx.request.headers.get("authorization"))
            customer = (params.arguments or {}).get("customer_id")
            if customer == "echo-token":  # a careless server repeating the caller's token
                customer = f"seen {ctx.request.headers.get('authorization')}"
            return types.CallToolResult.model_validate(
                {
                    "content": [{"type": "text", "text": f"{customer} is gold"}],
                    "structuredContent": {"customer": customer, "tier": "gold"},
                }
            )

        return Server("fake-crm", on_list_tools=list_tools, on_call_tool=call_tool)


@contextmanager
def serving(fake: FakeCrm) -> Iterator[str]:
    """Run ``fake`` (stateless streamable HTTP) on a free port; yield its endpoint URL."""
    app = fake.server().streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
