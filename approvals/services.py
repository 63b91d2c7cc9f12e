"""Approval services: create requests, decide them (exactly one decision wins), expire them."""

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus, DecisionKind
from toolhub.audit import audit_call_event, redact
from toolhub.conf import toolhub_setting
from toolhub.exceptions import AlreadyDecidedError, ApprovalError, DecisionNotAllowedError
from toolhub.feedback import invalid_arguments_message
from toolhub.models import CallStatus, ToolCall
from toolhub.pipeline import tool_call_refuse, tool_call_release
from toolhub.tools.registry import registry
from toolhub.tools.results import to_json_value

__all__ = ["approval_request_create", "approval_approve", "approval_reject", "approvals_expire_due"]

DECIDE_PERMISSION = "approvals.decide_approvalrequest"


def approval_request_create(*, call: ToolCall, reason: str) -> ApprovalRequest:
    """Open the request for a call the pipeline held back (inside the pipeline's transaction)."""
    tool = registry.get(call.tool_name)
    risk = str(tool.risk) if tool else ""
    from toolhub.models import ToolDefinition

    definition = ToolDefinition.objects.filter(name=call.tool_name).first()
    if definition is not None and definition.risk_override:
        risk = definition.risk_override
    timeout = float(toolhub_setting("APPROVAL_TIMEOUT_SECONDS"))
    return ApprovalRequest.objects.create(
        call=call,
        reason=reason[:500],
        tool_name=call.tool_name,
        risk=risk,
        requested_by_id=call.user_id,
        agent_name=call.agent_name,
        tenant=call.tenant,
        required_approvals=2 if risk == "critical" else 1,
        expires_at=timezone.now() + timedelta(seconds=timeout),
    )


def approval_approve(
    *,
    request_id: int,
    user: AbstractBaseUser,
    comment: str = "",
    arguments: Mapping[str, Any] | None = None,
) -> ApprovalRequest:
    """Approve (optionally with edited arguments); the call runs once enough approvers agreed."""
    return _decide(request_id=request_id, user=user, kind=DecisionKind.APPROVE, comment=comment, arguments=arguments)


def approval_reject(*, request_id: int, user: AbstractBaseUser, comment: str = "") -> ApprovalRequest:
    """Reject; the model is told the call was rejected by an operator, with the comment."""
    return _decide(request_id=request_id, user=user, kind=DecisionKind.REJECT, comment=comment, arguments=None)


@transaction.atomic
def _decide(
    *,
    request_id: int,
    user: AbstractBaseUser,
    kind: DecisionKind,
    comment: str,
    arguments: Mapping[str, Any] | None,
) -> ApprovalRequest:
    # The row lock makes concurrent deciders queue; the status check then lets exactly one win.
    request = ApprovalRequest.objects.select_for_update(of=("self",)).select_related("call").get(pk=request_id)
    if request.status != ApprovalStatus.PENDING:
        raise AlreadyDecidedError(f"This approval request is already {request.status}; nothing was changed.")
    if not user.has_perm(DECIDE_PERMISSION):
        raise DecisionNotAllowedError("You need the 'Can approve or reject held-back tool calls' permission.")
    if request.requested_by_id is not None and request.requested_by_id == user.pk:
        raise DecisionNotAllowedError("You started this call; another operator must decide it.")
    if request.decisions.filter(decided_by=user).exists():
        raise DecisionNotAllowedError("You already approved this call; a second, different operator must decide.")
    now = timezone.now()
    if request.expires_at <= now:
        _expire(request)
        raise AlreadyDecidedError("This approval request expired; nothing was changed.")

    call = request.call
    username = user.get_username()
    actor = f"operator:{username}"
    edited, diff = _edited_arguments(call, arguments) if arguments is not None else (None, None)
    decision_kind = DecisionKind.EDIT if edited is not None else kind
    ApprovalDecision.objects.create(
        request=request,
        decided_by=user,
        decided_by_name=username,
        decision=decision_kind,
        comment=comment,
        edited_arguments=edited,
        diff=diff,
    )
    tool = registry.get(call.tool_name)
    sensitive = tool.sensitive if tool else frozenset()
    audit_data: dict[str, Any] = {"decision": str(decision_kind), "comment": comment, "request": request.pk}
    if diff is not None:
        audit_data["diff"] = {key: redact(change, sensitive) for key, change in diff.items()}
    audit_call_event(call, f"approval.{decision_kind}", actor=actor, data=audit_data)

    if kind == DecisionKind.REJECT:
        request.status = ApprovalStatus.REJECTED
        request.decided_at = now
        request.save(update_fields=["status", "decided_at"])
        message = f"Rejected by operator: {comment}" if comment else "Rejected by operator (no comment given)."
        tool_call_refuse(call=call, actor=actor, status=CallStatus.REJECTED, message=message)
        return request

    approvals = request.decisions.exclude(decision=DecisionKind.REJECT).count()
    if approvals >= request.required_approvals:
        request.status = ApprovalStatus.APPROVED
        request.decided_at = now
        request.save(update_fields=["status", "decided_at"])
        tool_call_release(call=call, actor=actor, arguments=edited)
    return request


def _edited_arguments(call: ToolCall, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Validate an operator's edit against the tool's schema and compute what changed."""
    tool = registry.get(call.tool_name)
    if tool is None:
        raise ApprovalError(f"Tool {call.tool_name!r} no longer exists; the call cannot be edited.")
    merged = {**call.arguments, **dict(arguments)}
    try:
        validated = to_json_value(tool.validate_arguments(merged))
    except ValidationError as exc:
        raise ApprovalError(invalid_arguments_message(tool.name, exc)) from None
    diff = {
        key: {"before": call.arguments.get(key), "after": validated.get(key)}
        for key in sorted(set(call.arguments) | set(validated))
        if call.arguments.get(key) != validated.get(key)
    }
    return validated, diff


def _expire(request: ApprovalRequest) -> None:
    request.status = ApprovalStatus.EXPIRED
    request.decided_at = timezone.now()
    request.save(update_fields=["status", "decided_at"])
    tool_call_refuse(
        call=request.call,
        actor="expiry",
        status=CallStatus.EXPIRED,
        message="The approval request expired before an operator decided; the call was not executed.",
    )


def approvals_expire_due() -> int:
    """Expire every pending request past its deadline; return how many."""
    expired = 0
    due = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING, expires_at__lte=timezone.now())
    for request_id in due.values_list("pk", flat=True)[:500]:
        with transaction.atomic():
            request = ApprovalRequest.objects.select_for_update(of=("self",)).select_related("call").get(pk=request_id)
            if request.status == ApprovalStatus.PENDING and request.expires_at <= timezone.now():
                _expire(request)
                expired += 1
    return expired
