"""Writes of the sagas: record steps, roll back, run compensations one after another, retry, resolve.

Every function that changes a saga locks its row first, so the steps of one saga are numbered and
compensated strictly one after another whatever the number of workers; every state change writes
its audit event in the same transaction.
"""

import logging
import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from toolhub.audit import audit_append
from toolhub.authorization import CallPrincipal
from toolhub.calls import call_transition
from toolhub.conf import toolhub_settings
from toolhub.exceptions import InvalidTransitionError, ToolhubError
from toolhub.models import SETTLED_STATUSES, STEP_KINDS, CallKind, CallStatus, ToolCall
from toolhub.pipeline import CallRequest, dispatch_call, tool_call_request
from toolhub.sagas.conf import retry_delay_seconds
from toolhub.sagas.mapping import MappingError, compensation_arguments
from toolhub.sagas.models import (
    ACTIVE_COMPENSATION_STATUSES,
    ATTENTION_COMPENSATION_STATUSES,
    Compensation,
    CompensationAttempt,
    CompensationStatus,
    Rollback,
    RollbackTrigger,
    Saga,
    SagaStatus,
)
from toolhub.sagas.selectors import rollback_note
from toolhub.tools.context import ToolContext
from toolhub.tools.registry import registry
from toolhub.transitions import TransitionTable, guarded_update

__all__ = [
    "NothingToCompensateError",
    "SagaKeyTakenError",
    "saga_open",
    "saga_key_of",
    "saga_call_settled",
    "saga_ignores",
    "saga_record_step",
    "saga_rollback",
    "saga_rollback_on_demand",
    "saga_rollback_on_failure",
    "saga_rollback_notes",
    "saga_advance",
    "saga_sync_compensation",
    "compensation_retry_due",
    "compensation_retry",
    "compensation_resolve",
    "saga_retry",
    "saga_resolve",
    "sagas_sweep",
]

logger = logging.getLogger(__name__)

#: The actor of what the sagas do on their own (as opposed to an operator's action).
SAGA_ACTOR = "saga"
_Status = CompensationStatus

#: Every move a compensation's status may make (``held`` and ``recorded`` are set when it is created).
COMPENSATION_TRANSITIONS = TransitionTable(
    "compensation status",
    {
        _Status.RECORDED: {_Status.PENDING},
        _Status.PENDING: {_Status.RUNNING, _Status.FAILED, _Status.RESOLVED},
        _Status.RETRY_SCHEDULED: {_Status.RUNNING, _Status.FAILED, _Status.RESOLVED},
        _Status.RUNNING: {_Status.SUCCEEDED, _Status.RETRY_SCHEDULED, _Status.UNKNOWN, _Status.FAILED},
        _Status.FAILED: {_Status.PENDING, _Status.RESOLVED},
        _Status.UNKNOWN: {_Status.PENDING, _Status.RESOLVED},
        _Status.HELD: {_Status.PENDING, _Status.RESOLVED},
    },
)


class NothingToCompensateError(ToolhubError):
    """A rollback was asked for, but no completed step of the saga can be compensated."""

    status_code = 409


class SagaKeyTakenError(ToolhubError):
    """A direct saga was to be opened under a key that is in use already."""


@transaction.atomic
def saga_open(*, key: str, tenant: str, user: Any, actor: str) -> Saga:
    """Open a direct saga for ``user``'s calls that will carry ``saga_id=key`` (``POST /api/v1/sagas/``).

    A key in use (a saga, or calls of any tenant carrying it) is refused, so that no caller joins
    another's saga.
    """
    if Saga.objects.filter(key=key).exists() or ToolCall.objects.filter(saga_id=key).exists():
        raise SagaKeyTakenError("This saga id is in use; choose another (a new UUID, for instance).")
    try:
        with transaction.atomic():
            saga = Saga.objects.create(key=key, tenant=tenant, created_by=user)
    except IntegrityError:
        raise SagaKeyTakenError("This saga id is in use; choose another (a new UUID, for instance).") from None
    _audit(saga, "saga.opened", actor=actor, status=saga.status, data={"run_id": None, "direct": True})
    return saga


