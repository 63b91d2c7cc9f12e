"""toolhub's MCP server: the catalogue a principal may use, each call a governed, audited ``ToolCall`` (kind ``mcp``).

Built on the official ``mcp`` SDK's low-level ``Server`` over streamable HTTP, stateless (every
request stands alone, as the 2026-07-28 protocol has it), mounted at ``/mcp`` by ``toolhub.asgi``.
Clients authenticate with the REST API's tokens (``Authorization: Bearer <token>`` or ``Token``).

``tools/list`` depends only on who asks (their grants): the tools they may call (all of them, or with
``MCP_TOOL_LISTING = "search"`` the always-visible ones), plus the stable ``toolhub_call_status``,
``toolhub_cancel_call`` (``toolhub.mcp_cancel``), ``toolhub_find_tools`` and ``toolhub_describe_tool``
(``toolhub.mcp_discovery``); the run-oriented
navigation tools (meta tools, facades, context tools) are never listed nor called here. A call that
waits for an operator answers at once with the approval id and how to poll (``toolhub_call_status``,
or ``GET /api/v1/calls/{id}/?wait=``), never holding the client while someone decides; a queued or
running call is followed for up to ``MCP_CALL_WAIT_SECONDS`` while its progress is sent as
``notifications/progress``.
"""

import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.types import ASGIApp, Receive, Scope, Send

from toolhub.api.throttling import user_throttle_wait
from toolhub.authorization import CallPrincipal
from toolhub.caller_view import CallerView
from toolhub.conf import toolhub_settings
from toolhub.direct import (
    WAITING_STATUSES,
    DirectCallError,
    call_approval_id,
    call_status_of,
    call_wait_async,
    caller_principal,
    direct_call_request,
)
from toolhub.disclosure.visibility import is_navigation
from toolhub.feedback import unknown_tool_message
from toolhub.mcp_cancel import CANCEL_TOOL, CANCEL_TOOL_DEFINITION, cancel_call
from toolhub.mcp_discovery import (
    DESCRIBE_TOOL,
    DESCRIBE_TOOL_DEFINITION,
    FIND_TOOL,
    FIND_TOOL_DEFINITION,
    callable_names,
    describe_tool,
    find_tools,
    listed_tools,
)
from toolhub.mcp_headers import header_declaring_tools, header_schema, header_tools_allowed, header_tools_for
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.selectors import tool_calls_visible_to
from toolhub.tools.export import tool_definition
from toolhub.tools.registry import registry

__all__ = ["STATUS_TOOL", "TENANT_HEADER", "build_server", "mcp_asgi_app"]

#: The stable tool that reports (and waits a little for) a call that was waiting.
STATUS_TOOL = "toolhub_call_status"
#: A member of several tenants says which one they act for.
TENANT_HEADER = "x-toolhub-tenant"
#: Where the authenticated user's id travels from the auth wrapper to the handlers.
_USER_SCOPE_KEY = "toolhub.user"
#: ``_meta`` keys of the protocol itself (progress tokens, the 2026 envelope's ``io.modelcontextprotocol/*``).
_PROTOCOL_META_KEYS = frozenset({"progressToken", "progress_token"})
_STATUS_WAIT_MAX = 25.0

_STATUS_TOOL_DEFINITION = {
    "name": STATUS_TOOL,
    "description": (
        "Get the state of a toolhub call that was waiting (for an operator's approval, a worker, or an "
        "external result): its result once it ran, or its status. Waits up to `wait` seconds for a change."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "call_id": {"type": "string", "description": "The call id a waiting tool call answered with."},
            "wait": {"type": "number", "minimum": 0, "maximum": _STATUS_WAIT_MAX, "description": "Seconds to wait."},
        },
        "required": ["call_id"],
        "additionalProperties": False,
    },
    "annotations": {"readOnlyHint": True, "idempotentHint": True},
}


