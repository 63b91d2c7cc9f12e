"""Who asks the MCP server: the token's user, the tenant they act for, their client, their ``_meta``.

The auth wrapper loads the user once per HTTP request (a 401 before the MCP app sees a request without
a valid token) and reads the tenant header once; the handlers read both from it, and every database
access runs in a thread (``in_thread``).
"""

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qs

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from starlette.types import ASGIApp, Receive, Scope, Send

from toolhub.api.token_use import TokenChannel
from toolhub.api.tokens import TokenExpired, TokenRefused, token_owner
from toolhub.authorization import CallPrincipal
from toolhub.direct import TENANT_HEADER as _TENANT_HEADER
from toolhub.direct import CallerContextError, DirectCallError, caller_principal, tenant_named
from toolhub.mcp_headers import header_schemas_allowed, header_schemas_for

__all__ = [
    "TENANT_HEADER",
    "authenticated",
    "in_thread",
    "meta_context",
    "request_client",
    "request_principal",
    "request_tenant",
    "request_user",
]

#: A member of several tenants says which one they act for (or ``?tenant=``, ``tenant_named``).
TENANT_HEADER = _TENANT_HEADER.lower()
#: What a request without a usable token is told.
AUTHENTICATION_REQUIRED = "Authentication required: send Authorization: Bearer <your toolhub API token>."
#: Where the authenticated user travels from the auth wrapper to the handlers.
_USER_SCOPE_KEY = "toolhub.user"
#: Where the tenant header, as the auth wrapper read it, travels to the handlers (one reading for both).
_TENANT_SCOPE_KEY = "toolhub.tenant"
#: ``_meta`` keys of the protocol itself (progress tokens, the 2026 envelope's ``io.modelcontextprotocol/*``).
_PROTOCOL_META_KEYS = frozenset({"progressToken", "progress_token"})


def in_thread(fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """``fn`` run in a worker thread, with Django's per-request connection handling around it.

    As Django does around a request: connections past ``CONN_MAX_AGE`` (after every unit, by default)
    or broken are closed before and after, so no worker thread keeps one it should not.
    """

    def managed(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(managed, thread_sensitive=False)


def token_user(authorization: str) -> tuple[Any, str]:
    """The active user of a DRF token in ``Authorization: Bearer|Token <key>``, else ``None`` and what to do.

    The key is read as the REST API reads it (``token_owner``): an expired token is refused here too.
    """
    scheme, _, key = authorization.strip().partition(" ")
    if scheme.lower() not in ("bearer", "token") or not key.strip():
        return None, AUTHENTICATION_REQUIRED
    try:
        return token_owner(key.strip(), channel=TokenChannel.MCP)[0], ""
    except TokenExpired as expired:
        return None, str(expired)
    except TokenRefused:
        return None, AUTHENTICATION_REQUIRED


def header_value(scope: Scope, name: str) -> str:
    """Every ``name`` header of the request, joined as RFC 9110 (5.3) combines repeated fields.

    Two ``X-Toolhub-Tenant`` headers are one list (``acme, globex``), which names no tenant and is refused,
    never read as the first by one part of the server and as the last by another.
    """
    values = [value.decode("latin-1") for key, value in scope["headers"] if key.decode("latin-1").lower() == name]
    return ", ".join(values)


def query_value(scope: Scope, name: str) -> str:
    """Every ``name`` parameter of the request's query string, joined as :func:`header_value` joins headers."""
    return ", ".join(parse_qs(scope.get("query_string", b"").decode("latin-1")).get(name, []))


def _tenant_named(scope: Scope) -> "str | None | CallerContextError":
    """The tenant the request names (``X-Toolhub-Tenant`` or ``?tenant=``, ``tenant_named``), else why it is refused."""
    try:
        return tenant_named(query=query_value(scope, "tenant"), header=header_value(scope, TENANT_HEADER))
    except CallerContextError as refused:
        return refused


def _caller(authorization: str, tenant: "str | None | CallerContextError") -> tuple[Any, dict[str, Any], str]:
    """The token's user, their tools' ``Mcp-Param-*`` header schemas and why no user (one thread hop).

    A request naming two tenants gets no schema (its calls are refused by ``request_tenant`` before any is asked).
    """
    user, problem = token_user(authorization)
    if user is None or isinstance(tenant, CallerContextError):
        return user, {}, problem
    return user, header_schemas_for(user, tenant), problem


def authenticated(app: ASGIApp) -> ASGIApp:
    """Refuse (401) an HTTP request without a valid token before the MCP app sees it; remember the user."""

    async def wrapper(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        tenant = _tenant_named(scope)
        # The user, and which tools' headers the SDK may check for them: worked out here, where the database is read.
        user, schemas, problem = await in_thread(_caller)(header_value(scope, "authorization"), tenant)
        if user is None:
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": problem}}
            body = json.dumps(error, separators=(",", ":")).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="toolhub"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        with header_schemas_allowed(schemas):
            await app({**scope, _USER_SCOPE_KEY: user, _TENANT_SCOPE_KEY: tenant}, receive, send)

    return wrapper


def request_user(ctx: ServerRequestContext[Any, Any]) -> Any:
    """The user the request's token authenticated (loaded once per HTTP request, by the auth wrapper)."""
    request = ctx.request
    user = request.scope.get(_USER_SCOPE_KEY) if request is not None else None
    if user is None:
        raise MCPError(-32001, "Authentication required.")
    return user


def request_tenant(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The tenant the caller named (``X-Toolhub-Tenant`` or ``?tenant=``), as the auth wrapper read it.

    Named differently in both, the request is refused (invalid request), nothing listed or called.
    """
    request = ctx.request
    named = request.scope.get(_TENANT_SCOPE_KEY) if request is not None else None
    if isinstance(named, CallerContextError):
        raise MCPError(types.INVALID_REQUEST, str(named))
    return named  # type: ignore[no-any-return]


def request_client(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The client's name and version as it introduced itself, for the audit trail."""
    params = ctx.session.client_params
    info = getattr(params, "client_info", None)
    client: dict[str, Any] = {"channel": "mcp", "protocol_version": ctx.protocol_version}
    if info is not None:
        client["name"] = str(info.name)[:200]
        client["version"] = str(info.version)[:100]
    return client


def meta_context(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """``_meta`` without the protocol's own keys; the rest goes through the client context allow list."""
    if not meta:
        return {}
    return {key: value for key, value in dict(meta).items() if key not in _PROTOCOL_META_KEYS and "/" not in key}


def request_principal(ctx: ServerRequestContext[Any, Any]) -> CallPrincipal:
    try:
        return caller_principal(request_user(ctx), tenant=request_tenant(ctx))
    except DirectCallError as exc:
        raise MCPError(types.INVALID_REQUEST, str(exc)) from None
