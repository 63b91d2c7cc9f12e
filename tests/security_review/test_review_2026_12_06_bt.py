"""Review 2026-12-06 (bt): a review of the reviews of ``toolhub.asgi_body``, ``toolhub.api.wait_slots`` and
``toolhub.api.sessions`` (reviews an, ax, ay), adversarially.

Findings (each fails on the code as found, passes with the fix):

1. A wait slot lived ``CALL_WAIT_MAX_SECONDS`` + 60 s, but MCP's followed ``tools/call`` holds its slot for
   ``MCP_CALL_WAIT_SECONDS``, which is not cut to it: with a follow longer than the REST cap plus the spare, the slot
   expired under the wait still holding it, and the user took another, past ``CALL_WAITS_PER_USER``. A slot now
   lives as long as the longest wait that can hold it, plus the spare.
2. A WebSocket handshake (any path, ``/mcp`` too, no credentials) went to Django, which serves HTTP only and raised:
   with ``websockets`` installed (uvicorn then takes handshakes) anyone had a server error and its traceback logged
   per handshake. ``toolhub.asgi`` now refuses a handshake (403) before either app sees it.

Checked and holds:

- ``toolhub.asgi_body``: the bytes read are counted whatever ``Content-Length`` says (a smaller, negative, repeated or
  malformed one, or one beside ``Transfer-Encoding: chunked``); multipart bodies are bounded whole (no route takes a
  file; WSGI refuses the same declared lengths); ``DATA_UPLOAD_MAX_MEMORY_SIZE = None`` is Django's own "no bound"
  (settings never set it from the environment); the lifespan goes to the MCP app only. ``/mcp`` is bounded by the
  SDK (4 MiB, declared and counted) after the token check, which reads no body (401 unread).
- ``toolhub.api.wait_slots``: slots are taken with ``add`` (atomic in locmem and Redis, the only backends settings
  build), keyed per user (a user's two channels and tokens share them; one user cannot take another's, so one user
  cannot block a tenant); given back in ``finally`` on an exception, and shielded on a cancel (ax); ``?wait=nan``,
  ``inf`` and negatives are refused; every wait is cut (REST and ``toolhub_call_status`` to
  ``CALL_WAIT_MAX_SECONDS``, the follow to ``MCP_CALL_WAIT_SECONDS``).
- ``ConsoleSessionAuthentication``: a superuser who is not staff, an inactive user and a demoted one are refused
  (401); an unsafe method with a session and no CSRF token is 403, also beside a non-``Token`` ``Authorization``
  header; a valid token beside a session authenticates the token's user (a cross-site page cannot set the header);
  a password change ends the other sessions (session auth hash); MCP takes no cookie.
"""

import asyncio
import threading
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from mcp import Client

import toolhub.api.wait_slots as wait_slots
import toolhub.pipeline as pipeline
from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - a fixture among them
from toolhub.api.wait_slots import wait_slot
from toolhub.celery import app as celery_app
from toolhub.models import CallStatus, Grant, ToolCall


@pytest.mark.django_db(transaction=True)
def test_an_mcp_follow_longer_than_the_rest_cap_keeps_its_slot(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
    settings: Any,
    monkeypatch: Any,
) -> None:
    """Found: with ``CALL_WAIT_MAX_SECONDS`` 1 and ``MCP_CALL_WAIT_SECONDS`` 4 (the spare set to 0 to keep the test
    short; it is 60 s), the slot a followed ``tools/call`` took expired after 1 s: 2.5 s into the follow alice's only
    slot was free again, a second wait held beside it. Expect: the slot stays taken for the whole follow."""
    settings.TOOLHUB = {
        **settings.TOOLHUB,
        "CALL_WAIT_MAX_SECONDS": 1,
        "MCP_CALL_WAIT_SECONDS": 4,
        "CALL_WAITS_PER_USER": 1,
    }
    monkeypatch.setattr(wait_slots, "_SLOT_SPARE_SECONDS", 0)
    celery_app.conf.task_always_eager = False  # a worker's call, not run here (conftest's _celery_mode restores it)
    monkeypatch.setattr(pipeline, "dispatch_call", lambda call: None)  # and no worker: it stays queued
    Grant.objects.create(tool_name="record_effect", user=alice)
    answered: list[str] = []

    async def call(client: Client) -> None:
        result = await client.call_tool("record_effect", {"note": "followed"})
        answered.append(result.content[0].text)  # type: ignore[union-attr]

    follow = threading.Thread(target=with_client, args=(live_asgi, token(alice), call))
    started = time.monotonic()
    follow.start()
    try:
        time.sleep(2.5)
        assert ToolCall.objects.get().status == CallStatus.QUEUED
        with wait_slot(alice.pk) as free:
            second_wait = free
    finally:
        follow.join(15)
    assert answered and time.monotonic() - started >= 3.5  # the follow ran its 4 s
    assert not second_wait, "the follow's slot expired under it: a second wait was let in"


@pytest.mark.parametrize("path", ["/api/v1/calls/", "/mcp"])
def test_a_websocket_handshake_is_refused_not_a_server_error(path: str) -> None:
    """Found: a WebSocket handshake (any path, no credentials; uvicorn takes them with ``websockets`` installed) went
    to Django, which raised ``ValueError: Django can only handle ASGI/HTTP connections``: a server error and its
    traceback logged for each one anyone sent. Expect: the handshake is refused (``websocket.close``, a 403), nothing
    raised."""
    from toolhub.asgi import application

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "websocket",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "scheme": "ws",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
        "subprotocols": [],
    }
    asyncio.run(asyncio.wait_for(application(scope, receive, send), timeout=10))
    assert [message["type"] for message in sent] == ["websocket.close"]
