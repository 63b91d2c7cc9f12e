"""Notifications about approvals, for other apps and for the webhook.

Each is sent after the transaction that caused it commits; kwargs: ``request`` (ApprovalRequest).
``approval_decided`` also has ``decision`` ("approved", "rejected" or "partial" when more approvers are
needed).
"""

from django.dispatch import Signal

approval_requested = Signal()
approval_decided = Signal()
approval_expired = Signal()
approval_escalated = Signal()
#: A pending request withdrawn because its run was cancelled; kwargs also ``reason``.
approval_cancelled = Signal()
