"""An agentic tool's inner calls: through the governed pipeline, with the outer call's principal, run here."""

import uuid
from collections.abc import Sequence
from typing import Any

from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Tool

__all__ = ["inner_definitions", "inner_tool_call", "inner_calls_of"]


def inner_definitions(ctx: ToolContext, members: Sequence[Tool], profile: str) -> list[dict[str, Any]]:
    """The inner model's tool definitions: the members the call's principal is granted, nothing else."""
    from toolhub.agentic.runstate import granted_for
    from toolhub.tools.export import openai_tool

    allowed = set(granted_for(ctx, [tool.name for tool in members]))
    return [openai_tool(tool, profile) for tool in members if tool.name in allowed]


def inner_tool_call(
    ctx: ToolContext,
    *,
    name: str,
    arguments: str,
    model_call_id: str,
    position: int,
    allowed: set[str],
    owner: str,
) -> ToolCall:
    """Request one inner call (audited, linked to the outer call) and, when policy lets it run now, run it here."""
    from toolhub.disclosure.principals import principal_of_context
    from toolhub.execution import tool_call_run_claimed
    from toolhub.pipeline import EAGER_WORKER, CallRequest, inline_execution, tool_call_request
    from toolhub.tools.registry import registry

    def gate(tool_name: str) -> str | None:
        if tool_name in allowed:
            return None
        return f"Tool {tool_name!r} is not one of the tools of {owner}; it was not run."

    outer = ctx.call_id
    with inline_execution():
        call = tool_call_request(
            request=CallRequest(
                tool_name=name,
                arguments=arguments,
                principal=principal_of_context(ctx),
                context=ToolContext({k: v for k, v in ctx.as_dict().items() if k not in _OWN_KEYS}),
                run_id=_uuid(ctx.run_id),
                position=position,
                model_call_id=model_call_id[:100],
                kind=CallKind.INNER,
                interaction_context={"parent_call_id": str(outer or ""), "parent_tool": owner},
                gate=gate,
            )
        )
    if call.status == CallStatus.RUNNING and call.worker == EAGER_WORKER:
        tool = registry.get(call.tool_name)
        assert tool is not None
        tool_call_run_claimed(
            call=call, tool=tool, arguments=tool.validate_arguments(call.arguments), worker=EAGER_WORKER
        )
    call.refresh_from_db()
    if call.status == CallStatus.PENDING_APPROVAL:
        call.error = (
            f"The call of {call.tool_name} waits for an operator's approval; it was not run yet and will run "
            "once approved. Do not call it again."
        )
    return call


def inner_calls_of(call_id: uuid.UUID | str, *, user: Any) -> list[ToolCall]:
    """The inner calls an agentic tool's call made, in order, among the rows of ``user``'s tenants."""
    from toolhub.tenancy import scoped

    calls = ToolCall.objects.filter(kind=CallKind.INNER, context__parent_call_id=str(call_id))
    return list(scoped(calls, user).order_by("created_at", "position"))


#: The outer call's own keys, which the inner call gets afresh when it runs.
_OWN_KEYS = frozenset({"call_id", "idempotency_key"})


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None
