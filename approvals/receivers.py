"""Connects approvals to the core's signals: a held-back call gets its approval request."""

from typing import Any

from django.dispatch import receiver

from approvals.services import approval_request_create
from toolhub.models import ToolCall
from toolhub.policy import ApprovalVerdict
from toolhub.signals import approval_needed


@receiver(approval_needed, dispatch_uid="approvals.create_request")
def _on_approval_needed(sender: type, call: ToolCall, reason: str, verdict: ApprovalVerdict, **kwargs: Any) -> None:
    approval_request_create(call=call, verdict=verdict)