def saga_key_of(call: ToolCall) -> str:
    """The saga a call belongs to: its explicit saga id, else its run; ``""`` for a lone direct call."""
    if call.saga_id:
        return call.saga_id
    return str(call.run_id) if call.run_id else ""


# --- reacting to calls -------------------------------------------------------------------------------


def saga_ignores(call: ToolCall) -> bool:
    """Whether no saga can care that ``call`` settled, judged from what never changes on a call (no read).

    Sagas follow compensations, succeeded steps of compensable tools, and failed direct calls that share a
    saga id; a call of a tool without compensation in a run, or outside any saga, concerns none.
    """
    if call.kind not in STEP_KINDS:
        return False
    if not saga_key_of(call):
        return True
    tool = registry.get(call.tool_name)
    compensable = tool is not None and bool(tool.compensate_with)
    return not compensable and not (call.run_id is None and call.saga_id)


def saga_call_settled(*, call_id: uuid.UUID) -> None:
    """React to a settled call: record a completed compensable step, follow a compensation, roll back a direct saga."""
    call = ToolCall.objects.filter(pk=call_id).first()
    if call is None:
        return
    if call.kind == CallKind.COMPENSATION:
        compensation_id = Compensation.objects.filter(call_id=call.id).values_list("id", flat=True).first()
        if compensation_id is not None:
            saga_sync_compensation(compensation_id=compensation_id)
        return
    if not saga_key_of(call):
        return
    if call.status == CallStatus.SUCCEEDED:
        saga_record_step(call=call)
    elif call.status == CallStatus.FAILED and call.run_id is None and call.saga_id:
        # Direct calls sharing a saga id: a failed step undoes the completed ones, as in a run whose agent
        # compensates on error.
        saga_rollback(
            saga_key=call.saga_id,
            tenant=call.tenant,
            actor=SAGA_ACTOR,
            trigger=RollbackTrigger.STEP_FAILED,
            failed_call=call,
        )


def saga_record_step(*, call: ToolCall, actor: str = SAGA_ACTOR) -> Compensation | None:
    """Record a succeeded compensable call as the saga's next step; a no-op for anything else or a second time."""
    tool = registry.get(call.tool_name)
    key = saga_key_of(call)
    if tool is None or not tool.compensate_with or not key or call.kind not in STEP_KINDS:
        return None
    if call.status != CallStatus.SUCCEEDED:
        return None
    with transaction.atomic():
        saga = _locked_saga(key=key, run_id=call.run_id, tenant=call.tenant, actor=actor)
        existing = Compensation.objects.filter(step_call_id=call.id).first()
        if existing is not None:
            return existing
        compensation = _record(saga, call, actor=actor)
        if compensation.status == _Status.PENDING:
            _advance(saga, actor)
        _refresh_status(saga, actor)
    return compensation


def saga_sync_compensation(*, compensation_id: int, actor: str = SAGA_ACTOR) -> None:
    """Bring a running compensation in step with its call's outcome, then start the next one."""
    with transaction.atomic():
        saga = _lock_saga_of(compensation_id)
        if saga is None:
            return
        compensation = Compensation.objects.select_related("call", "step_call").get(pk=compensation_id)
        if compensation.call is not None:
            _apply_call_outcome(saga, compensation, compensation.call, actor)
        _advance(saga, actor)
        _refresh_status(saga, actor)


# --- rolling back ------------------------------------------------------------------------------------


