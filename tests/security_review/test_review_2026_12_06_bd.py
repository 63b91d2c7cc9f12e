"""Review bd (2026-12-06): a direct saga whose step failed while every after-commit notification was lost.

Findings (each test fails on the reviewed code, main at bbb66f4, and passes after the fix):

1. The sagas sweep's repair of a lost failure (``recovery._roll_back_unheard_failures``) started from the saga's
   row and its newest *recorded* step: when the completed step's own notification was lost too (a worker or web
   process killed between commit and notify, or the broker down for both), the saga had no row and no compensation,
   so it was never rolled back, its completed step kept for ever. Fixed: the sweep reads the failed direct steps
   no rollback names (partial index ``toolcall_failed_direct_step``; the rollbacks and compensations asked per
   failure through their own indexes as scalar subqueries, never hashed whole) against the saga's newest completed
   step left to undo, read from the calls; ``saga_rollback`` opens the saga and records the lost step. Its
   ``saga.rollback_requested`` event now says ``automatic`` (no person asked; ``asked_by`` empty, actor
   ``saga-sweeper``).

Checked and found holding: two sweepers at once start one rollback (both wait on the saga's unique key; the loser
finds the first's rollback: ``saga_rollback_once_per_failure``), though each may count it in its ``rolled_back``;
a compensation whose call succeeded but whose notification was lost is applied by the next sweep (``synced``);
a rollback whose first compensation message the broker lost finishes on real workers once the calls sweep sends
it again (the sagas sweep rightly leaves a ``running`` compensation to it); a failure before the newest step (the
caller carried on) is still left alone (tests/sagas/test_services.py); an agent run's saga with every notification
lost (steps, failure, compensations) is taken to the end by the runs sweep (``runs_to_wake`` wakes the run, whose
loop asks ``saga_rollback_on_failure``, which records the lost steps) and the sagas sweep, each step undone once.
"""

import json
import os
import time

import psycopg
import pytest
import redis
from django.contrib.auth.models import User
from django.utils import timezone

from agents_app.models import RunStatus
from agents_app.services import agent_create, run_start
from agents_app.tasks import sweep_runs_task
from tests.integration.workers import Worker, wait_for
from tests.sagas.sample_tools import LOG
from tests.security_review.direct_sagas import direct_call, unheard_call
from tests.security_review.pg_races import dsn, in_thread, wait_for_lock_waiter
from tests.security_review.query_plans import ago, analyze, clone, explained, max_loops, seq_scans, uuid_of
from tests.testapp.models import SideEffect
from toolhub.celery import app as celery_app
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Rollback, Saga, SagaStatus
from toolhub.sagas.recovery import sagas_sweep
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.signals import call_settled
from toolhub.sweeper import calls_redispatch_stale

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.usefixtures("saga_tools")
def test_a_failed_direct_saga_is_rolled_back_when_both_notifications_were_lost(alice: User) -> None:
    """Found: a direct saga whose completed step and failed step were both never heard of (no compensation row)
    was skipped by the sweep (``newest_step_at`` NULL) and never rolled back.
    Expect: the sweep rolls it back once, as an automatic rollback (no person asked), the step compensated.
    """
    booked = unheard_call("book", {"item": "a"}, saga="deaf", user=alice)
    failed = unheard_call("explode", {"reason": "boom"}, saga="deaf", user=alice)
    assert booked.status == CallStatus.SUCCEEDED and failed.status == CallStatus.FAILED
    assert not Compensation.objects.filter(saga__key="deaf").exists()

    assert sagas_sweep()["rolled_back"] == 1

    saga = Saga.objects.get(key="deaf")
    rollback = saga.rollbacks.get()
    assert saga.status == SagaStatus.COMPENSATED and rollback.failed_call_id == failed.id
    assert rollback.asked_by is None and rollback.requested_by == "saga-sweeper"
    assert saga.compensations.get().step_call_id == booked.id
    event = AuditEvent.objects.get(event_type="saga.rollback_requested")
    data = json.loads(event.data)
    assert event.actor == "saga-sweeper" and data["rollback"] == rollback.pk and data["automatic"] is True
    assert sagas_sweep()["rolled_back"] == 0
    assert Rollback.objects.count() == 1 and CompensationStatus.SUCCEEDED == saga.compensations.get().status


