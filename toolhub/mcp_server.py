"""toolhub's MCP server: the catalogue a principal may use, each call a governed, audited ``ToolCall`` (kind ``mcp``).

Built on the official ``mcp`` SDK's low-level ``Server`` over streamable HTTP, stateless (every
request stands alone, as the 2026-07-28 protocol has it), mounted at ``/mcp`` by ``toolhub.asgi``.
Clients authenticate with the REST API's tokens (``Authorization: Bearer <token>`` or ``Token``).

``tools/list`` depends only on who asks (their grants, ``toolhub.mcp_caller``): the tools they may
call (all of them, or with ``MCP_TOOL_LISTING = "search"`` the always-visible ones), plus the stable
``toolhub_call_status`` (``toolhub.mcp_status``), ``toolhub_cancel_call`` (``toolhub.mcp_cancel``),
``toolhub_find_tools`` and ``toolhub_describe_tool`` (``toolhub.mcp_discovery``); the run-oriented
navigation tools (meta tools, facades, context tools) are never listed nor called here. A call that
waits for an operator answers at once with the approval id and how to poll (``toolhub_call_status``,
or ``GET /api/v1/calls/{id}/?wait=``), never holding the client while someone decides; a queued or
running call is followed for up to ``MCP_CALL_WAIT_SECONDS`` while its progress is sent as
``notifications/progress``.
"""

import copy
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import mcp_types as types
from django.conf import settings
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from toolhub.api.throttling import user_throttle_wait
from toolhub.api.wait_slots import wait_slot_async
from toolhub.conf import toolhub_settings
from toolhub.direct import DirectCallError, answering_principal, direct_call_request
from toolhub.disclosure.visibility import is_navigation
from toolhub.feedback import unknown_tool_message
from toolhub.mcp_caller import (
    TENANT_HEADER,
    authenticated,
    in_thread,
    meta_context,
    request_client,
    request_principal,
    request_tenant,
    request_user,
)
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
from toolhub.mcp_headers import header_schema
from toolhub.mcp_status import STATUS_TOOL, STATUS_TOOL_DEFINITION, call_result, status_tool
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.rights_recheck import RightsRecheck
from toolhub.tenancy import tenant_scope_now
from toolhub.tools.export import buildable, tool_definition
from toolhub.tools.registry import registry

__all__ = ["INTERNAL_ERROR_MESSAGE", "STATUS_TOOL", "TENANT_HEADER", "build_server", "mcp_asgi_app"]

logger = logging.getLogger(__name__)

#: The server's own tools, answered here (read-only) rather than by the pipeline.
_STABLE_TOOLS = (STATUS_TOOL_DEFINITION, CANCEL_TOOL_DEFINITION, FIND_TOOL_DEFINITION, DESCRIBE_TOOL_DEFINITION)


def _list_tools_sync(ctx: ServerRequestContext[Any, Any]) -> types.ListToolsResult:
    listed = listed_tools(request_principal(ctx))
    tools = buildable(listed, lambda tool: types.Tool.model_validate(tool_definition(tool, "mcp")))
    tools.extend(types.Tool.model_validate(definition) for definition in _STABLE_TOOLS)
    return types.ListToolsResult(tools=tools)


