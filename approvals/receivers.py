"""Connects approvals to the core's signals: a held call gets its approval request, a withdrawn one ends it.

A worker asks, before it runs an approved call, whether its approval still suffices (``approval_shortfall``).
"""

from typing import Any

from django.dispatch import receiver

from approvals import signals
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_request_create
from approvals.shortfall import approval_shortfall as shortfall_of
from approvals.unanswered import approval_withdraw
from toolhub.models import ToolCall
from toolhub.policy import ApprovalVerdict
from toolhub.signals import approval_needed, approval_shortfall, approval_withdrawing


@receiver(approval_needed, dispatch_uid="approvals.create_request")
def _on_approval_needed(sender: type, call: ToolCall, reason: str, verdict: ApprovalVerdict, **kwargs: Any) -> None:
    approval_request_create(call=call, verdict=verdict)


@receiver(approval_withdrawing, dispatch_uid="approvals.withdraw_request")
def _on_approval_withdrawing(sender: type, call: ToolCall, actor: str, reason: str, **kwargs: Any) -> bool:
    pending = ApprovalRequest.objects.filter(call_id=call.id, status=ApprovalStatus.PENDING)
    request_id = pending.values_list("id", flat=True).first()
    return request_id is not None and approval_withdraw(request_id=request_id, actor=actor, reason=reason)


@receiver(approval_shortfall, dispatch_uid="approvals.approval_shortfall")
def _on_approval_shortfall(sender: type, call: ToolCall, **kwargs: Any) -> str | None:
    return shortfall_of(call)


@receiver(signals.approval_requested, dispatch_uid="approvals.email_on_request")
def _email_on_request(sender: type, request: ApprovalRequest, **kwargs: Any) -> None:
    # Sent after commit already: the worker reads the committed request.
    from approvals.tasks import email_approvers_task

    email_approvers_task.delay(request.pk, "approval.requested")


@receiver(signals.approval_escalated, dispatch_uid="approvals.email_on_escalation")
def _email_on_escalation(sender: type, request: ApprovalRequest, **kwargs: Any) -> None:
    from approvals.tasks import email_approvers_task

    email_approvers_task.delay(request.pk, "approval.escalated")
