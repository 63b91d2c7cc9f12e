"""Review of 2026-12-06 (n): which unfinished rollbacks the sweeps read, and how (the sagas sweep, ``runs_to_wake``).

Findings:

1. The sagas sweep read its batch of stalled rollbacks (``Rollback.objects.filter(finished_at__isnull=True)
   .values_list("saga_id").distinct()[:limit]``) by the model's ordering, newest first, whether or not they could
   go on: once ``limit`` (200) newer rollbacks waited on a compensation under way (a call held for approval, a
   retry scheduled), an older one that could go on was never reached.
2. The ordering column joined the ``DISTINCT`` (``SELECT DISTINCT saga_id, requested_at``): a saga with two
   unfinished rollbacks was advanced, and counted, once per rollback.
3. ``runs_to_wake``'s "no rollback of a failed call of this turn" (a ``NOT EXISTS`` over the rollbacks joined to
   their failed call, inside an ``OR``) was planned as a hashed subplan once a thousand runs were candidates: every
   rollback that ever named a failed call joined to every call (a seq scan of ``toolhub_toolcall``), each 60 s; so
   were its other rollback checks (a seq scan of ``sagas_saga``) and "a failed call of the turn" (every failed call
   ever, through the status index). Each is now a scalar subquery, which PostgreSQL never hashes: per candidate
   run, through ``toolcall_run_turn``, the rollbacks' ``failed_call`` index and ``rollback_unfinished``.

Found and not fixed here: with a thousand idle candidate runs, ``runs_to_wake``'s top-level "a call of the turn
still open" (``NOT EXISTS``, ``status NOT IN`` settled) is planned as a hash anti join over a seq scan of the calls;
naming the live statuses, or a scalar subquery, removes it but turns review d's 100 000-row plan away from
``agentrun_to_wake`` (every live run read and sorted), so it is left for the lead to weigh.

Checked and found holding:

- ``saga_advance`` still locks the saga and decides under the lock (a saga read as able to go on that is no longer
  is left as it is); each close and launch audits in the same transaction (``close_rollbacks``, ``launch``).
- ``runs_to_wake`` returns the same runs for the same data (``test_review_2026_12_05_dx``, ``_dq``, approvepath):
  the failed call's own rollback decides when it has one (under way or not), else any rollback of the saga under
  way, as ``saga_rollback`` hands back; with 100 000 rows of history (review d) every statement of each sweep
  reads through an index (``test_runs_to_wake_reads_the_live_runs_through_its_index`` now checks the whole plan).
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from agents_app.models import AgentRun
from agents_app.selectors import runs_to_wake
from agents_app.services import agent_create
from tests.security_review.query_plans import analyze, clone, explained, seq_scans, uuid_of
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Rollback, RollbackTrigger, Saga, SagaStatus
from toolhub.sagas.recovery import sagas_sweep

pytestmark = pytest.mark.django_db


def _saga_with_unfinished_rollback(key: str, *, hours_ago: float, under_way: bool) -> Saga:
    """A saga rolling back; ``under_way``: its compensation's call waits for an approver (it cannot go on now)."""
    saga = Saga.objects.create(key=key, tenant="acme", status=SagaStatus.COMPENSATING)
    rollback = Rollback.objects.create(saga=saga, trigger=RollbackTrigger.ON_DEMAND, requested_by="alice")
    Rollback.objects.filter(pk=rollback.pk).update(requested_at=timezone.now() - timedelta(hours=hours_ago))
    if under_way:
        step = ToolCall.objects.create(tool_name="book", status=CallStatus.SUCCEEDED, tenant="acme", saga_id=key)
        call = ToolCall.objects.create(tool_name="release", status=CallStatus.PENDING_APPROVAL, tenant="acme")
        Compensation.objects.create(
            saga=saga,
            sequence=1,
            rollback=rollback,
            step_call=step,
            step_tool="book",
            tool_name="release",
            status=CompensationStatus.RUNNING,
            call=call,
        )
    return saga


def test_a_rollback_that_can_go_on_is_reached_behind_a_full_batch_waiting_on_approvers() -> None:
    """Found: the sweep read the 200 newest unfinished rollbacks, here all waiting on a compensation under way; the
    older one whose compensations were all done (its close was lost) was never closed, tick after tick.
    Expect: only rollbacks that can go on are read, oldest first; the old one is closed and audited at once."""
    stalled = _saga_with_unfinished_rollback("stalled", hours_ago=5, under_way=False)
    for i in range(200):
        _saga_with_unfinished_rollback(f"held-{i}", hours_ago=1, under_way=True)

    assert sagas_sweep()["advanced"] == 1

    assert stalled.rollbacks.get().finished_at is not None
    assert AuditEvent.objects.filter(event_type="saga.rollback_finished", tenant="acme").count() == 1
    assert Rollback.objects.filter(finished_at__isnull=True).count() == 200


