"""A locked saga's records: steps numbered with their planned compensations, compensations moved, status derived.

Every function here expects the saga's row locked by its caller (``locked_saga`` / ``lock_saga_of``), so
the steps of one saga are numbered and moved strictly one after another; every change writes its audit
event in the same transaction.
"""

import uuid
from collections.abc import Iterable
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from toolhub.audit import audit_append
from toolhub.commit_once import on_commit_once
from toolhub.conf import toolhub_settings
from toolhub.models import SAGA_STEPS, CallStatus, ToolCall
from toolhub.sagas.mapping import MappingError, compensation_arguments
from toolhub.sagas.models import (
    ACTIVE_COMPENSATION_STATUSES,
    ATTENTION_COMPENSATION_STATUSES,
    Compensation,
    CompensationStatus,
    Rollback,
    Saga,
    SagaStatus,
)
from toolhub.signals import rollback_reopened
from toolhub.tools.registry import registry
from toolhub.transitions import TransitionTable, guarded_update

__all__ = [
    "SAGA_ACTOR",
    "COMPENSATION_TRANSITIONS",
    "locked_saga",
    "lock_saga_of",
    "lock_sagas",
    "compensable_tool_names",
    "step_calls",
    "plan_compensation",
    "reopen_rollback",
    "planned_arguments",
    "record_missing_steps",
    "hold_unknown_steps",
    "refresh_status",
    "compensation_transition",
    "audit_compensation",
    "audit_saga",
]

#: The actor of what the sagas do on their own (as opposed to an operator's action).
SAGA_ACTOR = "saga"

_Status = CompensationStatus

#: Every move a compensation's status may make (``held`` and ``recorded`` are set when it is created; a recorded step
#: is held when its failure is found too late to undo on its own).
COMPENSATION_TRANSITIONS = TransitionTable(
    "compensation status",
    {
        _Status.RECORDED: {_Status.PENDING, _Status.HELD},
        _Status.PENDING: {_Status.RUNNING, _Status.FAILED, _Status.RESOLVED},
        _Status.RETRY_SCHEDULED: {_Status.RUNNING, _Status.FAILED, _Status.RESOLVED},
        _Status.RUNNING: {_Status.SUCCEEDED, _Status.RETRY_SCHEDULED, _Status.UNKNOWN, _Status.FAILED},
        _Status.FAILED: {_Status.PENDING, _Status.RESOLVED},
        _Status.UNKNOWN: {_Status.PENDING, _Status.RESOLVED},
        _Status.HELD: {_Status.PENDING, _Status.RESOLVED},
    },
)


def locked_saga(*, key: str, run_id: uuid.UUID | None, tenant: str, actor: str) -> Saga:
    """The saga ``key`` of ``tenant`` (opened now if it is new), locked until the transaction ends."""
    saga, created = Saga.objects.get_or_create(key=key, tenant=tenant, defaults={"run_id": run_id})
    if created:
        audit_saga(
            saga, "saga.opened", actor=actor, status=saga.status, data={"run_id": str(run_id) if run_id else None}
        )
    return Saga.objects.select_for_update().get(pk=saga.pk)


def lock_sagas(sagas: QuerySet[Saga]) -> list[int]:
    """Lock the rows of ``sagas`` until the transaction ends, in id order; return their ids.

    Whoever locks more than one saga in a transaction takes them through here, so that two such transactions (a
    bulk retry, a rollback of a run with its subagents) never hold one each while waiting for the other's.
    """
    return list(sagas.select_for_update().order_by("pk").values_list("pk", flat=True))


def lock_saga_of(compensation_id: int) -> Saga | None:
    saga_id = Compensation.objects.filter(pk=compensation_id).values_list("saga_id", flat=True).first()
    if saga_id is None:
        return None
    return Saga.objects.select_for_update().get(pk=saga_id)


def compensable_tool_names() -> list[str]:
    return [tool.name for tool in registry.all() if tool.compensate_with]


def step_calls(key: str, run_id: uuid.UUID | None, *, tenant: str) -> QuerySet[ToolCall]:
    """The calls that are steps of a saga: the run's own calls, or its tenant's direct calls carrying its id."""
    match = Q(saga_id=key, tenant=tenant)
    if run_id is not None:
        match |= Q(run_id=run_id, saga_id="")
    return ToolCall.objects.filter(match, SAGA_STEPS)


def plan_compensation(
    saga: Saga, call: ToolCall, *, actor: str, status: CompensationStatus | None = None, file_late: bool = True
) -> Compensation:
    """Number a step and plan its compensation; a step asked for before a rollback is filed under it too.

    Compensated by it, or held when that rollback holds its steps for an operator (``held_for_operator``) or the step's
    own outcome is unknown (``status`` held): it does not undo such a step alone. A finished rollback it is filed
    under is opened again (``reopen_rollback``): the caller advances the saga, which finishes it again naming the step.
    ``file_late=False``: the caller files the step under a new rollback of its own (``saga_rollback``).
    """
    tool = registry.get(call.tool_name)
    # A step whose tool left the code is held (``hold_unknown_steps``): nobody knows any more how to undo it.
    assert (tool is not None and tool.compensate_with) or status == CompensationStatus.HELD
    arguments, error = planned_arguments(call.tool_name, call)
    late_for = (
        saga.rollbacks.filter(requested_at__gt=call.created_at).order_by("-requested_at").first() if file_late else None
    )
    if status is None and late_for is not None:
        status = CompensationStatus.HELD if late_for.held_for_operator else CompensationStatus.PENDING
    status = status or CompensationStatus.RECORDED
    if late_for is not None and late_for.finished_at is not None:
        held = {"held": True} if status == CompensationStatus.HELD else {}
        reopen_rollback(saga, late_for, call, actor, cause={"late_step": str(call.id), **held})
    saga.last_sequence += 1
    saga.save(update_fields=["last_sequence", "updated_at"])
    compensation = Compensation.objects.create(
        saga=saga,
        sequence=saga.last_sequence,
        rollback=late_for,
        step_call=call,
        step_tool=call.tool_name,
        tool_name=tool.compensate_with if tool is not None else "",
        arguments=arguments,
        mapping_error=error,
        status=status,
        max_attempts=toolhub_settings().SAGA_MAX_ATTEMPTS,
    )
    audit_compensation(
        saga,
        compensation,
        f"compensation.{'held' if status == CompensationStatus.HELD else 'recorded'}",
        actor=actor,
        data={"arguments_known": arguments is not None, "mapping_error": error} if error else {},
    )
    return compensation


