"""Review an (2026-12-06): what keeps web and Celery workers from being held or exhausted.

Findings:
- A remote MCP server's name resolved past the use's deadline: the guarded async backend resolved it on a thread
  that a cancel could not leave (anyio's ``run_sync`` waits for its thread), so a hanging resolver held the admin's
  "Fetch the tools they offer now" request (a web worker) or the call's worker for as long as it hung, whatever
  the server's timeout.
- Under ASGI (uvicorn, the way ``/mcp`` is served) Django read a request's whole body, spooled to disk, before any
  middleware ran: the ``DATA_UPLOAD_MAX_MEMORY_SIZE`` check on ``Content-Length`` came after every byte was read,
  and a chunked body (no length) was never bounded at all. Anyone, unauthenticated, could make a worker read and
  store gigabytes. (WSGI reads only the declared length; the SDK bounds ``/mcp`` itself at 4 MiB.)
- MCP's waits (``toolhub_call_status`` with ``wait``, a ``tools/call`` following a queued call) took none of the
  user's ``CALL_WAITS_PER_USER`` slots: one user could keep hundreds open, each polling through the few threads every
  MCP request shares (authentication too). They now take the ``?wait=`` slots, given back on a cancel too.

What holds:
- ``?wait=`` slots: per user (a second token is the same user), released in ``finally`` (an exception in the wait
  frees it); a wait past the cap answers at once. MCP's waits sleep in the event loop and hold a thread only per
  read (no worker, no connection held per wait). Only the REST ``?wait=`` follows a call on a web worker.
- Throttled scopes (runs, decisions, calls) all need authentication (permissions run before throttles), so DRF's
  ``X-Forwarded-For`` ident is never used for them; the login guard reads it only behind ``TRUSTED_PROXY_COUNT``.
- The MCP server answers every method but POST with 405 (no standalone GET stream); unexpected errors are
  "Internal server error"; its bodies are bounded by the SDK (``RequestBodyLimitMiddleware``, 4 MiB).
- A remote MCP server that accepts the connection and never answers is given up at the use's timeout (all of
  initialize, list and call under one ``fail_after``); answers are cut at the use's byte tally.
- Webhook posts and model calls run under ``run_within`` (name resolution, TLS and reads inside the deadline).
- WSGI bodies: Django reads only ``Content-Length`` bytes; the middleware refuses a declared length over the limit
  before reading a byte.
"""

import asyncio
import contextlib
import json
import threading
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from mcp import Client

import toolhub.outbound_addresses as outbound
from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - a fixture among them
from tests.tenancy.conftest import AcmeData
from toolhub.api.wait_slots import wait_slot
from toolhub.mcp_client.remote import RemoteServerError, remote_tools


def test_remote_mcp_use_gives_up_at_its_timeout_while_the_name_still_resolves(monkeypatch: Any) -> None:
    """Found: with a resolver hanging 5 s, a remote server's tools listed with a 0.5 s timeout took the whole 5 s
    (then failed on the resolution). Expect: the use ends at its timeout, said as a timeout."""
    release = threading.Event()

    def hanging(host: str, port: int) -> list[str]:
        release.wait(5)
        raise OSError("the resolver gave up")

    monkeypatch.setattr(outbound, "_resolved", hanging)
    started = time.monotonic()
    try:
        with pytest.raises(RemoteServerError, match="did not answer within 0.5 s"):
            remote_tools("http://mcp.example.test/mcp", name="slow-dns", headers={}, timeout=0.5)
        assert time.monotonic() - started < 2.5
    finally:
        release.set()


def _send_body(path: str, chunks: list[bytes], headers: list[tuple[bytes, bytes]]) -> tuple[int, int, bytes]:
    """POST ``chunks`` to the ASGI application at ``path``: (status answered, body bytes it read, its answer)."""
    from toolhub.asgi import application

    read = 0
    sent: list[dict[str, Any]] = []
    left = list(chunks)

    async def receive() -> dict[str, Any]:
        nonlocal read
        if not left:
            await asyncio.sleep(3600)  # the client waits for the answer; nothing more to read
        chunk = left.pop(0)
        read += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": bool(left)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
    }

    async def run() -> None:
        await asyncio.wait_for(application(scope, receive, send), timeout=20)

    asyncio.run(run())
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, read, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


@pytest.mark.django_db(transaction=True)
@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=10_000)
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_asgi_stops_reading_a_body_over_the_limit(declared: bool) -> None:
    """Found: under ASGI an anonymous POST of 1 MB to ``/api/v1/calls/`` was read to its end (spooled) before the
    413 (with ``Content-Length``) or the 401 (chunked: never bounded). Expect: 413 once the limit is passed, the
    rest never read."""
    chunk, chunks = b"x" * 4096, 256
    headers = [(b"content-length", str(len(chunk) * chunks).encode())] if declared else []
    status, read, answer = _send_body("/api/v1/calls/", [chunk] * chunks, headers)
    assert status == 413
    assert read <= 10_000 + len(chunk)
    assert b"DATA_UPLOAD_MAX_MEMORY_SIZE" in answer


@pytest.mark.django_db(transaction=True)
@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=10_000)
def test_asgi_body_within_the_limit_reaches_the_view_whole(globex_user: User) -> None:
    """Expect: a body under the limit, sent in two parts, is read by the view as sent (the tool it names is looked
    up)."""
    body = json.dumps({"tool": "no_such_tool_an", "arguments": {"pad": "y" * 5000}}).encode()
    auth = [(b"authorization", f"Token {token(globex_user)}".encode()), (b"content-length", str(len(body)).encode())]
    status, read, answer = _send_body("/api/v1/calls/", [body[:3000], body[3000:]], auth)
    assert (status, read) == (404, len(body)), answer
    assert b"no_such_tool_an" in answer


@pytest.mark.django_db(transaction=True)
def test_an_mcp_status_wait_past_the_users_wait_cap_answers_at_once(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    acme: AcmeData,
) -> None:
    """Found: with both of alice's wait slots held (two ``?wait=`` long-polls), ``toolhub_call_status`` with
    ``wait: 3`` still waited its 3 s: MCP's waits were never counted, so one user could keep hundreds open, their
    reads filling the few threads every MCP request shares. Expect: past the cap it answers at once, as REST does,
    and the slots it takes are given back."""
    alice = acme.external_call.user
    call_id = str(acme.external_call.pk)

    async def status(client: Client) -> tuple[float, str]:
        started = time.monotonic()
        result = await client.call_tool("toolhub_call_status", {"call_id": call_id, "wait": 3})
        return time.monotonic() - started, result.content[0].text  # type: ignore[union-attr]

    with contextlib.ExitStack() as held:
        assert all(held.enter_context(wait_slot(alice.pk)) for _ in range(2))
        elapsed, text = with_client(live_asgi, token(alice), status)
    assert elapsed < 1.5 and call_id in text

    elapsed, _ = with_client(live_asgi, token(alice), status)  # slots free: it waits
    assert elapsed >= 2.5
    with wait_slot(alice.pk) as first, wait_slot(alice.pk) as second:
        assert first and second  # the MCP wait gave its slot back
