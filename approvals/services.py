"""Approval services: create requests, decide them (exactly one decision wins), expire them."""

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from approvals import signals
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus, DecisionKind
from approvals.webhooks import webhook_enqueue
from toolhub.audit import REDACTED, audit_call_event
from toolhub.authorization import tool_group_names
from toolhub.conf import toolhub_setting
from toolhub.exceptions import AlreadyDecidedError, ApprovalError, DecisionNotAllowedError
from toolhub.feedback import invalid_arguments_message
from toolhub.models import CallStatus, ToolCall, ToolGroup
from toolhub.pipeline import tool_call_refuse, tool_call_release
from toolhub.policy import ApprovalVerdict
from toolhub.tenancy import require_tenant
from toolhub.tools.registry import registry
from toolhub.tools.results import to_json_value

__all__ = [
    "approval_request_create",
    "approval_approve",
    "approval_reject",
    "approvals_expire_due",
    "approvals_escalate_due",
    "approval_may_decide",
]

DECIDE_PERMISSION = "approvals.decide_approvalrequest"


def approval_request_create(*, call: ToolCall, verdict: ApprovalVerdict) -> ApprovalRequest:
    """Open (or reopen) the request for a call the pipeline held back, inside the pipeline's transaction."""
    now = timezone.now()
    timeout = verdict.timeout_seconds or float(toolhub_setting("APPROVAL_TIMEOUT_SECONDS"))
    group = _governing_group(call.tool_name)
    escalate_after = (group.escalate_after_seconds if group else None) or float(
        toolhub_setting("ESCALATE_AFTER_SECONDS")
    )
    terms = {
        "reason": verdict.reason[:500],
        "source": verdict.source,
        "rule_id": verdict.rule_id,
        "risk": verdict.risk,
        "required_approvals": verdict.required_approvals,
        "approver_group": group.approver_group if group else None,
        "approver_permission": group.approver_permission if group else "",
        "escalation_group": group.escalation_group if group else None,
        "escalate_at": now + timedelta(seconds=escalate_after) if group and group.escalation_group_id else None,
        "escalated_at": None,
        "expires_at": now + timedelta(seconds=timeout),
    }
    request = ApprovalRequest.objects.filter(call=call).select_for_update().first()
    if request is None:
        request = ApprovalRequest.objects.create(
            call=call,
            tool_name=call.tool_name,
            requested_by_id=call.user_id,
            agent_name=call.agent_name,
            tenant=call.tenant,
            **terms,
        )
    else:
        # The call came back (its tool changed after approval): a new round, earlier decisions no longer count.
        for name, value in terms.items():
            setattr(request, name, value)
        request.status = ApprovalStatus.PENDING
        request.round += 1
        request.decided_at = None
        request.save()
    _notify(signals.approval_requested, request, "approval.requested")
    return request


def approval_may_decide(request: ApprovalRequest, user: AbstractBaseUser) -> str | None:
    """Why ``user`` may not decide ``request``, or ``None`` when they may.

    A user outside the request's tenant is refused with :class:`NotInTenantError` before anything
    else is checked, so that the answer reveals nothing of the request (callers answer it as 404).
    """
    require_tenant(user, request.tenant)
    if not user.has_perm(DECIDE_PERMISSION):
        return "You need the 'Can approve or reject held-back tool calls' permission."
    if request.requested_by_id is not None and request.requested_by_id == user.pk:
        return "You started this call; another operator must decide it."
    if (request.approver_group_id or request.approver_permission) and not user.is_superuser:
        groups = set(user.groups.values_list("id", flat=True))
        fallback = bool(request.escalated_at) and request.escalation_group_id in groups
        in_group = not request.approver_group_id or request.approver_group_id in groups
        permitted = not request.approver_permission or user.has_perm(request.approver_permission)
        if not fallback and not (in_group and permitted):
            return "Only the approvers of this tool's group may decide this request."
    return None


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


def _decide(**options: Any) -> ApprovalRequest:
    request = _decide_in_transaction(**options)
    if request.status == ApprovalStatus.EXPIRED:
        # Raised only now, so that the expiry found on the way is committed and the model is told.
        raise AlreadyDecidedError("This approval request expired; nothing was changed.")
    return request


