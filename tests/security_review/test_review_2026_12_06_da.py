"""Review da (2026-12-06): review cs's late unheard saga steps, and the steps of agent runs.

Each finding's test failed on the reviewed code (main at 9dc5af6) and passes now.

Findings:

1. A step of an agent run (``run_id`` set) still running when its run's saga was rolled back, succeeding after it with
   its notification lost, was never compensated and the saga read ``compensated`` over it: review cs's scan read
   direct saga steps only. Fixed in the same scan (one mechanism): its index is ``toolcall_ended_saga_step`` (a run's
   steps and direct ones, toolhub 0045 replacing 0043's), its mark ``ended_saga_steps`` (an upgrade reads the run
   steps from the oldest once), a step matched to its saga's rollback by saga id or by run, each through an index;
   the failures read again stay direct sagas' (a run's failure is its agent's to act on).

Checked and holding:
- TODO
"""

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.sagas.sample_tools import LOG
from tests.security_review.query_plans import ago, analyze, clone, explained, max_loops, uuid_of
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.sagas.models import CompensationStatus, Rollback, RollbackTrigger, Saga, SagaStatus, SweepMark
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
    rollback = Rollback.objects.create(saga=saga, trigger=RollbackTrigger.ON_DEMAND, requested_by="alice")
    clone(
        Rollback,
        rollback,
        10_000,
        saga_id=f"(SELECT id FROM sagas_saga s WHERE s.key = ({uuid_of('run')})::text AND s.tenant = 'acme')",
        requested_at=ago("60 * 24 * 30"),
        finished_at=ago("60 * 24 * 30 - 1"),
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