def saga_rollback(
    *,
    saga_key: str,
    actor: str,
    trigger: RollbackTrigger,
    failed_call: ToolCall | None = None,
    run_id: uuid.UUID | None = None,
    tenant: str = "",
) -> Rollback | None:
    """Compensate the saga's completed steps, newest first, one after another; ``None`` if there are none.

    Steps whose own outcome is unknown (their call needs attention) are held for an operator, who
    decides whether to compensate them. Asking twice for the same failed step returns the first rollback.
    """
    with transaction.atomic():
        saga = Saga.objects.select_for_update().filter(key=saga_key).first()
        if saga is None:
            if not _step_calls(saga_key, run_id).filter(tool_name__in=_compensable_tool_names()).exists():
                return None
            saga = _locked_saga(key=saga_key, run_id=run_id, tenant=tenant, actor=actor)
        if failed_call is not None:
            existing = saga.rollbacks.filter(failed_call=failed_call).first()
            if existing is not None:
                return existing
        _record_missing_steps(saga, actor)
        recorded = list(saga.compensations.filter(status=_Status.RECORDED).order_by("-sequence"))
        held = _hold_unknown_steps(saga, actor)
        if not recorded and not held:
            return saga.rollbacks.filter(finished_at__isnull=True).first()
        rollback = Rollback.objects.create(
            saga=saga, trigger=trigger, failed_call=failed_call, requested_by=actor[:200]
        )
        _audit(
            saga,
            "saga.rollback_requested",
            actor=actor,
            call_id=failed_call.id if failed_call else None,
            tool_name=failed_call.tool_name if failed_call else "",
            status=saga.status,
            data={
                "rollback": rollback.pk,
                "trigger": trigger,
                "failed_call": str(failed_call.id) if failed_call else None,
                "compensate": [[c.sequence, c.step_tool, c.tool_name] for c in recorded],
                "held": [[c.sequence, c.step_tool] for c in held],
            },
        )
        for compensation in recorded:
            _transition(
                saga, compensation, to=_Status.PENDING, allowed_from={_Status.RECORDED}, actor=actor, rollback=rollback
            )
        Compensation.objects.filter(pk__in=[c.pk for c in held]).update(rollback=rollback)
        _advance(saga, actor)
        _refresh_status(saga, actor)
        rollback.refresh_from_db()
    return rollback


def saga_rollback_on_demand(*, saga_key: str, actor: str, run_id: uuid.UUID | None = None, tenant: str = "") -> Saga:
    """Roll back a saga now (``POST /runs/{id}/rollback/``); refuses when nothing can be compensated."""
    rollback = saga_rollback(
        saga_key=saga_key, actor=actor, trigger=RollbackTrigger.ON_DEMAND, run_id=run_id, tenant=tenant
    )
    if rollback is None:
        raise NothingToCompensateError(
            "Nothing to roll back: no completed step of this saga has a compensation (declare one with "
            "compensate_with= or @tool.compensation)."
        )
    return rollback.saga


def saga_rollback_on_failure(*, run_id: uuid.UUID, tenant: str, calls: Iterable[ToolCall], actor: str) -> bool:
    """For a run whose agent compensates on error: roll back once when one of ``calls`` failed.

    Returns whether that rollback is still under way (the run waits for it before the model's next turn).
    """
    failed = next((c for c in calls if c.kind in STEP_KINDS and c.status == CallStatus.FAILED), None)
    if failed is None:
        return False
    rollback = saga_rollback(
        saga_key=str(run_id),
        run_id=run_id,
        tenant=tenant,
        actor=actor,
        trigger=RollbackTrigger.STEP_FAILED,
        failed_call=failed,
    )
    return rollback is not None and rollback.finished_at is None


def saga_rollback_notes(*, run_id: uuid.UUID, actor: str = SAGA_ACTOR) -> list[str]:
    """What the conversation must be told about finished rollbacks of a run it was not told of yet."""
    saga = Saga.objects.filter(key=str(run_id)).first()
    if saga is None:
        return []
    notes = []
    with transaction.atomic():
        for rollback in (
            saga.rollbacks.select_for_update()
            .filter(finished_at__isnull=False, told_at__isnull=True)
            .order_by("requested_at")
        ):
            note = rollback_note(rollback)
            rollback.told_at = timezone.now()
            rollback.save(update_fields=["told_at"])
            _audit(saga, "saga.rollback_reported", actor=actor, status=saga.status, data={"rollback": rollback.pk})
            notes.append(note)
    return notes


