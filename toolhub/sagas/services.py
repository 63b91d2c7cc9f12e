"""Writes of the sagas: open one, record its steps as calls settle, roll it back, report rollbacks to the run.

Every function that changes a saga locks its row first (``records``), so the steps of one saga are
numbered and compensated strictly one after another whatever the number of workers; every state change
writes its audit event in the same transaction. Running the compensations is ``compensating``'s job;
retries, the sweep and operators' actions are ``recovery``'s.
"""

import uuid
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from toolhub.exceptions import ToolhubError
from toolhub.models import ROLLBACK_KINDS, STEP_KINDS, CallKind, CallStatus, ToolCall, is_saga_step, is_undoing
from toolhub.sagas.compensating import advance, apply_call_outcome
from toolhub.sagas.models import Compensation, CompensationStatus, Rollback, RollbackTrigger, Saga
from toolhub.sagas.records import (
    SAGA_ACTOR,
    audit_saga,
    compensable_tool_names,
    compensation_transition,
    hold_unknown_steps,
    lock_saga_of,
    locked_saga,
    plan_compensation,
    record_missing_steps,
    refresh_status,
    step_calls,
)
from toolhub.sagas.selectors import rollback_note, saga_id_unavailable
from toolhub.tools.registry import registry

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
]


class NothingToCompensateError(ToolhubError):
    """A rollback was asked for, but no completed step of the saga can be compensated."""

    status_code = 409


class SagaKeyTakenError(ToolhubError):
    """A direct saga was to be opened under a key that is in use already."""


@transaction.atomic
def saga_open(*, key: str, tenant: str, user: Any, actor: str) -> Saga:
    """Open a direct saga for ``user``'s calls that will carry ``saga_id=key`` (``POST /api/v1/sagas/``).

    A key in use in ``tenant`` (a saga, or calls carrying it) or a run's id (its saga's key, even before the
    run's first step) is refused, so that no caller joins, or takes, another's saga. Keys are the tenant's
    own: another tenant's saga of the same name neither blocks it nor shows.
    """
    if saga_id_unavailable(key, tenant=tenant, user_id=None):
        raise SagaKeyTakenError("This saga id is in use; choose another (a new UUID, for instance).")
    try:
        with transaction.atomic():
            saga = Saga.objects.create(key=key, tenant=tenant, created_by=user)
    except IntegrityError:
        raise SagaKeyTakenError("This saga id is in use; choose another (a new UUID, for instance).") from None
    audit_saga(saga, "saga.opened", actor=actor, status=saga.status, data={"run_id": None, "direct": True})
    return saga


def saga_key_of(call: ToolCall) -> str:
    """The saga a call belongs to: its explicit saga id, else its run; ``""`` for a lone direct call."""
    if call.saga_id:
        return call.saga_id
    return str(call.run_id) if call.run_id else ""


def saga_ignores(call: ToolCall) -> bool:
    """Whether no saga can care that ``call`` settled, judged from what never changes on a call (no read).

    Sagas follow compensations, succeeded steps of compensable tools, and failed direct calls that share a
    saga id; a call of a tool without compensation in a run, or outside any saga, concerns none.
    """
    if call.kind not in STEP_KINDS or is_undoing(call.kind, call.context):
        return False  # a compensation, or a call held on its behalf whose outcome is the compensation's
    if not is_saga_step(call.kind, call.context) or not saga_key_of(call):
        return True
    tool = registry.get(call.tool_name)
    compensable = tool is not None and bool(tool.compensate_with)
    return not compensable and not (call.run_id is None and call.saga_id)