def _in_thread(fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
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


# --- who is asking ---------------------------------------------------------------------------------------


def _token_user(authorization: str) -> Any:
    """The active user of a DRF token in ``Authorization: Bearer|Token <key>``; ``None`` for anything else."""
    from rest_framework.authtoken.models import Token

    scheme, _, key = authorization.strip().partition(" ")
    if scheme.lower() not in ("bearer", "token") or not key.strip():
        return None
    token = Token.objects.select_related("user").filter(key=key.strip()).first()
    if token is None or not token.user.is_active:
        return None
    return token.user


def _authenticated(app: ASGIApp) -> ASGIApp:
    """Refuse (401) an HTTP request without a valid token before the MCP app sees it; remember the user."""

    async def wrapper(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        user = await _in_thread(_token_user)(headers.get("authorization", ""))
        if user is None:
            body = (
                b'{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Authentication required: send '
                b'Authorization: Bearer <your toolhub API token>."}}'
            )
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
        # Which tools' headers the SDK may check for this caller, worked out here where the database may be read.
        tenant = headers.get(TENANT_HEADER) or None
        allowed = await _in_thread(header_tools_for)(user, tenant) if header_declaring_tools() else frozenset()
        with header_tools_allowed(allowed):
            await app({**scope, _USER_SCOPE_KEY: user}, receive, send)

    return wrapper


def _user(ctx: ServerRequestContext[Any, Any]) -> Any:
    """The user the request's token authenticated (loaded once per HTTP request, by the auth wrapper)."""
    request = ctx.request
    user = request.scope.get(_USER_SCOPE_KEY) if request is not None else None
    if user is None:
        raise MCPError(-32001, "Authentication required.")
    return user


def _tenant(ctx: ServerRequestContext[Any, Any]) -> str | None:
    request = ctx.request
    return (request.headers.get(TENANT_HEADER) or None) if request is not None else None


def _client(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The client's name and version as it introduced itself, for the audit trail."""
    params = ctx.session.client_params
    info = getattr(params, "client_info", None)
    client: dict[str, Any] = {"channel": "mcp", "protocol_version": ctx.protocol_version}
    if info is not None:
        client["name"] = str(info.name)[:200]
        client["version"] = str(info.version)[:100]
    return client


def _meta_context(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """``_meta`` without the protocol's own keys; the rest goes through the client context allow list."""
    if not meta:
        return {}
    return {key: value for key, value in dict(meta).items() if key not in _PROTOCOL_META_KEYS and "/" not in key}


# --- the catalogue ---------------------------------------------------------------------------------------


#: The server's own tools, answered here (read-only) rather than by the pipeline.
_STABLE_TOOLS = (_STATUS_TOOL_DEFINITION, CANCEL_TOOL_DEFINITION, FIND_TOOL_DEFINITION, DESCRIBE_TOOL_DEFINITION)


def _principal(ctx: ServerRequestContext[Any, Any]) -> CallPrincipal:
    try:
        return caller_principal(_user(ctx), tenant=_tenant(ctx))
    except DirectCallError as exc:
        raise MCPError(types.INVALID_REQUEST, str(exc)) from None


def _list_tools_sync(ctx: ServerRequestContext[Any, Any]) -> types.ListToolsResult:
    tools = [types.Tool.model_validate(tool_definition(tool, "mcp")) for tool in listed_tools(_principal(ctx))]
    tools.extend(types.Tool.model_validate(definition) for definition in _STABLE_TOOLS)
    return types.ListToolsResult(tools=tools)


def _find_sync(ctx: ServerRequestContext[Any, Any], arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    return find_tools(_principal(ctx), arguments)


def _cancel_sync(ctx: ServerRequestContext[Any, Any], arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    return cancel_call(_user(ctx), arguments)


def _describe_sync(ctx: ServerRequestContext[Any, Any], arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    return describe_tool(_principal(ctx), arguments)


# --- answers ---------------------------------------------------------------------------------------------


def _text(text: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=text)]


def _waiting_text(call: ToolCall, approval_id: int | None) -> str:
    if call.status == CallStatus.PENDING_APPROVAL:
        why = f"It waits for an operator's approval (approval request #{approval_id})."
    elif call.status == CallStatus.AWAITING_RESULT:
        why = "It waits for its result from an external system."
    else:
        why = f"It is {call.status} and has not finished yet."
    return (
        f"The call of {call.tool_name} (call id {call.pk}) has not produced a result yet. {why} "
        f'Call {STATUS_TOOL} with {{"call_id": "{call.pk}"}} later to get its result '
        f"(or GET /api/v1/calls/{call.pk}/?wait=30 over the REST API)."
    )


def _call_meta(call: ToolCall, approval_id: int | None) -> dict[str, Any]:
    return {"io.toolhub/call": {"id": str(call.pk), "status": str(call.status), "approval_id": approval_id}}


def _result(call: ToolCall, *, for_status_tool: bool = False) -> types.CallToolResult:
    """A call's state as a ``tools/call`` result: its result, its error, or how to follow it while it waits."""
    if call.status in WAITING_STATUSES:
        approval_id = call_approval_id(call) if call.status == CallStatus.PENDING_APPROVAL else None
        status = {"call_id": str(call.pk), "status": str(call.status), "approval_id": approval_id}
        # Not a result of the tool: flagged so that no client validates it against the tool's output schema.
        return types.CallToolResult(
            content=_text(_waiting_text(call, approval_id)),
            structured_content=status if for_status_tool else None,
            is_error=not for_status_tool,
            _meta=_call_meta(call, approval_id),
        )
    if call.status == CallStatus.SUCCEEDED:
        structured = call.result if isinstance(call.result, dict) else None
        if for_status_tool:
            structured = {"call_id": str(call.pk), "status": "succeeded", "result": call.result}
        return types.CallToolResult(
            content=_text(call.model_text()), structured_content=structured, _meta=_call_meta(call, None)
        )
    return types.CallToolResult(
        content=_text(call.model_text()),
        structured_content={"call_id": str(call.pk), "status": str(call.status)} if for_status_tool else None,
        is_error=True,
        _meta=_call_meta(call, None),
    )


# --- tools/call ------------------------------------------------------------------------------------------

ProgressSender = Callable[[float, float | None, str | None], Awaitable[None]]


class _Follower:
    """Sends a call's new progress updates as ``notifications/progress``, each once."""

    def __init__(self, call_id: uuid.UUID, report: ProgressSender) -> None:
        self.call_id, self.report, self.sent = call_id, report, 0

    async def poll(self) -> str | None:
        """Send what is new; return the call's status (``None`` before its row is written)."""
        row = await _in_thread(_progress_of)(self.call_id)
        if row is None:
            return None
        status, progress = row
        for update in progress[self.sent :]:
            current = update.get("current")
            self.sent += 1
            await self.report(
                float(current if current is not None else self.sent), update.get("total"), update.get("message")
            )
        return status

    async def while_requested(self) -> None:
        """Runs beside the request (an eager call executes in it) until cancelled; a quick call never polls."""
        while True:
            await anyio.sleep(0.2)
            await self.poll()

    async def until_settled(self, seconds: float) -> None:
        """Follow a queued or running call (on a worker) for up to ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if await self.poll() not in (CallStatus.QUEUED, CallStatus.RUNNING):
                return
            await anyio.sleep(min(0.2, max(deadline - time.monotonic(), 0)))


def _progress_of(call_id: uuid.UUID) -> tuple[str, list[dict[str, Any]]] | None:
    row = ToolCall.objects.filter(pk=call_id).values_list("status", "progress").first()
    return (row[0], list(row[1] or [])) if row is not None else None


def _request_sync(
    ctx: ServerRequestContext[Any, Any], name: str, arguments: Mapping[str, Any] | None, call_id: uuid.UUID
) -> ToolCall:
    user = _user(ctx)
    if is_navigation(name):
        # Meta tools, facades and context tools act on a run's visible tools; an MCP client has no run.
        raise MCPError(types.INVALID_PARAMS, unknown_tool_message(name, callable_names(_principal(ctx))))
    # The per-user rate of calls (``calls``) counts a call over MCP as one over ``POST /api/v1/calls/``.
    wait = user_throttle_wait(user, "calls")
    if wait is not None:
        raise MCPError(
            types.INVALID_REQUEST, f"Too many calls: the rate of calls per user is used up; try again in {wait:.0f} s."
        )
    try:
        made = direct_call_request(
            user=user,
            tool_name=name,
            arguments=dict(arguments or {}),
            context=_meta_context(ctx.meta),
            tenant=_tenant(ctx),
            kind=CallKind.MCP,
            client=_client(ctx),
            strict_context=False,
            call_id=call_id,
        )
    except DirectCallError as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None
    # The same object the pipeline (and, run here at commit, the execution) moved along: no re-read.
    call = made.call
    if call.status in (CallStatus.INVALID, CallStatus.DENIED):
        principal = caller_principal(user, tenant=call.tenant or None)
        visible = callable_names(principal)
        if registry.get(call.tool_name) is None or call.tool_name not in visible:
            # A tool the caller may not see is answered exactly like a missing one.
            raise MCPError(types.INVALID_PARAMS, unknown_tool_message(call.tool_name, visible))
    return call


def _status_target(
    ctx: ServerRequestContext[Any, Any], arguments: Mapping[str, Any] | None
) -> types.CallToolResult | tuple[ToolCall, float]:
    """The caller's call the status tool asks about and how long to wait, or the error to answer."""
    arguments = dict(arguments or {})
    unknown = sorted(set(arguments) - {"call_id", "wait"})
    try:
        call_id = uuid.UUID(str(arguments.get("call_id", "")))
        wait = float(arguments.get("wait", 0) or 0)
    except (TypeError, ValueError):
        unknown = unknown or ["call_id"]
    if unknown or not 0 <= wait <= _STATUS_WAIT_MAX:
        return types.CallToolResult(
            content=_text(f'Give {{"call_id": "<the call id>", "wait": <0 to {_STATUS_WAIT_MAX:g} seconds>}}.'),
            is_error=True,
        )
    call = tool_calls_visible_to(_user(ctx)).filter(pk=call_id).first()
    if call is None:
        return types.CallToolResult(content=_text(f"There is no call {call_id} among yours."), is_error=True)
    return call, wait


def _status_answer(ctx: ServerRequestContext[Any, Any], call: ToolCall) -> types.CallToolResult:
    # Read as the caller was answered: a refused call of a tool they may not see is an unknown tool's.
    fresh = tool_calls_visible_to(_user(ctx)).filter(pk=call.pk).first()
    if fresh is None:  # gone while it was waited for (retention)
        return types.CallToolResult(content=_text(f"There is no call {call.pk} among yours."), is_error=True)
    return _result(CallerView(_user(ctx)).call(fresh), for_status_tool=True)


async def _status(ctx: ServerRequestContext[Any, Any], arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    """The status tool: a wait sleeps in the event loop, so it holds none of the threads every request shares."""
    target = await _in_thread(_status_target)(ctx, arguments)
    if isinstance(target, types.CallToolResult):
        return target
    call, wait = target
    if wait:
        await call_wait_async(call_id=call.pk, status=call.status, seconds=wait, read=_in_thread(call_status_of))
    return await _in_thread(_status_answer)(ctx, call)


async def _call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == STATUS_TOOL:
        return await _status(ctx, params.arguments)
    if params.name == CANCEL_TOOL:
        return await _in_thread(_cancel_sync)(ctx, params.arguments)
    if params.name == FIND_TOOL:
        return await _in_thread(_find_sync)(ctx, params.arguments)
    if params.name == DESCRIBE_TOOL:
        return await _in_thread(_describe_sync)(ctx, params.arguments)
    call_id = uuid.uuid4()
    follower = _Follower(call_id, ctx.session.report_progress)
    outcome: ToolCall | MCPError
    async with anyio.create_task_group() as group:
        group.start_soon(follower.while_requested)
        try:
            outcome = await _in_thread(_request_sync)(ctx, params.name, params.arguments, call_id)
        except MCPError as refused:  # raised past the task group, not wrapped in an exception group
            outcome = refused
        finally:
            group.cancel_scope.cancel()
    if isinstance(outcome, MCPError):
        raise outcome
    call = outcome
    if call.status in (CallStatus.QUEUED, CallStatus.RUNNING):
        await follower.until_settled(toolhub_settings().MCP_CALL_WAIT_SECONDS)
        call = await _in_thread(ToolCall.objects.get)(pk=call.pk)
    return await _in_thread(_result)(call)


async def _list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return await _in_thread(_list_tools_sync)(ctx)


# --- the server and its ASGI app -------------------------------------------------------------------------


def build_server() -> Server[Any]:
    """The MCP server (one per process): toolhub's catalogue and governed calls."""
    return Server(
        "toolhub",
        version="1",
        instructions=(
            "toolhub's governed tools: every call is authorized, may wait for an operator's approval, and is "
            f"audited. A call that waits answers with its call id; {STATUS_TOOL} returns its result later, "
            f"{CANCEL_TOOL} withdraws it. "
            f"{FIND_TOOL} finds the tools you may use (also those not listed) and {DESCRIBE_TOOL} describes one; "
            "call a tool found by its name."
        ),
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
        get_tool_input_schema=_input_schema,
    )


def _input_schema(name: str) -> Mapping[str, Any] | None:
    """A tool's input schema for the SDK's ``Mcp-Param-*`` header check (no database: ``toolhub.mcp_headers``).

    Without it the SDK lists the whole catalogue for the caller on every ``tools/call``. A tool the caller
    may not call gets no schema, as an unknown name gets none, so the check answers for both alike.
    """
    for definition in _STABLE_TOOLS:
        if definition["name"] == name:
            return definition["inputSchema"]  # type: ignore[no-any-return]
    return header_schema(name)


def _transport_security() -> TransportSecuritySettings:
    """DNS-rebinding protection from Django's ``ALLOWED_HOSTS`` (off when they allow any host)."""
    hosts = [host for host in settings.ALLOWED_HOSTS if host]
    if not hosts or "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    allowed = [f"{host.lstrip('.')}:*" for host in hosts] + [host.lstrip(".") for host in hosts]
    origins = [f"{scheme}://{host.lstrip('.')}:*" for host in hosts for scheme in ("http", "https")]
    origins += [f"{scheme}://{host.lstrip('.')}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(allowed_hosts=allowed, allowed_origins=origins)


def mcp_asgi_app(path: str = "/mcp") -> ASGIApp:
    """The streamable HTTP app serving ``path`` (stateless), behind token authentication.

    Its lifespan starts the SDK's session manager: run it under an ASGI server that sends lifespan
    events (uvicorn, or gunicorn with uvicorn workers).
    """
    starlette_app = build_server().streamable_http_app(
        streamable_http_path=path, stateless_http=True, transport_security=_transport_security()
    )
    authenticated = _authenticated(starlette_app)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await starlette_app(scope, receive, send)
        else:
            await authenticated(scope, receive, send)

    return app
