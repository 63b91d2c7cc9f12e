"""A call's state as an MCP ``tools/call`` result, and ``toolhub_call_status``, which waits for one that waits.

A call waiting for an operator (or a worker, or an external result) answers at once with its id and how
to follow it; the status tool returns its result later, read as the caller was answered.
"""

import uuid
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext

from toolhub.api.wait_slots import wait_slot_async
from toolhub.caller_view import CallerView
from toolhub.direct import WAITING_STATUSES, call_approval_id, call_status_of, call_wait_async
from toolhub.mcp_caller import in_thread, request_user
from toolhub.models import CallStatus, ToolCall
from toolhub.selectors import tool_calls_visible_to
from toolhub.tenancy import tenant_scope_now

__all__ = ["STATUS_TOOL", "STATUS_TOOL_DEFINITION", "call_result", "status_tool"]

#: The stable tool that reports (and waits a little for) a call that was waiting.
STATUS_TOOL = "toolhub_call_status"
_STATUS_WAIT_MAX = 25.0

STATUS_TOOL_DEFINITION = {
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


def call_result(call: ToolCall, *, for_status_tool: bool = False) -> types.CallToolResult:
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
    call = tool_calls_visible_to(request_user(ctx)).filter(pk=call_id).first()
    if call is None:
        return types.CallToolResult(content=_text(f"There is no call {call_id} among yours."), is_error=True)
    return call, wait


def _status_answer(ctx: ServerRequestContext[Any, Any], call: ToolCall, *, waited: bool) -> types.CallToolResult:
    """The call as it is now, read as the caller was answered (a hidden tool's refusal reads as an unknown tool's).

    After a wait the caller's tenants are read again (``tenant_scope_now``), as REST's ``?wait=`` does: a caller
    removed from the call's tenant meanwhile is answered as for any call not theirs.
    """
    user = request_user(ctx)
    if waited:
        tenant_scope_now(user)
    fresh = tool_calls_visible_to(user).filter(pk=call.pk).first()
    if fresh is None:  # gone while it was waited for (retention), or no longer in the caller's tenants
        return types.CallToolResult(content=_text(f"There is no call {call.pk} among yours."), is_error=True)
    return call_result(CallerView(user).call(fresh), for_status_tool=True)


async def status_tool(ctx: ServerRequestContext[Any, Any], arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    """The status tool: a wait sleeps in the event loop, so it holds none of the threads every request shares."""
    target = await in_thread(_status_target)(ctx, arguments)
    if isinstance(target, types.CallToolResult):
        return target
    call, wait = target
    waited = False
    if wait:
        # One of the user's wait slots, shared with ``?wait=``: past the cap, the call as it is now.
        async with wait_slot_async(request_user(ctx).pk) as free:
            if free:
                await call_wait_async(call_id=call.pk, status=call.status, seconds=wait, read=in_thread(call_status_of))
                waited = True
    return await in_thread(_status_answer)(ctx, call, waited=waited)
