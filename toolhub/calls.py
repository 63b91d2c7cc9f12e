"""State transitions of tool calls: one guarded function, one audit event per transition."""

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from toolhub.audit import audit_call_event
from toolhub.models import SETTLED_STATUSES, CallStatus, ToolCall
from toolhub.signals import call_settled

__all__ = ["call_transition", "notify_settled"]


def call_transition(
    call: ToolCall,
    *,
    to: CallStatus,
    allowed_from: Iterable[CallStatus],
    actor: str,
    event: str | None = None,
    data: Mapping[str, Any] | None = None,
    **fields: Any,
) -> bool:
    """Move ``call`` to ``to`` if it is still in one of ``allowed_from``; return whether it moved.

    The move is a conditional UPDATE, so of two racing writers exactly one wins; the audit event is
    written in the same transaction; a settled call notifies listeners after commit.
    """
    now = timezone.now()
    with transaction.atomic():
        moved = ToolCall.objects.filter(id=call.id, status__in=list(allowed_from)).update(
            status=to, updated_at=now, **fields
        )
        if not moved:
            return False
        call.status = to
        for name, value in fields.items():
            setattr(call, name, value)
        audit_call_event(call, event or f"call.{to}", actor=actor, data=data)
        if to in SETTLED_STATUSES:
            transaction.on_commit(lambda: notify_settled(call), robust=True)
    return True


def notify_settled(call: ToolCall) -> None:
    """Tell listeners (the agent loop, the sagas) that a call settled; call only after the commit."""
    call_settled.send(sender=ToolCall, call_id=call.id, run_id=call.run_id, call=call)