def saga_advance(*, saga_id: int, actor: str = SAGA_ACTOR) -> None:
    """Start the next compensation of a saga if none is under way (repairs a lost wake-up)."""
    with transaction.atomic():
        saga = Saga.objects.select_for_update().filter(pk=saga_id).first()
        if saga is not None:
            _advance(saga, actor)
            _refresh_status(saga, actor)


# --- retries, the sweeper and operators --------------------------------------------------------------


def compensation_retry_due(*, compensation_id: int, actor: str = "saga-sweeper") -> bool:
    """Run a failed compensation's next attempt if its time has come; return whether it was started."""
    with transaction.atomic():
        saga = _lock_saga_of(compensation_id)
        if saga is None:
            return False
        compensation = Compensation.objects.select_related("call", "step_call").get(pk=compensation_id)
        due = compensation.next_attempt_at is not None and compensation.next_attempt_at <= timezone.now()
        if compensation.status != _Status.RETRY_SCHEDULED or not due:
            return False
        _launch(saga, compensation, actor)
        _advance(saga, actor)
        _refresh_status(saga, actor)
    return True


def sagas_sweep(*, limit: int = 200) -> dict[str, int]:
    """The periodic repair: due retries run, lost call outcomes are applied, stalled rollbacks go on."""
    now = timezone.now()
    counts = {"retried": 0, "synced": 0, "advanced": 0, "rolled_back": 0}
    due = Compensation.objects.filter(status=_Status.RETRY_SCHEDULED, next_attempt_at__lte=now)
    for compensation_id in due.order_by("next_attempt_at").values_list("id", flat=True)[:limit]:
        counts["retried"] += compensation_retry_due(compensation_id=compensation_id)
    settled = Compensation.objects.filter(status=_Status.RUNNING, call__status__in=list(SETTLED_STATUSES))
    for compensation_id in settled.values_list("id", flat=True)[:limit]:
        saga_sync_compensation(compensation_id=compensation_id)
        counts["synced"] += 1
    stalled = Rollback.objects.filter(finished_at__isnull=True).values_list("saga_id", flat=True).distinct()
    for saga_id in list(stalled[:limit]):
        saga_advance(saga_id=saga_id)
        counts["advanced"] += 1
    counts["rolled_back"] = _roll_back_unheard_failures(limit)
    return counts


def _roll_back_unheard_failures(limit: int) -> int:
    """A direct saga whose newest event is a failed step that nobody acted on (its notification was lost)."""
    rolled_back = 0
    open_sagas = Saga.objects.filter(run_id__isnull=True, compensations__status=_Status.RECORDED).distinct()
    for saga in open_sagas[:limit]:
        newest_step = saga.compensations.filter(status=_Status.RECORDED).order_by("-sequence").first()
        assert newest_step is not None
        failed = (
            ToolCall.objects.filter(
                saga_id=saga.key, kind__in=STEP_KINDS, run_id__isnull=True, status=CallStatus.FAILED
            )
            .filter(created_at__gte=newest_step.step_call.finished_at or newest_step.created_at)
            .exclude(id__in=saga.rollbacks.filter(failed_call__isnull=False).values("failed_call_id"))
            .order_by("created_at")
            .first()
        )
        if failed is not None:
            saga_rollback(
                saga_key=saga.key,
                tenant=saga.tenant,
                actor="saga-sweeper",
                trigger=RollbackTrigger.STEP_FAILED,
                failed_call=failed,
            )
            rolled_back += 1
    return rolled_back


