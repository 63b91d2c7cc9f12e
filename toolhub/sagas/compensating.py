"""Running a locked saga's compensations one after another, each as a governed call of its own.

``advance`` starts the newest pending compensation unless one is under way; a compensation's call
goes through the same pipeline as any call (the step's user and tenant, their grants and approval
rules); its outcome moves the compensation on, to a scheduled retry, or to an operator's attention.
"""

import copy
from datetime import timedelta
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from toolhub.agentic.simple import MAX_CALLS
from toolhub.authorization import CallPrincipal
from toolhub.calls import call_transition, settling_together
from toolhub.dispatch import dispatch_call
from toolhub.execution_checks import approval_no_longer_suffices, refusal_at_execution
from toolhub.models import SETTLED_STATUSES, AuditEvent, CallKind, CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.policy import policy_moved_verdict
from toolhub.sagas.conf import retry_delay_seconds
from toolhub.sagas.models import (
    ACTIVE_COMPENSATION_STATUSES,
    Compensation,
    CompensationAttempt,
    CompensationStatus,
    Saga,
)
from toolhub.sagas.records import audit_compensation, audit_saga, compensation_transition, planned_arguments
from toolhub.tools.context import ToolContext
from toolhub.tools.registry import registry

__all__ = ["advance", "launch", "compensation_request", "apply_call_outcome", "close_rollbacks"]


def advance(saga: Saga, actor: str) -> None:
    """Start the newest pending compensation unless one is under way; close the rollbacks when none is left."""
    while True:
        if saga.compensations.filter(status__in=ACTIVE_COMPENSATION_STATUSES).exists():
            return
        following = (
            saga.compensations.filter(status=CompensationStatus.PENDING)
            .select_related("call", "step_call")
            .order_by("-sequence")
            .first()
        )
        if following is None:
            close_rollbacks(saga, actor)
            return
        launch(saga, following, actor)


def launch(saga: Saga, compensation: Compensation, actor: str) -> None:
    """Send a compensation through the governed pipeline: its first call, or the same call once more."""
    if compensation.arguments is None:
        arguments, error = planned_arguments(compensation.step_tool, compensation.step_call)
        if error:
            compensation_transition(
                saga,
                compensation,
                to=CompensationStatus.FAILED,
                allowed_from={CompensationStatus.PENDING, CompensationStatus.RETRY_SCHEDULED},
                actor=actor,
                data={"error": error},
                last_error=error,
                mapping_error=error,
                finished_at=timezone.now(),
            )
            return
        compensation.arguments = arguments
        compensation.mapping_error = ""
        compensation.save(update_fields=["arguments", "mapping_error", "updated_at"])
    call = compensation.call
    if call is not None and call.status in (CallStatus.FAILED, CallStatus.NEEDS_ATTENTION) and _may_ask_again(call):
        attempt = attempts_of(call) + 1
        external = _is_external(call)
        # The same call runs again, so the tool sees the same idempotency key on every attempt; an external tool's
        # call waits for the outside system again (no worker can run it), and counts the ask as its attempt.
        requeued = call_transition(
            call,
            to=CallStatus.AWAITING_RESULT if external else CallStatus.QUEUED,
            allowed_from={CallStatus.FAILED} if external else {CallStatus.FAILED, CallStatus.NEEDS_ATTENTION},
            actor=actor,
            data={"reason": "compensation attempt", "attempt": attempt, "saga": saga.key},
            queued_at=timezone.now(),
            result=None,
            error="",
            error_detail="",
            started_at=None,
            finished_at=None,
            lease_expires_at=None,
            # Its askers changed (a retrier: ``retried_by``): the worker judges its approvals again (review gm).
            approved_under=None,
            **({"attempts": attempt} if external else {}),
        )
        if requeued:
            if not external:
                dispatch_call(call)
            compensation_transition(
                saga,
                compensation,
                to=CompensationStatus.RUNNING,
                allowed_from={CompensationStatus.PENDING, CompensationStatus.RETRY_SCHEDULED},
                actor=actor,
                event="compensation.attempt",
                data={"attempt": attempt},
                next_attempt_at=None,
            )
            return
    call = tool_call_request(request=compensation_request(saga, compensation))
    compensation_transition(
        saga,
        compensation,
        to=CompensationStatus.RUNNING,
        allowed_from={CompensationStatus.PENDING, CompensationStatus.RETRY_SCHEDULED},
        actor=actor,
        event="compensation.started",
        data={"call_status": call.status},
        call=call,
        next_attempt_at=None,
    )
    if call.is_settled:  # refused at once (invalid arguments, or not allowed)
        apply_call_outcome(saga, compensation, call, actor)


def _is_external(call: ToolCall) -> bool:
    tool = registry.get(call.tool_name)
    return tool is not None and tool.is_external