def saga_call_settled(*, call_id: uuid.UUID) -> None:
    """React to a settled call: record a completed compensable step, follow a compensation, roll back a direct saga."""
    call = ToolCall.objects.filter(pk=call_id).first()
    if call is None:
        return
    if is_undoing(call.kind, call.context):
        # Its own call, or one an agentic compensation's model left held (``held_inner_outcome``): either settles it.
        undoing_call = (
            call.id if call.kind == CallKind.COMPENSATION else _uuid((call.context or {}).get("parent_call_id"))
        )
        if undoing_call is None:
            return
        compensation_id = Compensation.objects.filter(call_id=undoing_call).values_list("id", flat=True).first()
        if compensation_id is not None:
            saga_sync_compensation(compensation_id=compensation_id)
        return
    if not saga_key_of(call):
        return
    if call.status in (CallStatus.SUCCEEDED, CallStatus.NEEDS_ATTENTION):
        saga_record_step(call=call)
    elif call.status == CallStatus.FAILED and call.kind in ROLLBACK_KINDS and call.run_id is None and call.saga_id:
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
    """Record a settled compensable call as the saga's step; a no-op for anything else or a second time.

    A succeeded call is the saga's next step (compensated at once by a rollback asked for after it was).
    A call whose outcome became unknown (its worker died: ``needs_attention``) after a rollback was asked for
    is held under that rollback for an operator, as the rollback held the steps already unknown; before any
    rollback it waits for one (``hold_unknown_steps``).
    """
    tool = registry.get(call.tool_name)
    key = saga_key_of(call)
    if tool is None or not tool.compensate_with or not key or not is_saga_step(call.kind, call.context):
        return None
    if call.status not in (CallStatus.SUCCEEDED, CallStatus.NEEDS_ATTENTION):
        return None
    unknown = call.status == CallStatus.NEEDS_ATTENTION
    with transaction.atomic():
        if unknown:
            # Locked first, so that a rollback being asked for now is seen (or sees this call) once committed.
            saga = Saga.objects.select_for_update().filter(key=key, tenant=call.tenant).first()
            if saga is None or not saga.rollbacks.filter(requested_at__gt=call.created_at).exists():
                return None
        else:
            saga = locked_saga(key=key, run_id=call.run_id, tenant=call.tenant, actor=actor)
        existing = Compensation.objects.filter(step_call_id=call.id).first()
        if existing is not None:
            return existing
        compensation = plan_compensation(saga, call, actor=actor, status=CompensationStatus.HELD if unknown else None)
        if compensation.status != CompensationStatus.RECORDED:
            # Filed under a rollback: a pending step starts; a finished rollback that a held one opened again
            # finishes again at once, naming it.
            advance(saga, actor)
        refresh_status(saga, actor)
    return compensation


def saga_sync_compensation(*, compensation_id: int, actor: str = SAGA_ACTOR) -> None:
    """Bring a running compensation in step with its call's outcome, then start the next one."""
    with transaction.atomic():
        saga = lock_saga_of(compensation_id)
        if saga is None:
            return
        compensation = Compensation.objects.select_related("call", "step_call").get(pk=compensation_id)
        if compensation.call is not None:
            apply_call_outcome(saga, compensation, compensation.call, actor)
        advance(saga, actor)
        refresh_status(saga, actor)


