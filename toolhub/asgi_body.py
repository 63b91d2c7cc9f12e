"""Bound a request body under ASGI before Django reads it: ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes at most.

Django's ASGI handler reads the whole body (spooled to disk past ``FILE_UPLOAD_MAX_MEMORY_SIZE``) before any
middleware runs, so ``toolhub.middleware``'s check of the declared ``Content-Length`` came after every byte was
read, and a chunked body (no length) was never bounded: anyone, unauthenticated, could make a worker read and store
gigabytes. Under WSGI the server reads only the declared length, and ``/mcp`` has the SDK's own bound.
Here a declared length over the limit is refused unread, and a body is read only up to the limit (413 past it).
"""

from typing import Any

from django.conf import settings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolhub.api.error_pages import body_too_big
from toolhub.asgi_paths import route_path
from toolhub.middleware import API_PREFIX
from toolhub.response_headers import answer_headers

__all__ = ["bounded_body"]


def bounded_body(app: ASGIApp) -> ASGIApp:
    """``app`` behind the body bound: it gets the body read so far replayed, then the rest of the connection."""

    async def bounded(scope: Scope, receive: Receive, send: Send) -> None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if scope["type"] != "http" or limit is None:
            await app(scope, receive, send)
            return
        if _declared_length(scope) > limit:
            await _refuse(scope, send)
            return
        read, held = 0, []
        while True:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break
            read += len(message.get("body", b""))
            if read > limit:
                await _refuse(scope, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return held.pop(0) if held else await receive()

        await app(scope, replay, send)

    return bounded


def _declared_length(scope: Scope) -> int:
    for name, value in scope["headers"]:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0  # not a length: Django's own parsing answers it
    return 0


async def _refuse(scope: Scope, send: Send) -> None:
    """413: under ``/api/`` in the API's shape, naming the limit (as Django's own refusal there does)."""
    if route_path(scope).startswith(API_PREFIX):  # below the mount prefix: the API's JSON under --root-path too
        body, kind = body_too_big().content, b"application/json"
    else:
        body, kind = b"Request body too large", b"text/plain; charset=utf-8"
    headers: list[tuple[bytes, bytes]] = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
    headers.append((b"connection", b"close"))
    # Answered before Django: the headers its middleware puts on every answer are added here.
    start: dict[str, Any] = {
        "type": "http.response.start",
        "status": 413,
        "headers": answer_headers(scope, 413, headers),
    }
    await send(start)
    await send({"type": "http.response.body", "body": body})
