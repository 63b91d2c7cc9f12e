"""Requests nobody decides: withdrawn with their call, expired at their deadline, escalated to the fallback group.

Each locks its request (``approvals.rows.locked_request``) and acts only while it is still pending, so a
decision that got there first wins and nothing is done twice; beat runs the sweeps (``approvals.tasks``).
"""

from django.db import transaction
from django.utils import timezone

from approvals import signals
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.rows import locked_request
from approvals.writes import decided_row, notify
from toolhub.audit import EventSpec, audit_call_event
from toolhub.models import CallStatus
from toolhub.waiting import tool_call_refuse

__all__ = ["approval_withdraw", "approvals_expire_due", "approvals_escalate_due", "expire_request"]


def approval_withdraw(*, request_id: int, actor: str, reason: str) -> bool:
    """Withdraw a pending request: the request and its call end ``cancelled``, in one write.

    For the caller's transaction (``toolhub.waiting.tool_call_withdraw``, through ``approval_withdrawing``);
    ``False`` when the request was decided meanwhile, or its call had left ``pending_approval`` (then nobody is told
    it was withdrawn, as ``expire_request`` tells no expiry of a call that did not move).
    """
    request = locked_request(request_id)
    if request.status != ApprovalStatus.PENDING:
        return False
    withdrawn = EventSpec("approval.cancelled", actor, {"request": request.pk, "reason": reason})
    moved = tool_call_refuse(
        call=request.call,
        actor=actor,
        status=CallStatus.CANCELLED,
        message=f"Not executed: {reason}",
        preceding=[withdrawn],
        writes=[decided_row(request, ApprovalStatus.CANCELLED)],
    )
    if moved:
        notify(signals.approval_cancelled, request, "approval.cancelled", reason=reason)
    return moved


def approvals_expire_due() -> int:
    """Expire every pending request past its deadline; return how many."""
    expired = 0
    due = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING, expires_at__lte=timezone.now())
    for request_id in due.order_by("expires_at", "pk").values_list("pk", flat=True)[:500]:
        with transaction.atomic():
            request = locked_request(request_id)
            if request.status == ApprovalStatus.PENDING and request.expires_at <= timezone.now():
                expire_request(request)
                expired += 1
    return expired


def approvals_escalate_due() -> int:
    """Open waiting requests to their fallback approver group once their escalation time has come."""
    escalated = 0
    due = ApprovalRequest.objects.filter(
        status=ApprovalStatus.PENDING, escalated_at__isnull=True, escalate_at__lte=timezone.now()
    )
    for request_id in due.order_by("escalate_at", "pk").values_list("pk", flat=True)[:500]:
        with transaction.atomic():
            request = locked_request(request_id)
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
            notify(signals.approval_escalated, request, "approval.escalated")
            escalated += 1
    return escalated


def expire_request(request: ApprovalRequest) -> bool:
    """End the request unanswered and refuse its call: the request's move and the call's are one write.

    The expiry is recorded and announced only when the call moved (a conditional UPDATE, ``tool_call_refuse``): a
    call that had already left ``pending_approval`` did not expire, and nobody is told it did. Returns whether it moved.
    """
    moved = tool_call_refuse(
        call=request.call,
        actor="expiry",
        status=CallStatus.EXPIRED,
        message="The approval request expired before an operator decided; the call was not executed.",
        writes=[decided_row(request, ApprovalStatus.EXPIRED)],
    )
    if moved:
        audit_call_event(request.call, "approval.expired", actor="expiry", data={"request": request.pk})
        notify(signals.approval_expired, request, "approval.expired")
    return moved
