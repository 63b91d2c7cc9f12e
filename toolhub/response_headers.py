"""The headers every answer of toolhub carries, the console's and the API's and ``/mcp``'s alike.

Every answer is private and stored nowhere (``Cache-Control: ..., no-store, private``): they hold tenants' data
(approval requests and their arguments, runs, call results, artifacts, MCP tool results) and are fetched with a
session or a token; an answer without ``Cache-Control`` (every API view's) could be kept by a shared proxy and by the
browser's disk cache after logout. A view that sets ``Cache-Control`` itself keeps its directives, made private and
``no-store`` too.

Under ASGI some answers never pass through Django's middleware: ``/mcp``'s (a Starlette app beside Django) and the
body bound's refusals (``toolhub.asgi_body``). Those get the same headers from the same settings by running the same
middleware on a stand-in of each answer (:func:`answer_headers`), so the two never drift: ``SecurityMiddleware``'s
(``nosniff``, ``Referrer-Policy``, ``Cross-Origin-Opener-Policy``, HSTS when set), ``X-Frame-Options``, the
``Content-Security-Policy`` and the cache directives.
"""

import io
from collections.abc import Callable
from typing import Any

from csp.middleware import CSPMiddleware
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.http import BadHeaderError, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.http.response import HttpResponseBase
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware
from django.utils.cache import add_never_cache_headers, patch_cache_control

__all__ = ["PrivateAnswersMiddleware", "answer_headers", "stored_nowhere", "with_answer_headers"]


def stored_nowhere(response: HttpResponseBase) -> None:
    """Mark ``response`` private and ``no-store`` (Django's never-cache headers when it has no ``Cache-Control``)."""
    if response.has_header("Cache-Control"):
        patch_cache_control(response, private=True, no_store=True)
    else:
        add_never_cache_headers(response)


class PrivateAnswersMiddleware:
    """Every answer is private and stored nowhere (:func:`stored_nowhere`)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        stored_nowhere(response)
        return response


def _unused(request: HttpRequest) -> HttpResponse:
    raise AssertionError("only the middleware's process_response runs here")  # pragma: no cover


#: The settings' middleware that put headers on Django's answers, in the order they run on an answer. Made for each
#: answer: ``SecurityMiddleware`` reads its settings when made.
_HEADER_MIDDLEWARE = (CSPMiddleware, XFrameOptionsMiddleware, SecurityMiddleware)


def answer_headers(scope: Any, status: int, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` of an ASGI answer (``status``) to ``scope`` with what Django's answers carry added (its own kept).

    It raises on nothing it is handed: on ``/mcp`` it runs at the answer's start, after the tool has run.
    """
    decoded = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in headers]
    stand_in = HttpResponse(status=status)
    del stand_in["Content-Type"]
    for name, value in decoded:
        if name.lower() == "set-cookie":
            continue
        try:
            stand_in[name] = value
        except (BadHeaderError, UnicodeError):
            # One Django would not write (a newline, a name past ASCII) is the server's to judge, as it is on any
            # ASGI app's answer; raised here, the answer (a tool result that ran) was lost to a server error.
            continue
    before = {name.lower(): value for name, value in stand_in.items()}
    request = _stand_in_request(scope)
    for middleware in _HEADER_MIDDLEWARE:
        middleware(_unused).process_response(request, stand_in)
    stored_nowhere(stand_in)
    changed = {name.lower(): (name, value) for name, value in stand_in.items() if before.get(name.lower()) != value}
    kept = [(name, value) for name, value in decoded if name.lower() not in changed]
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in [*kept, *changed.values()]]


def with_answer_headers(app: Any) -> Any:
    """The ASGI ``app`` whose HTTP answers carry the headers Django's do (:func:`answer_headers`).

    A request Django's ``SecurityMiddleware`` answers itself is answered so here too, ``app`` never reached: plain HTTP
    when ``SECURE_SSL_REDIRECT`` is set is redirected to HTTPS (the query string left out: ``/mcp`` takes none).
    """

    async def application(scope: Any, receive: Any, send: Any) -> None:
        refusal = _security_answer(scope) if scope["type"] == "http" else None
        if refusal is not None:
            headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in refusal.items()]
            start = {"type": "http.response.start", "status": refusal.status_code, "headers": headers}
            await send({**start, "headers": answer_headers(scope, refusal.status_code, headers)})
            await send({"type": "http.response.body", "body": refusal.content})
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": answer_headers(scope, message["status"], list(message.get("headers", []))),
                }
            await send(message)

        await app(scope, receive, send_with_headers)

    return application


def _security_answer(scope: Any) -> HttpResponse | None:
    """What ``SecurityMiddleware`` answers ``scope`` before any view (a redirect to HTTPS), or ``None``.

    A host Django refuses there is answered 400, as Django's own handler answers one.
    """
    try:
        return SecurityMiddleware(_unused).process_request(_stand_in_request(scope))
    except DisallowedHost:
        return HttpResponseBadRequest()


def _stand_in_request(scope: Any) -> ASGIRequest:
    """A request standing in for ``scope`` to the header middleware.

    No header depends on the query string, and Django reads one as UTF-8: a raw byte past it (a server may hand it on
    undecoded) raised here after the tool had run, where Django answers its own requests 400.
    """
    return ASGIRequest({**scope, "query_string": b""}, io.BytesIO())