def _may_ask_again(call: ToolCall) -> bool:
    """Whether the same call may go out again: a worker's is checked where it runs, an external one only here.

    An external call has no worker to check it (``toolhub.execution_checks``); one refused now is asked anew
    through the pipeline instead, which records the refusal on a call of its own. So is one whose approval no
    longer suffices (governance asks more approvals of it now, as a worker would send it back), and one never held
    that the policy holds now (a rule for its tool added since it first went out, as a worker judges a queued call
    again: ``policy_moved_verdict``; review p): the new call is held for a decision under the rules of now, not sent
    out again on the approvals it had, or without one.
    """
    if not _is_external(call):
        return True
    tool = registry.get(call.tool_name)
    if refusal_at_execution(call, tool) is not None or approval_no_longer_suffices(call) is not None:
        return False
    assert tool is not None  # refused above otherwise
    return policy_moved_verdict(call, tool) is None


def attempts_of(call: ToolCall) -> int:
    """The attempts a compensation's call used: an external call's first ask counts, though no worker claimed it."""
    if call.attempts == 0 and call.status == CallStatus.FAILED and _is_external(call):
        return 1
    return call.attempts


def compensation_request(saga: Saga, compensation: Compensation) -> CallRequest:
    """The compensation's call: for the step's user and tenant; its context says which step it undoes.

    No agent is named: the model did not ask for it and the agent's tool list does not limit it; the
    user's grants and the approval policy apply as to any call. It runs although the user may no longer act in
    the tenant (``undoing``): undoing their steps is the saga's work.
    """
    step = compensation.step_call
    user = step.user if step.user_id else None
    principal = CallPrincipal(
        user_id=step.user_id,
        username=user.get_username() if user is not None else "",
        tenant=step.tenant,
        agent_name="",
        agent_tools=None,
        undoing=True,
    )
    context = ToolContext(step.context or {}).with_values(saga_id=saga.key, compensates=str(step.id))
    return CallRequest(
        tool_name=compensation.tool_name,
        arguments=compensation.arguments,
        principal=principal,
        context=context,
        run_id=step.run_id,
        turn=step.turn,
        position=step.position,
        saga_id=saga.key,
        kind=CallKind.COMPENSATION,
    )


def apply_call_outcome(saga: Saga, compensation: Compensation, call: ToolCall, actor: str) -> None:
    """Move a running compensation on by its call's outcome, which includes the calls held on its behalf.

    An agentic compensation's inner call held for an operator's approval is not waited for by its model (told it
    runs once approved), so the compensation's call may succeed before the undo is done: the compensation stays
    running until such calls settle (``held_inner_outcome``), and one that did not succeed is its outcome. An attempt
    that did not succeed first withdraws those still waiting; one already running is waited for the same way.
    """
    if compensation.status != CompensationStatus.RUNNING or compensation.call_id != call.id or not call.is_settled:
        return
    if call.status != CallStatus.SUCCEEDED:
        withdraw_held_inner(call, actor)
    held = held_inner_outcome(call)
    if held is not None:
        status, error = held
        if status == "":
            _wait_for_held(saga, compensation, error, actor)
            return
        call = copy.copy(call)
        call.status, call.error = status, error
    now = timezone.now()
    CompensationAttempt.objects.get_or_create(
        call=call,
        number=call.attempts,
        defaults={
            "compensation": compensation,
            "outcome": call.status,
            "error": call.error,
            "worker": call.worker,
            "started_at": call.started_at,
            "finished_at": call.finished_at,
        },
    )
    used = attempts_of(call)
    common: dict[str, Any] = {"allowed_from": {CompensationStatus.RUNNING}, "actor": actor, "attempts": used}
    if call.status == CallStatus.SUCCEEDED:
        compensation_transition(
            saga, compensation, to=CompensationStatus.SUCCEEDED, last_error="", finished_at=now, **common
        )
        call_transition(
            compensation.step_call,
            to=CallStatus.COMPENSATED,
            allowed_from={CallStatus.SUCCEEDED, CallStatus.NEEDS_ATTENTION},
            actor=actor,
            data={"compensation_call": str(call.id), "compensation": compensation.tool_name, "saga": saga.key},
        )
    elif call.status == CallStatus.FAILED and used < compensation.max_attempts:
        delay = retry_delay_seconds(used)
        at = now + timedelta(seconds=delay)
        compensation_transition(
            saga,
            compensation,
            to=CompensationStatus.RETRY_SCHEDULED,
            event="compensation.retry_scheduled",
            data={"attempt": used, "error": call.error, "delay_seconds": delay, "next_attempt_at": at},
            next_attempt_at=at,
            last_error=call.error,
            **common,
        )
    elif call.status == CallStatus.NEEDS_ATTENTION:
        error = call.error or "The compensation's worker stopped while running it; its outcome is unknown."
        compensation_transition(
            saga, compensation, to=CompensationStatus.UNKNOWN, data={"error": error}, last_error=error, **common
        )
    else:
        error = call.error or f"The compensation call ended {call.status}."
        compensation_transition(
            saga,
            compensation,
            to=CompensationStatus.FAILED,
            data={"error": error, "call_status": call.status, "max_attempts": compensation.max_attempts},
            last_error=error,
            finished_at=now,
            **common,
        )


