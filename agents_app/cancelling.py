"""Cancelling runs: by their user or an operator, or because their user may no longer act in their tenant.

A cancelled run ends at once and spends no more model turns: a step in flight loses its lease (its answer
is dropped when it comes back), its child runs are cancelled with it, and what it asked for that has not
started is withdrawn: calls held for approval (with their approval requests, so no operator decides them
any more), queued or awaiting a result. A call already running finishes; what completed steps did stays,
and a rollback (``POST /api/v1/runs/<id>/rollback/``, its children's sagas too) undoes it. The sagas'
compensations are never withdrawn. Each cancellation is a ``run.cancelled`` audit event naming who and why
(and the tools of a serial turn's calls it dropped unrequested, never their arguments), in the same transaction.
"""

import uuid
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents_app.ending import run_end_with_error
from agents_app.models import AgentRun, RunStatus, StopReason
from agents_app.steprows import locked_run
from approvals.models import ApprovalRequest, ApprovalStatus
from toolhub.audit import audit_append
from toolhub.authorization import CallPrincipal, standing_refusal
from toolhub.calls import settling_together
from toolhub.models import CallStatus, ToolCall, undoing
from toolhub.waiting import WITHDRAWABLE_STATUSES, tool_call_withdraw

__all__ = [
    "GOING",
    "GOVERNANCE_ACTOR",
    "run_cancel",
    "run_cancel_locked",
    "runs_cancel_of_user",
    "runs_cancel_without_standing",
]

#: Who cancels a run whose user may no longer act in its tenant.
GOVERNANCE_ACTOR = "governance"

#: The statuses of a run that is still going (and so can be cancelled).
GOING = (RunStatus.RUNNING, RunStatus.WAITING)


def run_cancel(*, run_id: uuid.UUID, actor: str, reason: str) -> bool:
    """Cancel the run if it is still going; return whether this call cancelled it (not: it had ended)."""
    with transaction.atomic():
        run = locked_run(run_id)
        if run is None or run.status not in GOING:
            return False
        run_cancel_locked(run, actor=actor, reason=reason)
    return True


def run_cancel_locked(run: AgentRun, *, actor: str, reason: str) -> None:
    """Cancel ``run`` (locked by the caller, still going) and its child runs, in the caller's transaction.

    Every row the cancellation changes is locked before its first audit append, in the order a decision takes
    them (the run's approval requests, then their calls): an append locks a chain head, which a decider or a
    worker holding one of those rows may be waiting for. Then children end before parents: a child's end
    settles its parent's waiting call (``subagent_run_ended``), as when it ends on its own. The calls it settles are
    told of together (``settling_together``): each run is woken once, not once per withdrawn call.
    """
    tree = _locked_tree(run)
    run_ids = [each.id for each in tree]
    list(_held_requests(run_ids).select_for_update(of=("self",)).values_list("id", flat=True))
    parent_calls = [each.parent_call_id for each in tree if each.parent_call_id is not None]
    settled_by_children = ToolCall.objects.filter(id__in=parent_calls)
    locked_calls = _withdrawn_calls(run_ids, WITHDRAWABLE_STATUSES) | settled_by_children
    list(locked_calls.select_for_update().order_by("id").values_list("id", flat=True))
    with settling_together():
        for each in reversed(tree):
            why = reason if each is run else f"its parent run {each.parent_run_id} was cancelled"
            _end_cancelled(each, actor=actor, reason=why)


def _held_requests(run_ids: list[uuid.UUID]) -> QuerySet[ApprovalRequest]:
    """The pending approval requests of the runs' steps, by id (the sagas' compensations are never withdrawn)."""
    return (
        ApprovalRequest.objects.filter(call__run_id__in=run_ids, status=ApprovalStatus.PENDING)
        .exclude(undoing("call__"))
        .order_by("id")
    )


def _withdrawn_calls(run_ids: list[uuid.UUID], statuses: frozenset[CallStatus]) -> QuerySet[ToolCall]:
    """The runs' steps in one of ``statuses`` (the sagas' compensations are never withdrawn)."""
    return ToolCall.objects.filter(run_id__in=run_ids, status__in=statuses).exclude(undoing())


def _locked_tree(run: AgentRun) -> list[AgentRun]:
    """``run`` and its descendants still going, each locked, every parent before its children."""
    tree = [run]
    for parent in tree:  # grows while it is walked: breadth first
        children = AgentRun.objects.filter(parent_run_id=parent.id, status__in=GOING).order_by("id")
        for child_id in children.values_list("id", flat=True):
            child = locked_run(child_id)
            if child is not None and child.status in GOING:
                tree.append(child)
    return tree


def _end_cancelled(run: AgentRun, *, actor: str, reason: str) -> None:
    error = f"Cancelled by {actor}: {reason}"
    dropped = run_end_with_error(
        run, error, status=RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED, now=timezone.now()
    )
    # A serial turn's calls never requested are named (tools, never arguments): the model asked for them.
    data: dict[str, Any] = {"reason": reason, **({"dropped_calls": dropped} if dropped else {})}
    audit_append(event_type="run.cancelled", actor=actor, data=data, run_id=run.id, tenant=run.tenant)
    _withdraw_calls(run, actor=actor, reason=f"its run was cancelled by {actor}: {reason}")


def _withdraw_calls(run: AgentRun, *, actor: str, reason: str) -> None:
    """Withdraw the run's steps that have not started, held ones with their approval requests."""
    for call in _withdrawn_calls([run.id], WITHDRAWABLE_STATUSES).order_by("turn", "position"):
        tool_call_withdraw(call=call, actor=actor, reason=reason)


def runs_cancel_of_user(*, user_id: int, actor: str, reason: str) -> int:
    """Cancel every run of ``user_id`` that is still going; return how many (a user about to be deleted)."""
    going = AgentRun.objects.filter(user_id=user_id, status__in=GOING).values_list("id", flat=True)
    return sum(run_cancel(run_id=run_id, actor=actor, reason=reason) for run_id in list(going))


def runs_cancel_without_standing(*, user_id: int, actor: str) -> int:
    """Cancel the runs of ``user_id`` still going in a tenant where they may no longer act; return how many.

    Called when their account or memberships change (deactivated, removed from a tenant): the loop checks the
    same standing before every model turn, so this only makes the end immediate and withdraws held calls.
    """
    cancelled = 0
    going = AgentRun.objects.filter(user_id=user_id, status__in=GOING).values_list("id", "tenant")
    for run_id, tenant in list(going):
        refusal = standing_refusal(CallPrincipal(user_id=user_id, username="", tenant=tenant))
        if refusal:
            cancelled += run_cancel(run_id=run_id, actor=actor, reason=refusal)
    return cancelled