def test_a_saga_with_two_unfinished_rollbacks_is_advanced_once() -> None:
    """Found: ``DISTINCT`` took in the ordering column, so the batch held a saga once per unfinished rollback (here
    two: asked on demand, then for a failed step) and advanced it twice. Expect: one row, one advance per saga."""
    saga = _saga_with_unfinished_rollback("twice", hours_ago=2, under_way=False)
    Rollback.objects.create(saga=saga, trigger=RollbackTrigger.STEP_FAILED, requested_by="saga")

    assert sagas_sweep()["advanced"] == 1
    assert not saga.rollbacks.filter(finished_at__isnull=True).exists()


CALLS = 50_000


@pytest.fixture
def rolled_back_runs() -> None:
    """CALLS calls of 10 000 runs of an agent that compensates on error, five a run, the first of each failed.

    Every run's failure was rolled back long ago; a fifth of the runs still wait, a rollback asked on demand
    under way (its failure's own rollback comes once it finishes): the branch that asks whether the failed call of
    the turn has a rollback of its own is the one these runs reach.
    """
    agent = agent_create(name="careful", script=[{"content": "hi"}], compensate_on_error=True)
    runs = CALLS // 5
    run = AgentRun.objects.create(agent=agent, tenant="acme", input="x", status="completed", turn=1)
    clone(
        AgentRun,
        run,
        runs,
        id=uuid_of("run"),
        status="CASE WHEN g % 10 = 0 THEN 'waiting' ELSE 'completed' END",
        updated_at="now() - interval '1 day'",
    )
    call = ToolCall.objects.create(tool_name="t", status="succeeded", tenant="acme", run_id=run.id, turn=1)
    clone(
        ToolCall,
        call,
        CALLS,
        id=uuid_of("call"),
        run_id=uuid_of("run", "1 + (g - 1) / 5"),
        # the first of each run's turn failed; a hundredth of the calls are of a later turn, still queued
        status="CASE WHEN g % 5 = 1 THEN 'failed' WHEN g % 100 = 0 THEN 'queued' ELSE 'succeeded' END",
        turn="CASE WHEN g % 100 = 0 THEN 2 ELSE 1 END",
    )
    saga = Saga.objects.create(key=str(run.id), run_id=run.id, tenant="acme", status="compensated")
    clone(Saga, saga, runs, key=f"({uuid_of('run')})::text", run_id=uuid_of("run"))
    first = Saga.objects.order_by("id").values_list("id", flat=True)[1]
    rollback = Rollback.objects.create(
        saga=saga, trigger="step_failed", requested_by="saga", finished_at=timezone.now()
    )
    clone(
        Rollback,
        rollback,
        runs,
        saga_id=f"{first} + g - 1",
        trigger="CASE WHEN g % 10 = 0 THEN 'on_demand' ELSE 'step_failed' END",
        failed_call_id=f"CASE WHEN g % 10 = 0 THEN NULL ELSE {uuid_of('call', '5 * (g - 1) + 1')} END",
        finished_at="CASE WHEN g % 10 = 0 THEN NULL ELSE now() END",
    )
    analyze()


@pytest.mark.postgres
def test_runs_to_wake_asks_for_a_failed_calls_rollback_through_an_index(rolled_back_runs: None) -> None:
    """Found: with a thousand candidate runs, "no rollback of a failed call of this turn" was a hashed subplan joining
    every rollback that named a failed call to every call (Seq Scan on toolhub_toolcall, 50 000 rows), each 60 s.
    Expect: the waiting runs are read and left out as before, each rollback check per run through an index."""
    assert runs_to_wake(idle_since=timezone.now()) == []
    [(_, plan)] = explained(lambda: runs_to_wake(idle_since=timezone.now()))
    lines = plan.splitlines()
    subplans = "\n".join(lines[next(i for i, line in enumerate(lines) if line.strip().startswith("SubPlan ")) :])
    assert "hashed SubPlan" not in plan, plan
    assert "toolcall_run_turn" in subplans and "rollback_unfinished" in subplans, plan
    assert not seq_scans(subplans), plan
