"""Review 2026-12-06 (w): the MCP server at the transport level (``/mcp``, streamable HTTP, SDK 2.3, stateless).

Driven against the live ASGI app (``tests/mcp/conftest.py``: uvicorn on a free port) with the official ``mcp`` SDK
client and raw ``httpx`` requests for what the SDK client would not send. Each test fails on the reviewed code
(main at ba19785) and passes after the fix.

Findings:

1. An authenticated ``GET /mcp`` (handshake-era revisions, or no ``MCP-Protocol-Version``) opened the SDK's standalone
   SSE stream, which in stateless mode never carries a message: it sent a ping every 15 s for as long as the client
   held it, with no bound in time or per user, and outlived the token's revocation and the user's deactivation. One
   token holder could pile up connections (file descriptors) until the process accepted no more, console included.
   Now every method but POST answers 405 ``Allow: POST`` (``toolhub.mcp_server._post_only``), as the spec allows a
   server without that stream, and as the SDK already answers a 2026-07-28 ``GET``; so no cap is needed.
2. An unexpected exception in a handler reached a handshake-era client as its text (the SDK's dispatcher answers
   ``{"code": 0, "message": str(exception)}``): a database error's host, user or row values went on the wire. Now a
   server middleware (``toolhub.mcp_server._sanitized_errors``) logs it and answers ``-32603 Internal server
   error``, as the SDK answers a 2026-07-28 request; refusals (``MCPError``) pass unchanged.

Checked and found holding (probes run; no test here, earlier reviews z, cf, dg and probe 05 h hold most as tests):

- ``Origin``: absent is served (non-browser client); a foreign one answers 403, before any body is parsed (after the
  token check: an anonymous one answers 401, which serves nothing either). ``Host`` outside ``ALLOWED_HOSTS`` 421.
  No CORS header on any answer (``OPTIONS`` included), so no ``*`` with credentials.
- ``ALLOWED_HOSTS = ["*"]`` or empty switches the SDK's Host/Origin check off (``_transport_security``). Not fixed:
  the production settings name the host (README), and no browser request is ever authenticated: the token travels
  only in ``Authorization``, which a browser never attaches by itself, and a cross-origin page cannot send it
  without a preflight that gets no CORS answer; a rebinding page holds no token.
- ``MCP-Protocol-Version``: an unknown value answers 400; absent is read as 2025-03-26, as the spec says.
- ``Mcp-Session-Id``: none is issued (stateless), a sent one is ignored (each request is its token's), ``DELETE``
  answers 405: no session another user could reuse, none that outlives a token (checked per request, active flag
  and expiry included).
- ``Accept``: without both JSON and SSE 406 (``*/*`` accepted); ``Content-Type`` other than JSON 400/415.
- JSON-RPC: a batch array 400 running nothing; a notification 202; a body over 4 MiB 413 before parsing (after the
  401); nesting past the parser's recursion limit 400 ``-32700`` (bounded message).
- POST streams are bounded: a followed call ``MCP_CALL_WAIT_SECONDS``, ``toolhub_call_status`` 25 s; both sleep in
  the event loop and hold a thread only for each read (not capped per user as the REST ``?wait=`` is, whose cap
  exists because a wait holds a WSGI worker; noted: each such follow still reads the database once a second).
"""

import json
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.db import OperationalError
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)

_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
_DATABASE_ERROR = 'connection to server at "db.internal" (10.0.0.5), port 5432 failed: FATAL: role "toolhub_prod"'


def test_get_mcp_answers_405_instead_of_holding_an_empty_stream_open(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
) -> None:
    """Found: ``GET /mcp`` with a valid token answered 200 ``text/event-stream`` and stayed open, pinging, without end.
    Expect: 405 with ``Allow: POST`` and a JSON-RPC error body, at once (a foreign ``Origin`` still 403); the SDK
    client (which never GETs) still works.
    """
    headers = {**_HEADERS, "Authorization": f"Bearer {token(alice)}", "MCP-Protocol-Version": "2025-06-18"}
    with httpx.stream("GET", f"{live_asgi}/mcp", headers=headers, timeout=10) as answer:
        status, allow, content_type = answer.status_code, answer.headers.get("allow"), answer.headers["content-type"]
        body = answer.read() if status != 200 else b""
    assert (status, allow, content_type) == (405, "POST", "application/json")
    assert json.loads(body)["error"]["code"] == -32600
    foreign = httpx.get(f"{live_asgi}/mcp", headers={**headers, "Origin": "http://evil.example"}, timeout=10)
    assert foreign.status_code == 403  # the Host and Origin check still comes first

    async def names(client: Client) -> list[str]:
        return [tool.name for tool in (await client.list_tools()).tools]

    assert "toolhub_call_status" in with_client(live_asgi, token(alice), names)


def test_an_unexpected_handler_error_reaches_the_client_only_as_a_generic_error(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: a database error while listing tools answered a 2025-06-18 client ``{"code": 0, "message": "<the
    error's text>"}``, naming the database host and role. Expect: ``-32603 Internal server error``, over a raw
    handshake-era request and the SDK client alike.
    """

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError(_DATABASE_ERROR)

    monkeypatch.setattr("toolhub.mcp_server.listed_tools", failing)
    headers = {**_HEADERS, "Authorization": f"Bearer {token(alice)}", "MCP-Protocol-Version": "2025-06-18"}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()

    answer = httpx.post(f"{live_asgi}/mcp", content=body, headers=headers, timeout=30)

    assert "db.internal" not in answer.text and "toolhub_prod" not in answer.text
    data = next(line for line in answer.text.splitlines() if line.startswith("data:"))
    assert json.loads(data.removeprefix("data:"))["error"] == {"code": -32603, "message": "Internal server error"}

    async def listing(client: Client) -> MCPError:
        with pytest.raises(MCPError) as raised:
            await client.list_tools()
        return raised.value

    refused = with_client(live_asgi, token(alice), listing)
    assert (refused.error.code, refused.error.message) == (-32603, "Internal server error")
