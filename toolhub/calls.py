"""State transitions of tool calls: one guarded function, one audit event per transition."""

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from toolhub.audit import EventSpec, audit_call_events
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
    preceding: Sequence[EventSpec] = (),
    **fields: Any,
) -> bool:
    """Move ``call`` to ``to`` if it is still in one of ``allowed_from``; return whether it moved.

    The move is a conditional UPDATE, so of two racing writers exactly one wins; the audit event is
    written in the same transaction; a settled call notifies listeners after commit. ``preceding``
    events (what caused the move, e.g. the deciding approval) go before it in the same append.
    """
    now = timezone.now()
    # Inside a caller's transaction no savepoint: a failure here fails the caller's whole change anyway.
    with transaction.atomic(savepoint=False):
        moved = ToolCall.objects.filter(id=call.id, status__in=list(allowed_from)).update(
            status=to, updated_at=now, **fields
        )
        if not moved:
            return False
        call.status = to
        for name, value in fields.items():
            setattr(call, name, value)
        audit_call_events(call, [*preceding, EventSpec(event or f"call.{to}", actor, data)])
        if to in SETTLED_STATUSES:
            call_id, run_id = call.id, call.run_id
            transaction.on_commit(lambda: notify_settled(call_id, run_id), robust=True)
    return True


def notify_settled(call_id: uuid.UUID, run_id: uuid.UUID | None) -> None:
    """Tell listeners (the agent loop) that a call settled; call only after the commit."""
    call_settled.send(sender=ToolCall, call_id=call_id, run_id=run_id)
