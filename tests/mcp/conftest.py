"""Fixtures of the MCP tests: a live server, an SDK client on it, and a user of another tenant."""

import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest
import uvicorn
from django.contrib.auth.models import User
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from rest_framework.authtoken.models import Token

from toolhub.api.keys import api_key_issue, key_digest
from toolhub.asgi import build_application
from toolhub.models import Tenant, TenantMembership


@pytest.fixture
def live_asgi() -> Iterator[str]:
    """toolhub's ASGI app (Django + /mcp) under uvicorn on a free port; yields its base URL."""
    yield from serve_asgi()


def serve_asgi(root_path: str = "", **options: Any) -> Iterator[str]:
    """Serve toolhub's ASGI app under uvicorn (with ``--root-path`` when given, and uvicorn's other ``options``) until
    the generator is closed."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(build_application(), lifespan="on", log_level="warning", root_path=root_path, **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)
    sock.close()


#: The keys issued here, by their stored digest: the table holds no key, so a user's token is answered from here.
_issued: dict[str, str] = {}


def token(user: User) -> str:
    """``user``'s API key: the one issued earlier in this test (same stored digest), else a new one."""
    stored = Token.objects.filter(user=user).values_list("key", flat=True).first()
    if stored is not None and stored in _issued:
        return _issued[stored]
    Token.objects.filter(user=user).delete()
    key = api_key_issue(user)
    _issued[key_digest(key)] = key
    return key


def with_client(
    base: str, key: str | None, body: Callable[[Client], Awaitable[Any]], scheme: str = "Bearer", **options: Any
) -> Any:
    """Run ``body`` with an SDK client connected to the live server's /mcp with ``key``."""

    async def main() -> Any:
        headers = {"Authorization": f"{scheme} {key}"} if key else {}
        async with create_mcp_http_client(headers=headers) as http:
            async with Client(streamable_http_client(f"{base}/mcp", http_client=http), **options) as client:
                return await body(client)

    return anyio.run(main)


def refused_call(base: str, user: User, name: str, arguments: dict[str, Any]) -> MCPError:
    """The error ``tools/call`` of ``name`` answers ``user`` over the SDK client."""

    async def body(client: Client) -> MCPError:
        with pytest.raises(MCPError) as raised:
            await client.call_tool(name, arguments)
        return raised.value

    return with_client(base, token(user), body)


@pytest.fixture
def bob(other_tenant: Tenant) -> User:
    """A user of another tenant."""
    user = User.objects.create_user("bob", "bob@example.com", "bob-password")
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    return user
