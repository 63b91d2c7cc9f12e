"""Failed direct saga steps nobody heard of, and saga steps that settled unheard, found by the sweep.

A saga's notifications (``call_settled``) are sent after commit: a process that dies between the two loses one. The
sweep finds what that left behind by reading the calls, through partial indexes: a direct step's failure nobody acted
on (rolled back at once within ``SAGA_UNHEARD_FAILURE_HOURS``, held for an operator after), a step (of a run or a
direct saga) that succeeded after its saga was rolled back (compensated under that rollback), and a direct step that
carried a failure on and then ended without succeeding (the failure read again).
"""

import datetime as dt

from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from toolhub.models import ENDED_STEP_STATUSES, ROLLBACK_KINDS, SAGA_STEPS, SETTLED_STATUSES, CallStatus, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Rollback, RollbackTrigger
from toolhub.sagas.records import compensable_tool_names
from toolhub.sagas.services import saga_record_step, saga_rollback
from toolhub.sagas.sweep_marks import marked_batch

__all__ = [
    "UNHEARD_FAILURES_MARK",
    "ENDED_STEPS_MARK",
    "ENDED_STEP_MARGIN",
    "SWEEP_ACTOR",
    "hold_unheard_failures",
    "roll_back_unheard_failures",
    "unheard_failures_to_roll_back",
    "unheard_among",
    "repair_ended_steps",
]

#: Who the sweep's own changes are by.
SWEEP_ACTOR = "saga-sweeper"

#: The ``SweepMark`` of the held scan: failures that failed before it were read by a completed one.
UNHEARD_FAILURES_MARK = "unheard_failures"


def hold_unheard_failures(limit: int, *, until: dt.datetime) -> int:
    """Hold the unheard failures that failed before ``until`` and the last completed scan had not reached.

    From ``SweepMark`` ``unheard_failures`` (the ``until`` of the last scan that read all it had to), so a sweep
    back after any outage holds every failure it missed, and a tick reads only what aged past the window since the
    last one (a fixed second window read every handled failure of a whole window, each tick). No mark (a first run,
    on an upgrade too): every older failure, from the oldest. At most ``limit`` failures read a tick, oldest first
    through ``toolcall_failed_direct_step``: a batch that filled it moves the mark to its newest failure, the next
    tick carries on after it. The mark moves only from the value this tick read (two sweepers at once: one moves it;
    a failure both read is rolled back once).
    """
    batch, move_mark = marked_batch(
        UNHEARD_FAILURES_MARK, failed_direct_steps(), until=until, margin=ENDED_STEP_MARGIN, limit=limit
    )
    held = roll_back_unheard_failures(unheard_among(ToolCall.objects.filter(pk__in=batch)), limit, hold=True)
    move_mark()
    return held


def roll_back_unheard_failures(failures: QuerySet[ToolCall], limit: int, *, hold: bool = False) -> int:
    """Roll back the direct sagas of ``failures`` (unheard: ``unheard_among``) whose newest event is that failure.

    Read from the failed calls, in SQL: the saga's row may not exist yet (a direct saga's row is written when a
    notification of one of its steps is heard, and both may have been lost), and a direct saga whose steps all
    succeeded stays open for ever, so only failures to act on count against ``limit``. One rollback a saga per
    sweep, its oldest such failure; two sweepers at once start one (``saga_rollback`` locks the saga, and a
    failure is rolled back once: ``saga_rollback_once_per_failure``). ``hold``: a failure found older than the
    window the sweep undoes on its own, rolled back held: its steps wait for an operator's decision.
    """
    rolled_back, seen = 0, set()
    for failed in failures[:limit]:
        if (failed.saga_id, failed.tenant) in seen:
            continue
        seen.add((failed.saga_id, failed.tenant))
        rollback = saga_rollback(
            saga_key=failed.saga_id,
            tenant=failed.tenant,
            actor=SWEEP_ACTOR,
            trigger=RollbackTrigger.STEP_FAILED,
            failed_call=failed,
            hold=hold,
        )
        rolled_back += rollback is not None and rollback.failed_call_id == failed.id
    return rolled_back