def reopen_rollback(saga: Saga, rollback: Rollback, call: ToolCall, actor: str, *, cause: dict[str, Any]) -> None:
    """Open a finished ``rollback`` again for its step ``call``, to run or hold now; ``cause`` says why, for the trail.

    A late step filed under it (``plan_compensation``: compensated now, or held for an operator), or an operator's
    retry or resolution by hand of one of its compensations (``compensation_retry``, ``compensation_resolve``). It
    finishes again (``close_rollbacks``) once that is done (a held step or a resolution: at once, nothing to run),
    with an outcome naming the step, the conversation told again; kept finished, it read done before one of its own
    compensations ran, and its one ``saga.rollback_finished`` never named what became of that step (nor was a run's
    conversation told). A run's saga wakes the run after commit (``rollback_reopened``): a held step or a resolution
    settles no call, and a run that ended is woken by nothing else; a wake-up that finds the rollback under way (a
    retry) tells nothing, its call's settling wakes the run again.
    """
    if saga.run_id is not None:
        # Once per transaction: a bulk resolution reopens (and finishes again) one rollback per compensation resolved.
        run_id, rollback_id = saga.run_id, rollback.pk
        on_commit_once(
            (rollback_reopened, run_id, rollback_id),
            lambda: rollback_reopened.send(sender=Rollback, run_id=run_id, rollback_id=rollback_id),
        )
    rollback.finished_at = None
    rollback.told_at = None
    rollback.save(update_fields=["finished_at", "told_at"])
    audit_saga(
        saga,
        "saga.rollback_reopened",
        actor=actor,
        call_id=call.id,
        tool_name=call.tool_name,
        status=saga.status,
        data={"rollback": rollback.pk, **cause},
    )


def planned_arguments(tool_name: str, call: ToolCall) -> tuple[dict[str, Any] | None, str]:
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


def record_missing_steps(saga: Saga, actor: str) -> None:
    """Record succeeded steps whose settle notification was lost (a process died right after the commit)."""
    known = Compensation.objects.filter(saga=saga).values("step_call_id")
    missing = (
        step_calls(saga.key, saga.run_id, tenant=saga.tenant)
        .filter(status=CallStatus.SUCCEEDED, tool_name__in=compensable_tool_names())
        .exclude(id__in=known)
        .order_by("finished_at", "created_at")
    )
    for call in missing:
        plan_compensation(saga, call, actor=actor)


def hold_unknown_steps(saga: Saga, actor: str) -> list[Compensation]:
    """Steps whose own outcome is unknown are not compensated on their own: an operator decides.

    So are unknown steps whose tool has left the code since: whether it was compensable is no longer known, and
    leaving them out would let the saga read compensated over a step nobody looked at.
    """
    known = Compensation.objects.filter(saga=saga).values("step_call_id")
    registered = [tool.name for tool in registry.all()]
    unknown = (
        step_calls(saga.key, saga.run_id, tenant=saga.tenant)
        .filter(Q(tool_name__in=compensable_tool_names()) | ~Q(tool_name__in=registered))
        .filter(status=CallStatus.NEEDS_ATTENTION)
        .exclude(id__in=known)
        .order_by("created_at")
    )
    # Filed by the caller under the rollback it asks for now, never opening an older one.
    return [
        plan_compensation(saga, call, actor=actor, status=CompensationStatus.HELD, file_late=False) for call in unknown
    ]


def refresh_status(saga: Saga, actor: str) -> None:
    """Derive the saga's status from its compensations; audit the change when there is one."""
    statuses = set(saga.compensations.values_list("status", flat=True))
    if statuses & ATTENTION_COMPENSATION_STATUSES:
        target = SagaStatus.NEEDS_ATTENTION
    elif statuses & (ACTIVE_COMPENSATION_STATUSES | {CompensationStatus.PENDING}):
        target = SagaStatus.COMPENSATING
    elif not saga.rollbacks.exists():
        target = SagaStatus.OPEN
    elif CompensationStatus.RESOLVED in statuses:
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
        audit_saga(saga, f"saga.{target}", actor=actor, status=target, data={"from": previous, "compensations": counts})


def compensation_transition(
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
    audit_compensation(saga, compensation, event or f"compensation.{to}", actor=actor, data=data)
    return True


def audit_compensation(
    saga: Saga, compensation: Compensation, event: str, *, actor: str, data: dict[str, Any] | None = None
) -> None:
    # Filed under the step's call, so the step's audit trail shows how it was undone.
    audit_saga(
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


def audit_saga(
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