def _find_sync(ctx: ServerRequestContext[Any, Any], arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    return find_tools(request_principal(ctx), arguments)


def _cancel_sync(ctx: ServerRequestContext[Any, Any], arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    user = request_user(ctx)
    _count_write(user)  # as ``POST /api/v1/calls/{id}/cancel/`` is throttled (``throttle_scope = "calls"``)
    return cancel_call(user, arguments)


def _count_write(user: Any) -> None:
    """Count one MCP write (a call, a cancel) against the per-user ``calls`` rate the REST API's writes count against.

    Past the rate it is refused before anything is read or written, whichever channel the user writes through.
    """
    wait = user_throttle_wait(user, "calls")
    if wait is not None:
        raise MCPError(
            types.INVALID_REQUEST, f"Too many calls: the rate of calls per user is used up; try again in {wait:.0f} s."
        )


def _describe_sync(ctx: ServerRequestContext[Any, Any], arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    return describe_tool(request_principal(ctx), arguments)


# --- answers ---------------------------------------------------------------------------------------------


# --- tools/call ------------------------------------------------------------------------------------------

ProgressSender = Callable[[float, float | None, str | None], Awaitable[None]]


class _Follower:
    """Sends a call's new progress updates as ``notifications/progress``, each once, while its caller may read them.

    Progress is the tool's own text, streamed for as long as the call runs: like a console export, the caller's rights
    are read again before updates are sent (``RightsRecheck``, at most every ``STREAM_RIGHTS_RECHECK_SECONDS``, on a
    copy of the request's user, read by other threads meanwhile); once they no longer reach the call's tenant nothing
    more is sent and the follow ends (``cut``): the answer is then refused (``answering_principal``).
    """

    def __init__(self, call_id: uuid.UUID, report: ProgressSender, user: Any) -> None:
        self.call_id, self.report, self.sent = call_id, report, 0
        self.tenant, self.cut = "", False
        reader = copy.copy(user)
        self.recheck = RightsRecheck(
            reader, lambda scope: reader.is_active and (not self.tenant or scope.allows(self.tenant))
        )

    async def poll(self) -> str | None:
        """Send what is new; return the call's status (``None`` before its row is written)."""
        row = await in_thread(_progress_of)(self.call_id)
        if row is None:
            return None
        status, progress, self.tenant = row
        if self.cut or (progress[self.sent :] and not await in_thread(self.recheck.holds)()):
            self.cut = True
            return status
        for update in progress[self.sent :]:
            current = update.get("current")
            self.sent += 1
            await self.report(
                float(current if current is not None else self.sent), update.get("total"), update.get("message")
            )
        return status

    async def while_requested(self) -> None:
        """Runs beside the request (an eager call executes in it) until cancelled; a quick call never polls."""
        while not self.cut:
            await anyio.sleep(0.2)
            await self.poll()

    async def until_settled(self, seconds: float) -> None:
        """Follow a queued or running call (on a worker) for up to ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if await self.poll() not in (CallStatus.QUEUED, CallStatus.RUNNING) or self.cut:
                return
            await anyio.sleep(min(0.2, max(deadline - time.monotonic(), 0)))


def _progress_of(call_id: uuid.UUID) -> tuple[str, list[dict[str, Any]], str] | None:
    row = ToolCall.objects.filter(pk=call_id).values_list("status", "progress", "tenant").first()
    return (row[0], list(row[1] or []), row[2] or "") if row is not None else None


def _request_sync(
    ctx: ServerRequestContext[Any, Any], name: str, arguments: Mapping[str, Any] | None, call_id: uuid.UUID
) -> ToolCall:
    user = request_user(ctx)
    if is_navigation(name):
        # Meta tools, facades and context tools act on a run's visible tools; an MCP client has no run.
        raise MCPError(types.INVALID_PARAMS, unknown_tool_message(name, callable_names(request_principal(ctx))))
    # The per-user rate of calls (``calls``) counts a call over MCP as one over ``POST /api/v1/calls/``.
    _count_write(user)
    try:
        made = direct_call_request(
            user=user,
            tool_name=name,
            arguments=dict(arguments or {}),
            context=meta_context(ctx.meta),
            tenant=request_tenant(ctx),
            kind=CallKind.MCP,
            client=request_client(ctx),
            strict_context=False,
            call_id=call_id,
        )
    except DirectCallError as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None
    # The same object the pipeline (and, run here at commit, the execution) moved along: no re-read.
    return _unless_hidden(user, made.call)


def _unless_hidden(user: Any, call: ToolCall) -> ToolCall:
    """``call``, unless it was refused for a tool the caller may not see: that is answered like a missing tool.

    Asked of the call as first answered and again of a followed one: a worker re-checks permissions when it runs
    the call, so a grant withdrawn meanwhile denies it there, and that denial must read as the status tool and the
    REST API read it (``toolhub.caller_view``), never as the policy's refusal naming the grant. A caller who left
    the call's tenant meanwhile is refused its outcome, as the REST API refuses it (``answering_principal``).
    """
    try:
        principal = answering_principal(user, call)
    except DirectCallError as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None
    if call.status in (CallStatus.INVALID, CallStatus.DENIED):
        visible = callable_names(principal)
        if registry.get(call.tool_name) is None or call.tool_name not in visible:
            raise MCPError(types.INVALID_PARAMS, unknown_tool_message(call.tool_name, visible))
    return call


def _followed_sync(ctx: ServerRequestContext[Any, Any], call_id: uuid.UUID, *, waited: bool) -> ToolCall:
    """The followed call as it is now, read as the caller was answered (``_unless_hidden``).

    After a wait the caller's rights are read again (``tenant_scope_now``), as REST's ``?wait=`` does.
    """
    user = request_user(ctx)
    if waited:
        tenant_scope_now(user)
    return _unless_hidden(user, ToolCall.objects.get(pk=call_id))


async def _call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == STATUS_TOOL:
        return await status_tool(ctx, params.arguments)
    if params.name == CANCEL_TOOL:
        return await in_thread(_cancel_sync)(ctx, params.arguments)
    if params.name == FIND_TOOL:
        return await in_thread(_find_sync)(ctx, params.arguments)
    if params.name == DESCRIBE_TOOL:
        return await in_thread(_describe_sync)(ctx, params.arguments)
    call_id = uuid.uuid4()
    follower = _Follower(call_id, ctx.session.report_progress, request_user(ctx))
    outcome: ToolCall | MCPError
    async with anyio.create_task_group() as group:
        group.start_soon(follower.while_requested)
        try:
            outcome = await in_thread(_request_sync)(ctx, params.name, params.arguments, call_id)
        except MCPError as refused:  # raised past the task group, not wrapped in an exception group
            outcome = refused
        finally:
            group.cancel_scope.cancel()
    if isinstance(outcome, MCPError):
        raise outcome
    call = outcome
    if call.status in (CallStatus.QUEUED, CallStatus.RUNNING):
        # Followed in one of the user's wait slots (``toolhub.api.wait_slots``); past the cap, answered as it is.
        async with wait_slot_async(request_user(ctx).pk) as free:
            if free:
                await follower.until_settled(toolhub_settings().MCP_CALL_WAIT_SECONDS)
        call = await in_thread(_followed_sync)(ctx, call.pk, waited=free)
    return await in_thread(call_result)(call)


async def _list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return await in_thread(_list_tools_sync)(ctx)


# --- the server and its ASGI app -------------------------------------------------------------------------


#: What a client is told when a handler fails unexpectedly (the exception goes to the log, never to the wire).
INTERNAL_ERROR_MESSAGE = "Internal server error"


async def _sanitized_errors(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Answer an unexpected exception as a generic internal error, for every protocol revision.

    The SDK does so for 2026-07-28 requests, but its handshake-era dispatcher puts ``str(exception)`` on the wire:
    a database error's text (host, user, a row's values) would reach any client. Refusals (``MCPError``) and
    invalid params (``ValidationError``, which the SDK answers without its text) pass as they are.
    """
    try:
        return await call_next(ctx)
    except (MCPError, ValidationError):
        raise
    except Exception:
        logger.exception("MCP %s failed", ctx.method)
        raise MCPError(types.INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE) from None


def build_server() -> Server[Any]:
    """The MCP server (one per process): toolhub's catalogue and governed calls."""
    server: Server[Any] = Server(
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
    server.middleware.append(_sanitized_errors)
    return server


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


#: What a request of another method than POST is told: a stateless server has nothing else to serve.
_POST_ONLY = "Method Not Allowed: toolhub's MCP server is stateless; send each JSON-RPC request as a POST."


def _post_only(app: ASGIApp, security: TransportSecuritySettings) -> ASGIApp:
    """Answer 405 to every method but POST before the SDK sees it (after the SDK's Host and Origin check).

    Stateless, the server never sends a message of its own, so the SDK's standalone ``GET`` stream (handshake-era
    revisions) would carry nothing but pings, open for as long as the client kept it: one token holder could pile up
    connections without end, each outliving the token's revocation. The spec lets a server without that stream
    answer ``GET`` 405; ``DELETE`` has no session to end. A foreign ``Origin`` still answers 403, as the spec asks.
    """
    guard = TransportSecurityMiddleware(security)

    async def only_post(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] == "POST":
            await app(scope, receive, send)
            return
        refused = await guard.validate_request(Request(scope, receive))
        if refused is not None:
            await refused(scope, receive, send)
            return
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": types.INVALID_REQUEST, "message": _POST_ONLY}}
        body = json.dumps(error, separators=(",", ":")).encode()
        headers = [(b"content-type", b"application/json"), (b"allow", b"POST")]
        await send({"type": "http.response.start", "status": 405, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return only_post


def mcp_asgi_app(path: str = "/mcp") -> ASGIApp:
    """The streamable HTTP app serving ``path`` (stateless, POST only), behind token authentication.

    Its lifespan starts the SDK's session manager: run it under an ASGI server that sends lifespan
    events (uvicorn, or gunicorn with uvicorn workers).
    """
    security = _transport_security()
    starlette_app = build_server().streamable_http_app(
        streamable_http_path=path, stateless_http=True, transport_security=security
    )
    authenticated_app = authenticated(_post_only(starlette_app, security))

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await starlette_app(scope, receive, send)
        else:
            await authenticated_app(scope, receive, send)

    return app