def compensation_retry(*, compensation: Compensation, actor: str) -> Compensation:
    """An operator runs a failed, unknown or held compensation (again), with a fresh round of attempts."""
    with transaction.atomic():
        saga = _lock_saga_of(compensation.pk)
        current = Compensation.objects.select_related("call").get(pk=compensation.pk)
        if current.status not in ATTENTION_COMPENSATION_STATUSES:
            raise InvalidTransitionError(
                f"Compensation #{current.sequence} ({current.step_tool}) is {current.status}; only a failed, unknown "
                "or held compensation can be retried."
            )
        assert saga is not None
        used = current.call.attempts if current.call is not None else 0
        _transition(
            saga,
            current,
            to=_Status.PENDING,
            allowed_from=ATTENTION_COMPENSATION_STATUSES,
            actor=actor,
            event="compensation.retry_requested",
            data={"previous_status": current.status},
            max_attempts=used + toolhub_settings().SAGA_MAX_ATTEMPTS,
            next_attempt_at=None,
            finished_at=None,
        )
        _advance(saga, actor)
        _refresh_status(saga, actor)
        current.refresh_from_db()
    return current


def compensation_resolve(*, compensation: Compensation, actor: str, note: str) -> Compensation:
    """An operator settles a compensation by hand (done outside toolhub, or not to be done), with a note."""
    allowed = ATTENTION_COMPENSATION_STATUSES | {_Status.PENDING, _Status.RETRY_SCHEDULED}
    with transaction.atomic():
        saga = _lock_saga_of(compensation.pk)
        current = Compensation.objects.get(pk=compensation.pk)
        if current.status not in allowed:
            raise InvalidTransitionError(
                f"Compensation #{current.sequence} ({current.step_tool}) is {current.status}; only one that failed, "
                "is unknown, held or still waiting can be resolved by hand."
            )
        assert saga is not None
        _transition(
            saga,
            current,
            to=_Status.RESOLVED,
            allowed_from=allowed,
            actor=actor,
            data={"previous_status": current.status, "note": note},
            resolved_by=actor[:200],
            resolution_note=note,
            next_attempt_at=None,
            finished_at=timezone.now(),
        )
        _advance(saga, actor)
        _refresh_status(saga, actor)
    return current


def saga_retry(*, saga: Saga, actor: str) -> int:
    """Retry every compensation of the saga that needs attention; return how many."""
    ids = list(saga.compensations.filter(status__in=ATTENTION_COMPENSATION_STATUSES).values_list("id", flat=True))
    for compensation in Compensation.objects.filter(pk__in=ids):
        compensation_retry(compensation=compensation, actor=actor)
    return len(ids)


def saga_resolve(*, saga: Saga, actor: str, note: str) -> int:
    """Resolve by hand every compensation of the saga that needs attention; return how many."""
    ids = list(saga.compensations.filter(status__in=ATTENTION_COMPENSATION_STATUSES).values_list("id", flat=True))
    for compensation in Compensation.objects.filter(pk__in=ids):
        compensation_resolve(compensation=compensation, actor=actor, note=note)
    return len(ids)


# --- internals (the saga's row is locked by the caller) ----------------------------------------------


def _locked_saga(*, key: str, run_id: uuid.UUID | None, tenant: str, actor: str) -> Saga:
    saga, created = Saga.objects.get_or_create(key=key, defaults={"run_id": run_id, "tenant": tenant})
    if created:
        _audit(saga, "saga.opened", actor=actor, status=saga.status, data={"run_id": str(run_id) if run_id else None})
    return Saga.objects.select_for_update().get(pk=saga.pk)


def _lock_saga_of(compensation_id: int) -> Saga | None:
    saga_id = Compensation.objects.filter(pk=compensation_id).values_list("saga_id", flat=True).first()
    if saga_id is None:
        return None
    return Saga.objects.select_for_update().get(pk=saga_id)


def _compensable_tool_names() -> list[str]:
    return [tool.name for tool in registry.all() if tool.compensate_with]