@pytest.mark.postgres
@pytest.mark.usefixtures("saga_tools")
def test_two_sweepers_at_once_start_one_rollback(alice: User) -> None:
    """Found: (holds, pinned) with no saga row yet, two sweepers both read the failure and both open the saga.
    Expect: both wait on the saga's unique key, one rolls back, the other finds that rollback: one rollback, one
    ``saga.opened``, one ``saga.rollback_requested``, the step compensated once."""
    unheard_call("book", {"item": "a"}, saga="deaf", user=alice)
    unheard_call("explode", {"reason": "boom"}, saga="deaf", user=alice)
    locker = psycopg.connect(**dsn())
    locker.execute(
        "INSERT INTO sagas_saga (key, tenant, status, last_sequence, created_at, updated_at) "
        "VALUES ('deaf', 'acme', 'open', 0, now(), now())"
    )
    try:
        threads = [in_thread(sagas_sweep, name=f"sweeper-{n}") for n in range(2)]
        wait_for_lock_waiter("sagas_saga", 15, count=2)
    finally:
        locker.rollback()
        locker.close()
    for thread, _ in threads:
        thread.join(30)
    results = [result[0] for _, result in threads]
    assert all(isinstance(r, dict) for r in results), results
    assert sum(r["rolled_back"] for r in results) >= 1  # the second may report the first's rollback as its own
    saga = Saga.objects.get(key="deaf")
    assert saga.status == SagaStatus.COMPENSATED and saga.rollbacks.count() == 1
    assert AuditEvent.objects.filter(event_type="saga.rollback_requested").count() == 1
    assert AuditEvent.objects.filter(event_type="saga.opened").count() == 1
    assert [e[0] for e in LOG].count("cancel") == 1 and saga.compensations.get().status == CompensationStatus.SUCCEEDED


@pytest.mark.postgres
@pytest.mark.usefixtures("saga_tools")
def test_the_unheard_failures_are_read_through_their_partial_index(alice: User) -> None:
    """Found: the new read of failed direct steps (no saga row needed) must not read the calls' history.
    Expect: 50,000 settled calls, a few failed direct steps: read through ``toolcall_failed_direct_step``, no seq
    scan of a big table, the subquery run per failure only; the one to act on is still rolled back."""
    unheard_call("book", {"item": "a"}, saga="deaf", user=alice)
    template = ToolCall.objects.create(tool_name="book", status="succeeded", tenant="acme", saga_id="x")
    clone(
        ToolCall,
        template,
        50_000,
        id=uuid_of("bd"),
        status="CASE WHEN g % 1000 = 1 THEN 'failed' ELSE 'succeeded' END",
        saga_id="CASE WHEN g % 3 = 0 THEN '' ELSE 'old-' || (g / 10) END",
        created_at=ago("50000 - g + 60"),
        finished_at=ago("50000 - g + 60"),
    )
    unheard_call("explode", {"reason": "boom"}, saga="deaf", user=alice)
    old = Saga.objects.create(key="old", tenant="acme", status="compensated")
    rollback = Rollback.objects.create(saga=old, trigger="on_demand", requested_by="x", finished_at=timezone.now())
    clone(Rollback, rollback, 20_000, failed_call_id="CASE WHEN g % 2 = 0 THEN " + uuid_of("bd") + " END")
    done = Compensation.objects.create(
        saga=old, sequence=1, step_call=template, step_tool="book", tool_name="cancel", status="succeeded"
    )
    clone(Compensation, done, 20_000, sequence="g + 1", step_call_id=uuid_of("bd"))
    analyze()
    plans = explained(sagas_sweep)
    unheard = [plan for sql, plan in plans if "toolcall_failed_direct_step" in plan]
    assert len(unheard) == 2  # review bv: the window rolled back, and the one before it held for an operator
    for plan in unheard:
        assert not seq_scans(plan), plan
        assert max_loops(plan) < 200, plan
    assert Saga.objects.get(key="deaf").status == SagaStatus.COMPENSATED


@pytest.mark.usefixtures("saga_tools")
def test_a_compensation_whose_settle_was_lost_is_advanced_by_the_next_sweep(alice: User) -> None:
    """Checked (holds): the sweep's rollback starts the compensation, whose call succeeds but whose notification is
    lost too (the saga never advanced). Expect: the next sweep applies the call's outcome (``synced``) and the saga
    is compensated, the step undone once, no second rollback."""
    unheard_call("book", {"item": "a"}, saga="deaf", user=alice)
    unheard_call("explode", {"reason": "boom"}, saga="deaf", user=alice)
    receivers = call_settled.receivers
    call_settled.receivers = []
    try:
        call_settled.sender_receivers_cache.clear()
        assert sagas_sweep()["rolled_back"] == 1
    finally:
        call_settled.receivers = receivers
        call_settled.sender_receivers_cache.clear()
    compensation = Compensation.objects.get(saga__key="deaf")
    assert compensation.status == CompensationStatus.RUNNING and compensation.call.status == CallStatus.SUCCEEDED

    counts = sagas_sweep()

    assert counts["synced"] == 1 and counts["rolled_back"] == 0
    saga = Saga.objects.get(key="deaf")
    assert saga.status == SagaStatus.COMPENSATED and saga.rollbacks.count() == 1
    assert [e[0] for e in LOG].count("cancel") == 1