@transaction.atomic
def _decide_in_transaction(
    *,
    request_id: int,
    user: AbstractBaseUser,
    kind: DecisionKind,
    comment: str,
    arguments: Mapping[str, Any] | None,
) -> ApprovalRequest:
    # The row lock makes concurrent deciders queue; the status check then lets exactly one win.
    request = ApprovalRequest.objects.select_for_update(of=("self",)).select_related("call").get(pk=request_id)
    # Who may decide is answered before the state, so that a user without the right learns nothing of it.
    refusal = approval_may_decide(request, user)
    if refusal:
        raise DecisionNotAllowedError(refusal)
    if request.status != ApprovalStatus.PENDING:
        raise AlreadyDecidedError(f"This approval request is already {request.status}; nothing was changed.")
    if request.decisions.filter(decided_by=user, round=request.round).exists():
        raise DecisionNotAllowedError("You already approved this call; a second, different operator must decide.")
    now = timezone.now()
    if request.expires_at <= now:
        _expire(request)
        return request

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
        round=request.round,
    )
    audit_data: dict[str, Any] = {"decision": str(decision_kind), "comment": comment, "request": request.pk}
    if diff is not None:
        audit_data["diff"] = diff
    audit_call_event(call, f"approval.{decision_kind}", actor=actor, data=audit_data)

    if kind == DecisionKind.REJECT:
        request.status = ApprovalStatus.REJECTED
        request.decided_at = now
        request.save(update_fields=["status", "decided_at"])
        message = f"Rejected by operator: {comment}" if comment else "Rejected by operator (no comment given)."
        tool_call_refuse(call=call, actor=actor, status=CallStatus.REJECTED, message=message)
        _notify(
            signals.approval_decided, request, "approval.rejected", decision="rejected", by=username, comment=comment
        )
        return request

    approvals = request.decisions.filter(round=request.round).exclude(decision=DecisionKind.REJECT).count()
    if approvals >= request.required_approvals:
        request.status = ApprovalStatus.APPROVED
        request.decided_at = now
        request.save(update_fields=["status", "decided_at"])
        # With four eyes, an edit by either approver is what runs; the last edit wins.
        last_edit = request.decisions.filter(round=request.round, decision=DecisionKind.EDIT).order_by("-id").first()
        tool_call_release(
            call=call,
            actor=actor,
            arguments=edited if edited is not None else (last_edit.edited_arguments if last_edit else None),
        )
        _notify(
            signals.approval_decided, request, "approval.approved", decision="approved", by=username, comment=comment
        )
    else:
        _notify(signals.approval_decided, request, "approval.partial", decision="partial", by=username, comment=comment)
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
    # The diff is shown to operators and auditors: sensitive values are never part of it.
    diff = {
        key: {"before": REDACTED, "after": REDACTED}
        if key in tool.sensitive
        else {"before": call.arguments.get(key), "after": validated.get(key)}
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
    audit_call_event(request.call, "approval.expired", actor="expiry", data={"request": request.pk})
    _notify(signals.approval_expired, request, "approval.expired")


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


def approvals_escalate_due() -> int:
    """Open waiting requests to their fallback approver group once their escalation time has come."""
    escalated = 0
    due = ApprovalRequest.objects.filter(
        status=ApprovalStatus.PENDING, escalated_at__isnull=True, escalate_at__lte=timezone.now()
    )
    for request_id in due.values_list("pk", flat=True)[:500]:
        with transaction.atomic():
            request = ApprovalRequest.objects.select_for_update(of=("self",)).select_related("call").get(pk=request_id)
            if request.status != ApprovalStatus.PENDING or request.escalated_at is not None:
                continue
            request.escalated_at = timezone.now()
            request.save(update_fields=["escalated_at"])
            group_name = request.escalation_group.name if request.escalation_group else ""
            audit_call_event(
                request.call,
                "approval.escalated",
                actor="escalation",
                data={"request": request.pk, "to_group": group_name},
            )
            _notify(signals.approval_escalated, request, "approval.escalated")
            escalated += 1
    return escalated


def _governing_group(tool_name: str) -> ToolGroup | None:
    """The tool's group that governs its approvals: the first by name that restricts approvers, else the first."""
    names = tool_group_names([tool_name])[tool_name]
    if not names:
        return None
    groups = list(ToolGroup.objects.filter(name__in=names).select_related("approver_group", "escalation_group"))
    restricting = [g for g in groups if g.approver_group_id or g.approver_permission]
    return min(restricting or groups, key=lambda group: group.name, default=None)


def _notify(signal: Any, request: ApprovalRequest, event: str, **extra: Any) -> None:
    """Send the signal after commit and queue the webhook notification in this transaction."""
    payload = {
        "request": request.pk,
        "call": str(request.call_id),
        "run": str(request.call.run_id) if request.call.run_id else None,
        "tool": request.tool_name,
        "status": request.status,
        "reason": request.reason,
        "tenant": request.tenant,
        **extra,
    }
    webhook_enqueue(event=event, payload=payload)
    transaction.on_commit(lambda: signal.send(sender=ApprovalRequest, request=request, **extra), robust=True)