#: Statuses in which an inner call's model is told it runs (or is answered) later, and left without its outcome.
HELD_STATUSES = (CallStatus.PENDING_APPROVAL, CallStatus.AWAITING_RESULT)


def held_inner_outcome(call: ToolCall) -> tuple[str, str] | None:
    """What the calls held on behalf of a compensation's settled attempt make of it: ``None`` when they change nothing.

    Held: made inside this attempt (an agentic compensation's inner calls) and either not settled when it finished or
    ever waiting for an operator's approval or an external result (``HELD_STATUSES``, read in its trail): its model
    was told such a call runs later and never saw its outcome, though it may have been decided before the model
    answered. ``("", why)`` while one is still open (an attempt that did not succeed withdrew
    those waiting: one approved and running meanwhile cannot be). Then, for a succeeded attempt, the first that did
    not succeed, as ``(status, error)`` naming it; for one that did not succeed, a call that succeeded after it ended
    makes its outcome unknown (``needs_attention``): the step may be undone in part, and a retry's model would ask
    again, so an operator decides; else its own failure stands.
    """
    if not call.is_settled or call.started_at is None or call.finished_at is None:
        return None
    held = (
        ToolCall.objects.filter(  # the tenant's calls since the attempt began (its index), not every call's context
            tenant=call.tenant,
            created_at__gte=call.started_at,
            kind=CallKind.INNER,
            context__parent_call_id=str(call.id),
        )
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=call.finished_at) | Exists(_held_once()))
        .order_by("created_at", "position")
    )
    rows = list(held.values_list("id", "tool_name", "status", "error")[:MAX_CALLS])
    for pk, name, status, _ in rows:
        if status not in SETTLED_STATUSES:
            return "", f"Its inner call {pk} ({name}) is {status}; the step is undone only once it succeeds."
    if call.status != CallStatus.SUCCEEDED:
        for pk, name, status, _ in rows:
            if status == CallStatus.SUCCEEDED:
                return CallStatus.NEEDS_ATTENTION, (
                    f"Its inner call {pk} ({name}), held when its model answered, succeeded though the attempt ended "
                    f"{call.status}: "
                    "the step may be undone in part, and a retry's model would ask again; check the step and "
                    "resolve the compensation by hand or retry it."
                )
        return None
    for pk, name, status, error in rows:
        if status != CallStatus.SUCCEEDED:
            why = f"Its inner call {pk} ({name}), held when its model answered, ended {status}"
            return status, f"{why}: {error}"[:2000] if error else f"{why}; the step was not undone."
    return None


def _held_once() -> QuerySet[AuditEvent]:
    """Whether the call of the outer query was ever held: an event of its trail in one of ``HELD_STATUSES``."""
    return AuditEvent.objects.filter(call_id=OuterRef("id"), status__in=HELD_STATUSES)


def withdraw_held_inner(call: ToolCall, actor: str) -> None:
    """Withdraw the calls still waiting on behalf of a compensation's attempt that did not succeed.

    Its model asked for them, then the attempt failed (out of turns, say): the compensation is retried or left to an
    operator, and a retry's model asks again, so one approved later would undo the step a second time. They are told
    of together (``settling_together``): a run is woken once, however many it withdraws.
    """
    from toolhub.waiting import WITHDRAWABLE_STATUSES, tool_call_withdraw

    if call.started_at is None:
        return
    waiting = ToolCall.objects.filter(  # as ``held_inner_outcome``: the tenant's calls since the attempt began
        tenant=call.tenant,
        created_at__gte=call.started_at,
        kind=CallKind.INNER,
        context__parent_call_id=str(call.id),
        status__in=list(WITHDRAWABLE_STATUSES),
    )
    reason = f"the compensation's attempt it was asked in ended {call.status}; a retry asks again"
    with settling_together():
        for inner in waiting.order_by("created_at", "position")[:MAX_CALLS]:
            tool_call_withdraw(call=inner, actor=actor, reason=reason)


def _wait_for_held(saga: Saga, compensation: Compensation, why: str, actor: str) -> None:
    """Keep the compensation running while a call held on its behalf is open; said once, in its trail and error."""
    now = timezone.now()
    if compensation.last_error == why:
        # The sweep comes back to it: touched, so the ones whose outcome was lost are reached before it again.
        Compensation.objects.filter(pk=compensation.pk).update(updated_at=now)
        return
    Compensation.objects.filter(pk=compensation.pk).update(last_error=why, updated_at=now)
    compensation.last_error = why
    audit_compensation(saga, compensation, "compensation.waiting", actor=actor, data={"reason": why})


def close_rollbacks(saga: Saga, actor: str) -> None:
    now = timezone.now()
    for rollback in saga.rollbacks.filter(finished_at__isnull=True):
        rollback.finished_at = now
        rollback.save(update_fields=["finished_at"])
        outcome = {str(c.sequence): c.status for c in rollback.compensations.all()}
        audit_saga(
            saga,
            "saga.rollback_finished",
            actor=actor,
            call_id=rollback.failed_call_id,
            status=saga.status,
            data={"rollback": rollback.pk, "compensations": outcome},
        )