def saga_rollback(
    *,
    saga_key: str,
    tenant: str,
    actor: str,
    trigger: RollbackTrigger,
    failed_call: ToolCall | None = None,
    run_id: uuid.UUID | None = None,
    through_run: uuid.UUID | None = None,
    by: AbstractBaseUser | None = None,
    hold: bool = False,
) -> Rollback | None:
    """Compensate the saga's completed steps, newest first, one after another; ``None`` if there are none.

    Steps whose own outcome is unknown (their call needs attention) are held for an operator, who
    decides whether to compensate them. Asking twice for the same failed step returns the first rollback.
    ``through_run`` names the run whose rollback asked for this one (a parent run rolling back its
    subagents' runs), so that auditors of this saga see where the request came from. ``by`` is the person who
    asked (``actor`` names them as they were called then): none of its compensations is approved by them.
    ``hold``: every step is held for an operator instead (a failure found too late to undo on its own).
    """
    with transaction.atomic():
        saga = Saga.objects.select_for_update().filter(key=saga_key, tenant=tenant).first()
        if saga is None:
            if not step_calls(saga_key, run_id, tenant=tenant).filter(tool_name__in=compensable_tool_names()).exists():
                return None
            saga = locked_saga(key=saga_key, run_id=run_id, tenant=tenant, actor=actor)
        if failed_call is not None:
            existing = saga.rollbacks.filter(failed_call=failed_call).first()
            if existing is not None:
                return existing
        record_missing_steps(saga, actor)
        recorded = list(saga.compensations.filter(status=CompensationStatus.RECORDED).order_by("-sequence"))
        held = hold_unknown_steps(saga, actor)
        if hold:
            held, recorded = recorded + held, []
        if not recorded and not held:
            # Nothing for a new rollback; a late step ``record_missing_steps`` just filed may have opened a finished
            # one again (``plan_compensation``): it starts now, not at the sweep's next tick, the saga's status with it.
            under_way = saga.rollbacks.filter(finished_at__isnull=True).first()
            advance(saga, actor)
            refresh_status(saga, actor)
            if under_way is not None:
                under_way.refresh_from_db()
            return under_way
        rollback = Rollback.objects.create(
            saga=saga,
            trigger=trigger,
            failed_call=failed_call,
            requested_by=actor[:200],
            asked_by=by,
            held_for_operator=hold,
        )
        audit_saga(
            saga,
            "saga.rollback_requested",
            actor=actor,
            call_id=failed_call.id if failed_call else None,
            tool_name=failed_call.tool_name if failed_call else "",
            status=saga.status,
            data={
                "rollback": rollback.pk,
                "trigger": trigger,
                # Nobody asked: the saga rolled itself back (a failed step, heard at once or by the sweep).
                "automatic": by is None and trigger == RollbackTrigger.STEP_FAILED,
                "failed_call": str(failed_call.id) if failed_call else None,
                "compensate": [[c.sequence, c.step_tool, c.tool_name] for c in recorded],
                "held": [[c.sequence, c.step_tool] for c in held],
                **({"through_run": str(through_run)} if through_run is not None else {}),
                **(
                    {"held_for_operator": "found after SAGA_UNHEARD_FAILURE_HOURS: an operator decides"} if hold else {}
                ),
            },
        )
        for compensation in recorded:
            compensation_transition(
                saga,
                compensation,
                to=CompensationStatus.PENDING,
                allowed_from={CompensationStatus.RECORDED},
                actor=actor,
                rollback=rollback,
            )
        for compensation in held:
            if compensation.status == CompensationStatus.RECORDED:
                compensation_transition(
                    saga,
                    compensation,
                    to=CompensationStatus.HELD,
                    allowed_from={CompensationStatus.RECORDED},
                    actor=actor,
                    rollback=rollback,
                )
        Compensation.objects.filter(pk__in=[c.pk for c in held]).update(rollback=rollback)
        advance(saga, actor)
        refresh_status(saga, actor)
        rollback.refresh_from_db()
    return rollback


def saga_rollback_on_demand(
    *, saga_key: str, tenant: str, actor: str, run_id: uuid.UUID | None = None, by: AbstractBaseUser | None = None
) -> Saga:
    """Roll back a saga now (``POST /sagas/{id}/rollback/``), as ``by``; refuses when nothing can be compensated."""
    rollback = saga_rollback(
        saga_key=saga_key, actor=actor, trigger=RollbackTrigger.ON_DEMAND, run_id=run_id, tenant=tenant, by=by
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
    failed = next((c for c in calls if c.kind in ROLLBACK_KINDS and c.status == CallStatus.FAILED), None)
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
    saga = Saga.objects.filter(run_id=run_id).first()
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
            audit_saga(saga, "saga.rollback_reported", actor=actor, status=saga.status, data={"rollback": rollback.pk})
            notes.append(note)
    return notes


def saga_advance(*, saga_id: int, actor: str = SAGA_ACTOR) -> None:
    """Start the next compensation of a saga if none is under way (repairs a lost wake-up)."""
    with transaction.atomic():
        saga = Saga.objects.select_for_update().filter(pk=saga_id).first()
        if saga is not None:
            advance(saga, actor)
            refresh_status(saga, actor)


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None