def _step_calls(key: str, run_id: uuid.UUID | None) -> QuerySet[ToolCall]:
    """The calls that are steps of a saga: the run's own calls, or the direct calls carrying its id."""
    match = Q(saga_id=key)
    if run_id is not None:
        match |= Q(run_id=run_id, saga_id="")
    return ToolCall.objects.filter(match, kind__in=STEP_KINDS)


def _record(saga: Saga, call: ToolCall, *, actor: str, status: CompensationStatus | None = None) -> Compensation:
    """Number a step and plan its compensation; a step asked for before a rollback is compensated by it too."""
    tool = registry.get(call.tool_name)
    assert tool is not None and tool.compensate_with
    arguments, error = _planned_arguments(tool.name, call)
    late_for = saga.rollbacks.filter(requested_at__gt=call.created_at).order_by("-requested_at").first()
    if status is None:
        status = _Status.PENDING if late_for is not None else _Status.RECORDED
    saga.last_sequence += 1
    saga.save(update_fields=["last_sequence", "updated_at"])
    compensation = Compensation.objects.create(
        saga=saga,
        sequence=saga.last_sequence,
        rollback=late_for,
        step_call=call,
        step_tool=call.tool_name,
        tool_name=tool.compensate_with,
        arguments=arguments,
        mapping_error=error,
        status=status,
        max_attempts=toolhub_settings().SAGA_MAX_ATTEMPTS,
    )
    _audit_compensation(
        saga,
        compensation,
        f"compensation.{'held' if status == _Status.HELD else 'recorded'}",
        actor=actor,
        data={"arguments_known": arguments is not None, "mapping_error": error} if error else {},
    )
    return compensation


def _planned_arguments(tool_name: str, call: ToolCall) -> tuple[dict[str, Any] | None, str]:
    tool = registry.get(tool_name)
    if tool is None or not tool.compensate_with:
        return None, f"Tool {tool_name!r} is no longer registered with a compensation."
    compensation = registry.get(tool.compensate_with)
    if compensation is None:
        return None, f"The compensating tool {tool.compensate_with!r} is not registered."
    result = call.result if call.status in (CallStatus.SUCCEEDED, CallStatus.COMPENSATED) else None
    try:
        return compensation_arguments(tool=tool, compensation=compensation, arguments=call.arguments, result=result), ""
    except MappingError as exc:
        return None, str(exc)


def _record_missing_steps(saga: Saga, actor: str) -> None:
    """Record succeeded steps whose settle notification was lost (a process died right after the commit)."""
    known = Compensation.objects.filter(saga=saga).values("step_call_id")
    missing = (
        _step_calls(saga.key, saga.run_id)
        .filter(status=CallStatus.SUCCEEDED, tool_name__in=_compensable_tool_names())
        .exclude(id__in=known)
        .order_by("finished_at", "created_at")
    )
    for call in missing:
        _record(saga, call, actor=actor)


def _hold_unknown_steps(saga: Saga, actor: str) -> list[Compensation]:
    """Steps whose own outcome is unknown are not compensated on their own: an operator decides."""
    known = Compensation.objects.filter(saga=saga).values("step_call_id")
    unknown = (
        _step_calls(saga.key, saga.run_id)
        .filter(status=CallStatus.NEEDS_ATTENTION, tool_name__in=_compensable_tool_names())
        .exclude(id__in=known)
        .order_by("created_at")
    )
    return [_record(saga, call, actor=actor, status=_Status.HELD) for call in unknown]


def _advance(saga: Saga, actor: str) -> None:
    """Start the newest pending compensation unless one is under way; close the rollbacks when none is left."""
    while True:
        if saga.compensations.filter(status__in=ACTIVE_COMPENSATION_STATUSES).exists():
            return
        following = (
            saga.compensations.filter(status=_Status.PENDING)
            .select_related("call", "step_call")
            .order_by("-sequence")
            .first()
        )
        if following is None:
            _close_rollbacks(saga, actor)
            return
        _launch(saga, following, actor)


