"""Review da (2026-12-06): review cs's late unheard saga steps, and the steps of agent runs.

Each finding's test failed on the reviewed code (main at 9dc5af6) and passes now.

Findings:

1. A step of an agent run (``run_id`` set) still running when its run's saga was rolled back, succeeding after it with
   its notification lost, was never compensated and the saga read ``compensated`` over it: review cs's scan read
   direct saga steps only. Fixed in the same scan (one mechanism): its index is ``toolcall_ended_saga_step`` (a run's
   steps and direct ones, toolhub 0045 replacing 0043's), its mark ``ended_saga_steps`` (an upgrade reads the run
   steps from the oldest once), a step matched to its saga's rollback by saga id or by run, each through an index;
   the failures read again stay direct sagas' (a run's failure is its agent's to act on).
2. A late step (heard late or found by the sweep) filed under a rollback that had already finished was compensated,
   but the rollback kept its old ``finished_at`` (done before one of its own compensations was recorded) and the
   trail's only ``saga.rollback_finished`` never named it; a run's conversation was never told. Fixed where a late
   step is planned (``plan_compensation``): a finished rollback it is to compensate now is opened again
   (``saga.rollback_reopened``, naming the step; ``told_at`` cleared), so ``close_rollbacks`` finishes it again with
   an outcome naming it, and the sweep's stalled-rollback repair covers it meanwhile. The saga's own trail already
   showed ``saga.compensating`` then ``saga.compensated`` again.

Checked and holding:
- The mark's boundaries (read in ``marked_batch``): a batch exactly filled moves the mark to its last row
  (``finished_at``, ``id``) and the next tick reads the rows at that same instant with a greater id, so two steps
  settling in the same microsecond at the cut are both read; a batch not filled moves it to ``until``, the rows at
  exactly ``until`` read by the next tick (``< until`` then ``>= until``). The mark moves only after the batch was
  handled: an error mid-batch leaves it, the batch read again next tick (no row skipped for ever).
- A late step whose outcome is unknown (``needs_attention``) is held under the rollback, never compensated on its own
  (``saga_record_step``), and a late step under a held rollback is held: what an operator expects.
- Tenants: the run-step lookup matches the rollback's saga by run and by the step's tenant, as the direct one does
  by key and tenant (cs pinned another tenant's step of the same key); a run's id is unique anyway.
- Cost (PostgreSQL, pinned): 30,000 run steps weeks old among 60,000 calls, 10,000 sagas rolled back: a first tick
  reads ``limit`` of them through ``toolcall_ended_saga_step``, no sequential scan of the calls, sagas or rollbacks
  (the saga looked up by key and by run as two indexed scalar lookups: one OR'd join read the sagas whole), no
  subquery run more than ``limit`` times; with the mark set a tick reads none.
"""

import datetime as dt
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from tests.sagas.sample_tools import LOG
from tests.security_review.direct_sagas import direct_call, unheard_call
from tests.security_review.query_plans import ago, analyze, clone, explained, max_loops, uuid_of
from toolhub.models import AuditEvent, CallKind, CallStatus, ToolCall
from toolhub.sagas.models import CompensationStatus, Saga, SagaStatus, SweepMark
from toolhub.sagas.recovery import sagas_sweep
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.sagas.unheard import ENDED_STEPS_MARK

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("saga_tools")]

BOOK_ONCE = [
    {"content": "", "tool_calls": [{"name": "book", "arguments": {"item": "flight"}}]},
    {"content": "booked"},
]


def _sweep_at(later: dt.timedelta) -> dict[str, int]:
    """One sweep tick run ``later`` from now (past the ended-steps scan's settling margin)."""
    at = timezone.now() + later
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timezone, "now", lambda: at)
        return sagas_sweep()


def _run_step_on_its_way(run_id: Any, user: User, item: str) -> ToolCall:
    """A ``book`` step of run ``run_id`` still running (its worker has not finished)."""
    return ToolCall.objects.create(
        run_id=run_id,
        kind=CallKind.CALL,
        tool_name="book",
        arguments={"item": item},
        status=CallStatus.RUNNING,
        tenant="acme",
        user=user,
    )


def _succeeds_unheard(call: ToolCall, result: dict[str, Any]) -> None:
    """``call`` succeeds now, and the sagas never hear of it (the worker died after the commit)."""
    ToolCall.objects.filter(pk=call.pk).update(status=CallStatus.SUCCEEDED, result=result, finished_at=timezone.now())


def test_a_run_step_settling_unheard_after_its_runs_saga_was_rolled_back_is_compensated(
    alice: User, make_agent: Any, start: Any
) -> None:
    """Found: review cs's sweep read direct saga steps only (``run_id`` null): a step of an agent run still running
    when the run was rolled back, succeeding after it with its notification lost, was never compensated, and the
    run's saga read ``compensated`` over a booking left in place. Expect: the same scan reads run steps too, files the
    step under the run's rollback and compensates it, once."""
    run = start(make_agent(tools=["book"], script=BOOK_ONCE), alice)
    slow = _run_step_on_its_way(run.id, alice, "slow")
    saga = saga_rollback_on_demand(saga_key=str(run.id), run_id=run.id, tenant="acme", actor="alice")
    assert saga.status == SagaStatus.COMPENSATED and LOG.count(("cancel", "B-flight")) == 1
    _succeeds_unheard(slow, {"bookingId": "B-slow", "item": "slow"})

    assert _sweep_at(dt.timedelta(minutes=10))["late_steps"] == 1

    saga = Saga.objects.get(run_id=run.id)
    late = saga.compensations.get(step_call=slow)
    assert late.status == CompensationStatus.SUCCEEDED and late.rollback == saga.rollbacks.get()
    assert ("cancel", "B-slow") in LOG and saga.status == SagaStatus.COMPENSATED
    assert _sweep_at(dt.timedelta(minutes=20))["late_steps"] == 0
    assert LOG.count(("cancel", "B-slow")) == 1


