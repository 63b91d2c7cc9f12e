"""Connects approvals to the core's signals: a held-back call gets its approval request."""

from typing import Any

from django.dispatch import receiver

from approvals import signals
from approvals.models import ApprovalRequest
from approvals.services import approval_request_create
from toolhub.models import ToolCall
from toolhub.policy import ApprovalVerdict
from toolhub.signals import approval_needed


@receiver(approval_needed, dispatch_uid="approvals.create_request")
def _on_approval_needed(sender: type, call: ToolCall, reason: str, verdict: ApprovalVerdict, **kwargs: Any) -> None:
    approval_request_create(call=call, verdict=verdict)


@receiver(signals.approval_requested, dispatch_uid="approvals.email_on_request")
def _email_on_request(sender: type, request: ApprovalRequest, **kwargs: Any) -> None:
    # Sent after commit already: the worker reads the committed request.
    from approvals.tasks import email_approvers_task

    email_approvers_task.delay(request.pk, "approval.requested")


@receiver(signals.approval_escalated, dispatch_uid="approvals.email_on_escalation")
def _email_on_escalation(sender: type, request: ApprovalRequest, **kwargs: Any) -> None:
    from approvals.tasks import email_approvers_task

    email_approvers_task.delay(request.pk, "approval.escalated")
