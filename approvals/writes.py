"""The decision path's writes: rows that go in the statement of a decision's audit event, and the notice of it.

A decision's row and its request's guarded move are written with the call's move and the events in one
statement (``writes`` of ``toolhub.audit``); the webhook delivery is queued in the same transaction and
the signal sent after it commits.
"""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from approvals.models import APPROVAL_TRANSITIONS, ApprovalDecision, ApprovalRequest, ApprovalStatus, DecisionKind
from approvals.webhooks import webhook_enqueue
from toolhub.audit import Write
from toolhub.rowwrite import insert_params, insert_sql
from toolhub.transitions import guarded_update_sql

__all__ = ["decision_row", "decided_row", "notify"]


def decision_row(
    request: ApprovalRequest, user: AbstractBaseUser, kind: DecisionKind, comment: str, **extra: Any
) -> Write:
    """An operator's decision row, as a write that goes in the statement of the decision's audit event."""
    decision = ApprovalDecision(
        request=request,
        decided_by=user,
        decided_by_name=user.get_username(),
        decision=kind,
        comment=comment,
        round=request.round,
        arguments_hash=request.arguments_hash,
        **extra,
    )
    return insert_sql(ApprovalDecision), insert_params(decision, transaction.get_connection())


def decided_row(request: ApprovalRequest, to: ApprovalStatus, **values: Any) -> Write:
    """The request's guarded move to ``to``, decided now, as a write (``request`` shows it moved, and ``values``).

    The request is locked since ``locked_request`` and was found pending, so the move cannot miss; if it
    ever did, the write raises ``WriteMissedError`` and the decision's transaction keeps nothing.
    """
    now = timezone.now()
    sql, params = guarded_update_sql(
        ApprovalRequest,
        request.pk,
        table=APPROVAL_TRANSITIONS,
        to=to,
        allowed_from={request.status},
        values={"decided_at": now, **values},
    )
    request.status, request.decided_at = to, now
    for name, value in values.items():
        setattr(request, name, value)
    return sql, params


def notify(signal: Any, request: ApprovalRequest, event: str, **extra: Any) -> None:
    """Send the signal after commit and queue the webhook notification in this transaction."""
    payload = {
        "request": request.pk,
        "call": str(request.call_id),
        "run": str(request.call.run_id) if request.call.run_id else None,
        "tool": request.tool_name,
        "status": request.status,
        "reason": request.reason,
        "tenant": request.tenant,
        "round": request.round,
        "arguments_hash": request.arguments_hash,
        **extra,
    }
    webhook_enqueue(event=event, payload=payload)
    transaction.on_commit(lambda: signal.send(sender=ApprovalRequest, request=request, **extra), robust=True)
