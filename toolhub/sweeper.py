"""Periodic repair of what a lost broker message or a dead worker leaves behind.

PostgreSQL is the record and Redis only the transport: a queued call whose message never ran is
dispatched again; a running call whose worker died (its lease expired) is never run twice when the
tool is not idempotent: it goes to ``needs_attention`` for an operator. An atomic tool's call is run
again: its effects roll back with the transaction of its unrecorded outcome, so the lost attempt left none.
Either is run again only while fewer than ``CALL_MAX_ATTEMPTS`` of its attempts in a row were lost, then it needs
attention too.
"""

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from toolhub.calls import call_transition
from toolhub.conf import toolhub_settings
from toolhub.dispatch import dispatch_call
from toolhub.models import CallStatus, ToolCall
from toolhub.selectors import tool_call_audit_events
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry
from toolhub.waiting import awaiting_results_past_deadline, tool_call_expire_awaiting

__all__ = ["calls_redispatch_stale", "calls_reconcile_expired_leases", "calls_expire_awaiting_results"]

#: The actor of the reconciler's moves: its requeues of a call are that call's lost attempts (``_lost_in_a_row``).
RECONCILER = "reconciler"


def calls_redispatch_stale(*, older_than_seconds: float | None = None) -> int:
    """Dispatch again every ``queued`` call that has waited longer than its message should take."""
    seconds = older_than_seconds if older_than_seconds is not None else toolhub_settings().REDISPATCH_AFTER_SECONDS
    cutoff = timezone.now() - timedelta(seconds=float(seconds))
    # What the message's claim hint needs is read with the batch: a deferred field would cost a query per call.
    stale = list(
        ToolCall.objects.filter(status=CallStatus.QUEUED, queued_at__lt=cutoff)
        .only("id", "tool_name", "tenant", "run_id", "attempts")
        .order_by("queued_at")[:500]
    )
    sent = 0
    for call in stale:
        with transaction.atomic():
            # Bumping queued_at keeps the next sweep from sending it again at once; a call claimed since is not sent.
            if ToolCall.objects.filter(id=call.id, status=CallStatus.QUEUED, attempts=call.attempts).update(
                queued_at=timezone.now()
            ):
                dispatch_call(call)
                sent += 1
    return sent


def calls_reconcile_expired_leases() -> dict[str, int]:
    """Settle calls whose worker vanished: idempotent and atomic ones are queued again, the others need attention.

    A late outcome of the lost attempt is refused (outcomes are written only by the attempt that holds the
    claim), and an atomic tool's effects roll back with it. Each move is of the claim read as expired, its attempt
    with its lease still ended: a call queued again and claimed meanwhile (a later attempt, by another sweep; or
    the same attempt number, after a batch handed it back unstarted) is left to its worker. A call whose last
    ``CALL_MAX_ATTEMPTS`` attempts were all lost is not queued again: one whose every run takes its worker down
    would otherwise do so once per lease, forever. Lost in a row, not claimed in all: a compensation's call is one
    row over all its attempts, whose ordinary failures are no worker's death (``_lost_in_a_row``).
    """
    now = timezone.now()
    max_attempts = toolhub_settings().CALL_MAX_ATTEMPTS
    counts = {"requeued": 0, "needs_attention": 0}
    for call in ToolCall.objects.filter(status=CallStatus.RUNNING, lease_expires_at__lt=now)[:500]:
        kind = _retry_kind(registry.get(call.tool_name))
        lost = _lost_in_a_row(call, max_attempts) if kind else 1
        with transaction.atomic():
            if kind and lost < max_attempts:
                if call_transition(
                    call,
                    to=CallStatus.QUEUED,
                    allowed_from={CallStatus.RUNNING},
                    attempt=call.attempts,
                    lease_expired_by=now,
                    actor=RECONCILER,
                    data={"reason": f"lease expired; {kind} tool is retried", "attempt": call.attempts},
                    queued_at=now,
                    lease_expires_at=None,
                ):
                    dispatch_call(call)
                    counts["requeued"] += 1
            elif call_transition(
                call,
                to=CallStatus.NEEDS_ATTENTION,
                allowed_from={CallStatus.RUNNING},
                attempt=call.attempts,
                lease_expired_by=now,
                actor=RECONCILER,
                data={"reason": _unsettled_reason(kind, lost), "attempt": call.attempts},
                error=_unsettled_error(kind, lost),
                lease_expires_at=None,
            ):
                counts["needs_attention"] += 1
    return counts


def _retry_kind(tool: Tool | None) -> str:
    """Why a lost attempt of the tool's call may be run again ("idempotent", "atomic"), or "" when it may not."""
    if tool is None:
        return ""
    return "idempotent" if tool.idempotent else "atomic" if tool.atomic else ""


def _lost_in_a_row(call: ToolCall, limit: int) -> int:
    """The call's attempts lost in a row, this one included (at most ``limit`` + 1 are read).

    Each earlier one is a requeue by the reconciler since the call was last queued by a decision (its request, a
    compensation's next attempt, an operator's retry), read from the call's audit events in the order they were
    appended (not by ``seq``: a call's later events go to another chain once ``AUDIT_CHAINS`` is raised); a batch's
    hand-back (a worker queueing a call it never started) neither counts nor ends the row.
    """
    actors = (
        tool_call_audit_events(call)
        .filter(event_type=f"call.{CallStatus.QUEUED}")
        .exclude(actor__startswith="worker:")
        .reverse()
        .values_list("actor", flat=True)[:limit]
    )
    lost = 1
    for actor in actors:
        if actor != RECONCILER:
            break
        lost += 1
    return lost


def _unsettled_reason(kind: str, lost: int) -> str:
    """The audit event's reason for a lost call that is not queued again."""
    if kind:
        return f"lease expired; {lost} attempts in a row lost (CALL_MAX_ATTEMPTS)"
    return "lease expired while running; outcome unknown"


def _unsettled_error(kind: str, lost: int) -> str:
    """What the model and the operator read of a lost call that is not queued again."""
    if not kind:
        return (
            "The outcome of this call is unknown (its worker stopped while running it). "
            "An operator was alerted; do not call it again until they resolve it."
        )
    outcome = "nothing it did was kept" if kind == "atomic" else "its outcome is unknown"
    return (
        f"This call's worker stopped while running it, {lost} times in a row; {outcome}. "
        "An operator was alerted; do not call it again until they resolve it."
    )


def calls_expire_awaiting_results() -> int:
    """Expire calls of external tools whose result did not arrive in time; the model is told.

    A call suspended with ``expires=False`` (a subagent's, settled by its child run) is left alone: expiring it
    would let the parent go on while the child still works, or waits on the approval desk, in its name. The
    deadline is ``toolhub.waiting``'s, which a result that comes late meets too.
    """
    now = timezone.now()
    return sum(tool_call_expire_awaiting(call, now=now) for call in awaiting_results_past_deadline(now)[:500])
