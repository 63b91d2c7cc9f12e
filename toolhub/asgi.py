"""ASGI entry point: Django, with the MCP server (streamable HTTP) at ``/mcp``.

Serve it with an ASGI server that sends lifespan events, e.g. ``uvicorn toolhub.asgi:application``:
the MCP app's lifespan starts the SDK's session manager. In production pass ``--no-proxy-headers``: uvicorn otherwise
rewrites the scheme and client from ``X-Forwarded-Proto``/``X-Forwarded-For`` sent by any peer on 127.0.0.1, whatever
Django's ``SECURE_PROXY_SSL_HEADER`` and ``TRUSTED_PROXY_COUNT`` say, for ``/mcp`` and Django alike. Behind a proxy
that mounts toolhub under a prefix, pass it as ``--root-path``: the console, the API and ``/mcp`` all answer below it.
"""

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
django_application = get_asgi_application()

from toolhub.asgi_body import bounded_body  # noqa: E402 - needs Django set up first
from toolhub.asgi_paths import route_path  # noqa: E402 - needs Django set up first (imported in order)
from toolhub.mcp_server import mcp_asgi_app  # noqa: E402 - needs Django set up first
from toolhub.response_headers import with_answer_headers  # noqa: E402 - needs Django set up first

MCP_PATH = "/mcp"


def build_application() -> Any:
    """Django for everything but ``/mcp`` and the lifespan, which go to a new MCP app (one per server run).

    WebSocket handshakes are refused: neither app serves one.

    Django gets bodies bounded before it reads them (``toolhub.asgi_body``); the MCP app bounds its own. The MCP app's
    answers and the body bound's refusals carry the headers Django's answers do (``toolhub.response_headers``).
    """
    mcp_application = mcp_asgi_app(MCP_PATH)
    mcp_answers = with_answer_headers(mcp_application)
    bounded_django = bounded_body(django_application)

    async def application(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await mcp_application(scope, receive, send)
        elif scope["type"] == "http" and route_path(scope).rstrip("/") == MCP_PATH:
            await mcp_answers({**scope, "path": scope.get("root_path", "") + MCP_PATH}, receive, send)
        elif scope["type"] == "websocket":
            await _refuse_websocket(receive, send)
        else:
            await bounded_django(scope, receive, send)

    return application


async def _refuse_websocket(receive: Any, send: Any) -> None:
    """Refuse a WebSocket handshake (403): nothing here speaks WebSocket.

    Handed on to Django, it raised (Django serves HTTP only): any client, unauthenticated, had a server error and its
    traceback logged for every handshake it sent (uvicorn takes them whenever ``websockets`` is installed).
    """
    if (await receive())["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": 1008})


application = build_application()
