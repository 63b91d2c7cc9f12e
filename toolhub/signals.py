"""Signals through which the core tells other apps what happened, without importing them."""

from django.dispatch import Signal

__all__ = ["approval_needed", "call_settled"]

#: A call became ``pending_approval``; kwargs: ``call`` (ToolCall), ``reason`` (str). Sent inside the
#: transaction, so the receiver's rows (the approval request) commit or roll back with the call.
approval_needed = Signal()

#: A call reached a settled status; kwargs: ``call_id``, ``run_id`` (or None) and ``call`` (the ToolCall as that
#: transition left it, so a listener need not read it again). Sent after commit.
call_settled = Signal()
