"""Getting stuck sagas going again: due retries, the periodic sweep, and operators' retry or resolve.

The sweep repairs what a lost notification or a killed process left behind (a retry that came due, a
compensation whose call settled unheard, a stalled rollback, a failed direct step nobody acted on);
operators retry or settle by hand what needs attention, each change audited with their name.
"""

import datetime as dt

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Exists, Min, OuterRef, QuerySet
from django.utils import timezone

from toolhub.admin_marks import seen_digest
from toolhub.conf import toolhub_settings
from toolhub.exceptions import CompensationNotAllowedError, InvalidTransitionError
from toolhub.models import SETTLED_STATUSES
from toolhub.sagas.compensating import advance, attempts_of, launch
from toolhub.sagas.models import (
    ACTIVE_COMPENSATION_STATUSES,
    ATTENTION_COMPENSATION_STATUSES,
    Compensation,
    CompensationStatus,
    Rollback,
    Saga,
)
from toolhub.sagas.records import (
    compensation_transition,
    lock_saga_of,
    lock_sagas,
    refresh_status,
    reopen_rollback,
)
from toolhub.sagas.selectors import OPERATE_PERMISSION
from toolhub.sagas.services import saga_advance, saga_sync_compensation
from toolhub.sagas.unheard import (
    UNHEARD_FAILURES_MARK,
    hold_unheard_failures,
    repair_ended_steps,
    roll_back_unheard_failures,
    unheard_failures_to_roll_back,
)
from toolhub.selectors import compensation_settle_refusal

__all__ = [
    "compensation_retry_due",
    "sagas_sweep",
    "compensation_retry",
    "compensation_resolve",
    "saga_retry",
    "saga_resolve",
    "retry_marks",
    "compensation_mark",
    "compensation_marks",
    "compensations_retry",
    "compensations_resolve",
    "StaleRetryError",
    "UNHEARD_FAILURES_MARK",
]


class StaleRetryError(InvalidTransitionError):
    """What the action would act on is not what the operator's page showed: nothing was done."""


def compensation_retry_due(*, compensation_id: int, actor: str = "saga-sweeper") -> bool:
    """Run a failed compensation's next attempt if its time has come; return whether it was started."""
    with transaction.atomic():
        saga = lock_saga_of(compensation_id)
        if saga is None:
            return False
        compensation = Compensation.objects.select_related("call", "step_call").get(pk=compensation_id)
        due = compensation.next_attempt_at is not None and compensation.next_attempt_at <= timezone.now()
        if compensation.status != CompensationStatus.RETRY_SCHEDULED or not due:
            return False
        launch(saga, compensation, actor)
        advance(saga, actor)
        refresh_status(saga, actor)
    return True


def sagas_sweep(*, limit: int = 200) -> dict[str, int]:
    """The periodic repair: due retries run, lost call outcomes are applied, stalled rollbacks go on."""
    now = timezone.now()
    counts = {"retried": 0, "synced": 0, "advanced": 0, "rolled_back": 0, "held": 0, "late_steps": 0}
    due = Compensation.objects.filter(status=CompensationStatus.RETRY_SCHEDULED, next_attempt_at__lte=now)
    for compensation_id in due.order_by("next_attempt_at").values_list("id", flat=True)[:limit]:
        counts["retried"] += compensation_retry_due(compensation_id=compensation_id)
    settled = Compensation.objects.filter(status=CompensationStatus.RUNNING, call__status__in=list(SETTLED_STATUSES))
    # Oldest touched first: one waiting on a call held on its behalf is touched each time (``_wait_for_held``).
    for compensation_id in settled.order_by("updated_at", "id").values_list("id", flat=True)[:limit]:
        saga_sync_compensation(compensation_id=compensation_id)
        counts["synced"] += 1
    for saga_id in list(_stalled_rollbacks()[:limit]):
        saga_advance(saga_id=saga_id)
        counts["advanced"] += 1
    window = dt.timedelta(hours=toolhub_settings().SAGA_UNHEARD_FAILURE_HOURS)
    counts["rolled_back"] = roll_back_unheard_failures(unheard_failures_to_roll_back(since=now - window), limit)
    # Heard too late to undo on its own (the sweep stopped that long): held for an operator, never left unseen.
    counts["held"] = hold_unheard_failures(limit, until=now - window)
    # Steps that settled unheard after a rollback, or stopped carrying a failure on: what hearing them would do.
    counts["late_steps"], held_again = repair_ended_steps(limit, now=now, window=window)
    counts["held"] += held_again
    return counts