def failed_direct_steps() -> QuerySet[ToolCall]:
    """Failed direct saga steps: the rows of ``toolcall_failed_direct_step`` (partial), read by ``finished_at``.

    By when they failed, not when they were asked for: a row enters the index when its call fails, and a step that
    waited longer than the window (an approval, an external result) before failing was behind the automatic window
    and the held scan's mark the moment it failed, never read.
    """
    return ToolCall.objects.filter(kind__in=ROLLBACK_KINDS, run_id__isnull=True, status=CallStatus.FAILED).exclude(
        saga_id=""
    )


def unheard_failures_to_roll_back(*, since: dt.datetime) -> QuerySet[ToolCall]:
    """Failed direct steps that failed from ``since`` on and nobody acted on, oldest first.

    Through ``toolcall_failed_direct_step`` (partial: failed direct steps only), so a tick reads the failures of a
    window of ``SAGA_UNHEARD_FAILURE_HOURS``, never the calls' history.
    """
    # Only a window's failures: a handled one stays in the index for ever (its rollback or newer step is in other
    # tables), and each tick read them all (100,000 old failures: about 2.4 s a tick on PostgreSQL).
    return unheard_among(failed_direct_steps().filter(finished_at__gte=since))


def unheard_among(failures: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
    """The failures of ``failures`` nobody acted on, oldest first.

    No rollback names them, and no step left to undo was asked for after they settled (the caller carried on:
    such a failure is left alone).
    """
    return (
        failures
        # A scalar subquery per failure through the rollbacks' ``failed_call`` index: ``NOT IN`` (or a ``NOT
        # EXISTS`` PostgreSQL may hash) read every rollback there ever was, each tick.
        .annotate(
            rolled_back_by=Subquery(Rollback.objects.filter(failed_call=OuterRef("pk")).order_by().values("pk")[:1]),
            newest_step_at=Subquery(_newest_step_left()),
        )
        .filter(rolled_back_by__isnull=True, newest_step_at__lte=Coalesce("finished_at", "created_at"))
        .order_by("finished_at", "id")
    )


#: A step that is done, or may still be (waiting for its approval, queued, running): asked for after a failure settled,
#: it is the caller carrying on, as much once it succeeded as before (it would then be compensated under a rollback
#: asked for meanwhile, as no heard failure's rollback ever compensates a step asked for after it).
_STEP_OR_ON_ITS_WAY = [CallStatus.SUCCEEDED, *(status for status in CallStatus if status not in SETTLED_STATUSES)]


def _newest_step_left() -> QuerySet[ToolCall]:
    """When the outer failure's saga's newest compensable step no rollback took on (done or on its way) was asked for.

    Asked for, not finished: a slower step asked for before the failure (its caller had not seen it) that finished
    after is undone with the others, as it is when the failure is heard; a step asked for once the failure had
    settled is the caller carrying on, whether it has succeeded yet or is still on its way.

    Read from the steps' calls, not from the compensations recorded for them: a step whose own notification was
    lost too has none yet (``saga_rollback`` records it), and counting only recorded ones left such a saga with no
    newest step, so its failure was never rolled back. A step already compensated, pending or held is not left.
    """
    taken = Compensation.objects.filter(step_call=OuterRef("pk")).exclude(status=CompensationStatus.RECORDED).order_by()
    return (
        ToolCall.objects.filter(
            SAGA_STEPS,
            saga_id=OuterRef("saga_id"),
            tenant=OuterRef("tenant"),
            run_id__isnull=True,
            status__in=_STEP_OR_ON_ITS_WAY,
            tool_name__in=compensable_tool_names(),
        )
        # Scalar, through the compensations' one-to-one ``step_call`` index (a hashed ``NOT EXISTS`` read them all).
        .annotate(taken_by=Subquery(taken.values("pk")[:1]))
        .filter(taken_by__isnull=True)
        .order_by("-created_at")
        .values("created_at")[:1]
    )


#: The ``SweepMark`` of the ended-steps scan: saga steps that settled before it were read by a completed one. Named
#: anew when run steps joined the scan, so an upgrade reads them from the oldest once.
ENDED_STEPS_MARK = "ended_saga_steps"

#: How long a settled step waits before the sweep reads it: its notification is heard well within it. A step's
#: transaction (``finished_at`` is set inside it) may commit later (an atomic tool's stays open up to its timeout): the
#: mark never passes the start of a transaction still open with writes, less this margin (``marked_batch``).
ENDED_STEP_MARGIN = dt.timedelta(minutes=5)


def ended_saga_steps() -> QuerySet[ToolCall]:
    """Steps of a run or a direct saga that ended as ``ENDED_STEP_STATUSES``: ``toolcall_ended_saga_step`` (partial)."""
    return ToolCall.objects.filter(
        Q(run_id__isnull=False) | ~Q(saga_id=""), SAGA_STEPS, status__in=list(ENDED_STEP_STATUSES)
    )


def _rolled_back_after_it() -> Q:
    """Whether the outer step's saga (of its tenant) was rolled back after the step was asked for.

    Its saga as ``saga_key_of`` names it: a direct step's by its saga id, a run step's (no saga id: its saga's key is
    the run's id) by its run; no saga's key is empty, and a direct saga has no run. Two scalar lookups, each through
    its own index (``saga_key_per_tenant``, the sagas' ``run_id``): one join on either read every saga there is,
    for each step of the batch.
    """
    after = Rollback.objects.filter(saga__tenant=OuterRef("tenant"), requested_at__gt=OuterRef("created_at"))
    return Q(Exists(after.filter(saga__key=OuterRef("saga_id")))) | Q(
        Exists(after.filter(saga__run_id=OuterRef("run_id")))
    )


def repair_ended_steps(limit: int, *, now: dt.datetime, window: dt.timedelta) -> tuple[int, int]:
    """Apply what the sagas missed of saga steps that settled since the last completed scan; ``(late, held)``.

    A step (of a run or a direct saga) asked for before a rollback of its saga that succeeded (or became unknown)
    after it, unheard, is recorded as hearing it would have (``saga_record_step``: filed under that rollback,
    compensated, or held when the rollback holds its steps); counted without it, the saga read compensated over a step
    left in place. A direct step that ended without succeeding may have been what carried a failure on
    (``_newest_step_left``) when the failure scans read it: that saga's failures older than ``window`` (no scan reads
    them again) are held for an operator if nothing carries them on now; younger ones the automatic window reads each
    tick. From ``SweepMark`` ``ended_saga_steps`` (``marked_batch``), ``limit`` steps a tick, until
    ``ENDED_STEP_MARGIN`` ago.
    """
    batch, move_mark = marked_batch(
        ENDED_STEPS_MARK, ended_saga_steps(), until=now - ENDED_STEP_MARGIN, margin=ENDED_STEP_MARGIN, limit=limit
    )
    late = 0
    if batch:
        unrecorded = (
            ToolCall.objects.filter(
                pk__in=batch,
                status__in=[CallStatus.SUCCEEDED, CallStatus.NEEDS_ATTENTION],
                tool_name__in=compensable_tool_names(),
            )
            .exclude(Exists(Compensation.objects.filter(step_call=OuterRef("pk"))))
            .filter(_rolled_back_after_it())
            .order_by("finished_at", "id")
        )
        for call in unrecorded:
            late += saga_record_step(call=call, actor=SWEEP_ACTOR) is not None
    ended = set(
        ToolCall.objects.filter(pk__in=batch, run_id__isnull=True)
        .exclude(status=CallStatus.SUCCEEDED)
        .values_list("saga_id", "tenant")
        .distinct()
    )
    held = 0
    if ended:
        sagas = Q()
        for key, tenant in ended:
            sagas |= Q(saga_id=key, tenant=tenant)
        failures = failed_direct_steps().filter(sagas, finished_at__lt=now - window)
        held = roll_back_unheard_failures(unheard_among(failures), limit, hold=True)
    move_mark()
    return late, held