def _launch(saga: Saga, compensation: Compensation, actor: str) -> None:
    """Send a compensation through the governed pipeline: its first call, or the same call once more."""
    if compensation.arguments is None:
        arguments, error = _planned_arguments(compensation.step_tool, compensation.step_call)
        if error:
            _transition(
                saga,
                compensation,
                to=_Status.FAILED,
                allowed_from={_Status.PENDING, _Status.RETRY_SCHEDULED},
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
    if call is not None and call.status in (CallStatus.FAILED, CallStatus.NEEDS_ATTENTION):
        attempt = call.attempts + 1
        # The same call runs again, so the tool sees the same idempotency key on every attempt.
        requeued = call_transition(
            call,
            to=CallStatus.QUEUED,
            allowed_from={CallStatus.FAILED, CallStatus.NEEDS_ATTENTION},
            actor=actor,
            data={"reason": "compensation attempt", "attempt": attempt, "saga": saga.key},
            queued_at=timezone.now(),
            result=None,
            error="",
            error_detail="",
            started_at=None,
            finished_at=None,
            lease_expires_at=None,
        )
        if requeued:
            dispatch_call(call)
            _transition(
                saga,
                compensation,
                to=_Status.RUNNING,
                allowed_from={_Status.PENDING, _Status.RETRY_SCHEDULED},
                actor=actor,
                event="compensation.attempt",
                data={"attempt": attempt},
                next_attempt_at=None,
            )
            return
    call = tool_call_request(request=_compensation_request(saga, compensation))
    _transition(
        saga,
        compensation,
        to=_Status.RUNNING,
        allowed_from={_Status.PENDING, _Status.RETRY_SCHEDULED},
        actor=actor,
        event="compensation.started",
        data={"call_status": call.status},
        call=call,
        next_attempt_at=None,
    )
    if call.is_settled:  # refused at once (invalid arguments, or not allowed)
        _apply_call_outcome(saga, compensation, call, actor)


def _compensation_request(saga: Saga, compensation: Compensation) -> CallRequest:
    """The compensation's call: for the step's user and tenant; its context says which step it undoes.

    No agent is named: the model did not ask for it and the agent's tool list does not limit it; the
    user's grants and the approval policy apply as to any call.
    """
    step = compensation.step_call
    user = step.user if step.user_id else None
    principal = CallPrincipal(
        user_id=step.user_id,
        username=user.get_username() if user is not None else "",
        tenant=step.tenant,
        agent_name="",
        agent_tools=None,
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


def _apply_call_outcome(saga: Saga, compensation: Compensation, call: ToolCall, actor: str) -> None:
    if compensation.status != _Status.RUNNING or compensation.call_id != call.id or not call.is_settled:
        return
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
    common: dict[str, Any] = {"allowed_from": {_Status.RUNNING}, "actor": actor, "attempts": call.attempts}
    if call.status == CallStatus.SUCCEEDED:
        _transition(saga, compensation, to=_Status.SUCCEEDED, last_error="", finished_at=now, **common)
        call_transition(
            compensation.step_call,
            to=CallStatus.COMPENSATED,
            allowed_from={CallStatus.SUCCEEDED, CallStatus.NEEDS_ATTENTION},
            actor=actor,
            data={"compensation_call": str(call.id), "compensation": compensation.tool_name, "saga": saga.key},
        )
    elif call.status == CallStatus.FAILED and call.attempts < compensation.max_attempts:
        delay = retry_delay_seconds(call.attempts)
        at = now + timedelta(seconds=delay)
        _transition(
            saga,
            compensation,
            to=_Status.RETRY_SCHEDULED,
            event="compensation.retry_scheduled",
            data={"attempt": call.attempts, "error": call.error, "delay_seconds": delay, "next_attempt_at": at},
            next_attempt_at=at,
            last_error=call.error,
            **common,
        )
    elif call.status == CallStatus.NEEDS_ATTENTION:
        error = call.error or "The compensation's worker stopped while running it; its outcome is unknown."
        _transition(saga, compensation, to=_Status.UNKNOWN, data={"error": error}, last_error=error, **common)
    else:
        error = call.error or f"The compensation call ended {call.status}."
        _transition(
            saga,
            compensation,
            to=_Status.FAILED,
            data={"error": error, "call_status": call.status, "max_attempts": compensation.max_attempts},
            last_error=error,
            finished_at=now,
            **common,
        )


def _close_rollbacks(saga: Saga, actor: str) -> None:
    now = timezone.now()
    for rollback in saga.rollbacks.filter(finished_at__isnull=True):
        rollback.finished_at = now
        rollback.save(update_fields=["finished_at"])
        outcome = {str(c.sequence): c.status for c in rollback.compensations.all()}
        _audit(
            saga,
            "saga.rollback_finished",
            actor=actor,
            call_id=rollback.failed_call_id,
            status=saga.status,
            data={"rollback": rollback.pk, "compensations": outcome},
        )


def _refresh_status(saga: Saga, actor: str) -> None:
    """Derive the saga's status from its compensations; audit the change when there is one."""
    statuses = set(saga.compensations.values_list("status", flat=True))
    if statuses & ATTENTION_COMPENSATION_STATUSES:
        target = SagaStatus.NEEDS_ATTENTION
    elif statuses & (ACTIVE_COMPENSATION_STATUSES | {_Status.PENDING}):
        target = SagaStatus.COMPENSATING
    elif not saga.rollbacks.exists():
        target = SagaStatus.OPEN
    elif _Status.RESOLVED in statuses:
        target = SagaStatus.RESOLVED
    else:
        target = SagaStatus.COMPENSATED
    if target == saga.status:
        return
    previous = saga.status
    if Saga.objects.filter(pk=saga.pk, status=previous).update(status=target, updated_at=timezone.now()):
        saga.status = target
        counts: dict[str, int] = {}
        for status in saga.compensations.values_list("status", flat=True):
            counts[status] = counts.get(status, 0) + 1
        _audit(saga, f"saga.{target}", actor=actor, status=target, data={"from": previous, "compensations": counts})


def _transition(
    saga: Saga,
    compensation: Compensation,
    *,
    to: CompensationStatus,
    allowed_from: Iterable[CompensationStatus],
    actor: str,
    event: str | None = None,
    data: dict[str, Any] | None = None,
    **fields: Any,
) -> bool:
    """Move a compensation to ``to`` if it is still in one of ``allowed_from``; audit the move."""
    moved = guarded_update(
        Compensation,
        compensation.pk,
        table=COMPENSATION_TRANSITIONS,
        to=to,
        allowed_from=allowed_from,
        values={"updated_at": timezone.now(), **fields},
    )
    if not moved:
        return False
    compensation.status = to
    for name, value in fields.items():
        setattr(compensation, name, value)
    _audit_compensation(saga, compensation, event or f"compensation.{to}", actor=actor, data=data)
    return True


def _audit_compensation(
    saga: Saga, compensation: Compensation, event: str, *, actor: str, data: dict[str, Any] | None = None
) -> None:
    # Filed under the step's call, so the step's audit trail shows how it was undone.
    _audit(
        saga,
        event,
        actor=actor,
        call_id=compensation.step_call_id,
        tool_name=compensation.step_tool,
        status=compensation.status,
        data={
            "compensation_id": compensation.pk,
            "sequence": compensation.sequence,
            "compensation": compensation.tool_name,
            "compensation_call": str(compensation.call_id) if compensation.call_id else None,
            **(data or {}),
        },
    )


def _audit(
    saga: Saga,
    event: str,
    *,
    actor: str,
    data: dict[str, Any],
    status: str = "",
    call_id: uuid.UUID | None = None,
    tool_name: str = "",
) -> None:
    audit_append(
        event_type=event,
        actor=actor,
        data={"saga": saga.key, **data},
        call_id=call_id,
        run_id=saga.run_id,
        tool_name=tool_name,
        status=status,
        tenant=saga.tenant,
    )
