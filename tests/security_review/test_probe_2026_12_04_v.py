"""Probe of 2026-12-04 (v): resource exhaustion and unbounded work by a logged-in user, a tenant's staff or a model.

Looked at: the API's page sizes (``NewestFirstCursorPagination``, ``max_page_size`` 500, on every list), the filters,
the nested lists of runs, approvals and sagas, the admin's lists, exports and "Verify now" (rate-limited per tenant),
the run API (context bound ``MAX_RUN_CONTEXT_BYTES``, the tool-call budget counting invalid calls too), the
blackboard (``MAX_ENTRIES_PER_RUN``, ``MAX_VALUE_BYTES``), webhooks (bounded attempts, backoff, leases), MCP's
discovery tools (query and ``max_results`` bounded), decision comments (2,000 characters on the API and the desk)
and request bodies (Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` on REST, the SDK's 4 MB on MCP).

Two bounds were found missing, each measured on this 2-core machine:

- ``JSONBodyCheckMiddleware`` decodes and walks every JSON body *before* authentication: an anonymous client
  spends over a second of the server's CPU per 2.4 MB request, on any URL, with no throttle.
- MCP's ``toolhub_call_status`` waits (up to 25 s) with ``time.sleep`` in a thread of the event loop's default
  executor, which every MCP request shares (``min(32, cpus + 4)`` threads: 6 here), token authentication included:
  one user's handful of concurrent waits stalls the MCP server for every other user.
"""

import os
import time
from typing import Any

import anyio
import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client as DjangoClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.mcp.conftest import live_asgi, token  # noqa: F401 - live_asgi is a fixture
from toolhub.models import Grant, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


# --- JSON bodies checked before authentication ---------------------------------------------------------------


def _many_empty_lists(size: int) -> str:
    """A JSON body of about ``size`` bytes: one list of empty lists (``[[],[],...]``), well within every limit."""
    return "[" + ",".join(["[]"] * (size // 3)) + "]"


def test_an_anonymous_json_body_is_not_decoded_and_walked_before_authentication(db: None) -> None:
    """Found: ``JSONBodyCheckMiddleware`` (toolhub/api/parsers.py) runs ``StorableJSONParser`` on every
    ``application/json`` body, before ``AuthenticationMiddleware`` and any view: it measures the nesting on the raw
    text, decodes it and walks every value with ``json_storage_problem``. A 2.4 MB body (under
    ``DATA_UPLOAD_MAX_MEMORY_SIZE``) of ``[[],[],...]`` sent by nobody in particular to ``POST /api/v1/calls/`` took
    1.3 s here before the 403 (a body of three bytes: 1 ms); the same on ``/admin/login/``, any URL. No login, no
    throttle: a few such requests a second occupy every web worker.
    Expect: a request nobody authenticated is answered without decoding its body (the check belongs where a view
    reads the body: DRF's parser runs after authentication), in well under 0.3 s.
    """
    body = _many_empty_lists(2_400_000)
    assert len(body) < django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    client = DjangoClient()
    client.post("/api/v1/calls/", "[]", content_type="application/json")  # warm up URL resolution and imports

    timings = []
    for _ in range(2):
        started = time.monotonic()
        response = client.post("/api/v1/calls/", body, content_type="application/json")
        timings.append(time.monotonic() - started)
        assert response.status_code in (401, 403)
    assert not ToolCall.objects.exists()
    assert min(timings) < 0.3, f"an anonymous 2.4 MB JSON body took {min(timings):.2f} s to refuse"


# --- MCP: waits hold the shared threads ----------------------------------------------------------------------


@pytest.fixture
def mcp_tokens(settings: Any, alice: User, carol: User) -> tuple[str, str]:
    """alice may call ``risky_effect`` (held for approval), carol ``record_effect``; their API tokens."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    Grant.objects.create(tool_name="risky_effect", user=alice)
    Grant.objects.create(tool_name="record_effect", user=carol)
    return token(alice), token(carol)


def test_one_users_status_waits_do_not_stall_the_mcp_server_for_others(
    live_asgi: str,  # noqa: F811 - the fixture
    mcp_tokens: tuple[str, str],
) -> None:
    """Found: ``toolhub_call_status {"wait": <up to 25>}`` runs ``_status_sync`` through ``_in_thread``
    (toolhub/mcp_server.py: ``sync_to_async(thread_sensitive=False)``, the event loop's default executor, at most
    ``min(32, cpus + 4)`` threads, 6 here), where ``direct.call_wait`` sleeps (``time.sleep``) until the call settles
    or the wait ends. Every MCP request needs that same pool: token authentication (``_token_user``), ``tools/list``,
    every ``tools/call``. alice (acme) sent 7 concurrent status waits of 4 s on her call held for approval (nothing
    throttles the status tool); carol's ``tools/list``, sent a second later, took 3.3 s instead of milliseconds, and
    with waits of 25 s renewed as they end, MCP answers no one.
    Expect: a caller's waits do not hold the threads the others' requests need (wait with ``anyio.sleep`` between
    short reads in a thread, or bound the waits a user may hold at once): carol is answered within 1.5 s.
    """
    alice_token, carol_token = mcp_tokens
    waiters = min(32, (os.cpu_count() or 1) + 4) + 1  # one more than the default executor's threads

    async def session(key: str) -> Any:
        return create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})

    async def main() -> float:
        async with await session(alice_token) as http:
            async with Client(streamable_http_client(f"{live_asgi}/mcp", http_client=http)) as client:
                held = await client.call_tool("risky_effect", {"note": "held for an operator"})
        assert held.meta is not None
        call_id = held.meta["io.toolhub/call"]["id"]
        assert held.meta["io.toolhub/call"]["status"] == "pending_approval"
        took: list[float] = []

        async def wait_on_the_held_call() -> None:
            async with await session(alice_token) as http:
                async with Client(streamable_http_client(f"{live_asgi}/mcp", http_client=http)) as client:
                    await client.call_tool("toolhub_call_status", {"call_id": call_id, "wait": 4})

        async def carol_lists() -> None:
            await anyio.sleep(1.0)
            started = time.monotonic()
            async with await session(carol_token) as http:
                async with Client(streamable_http_client(f"{live_asgi}/mcp", http_client=http)) as client:
                    listed = await client.list_tools()
            took.append(time.monotonic() - started)
            assert "record_effect" in {tool.name for tool in listed.tools}

        async with anyio.create_task_group() as group:
            for _ in range(waiters):
                group.start_soon(wait_on_the_held_call)
            group.start_soon(carol_lists)
        return took[0]

    carol_took = anyio.run(main)
    assert carol_took < 1.5, f"carol's tools/list took {carol_took:.2f} s while alice's status waits held the threads"
