"""The governed call pipeline, worker side: claim a queued call once, execute it, record the outcome."""

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from toolhub.authorization import authorization_denial, principal_of_call, tenant_argument_denial
from toolhub.calls import call_transition
from toolhub.conf import toolhub_setting
from toolhub.feedback import exception_detail, execution_error
from toolhub.models import CallStatus, ToolCall
from toolhub.pipeline import approval_hash, tool_call_require_reapproval
from toolhub.storable import json_storage_problem, storable_text
from toolhub.tools.context import ToolContext
from toolhub.tools.results import ToolResult, to_json_value

__all__ = ["tool_call_execute", "tool_call_claim"]

logger = logging.getLogger(__name__)


def tool_call_claim(*, call_id: uuid.UUID, worker: str) -> ToolCall | None:
    """Atomically take a ``queued`` call for this worker; ``None`` if another delivery took it already."""
    call = ToolCall.objects.filter(id=call_id).first()
    if call is None or call.status != CallStatus.QUEUED:
        return None
    now = timezone.now()
    from toolhub.tools.registry import registry

    tool = registry.get(call.tool_name)
    lease = float(toolhub_setting("CALL_LEASE_SECONDS")) + float((tool.timeout if tool else 0) or 0)
    attempt = call.attempts + 1
    claimed = call_transition(
        call,
        to=CallStatus.RUNNING,
        allowed_from={CallStatus.QUEUED},
        actor=f"worker:{worker}",
        data={"attempt": attempt},
        attempts=attempt,
        worker=worker[:200],
        started_at=now,
        lease_expires_at=now + timedelta(seconds=lease),
    )
    return call if claimed else None


def tool_call_execute(*, call_id: uuid.UUID, worker: str) -> ToolCall | None:
    """Claim and run one call; the outcome (result or sanitized error) is stored and audited."""
    from toolhub.tools.registry import registry

    call = tool_call_claim(call_id=call_id, worker=worker)
    if call is None:
        return None
    tool = registry.get(call.tool_name)
    if call.approval_hash and tool is not None and tool.version != call.tool_version:
        # What was approved is not what would run: a fresh decision is needed.
        tool_call_require_reapproval(call=call, tool=tool, actor=f"worker:{worker}")
        return call
    refusal = _refusal_at_execution(call, tool)
    if refusal:
        _finish(call, status=CallStatus.DENIED, error=refusal, worker=worker)
        return call
    assert tool is not None
    ctx = ToolContext(call.context).with_values(call_id=str(call.id), idempotency_key=str(call.id))
    try:
        arguments = tool.validate_arguments(call.arguments)
        outcome = tool.invoke(arguments, ctx)
    except Exception as exc:  # noqa: BLE001 - every failure of a tool is recorded, none escapes
        logger.info("tool %s failed on call %s", call.tool_name, call.id, exc_info=True)
        _finish(
            call,
            status=CallStatus.FAILED,
            error=execution_error(exc),
            detail=exception_detail(exc),
            worker=worker,
        )
        return call
    if isinstance(outcome, ToolResult) and outcome.kind == "error":
        _finish(call, status=CallStatus.FAILED, error=str(outcome.value), worker=worker)
        return call
    try:
        result = _result_value(outcome)
        problem = json_storage_problem(result)
        if problem:
            raise ValueError(f"The result cannot be stored as JSON: {problem}")
    except Exception as exc:  # noqa: BLE001
        _finish(
            call,
            status=CallStatus.FAILED,
            error="The tool returned a value that cannot be serialized to JSON.",
            detail=exception_detail(exc),
            worker=worker,
        )
        return call
    _finish(call, status=CallStatus.SUCCEEDED, result=result, worker=worker)
    return call


def _refusal_at_execution(call: ToolCall, tool: Any) -> str | None:
    """Permissions and the approval binding are checked again when the call runs, not only when asked."""
    if tool is None:
        return f"Tool {call.tool_name!r} no longer exists; nothing was executed."
    principal = principal_of_call(user_id=call.user_id, tenant=call.tenant, agent_name=call.agent_name)
    denial = authorization_denial(call.tool_name, principal) or tenant_argument_denial(call.arguments, principal)
    if denial:
        return denial
    if call.approval_hash and approval_hash(call.tool_name, tool.version, call.arguments) != call.approval_hash:
        # An operator edit re-binds the hash; anything else changing the arguments voids the approval.
        return "The arguments differ from what was approved; nothing was executed."
    try:
        tool.validate_arguments(call.arguments)
    except ValidationError:
        return f"The stored arguments no longer match tool {call.tool_name!r}; nothing was executed."
    return None


def _result_value(outcome: Any) -> Any:
    if isinstance(outcome, ToolResult):
        if outcome.kind == "text":
            return str(outcome.value)
        if outcome.kind == "artifact":
            return {
                "artifact": outcome.name,
                "media_type": outcome.media_type,
                "data": to_json_value(outcome.value),
            }
    return to_json_value(outcome)


def _finish(
    call: ToolCall,
    *,
    status: CallStatus,
    worker: str,
    result: Any = None,
    error: str = "",
    detail: str = "",
) -> None:
    # What a tool raised may hold characters no text column stores.
    error, detail = storable_text(error), storable_text(detail)
    data: dict[str, Any] = {"attempt": call.attempts}
    if error:
        data["error"] = error
    with transaction.atomic():
        moved = call_transition(
            call,
            to=status,
            allowed_from={CallStatus.RUNNING},
            actor=f"worker:{worker}",
            data=data,
            result=result,
            error=error,
            error_detail=detail,
            finished_at=timezone.now(),
            lease_expires_at=None,
        )
    if not moved:
        logger.warning(
            "call %s was taken from this worker before it finished; outcome %s not recorded", call.id, status
        )