@pytest.mark.postgres
def test_the_ended_steps_scan_reads_run_steps_through_its_partial_index_a_batch_at_a_time(alice: User) -> None:
    """Expect (cost, PostgreSQL): 30,000 run steps that succeeded weeks ago, their 10,000 runs' sagas rolled back
    before them, among 30,000 other calls: a first tick reads ``limit`` of them through ``toolcall_ended_saga_step``,
    each step's saga looked up through an index (neither the calls nor the sagas read whole, no subquery run more
    than ``limit`` times); once its mark is set, a tick reads none of them."""
    run_of = uuid_of("run", "g / 3")
    saga = Saga.objects.create(key="template", tenant="acme")
    clone(Saga, saga, 10_000, key=f"({uuid_of('run')})::text", run_id=uuid_of("run"))
    with connection.cursor() as cursor:  # each run's saga rolled back a month ago, before its steps
        cursor.execute(
            "INSERT INTO sagas_rollback (saga_id, trigger, requested_by, held_for_operator, requested_at, finished_at)"
            f" SELECT id, 'on_demand', 'alice', false, {ago('60 * 24 * 30')}, {ago('60 * 24 * 30 - 1')}"
            " FROM sagas_saga WHERE run_id IS NOT NULL"
        )
    template = ToolCall.objects.create(tool_name="book", status="succeeded", tenant="acme", user=alice)
    clone(
        ToolCall,
        template,
        60_000,
        id=uuid_of("da"),
        run_id=f"CASE WHEN g % 2 = 0 THEN NULL ELSE {run_of} END",
        created_at=ago("60 * 24 * 14 + g"),
        finished_at=ago("60 * 24 * 14 + g"),
    )
    analyze()

    first = explained(lambda: sagas_sweep(limit=50))

    assert [plan for _, plan in first if "toolcall_ended_saga_step" in plan], first
    scans = ("Seq Scan on toolhub_toolcall", "Seq Scan on sagas_saga", "Seq Scan on sagas_rollback")
    assert not [plan for _, plan in first if any(scan in plan for scan in scans)], [
        plan for _, plan in first if any(scan in plan for scan in scans)
    ]
    assert max(max_loops(plan) for _, plan in first) <= 50, first
    SweepMark.objects.filter(name=ENDED_STEPS_MARK).update(reached=timezone.now() - dt.timedelta(hours=1))
    steady = explained(sagas_sweep)
    assert max(max_loops(plan) for _, plan in steady) < 5, steady


def test_a_late_step_filed_under_a_finished_rollback_reopens_it_and_its_outcome_is_written_again(alice: User) -> None:
    """Found: a step that succeeded unheard after its saga's rollback had finished (all compensated) was filed and
    compensated under that rollback, but the rollback kept the ``finished_at`` of before (it read finished before one
    of its own compensations had even been recorded) and the trail's only ``saga.rollback_finished`` listed the
    compensations without it: an auditor reading the rollback saw a booking undone that its outcome never named.
    Expect: filing a step under a finished rollback opens it again (audited ``saga.rollback_reopened``, naming the
    step), and once the late compensation is done it finishes again with an outcome that lists it."""
    direct_call("book", {"item": "a"}, saga="reopened", user=alice)
    slow = unheard_call("book", {"item": "slow"}, saga="reopened", user=alice)
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.RUNNING, finished_at=None)
    direct_call("explode", {"reason": "boom"}, saga="reopened", user=alice)
    saga = Saga.objects.get(key="reopened")
    assert saga.status == SagaStatus.COMPENSATED and saga.rollbacks.get().finished_at is not None
    _succeeds_unheard(slow, {"bookingId": "B-slow", "item": "slow"})

    assert _sweep_at(dt.timedelta(minutes=10))["late_steps"] == 1

    rollback = saga.rollbacks.get()
    late = saga.compensations.get(step_call=slow)
    assert late.rollback == rollback and late.status == CompensationStatus.SUCCEEDED
    assert rollback.finished_at is not None and late.finished_at is not None
    assert rollback.finished_at >= late.finished_at, (rollback.finished_at, late.finished_at)
    reopened = AuditEvent.objects.filter(event_type="saga.rollback_reopened", data__contains=str(slow.id))
    assert reopened.count() == 1
    finished = AuditEvent.objects.filter(event_type="saga.rollback_finished").order_by("seq")
    assert json.loads(finished.last().data)["compensations"][str(late.sequence)] == CompensationStatus.SUCCEEDED