@pytest.mark.integration
def test_a_rollback_whose_first_compensation_message_was_lost_finishes_on_real_workers(alice: User) -> None:
    """Checked (holds), on a real Celery worker (PostgreSQL, Redis): a rollback is asked while no worker listens and
    the broker then loses its compensation's message. Expect: the compensation's call waits ``queued`` (its
    compensation ``running``, so the sagas sweep leaves it alone), the calls sweep sends it again, the worker
    compensates the step once and the saga reads compensated."""
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = f"{previous}-review-bd"
    worker = Worker("review-bd", concurrency=1).start()
    try:
        step = direct_call("saga_step", {"label": "a"}, saga="lossy-bd", user=alice)
        wait_for(lambda: Compensation.objects.filter(step_call=step).exists(), timeout=30, what="step recorded")
        worker.stop()
        saga_rollback_on_demand(saga_key="lossy-bd", tenant="acme", actor="user:alice", by=alice)
        compensation = Compensation.objects.get(step_call=step)
        assert compensation.status == CompensationStatus.RUNNING and compensation.call.status == CallStatus.QUEUED
        redis.Redis.from_url(os.environ["CELERY_BROKER_URL"]).flushdb()  # the message is lost
        assert sagas_sweep()["advanced"] == 0
        worker = Worker("review-bd", concurrency=1).start()
        time.sleep(1.0)
        assert ToolCall.objects.get(pk=compensation.call_id).status == CallStatus.QUEUED
        assert calls_redispatch_stale(older_than_seconds=0) == 1
        wait_for(
            lambda: Saga.objects.get(key="lossy-bd").status == SagaStatus.COMPENSATED, timeout=60, what="compensated"
        )
    finally:
        worker.stop()
        celery_app.control.purge()
        celery_app.conf.task_default_queue = previous
    assert SideEffect.objects.filter(tool="undo_saga_step").count() == 1


TRIP = [
    {"content": "", "tool_calls": [{"name": "book", "arguments": {"item": "flight"}}]},
    {"content": "", "tool_calls": [{"name": "reserve", "arguments": {"item": "seat"}}]},
    {"content": "", "tool_calls": [{"name": "explode", "arguments": {"reason": "card declined"}}]},
    {"content": "Sorry: {last_tool_result}"},
]


@pytest.mark.usefixtures("saga_tools")
def test_an_agent_runs_saga_is_rolled_back_by_the_sweeps_when_every_notification_is_lost(alice: User) -> None:
    """Checked (holds): a run whose agent compensates on error, every settle notification lost (its steps', the
    failure's, the compensations'). Expect: the runs sweep and the sagas sweep alone take it to the end: both
    completed steps undone newest first, once each, the saga compensated, the run completed and told."""
    agent = agent_create(
        name="trip", provider="scripted", script=TRIP, tools=["book", "reserve", "explode"], compensate_on_error=True
    )
    receivers = call_settled.receivers
    call_settled.receivers = []
    try:
        call_settled.sender_receivers_cache.clear()
        run = run_start(agent=agent, user=alice, input="book my trip")
        run.refresh_from_db()
        assert run.status != RunStatus.COMPLETED and not Saga.objects.filter(key=str(run.id)).exists()
        for _ in range(20):
            run.refresh_from_db()
            if run.status == RunStatus.COMPLETED:
                break
            sweep_runs_task(idle_seconds=0)
            sagas_sweep()
    finally:
        call_settled.receivers = receivers
        call_settled.sender_receivers_cache.clear()
    assert run.status == RunStatus.COMPLETED, run.error
    assert [e for e in LOG if e[0] in {"cancel", "release"}] == [("release", "seat"), ("cancel", "B-flight")]
    saga = Saga.objects.get(key=str(run.id))
    assert saga.status == SagaStatus.COMPENSATED and saga.rollbacks.count() == 1
    assert run.output == "Sorry: exploded: card declined"