def _stalled_rollbacks() -> QuerySet[Rollback, int]:
    """Ids of the sagas whose unfinished rollback ``advance`` would take on now, one per saga, longest waiting first.

    Only those with no compensation under way (a call in the pipeline, held for approval, a retry scheduled: its
    outcome or its time moves the saga on): read newest first and all alike, a backlog of rollbacks waiting on
    approvers filled every batch and an older one that could go on was never reached.
    """
    under_way = Compensation.objects.filter(saga=OuterRef("saga_id"), status__in=list(ACTIVE_COMPENSATION_STATUSES))
    return (
        Rollback.objects.filter(finished_at__isnull=True)
        .exclude(Exists(under_way))
        .values("saga_id")
        .annotate(waiting_since=Min("requested_at"))
        .order_by("waiting_since", "saga_id")
        .values_list("saga_id", flat=True)
    )


def compensation_retry(*, compensation: Compensation, actor: str, by: AbstractBaseUser | None = None) -> Compensation:
    """An operator runs a failed, unknown or held compensation (again), with a fresh round of attempts.

    ``by``: the person asking (``None``: trusted code). They asked for it as the rollback's asker did: kept on the
    compensation (``retried_by``), they never decide an approval it needs (``compensation_askers``), so a retry
    after a rejection is not approved by whoever retried it alone.
    """
    with transaction.atomic():
        saga = lock_saga_of(compensation.pk)
        current = Compensation.objects.select_related("call", "step_call", "rollback").get(pk=compensation.pk)
        if current.status not in ATTENTION_COMPENSATION_STATUSES:
            raise InvalidTransitionError(
                f"Compensation #{current.sequence} ({current.step_tool}) is {current.status}; only a failed, unknown "
                "or held compensation can be retried."
            )
        assert saga is not None
        if by is not None:
            current.retried_by.add(by)  # before the call goes out: its approval request reads who asked
        used = attempts_of(current.call) if current.call is not None else 0
        previous = current.status
        compensation_transition(
            saga,
            current,
            to=CompensationStatus.PENDING,
            allowed_from=ATTENTION_COMPENSATION_STATUSES,
            actor=actor,
            event="compensation.retry_requested",
            data={"previous_status": previous},
            max_attempts=used + toolhub_settings().SAGA_MAX_ATTEMPTS,
            next_attempt_at=None,
            finished_at=None,
        )
        rollback = current.rollback
        if rollback is not None and rollback.finished_at is not None:
            # Its rollback finishes again once the retry settles, naming what became of the step.
            cause = {"retried": current.pk, "previous_status": previous}
            reopen_rollback(saga, rollback, current.step_call, actor, cause=cause)
        advance(saga, actor)
        refresh_status(saga, actor)
        current.refresh_from_db()
    return current


def compensation_resolve(
    *, compensation: Compensation, actor: str, note: str, by: AbstractBaseUser | None = None
) -> Compensation:
    """An operator settles a compensation by hand (done outside toolhub, or not to be done), with a note.

    ``by``: the person asking (``None``: trusted code); never the user whose step it undoes, an operator
    included (``compensation_settle_refusal``): resolving it keeps their own step done without a second pair of eyes.
    """
    allowed = ATTENTION_COMPENSATION_STATUSES | {CompensationStatus.PENDING, CompensationStatus.RETRY_SCHEDULED}
    with transaction.atomic():
        saga = lock_saga_of(compensation.pk)
        current = Compensation.objects.select_related("step_call", "rollback").get(pk=compensation.pk)
        refusal = None if by is None else compensation_settle_refusal(current.step_call.user_id, by, OPERATE_PERMISSION)
        if refusal:
            raise CompensationNotAllowedError(
                f"Compensation #{current.sequence} ({current.step_tool}) was not resolved: {refusal}"
            )
        if current.status not in allowed:
            raise InvalidTransitionError(
                f"Compensation #{current.sequence} ({current.step_tool}) is {current.status}; only one that failed, "
                "is unknown, held or still waiting can be resolved by hand."
            )
        assert saga is not None
        previous = current.status
        compensation_transition(
            saga,
            current,
            to=CompensationStatus.RESOLVED,
            allowed_from=allowed,
            actor=actor,
            data={"previous_status": previous, "note": note},
            resolved_by=actor[:200],
            resolution_note=note,
            next_attempt_at=None,
            finished_at=timezone.now(),
        )
        rollback = current.rollback
        if rollback is not None and rollback.finished_at is not None:
            # As a retry: the rollback finishes again at once (``advance``), naming the step resolved.
            cause = {"resolved": current.pk, "previous_status": previous}
            reopen_rollback(saga, rollback, current.step_call, actor, cause=cause)
        advance(saga, actor)
        refresh_status(saga, actor)
    return current


