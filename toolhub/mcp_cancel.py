"""``toolhub_cancel_call``: an MCP client withdraws a call of its own that has not started.

A call that needs approval answers an MCP client at once with its call id; its requester may change their
mind while it waits. This stable tool does over MCP what ``POST /api/v1/calls/{id}/cancel/`` does: the call
ends ``cancelled`` (a held call's approval request with it, so no operator approves it), through
``toolhub.waiting.tool_call_cancel``, by the same rule (the call's own user, or an operator of its tenant).
"""

import uuid
from collections.abc import Mapping
from typing import Annotated, Any

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from toolhub.direct import NO_LONGER_A_MEMBER
from toolhub.feedback import invalid_arguments_message
from toolhub.models import ToolCall
from toolhub.rights_recheck import still_visible_after_running_here
from toolhub.selectors import call_may_operate, tool_calls_operable_by, tool_calls_visible_to
from toolhub.waiting import CallNotWithdrawableError, CancelReasonError, tool_call_cancel

__all__ = ["CANCEL_TOOL", "CANCEL_TOOL_DEFINITION", "cancel_call"]

CANCEL_TOOL = "toolhub_cancel_call"
_MAX_REASON_LENGTH = 500

CANCEL_TOOL_DEFINITION: dict[str, Any] = {
    "name": CANCEL_TOOL,
    "description": (
        "Cancel a toolhub call of yours that has not started: one waiting for an operator's approval (its "
        "approval request is withdrawn), queued, or waiting for an external result. It will not run."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "call_id": {"type": "string", "description": "The call id a waiting tool call answered with."},
            "reason": {"type": "string", "maxLength": _MAX_REASON_LENGTH, "description": "Why, for the record."},
        },
        "required": ["call_id"],
        "additionalProperties": False,
    },
    "annotations": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True},
}


class _CancelArguments(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    call_id: uuid.UUID = Field(strict=False)
    reason: Annotated[str, StringConstraints(max_length=_MAX_REASON_LENGTH)] = ""


def cancel_call(user: Any, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    """Withdraw the caller's call (or, for an operator, one of their tenant's); every refusal is an error result."""
    try:
        parsed = _CancelArguments.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        return _refusal(invalid_arguments_message(CANCEL_TOOL, exc))
    call = tool_calls_operable_by(user).filter(pk=parsed.call_id).first()
    if call is None:
        return _refusal(f"There is no call {parsed.call_id} among yours.")
    if not call_may_operate(call, user):
        return _refusal("Only the user the call was made for, or an operator, may cancel it.")
    actor = f"user:{user.get_username()}"
    reason = f"cancelled by {actor}: {parsed.reason.strip() or 'no reason given'}"
    try:
        cancelled: ToolCall = tool_call_cancel(call=call, actor=actor, reason=reason, reader=user)
    except (CallNotWithdrawableError, CancelReasonError) as exc:
        return _refusal(str(exc))
    # Settled, the call woke its run: eager, its next turns ran in this request, a wait after which rights are re-read.
    if not still_visible_after_running_here(user, tool_calls_visible_to, cancelled.pk):
        return _refusal(NO_LONGER_A_MEMBER)
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text=f"The call of {cancelled.tool_name} was cancelled; it will not run.")
        ],
        structured_content={"call_id": str(cancelled.pk), "status": str(cancelled.status)},
    )


def _refusal(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