def compensation_mark(compensation: Compensation) -> str:
    """What a page showed of one compensation: it changes with every move (status, attempts, last change)."""
    return f"{compensation.pk}:{compensation.status}:{compensation.attempts}:{compensation.updated_at.isoformat()}"


def compensation_marks(scope: QuerySet[Compensation]) -> list[str]:
    """The marks of the compensations ``scope`` holds now, as a page lists them to act on."""
    return [
        compensation_mark(c)
        for c in scope.order_by("saga_id", "-sequence").only("pk", "status", "attempts", "updated_at")
    ]


def retry_marks(saga: Saga) -> list[str]:
    """What a retry of ``saga`` would act on, as a page shows it: the marks of its compensations needing attention.

    ``saga_retry(seen=...)`` compares their digest (``seen_digest``) with the saga's as they are.
    """
    return compensation_marks(saga.compensations.filter(status__in=ATTENTION_COMPENSATION_STATUSES))


def _hold_as_seen(scope: QuerySet[Compensation], seen: str | None, done: str) -> list[Compensation]:
    """Lock the sagas of ``scope`` and return its compensations, refused when they are not the ``seen`` ones.

    In the caller's transaction, the sagas' rows locked in one order (no deadlock between two pages): nothing of
    theirs moves between the comparison and the action. The rows compared are the rows returned, read once: a
    compensation of a saga that was not locked (none of its rows in ``scope`` then) and that joins ``scope`` after
    the comparison is not acted on unseen. ``None``: trusted code, which acts on the scope as it is now.
    """
    lock_sagas(Saga.objects.filter(pk__in=scope.values("saga_id")))
    held = list(scope.order_by("saga_id", "-sequence"))
    if seen is not None and seen != seen_digest(compensation_mark(c) for c in held):
        raise StaleRetryError(
            f"The compensations changed since you read this page; nothing was {done}. "
            "Read them again as they stand now."
        )
    return held


def compensations_retry(
    *, scope: QuerySet[Compensation], actor: str, seen: str | None = None, by: AbstractBaseUser | None = None
) -> int:
    """Retry the compensations of ``scope`` that need attention, all or none; return how many.

    ``seen``: the digest (``toolhub.admin_marks.seen_digest``) of the marks (``compensation_mark``) of the page the
    operator confirmed on, one word however many it listed. Compared under the sagas' row locks, so a retry runs
    only what they read: one whose state moved since (a first retry of a double click that finished as unknown, one
    newly needing attention) refuses the whole retry with ``StaleRetryError``.
    """
    with transaction.atomic():
        chosen = _hold_as_seen(scope.filter(status__in=ATTENTION_COMPENSATION_STATUSES), seen, "retried")
        for compensation in chosen:
            compensation_retry(compensation=compensation, actor=actor, by=by)
    return len(chosen)


def saga_retry(*, saga: Saga, actor: str, seen: str | None = None, by: AbstractBaseUser | None = None) -> int:
    """Retry every compensation of the saga that needs attention, bound to the page's ``retry_marks`` (``seen``)."""
    return compensations_retry(scope=saga.compensations.all(), actor=actor, seen=seen, by=by)


def compensations_resolve(
    *,
    scope: QuerySet[Compensation],
    actor: str,
    note: str,
    by: AbstractBaseUser | None = None,
    seen: str | None = None,
) -> tuple[int, list[str]]:
    """Resolve by hand each compensation of ``scope``; return how many, and why the others were not.

    ``seen``: the digest of the marks of the page the operator confirmed on, compared under the sagas' row locks as
    for a retry: when any compensation of ``scope`` moved or joined it since, ``StaleRetryError`` and nothing is
    resolved (a compensation nobody read would never run). Each one the service refuses (not in a state to resolve, the
    operator's own step) is reported and left as it is; the others are resolved.
    """
    resolved, refusals = 0, []
    with transaction.atomic():
        for compensation in _hold_as_seen(scope, seen, "resolved"):
            try:
                compensation_resolve(compensation=compensation, actor=actor, note=note, by=by)
            except (InvalidTransitionError, CompensationNotAllowedError) as exc:
                refusals.append(str(exc))
            else:
                resolved += 1
    return resolved, refusals


def saga_resolve(*, saga: Saga, actor: str, note: str, by: AbstractBaseUser | None = None) -> int:
    """Resolve by hand every compensation of the saga that needs attention; return how many."""
    ids = list(saga.compensations.filter(status__in=ATTENTION_COMPENSATION_STATUSES).values_list("id", flat=True))
    for compensation in Compensation.objects.filter(pk__in=ids):
        compensation_resolve(compensation=compensation, actor=actor, note=note, by=by)
    return len(ids)
