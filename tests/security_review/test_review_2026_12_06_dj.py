"""Review dj (2026-12-06): review da's late saga steps of agent runs and finished rollbacks opened again.

Each finding's test failed on the reviewed code (main at 74d0583) and passes now.

Findings:

1. A worker claiming a batch (``WORKER_CLAIM_BATCH`` > 1) stamped a call's ``finished_at`` when its tool returned but
   wrote it after the batch's later calls ran: a step whose write came more than ``ENDED_STEP_MARGIN`` after its stamp
   was behind the ended-steps scan's mark before it was visible, so a late saga step settling unheard in such a batch
   was never read (its booking left in place, the saga ``compensated``). Fixed in the worker's one settle path
   (``execution._finish``): ``finished_at`` is stamped when the outcome is written (a batch's write, or the write
   retried past the statement bound), as the atomic and in-process paths already did.

Checked and holding:
- A rollback reopened after its run ended: the conversation gets a second note, written from the rollback as it now
  stands (the first step's compensation and the late one's), nothing contradicting the first; the run stays
  ``completed``, the model is not asked again (``_begin_step`` only appends notes to an ended run), ``told_at`` is set
  again.
- A reopened rollback whose late compensation then fails: retried, then ``failed``; the rollback finishes again with
  an outcome naming it ``failed``, the saga needs attention and the acme operator's dashboard figure counts it.
- The trail: ``saga.rollback_reopened`` is in the saga's tenant's chain (acme), its data the saga, the rollback and the
  late step's id only (no arguments, no result); the chains verify.
- A reopen racing an operator's retry of the rollback's failed compensation (PostgreSQL, forced: both wait on the
  saga's row): serialized by that lock, each compensation runs once, the rollback finishes once more naming both.
- A late run step whose run's id is another tenant's direct saga key, rolled back there: never filed under that
  rollback, nothing compensated (the scan matches the rollback's saga by the step's tenant).
- The mark's rename on an upgraded database (the ``ended_direct_steps`` row left, no ``ended_saga_steps``): the scan
  reads past steps again from the oldest, and a step compensated before is not compensated twice (a step with a
  compensation is never planned again). The old row is read by nothing (left behind, harmless).
- Read, not driven here: a late step under a held rollback (``held_for_operator``) is held and does not reopen it;
  an operator's retry then runs it after the rollback finished, as any retry of a failed or held compensation does
  (a rollback's ``finished_at`` is when its automatic part ended, its outcome the compensations' as they stood then).
- A late step found by the sweep days after it settled is compensated on its own (the rollback was asked for), where a
  failure found that late is held for an operator: a difference of intent, not a defect; left as it is.

Found, not fixed: ``finished_at`` is still the worker's clock. A worker whose clock runs more than
``ENDED_STEP_MARGIN`` behind the sweeper's stamps steps the scan's mark may have passed: stamping the database's clock
in the settle statement needs expressions in the guarded, prepared UPDATE (``toolhub.transitions`` refuses them) and
the stamped value returned to every settle path's in-memory call (the notification's listeners read it), and the
sweep's ``until`` from the same clock (its tests move ``timezone.now``); not a cheap change. Hosts are expected to keep
their clocks synchronized (NTP); a 5-minute skew is a misconfigured host.
"""

import datetime as dt
import json
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.helpers import assert_audit_intact, for_a_worker
from tests.sagas.sample_tools import LOG, RELEASE_FAILS
from tests.security_review.direct_sagas import direct_call, settling_unheard, unheard_call
from tests.security_review.pg_races import dsn, in_thread, wait_for_lock_waiter
from tests.security_review.test_review_2026_12_06_da import (
    BOOK_ONCE,
    _run_step_on_its_way,
    _succeeds_unheard,
    _sweep_at,
)
from toolhub import tool
from toolhub.execution import tool_call_execute
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.sagas.dashboard import sagas_attention_figures
from toolhub.sagas.models import CompensationStatus, Rollback, RollbackTrigger, Saga, SagaStatus, SweepMark
from toolhub.sagas.recovery import compensation_retry, sagas_sweep
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.sagas.unheard import ENDED_STEP_MARGIN, ENDED_STEPS_MARK
from toolhub.tools.registry import registry

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("saga_tools")]

#: What the batch's second call does while it runs (set by the test).
_MEANWHILE: dict[str, Any] = {}


@tool
def settle_slowly(note: str) -> dict:
    """A long call claimed in the same batch as a saga step, run after it."""
    _MEANWHILE["action"]()
    return {"note": note}


def test_a_batched_step_is_stamped_finished_when_its_outcome_is_written_so_the_scan_reads_it(
    alice: User, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: a worker's batch stamped a step's ``finished_at`` when its tool returned and wrote it once the batch's
    later calls had run: a late step whose notification was lost, written more than ``ENDED_STEP_MARGIN`` after that
    stamp, was already behind the ended-steps scan's mark when it became visible, never compensated. Expect: the
    step's ``finished_at`` is when its outcome was written; the next sweep reads it and undoes the booking."""
    settings.TOOLHUB = {**settings.TOOLHUB, "WORKER_CLAIM_BATCH": 2}
    # The calls are this process's to execute, not a broker's: a session's worker (started by an integration test
    # earlier in the run) must not take them, nor run ``settle_slowly``, which only this process has.
    monkeypatch.setattr("toolhub.pipeline.dispatch_call", lambda call: None)
    real_now, ahead = timezone.now, [dt.timedelta()]
    monkeypatch.setattr(timezone, "now", lambda: real_now() + ahead[0])
    direct_call("book", {"item": "flight"}, saga="batched", user=alice)
    with registry.temporarily(settle_slowly):
        with for_a_worker():
            late = direct_call("book", {"item": "late"}, saga="batched", user=alice)
            slow = direct_call("settle_slowly", {"note": "long"}, saga="", user=alice)
        assert late.status == slow.status == CallStatus.QUEUED
        saga = saga_rollback_on_demand(saga_key="batched", tenant="acme", actor="alice")
        assert saga.status == SagaStatus.COMPENSATED and LOG == [("book", "flight"), ("cancel", "B-flight")]

        def meanwhile() -> None:  # the batch's second call runs past the margin; another sweeper ticks then
            ahead[0] = ENDED_STEP_MARGIN + dt.timedelta(minutes=1)
            sagas_sweep()

        _MEANWHILE["action"] = meanwhile
        with settling_unheard():
            tool_call_execute(call_id=late.id, worker="w1")

    late.refresh_from_db()
    assert late.status == CallStatus.SUCCEEDED and ToolCall.objects.get(pk=slow.pk).status == CallStatus.SUCCEEDED
    ahead[0] = dt.timedelta(minutes=20)

    assert sagas_sweep()["late_steps"] == 1

    assert ("cancel", "B-late") in LOG
    assert saga.compensations.get(step_call=late).status == CompensationStatus.SUCCEEDED


def test_a_rollback_reopened_after_its_run_ended_tells_the_conversation_again_and_never_resumes_it(
    alice: User, make_agent: Any, start: Any
) -> None:
    """Expect (holds): the run ended, its rollback finished and told; a late step reopens it: the conversation gets one
    more note, naming both compensations as done (the first note's content still true), the run stays completed and
    its model is not asked again."""
    run = start(make_agent(tools=["book"], script=BOOK_ONCE), alice)
    slow = _run_step_on_its_way(run.id, alice, "slow")
    saga_rollback_on_demand(saga_key=str(run.id), run_id=run.id, tenant="acme", actor="alice")
    run.refresh_from_db()
    told = [m["content"] for m in run.messages if m["role"] == "system"]
    assert len(told) == 1 and 'book({"item":"flight"}): rolled back' in told[0], run.messages
    answers = [m for m in run.messages if m["role"] == "assistant"]
    _succeeds_unheard(slow, {"bookingId": "B-slow", "item": "slow"})

    assert _sweep_at(dt.timedelta(minutes=10))["late_steps"] == 1

    run.refresh_from_db()
    notes = [m["content"] for m in run.messages if m["role"] == "system"]
    assert len(notes) == 2 and notes[0] == told[0], notes
    assert 'book({"item":"slow"}): rolled back' in notes[1] and 'book({"item":"flight"}): rolled back' in notes[1]
    assert run.status == "completed" and [m for m in run.messages if m["role"] == "assistant"] == answers
    rollback = Saga.objects.get(run_id=run.id).rollbacks.get()
    assert rollback.finished_at is not None and rollback.told_at is not None


def test_a_reopened_rollback_whose_late_compensation_fails_needs_attention_on_the_dashboard(
    alice: User, acme_operator: User
) -> None:
    """Expect (holds): a late step's compensation under a reopened rollback fails on every attempt: the rollback
    finishes again naming it ``failed``, the saga needs attention, the acme operator's figure counts it; the reopen is
    in acme's chain with no arguments; the chains verify."""
    direct_call("reserve", {"item": "a"}, saga="refused", user=alice)
    slow = unheard_call("reserve", {"item": "slow-secret-sku"}, saga="refused", user=alice)
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.RUNNING, finished_at=None)
    direct_call("explode", {"reason": "boom"}, saga="refused", user=alice)
    saga = Saga.objects.get(key="refused")
    assert saga.status == SagaStatus.COMPENSATED
    RELEASE_FAILS["on"] = True
    _succeeds_unheard(slow, {"ok": True})

    for minutes in (10, 20, 30, 40):
        _sweep_at(dt.timedelta(minutes=minutes))

    late = saga.compensations.get(step_call=slow)
    assert late.status == CompensationStatus.FAILED and late.attempts == 3
    saga.refresh_from_db()
    assert saga.status == SagaStatus.NEEDS_ATTENTION and saga.rollbacks.get().finished_at is not None
    finished = AuditEvent.objects.filter(event_type="saga.rollback_finished").order_by("seq").last()
    assert json.loads(finished.data)["compensations"][str(late.sequence)] == CompensationStatus.FAILED
    figure = sagas_attention_figures(acme_operator, timezone.now())
    assert [f.value for f in figure] == ["1"]
    reopened = AuditEvent.objects.get(event_type="saga.rollback_reopened")
    assert reopened.tenant == "acme" and reopened.call_id == slow.pk
    assert json.loads(reopened.data) == {
        "saga": "refused",
        "rollback": saga.rollbacks.get().pk,
        "late_step": str(slow.pk),
    }
    assert_audit_intact()


@pytest.mark.postgres
def test_a_reopen_racing_an_operators_retry_runs_each_compensation_once(alice: User, settings: Any) -> None:
    """Expect (holds, PostgreSQL, forced): the sweep filing a late step under a finished rollback and an operator
    retrying that rollback's failed compensation wait on the saga's row, one after the other: each compensation runs
    once, and the rollback finishes once more with both done."""
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 1}
    direct_call("reserve", {"item": "a"}, saga="raced", user=alice)
    slow = unheard_call("reserve", {"item": "slow"}, saga="raced", user=alice)
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.RUNNING, finished_at=None)
    RELEASE_FAILS["on"] = True
    direct_call("explode", {"reason": "boom"}, saga="raced", user=alice)
    saga = Saga.objects.get(key="raced")
    failed = saga.compensations.get()
    assert failed.status == CompensationStatus.FAILED and saga.rollbacks.get().finished_at is not None
    RELEASE_FAILS["on"] = False
    _succeeds_unheard(slow, {"ok": True})
    # Settled ten minutes ago, on the real clock: the locker's transaction starts now, and the ended-steps mark stops
    # short of a transaction still open with writes (review dr), as a sweep on a clock moved on would.
    ToolCall.objects.filter(pk=slow.pk).update(finished_at=timezone.now() - dt.timedelta(minutes=10))

    locker = psycopg.connect(**dsn())
    locker.execute("SELECT id FROM sagas_saga WHERE id = %s FOR UPDATE", [saga.pk])
    try:
        sweeper, _ = in_thread(sagas_sweep, "sweep")
        operator, _ = in_thread(lambda: compensation_retry(compensation=failed, actor="operator"), "retry")
        wait_for_lock_waiter('FROM "sagas_saga"', count=2)
    finally:
        locker.rollback()
        locker.close()
    sweeper.join(30)
    operator.join(30)

    assert LOG.count(("release", "a")) == 1 and LOG.count(("release", "slow")) == 1
    statuses = set(saga.compensations.values_list("status", flat=True))
    assert statuses == {CompensationStatus.SUCCEEDED}
    saga.refresh_from_db()
    rollback = saga.rollbacks.get()
    assert saga.status == SagaStatus.COMPENSATED and rollback.finished_at is not None
    finished = AuditEvent.objects.filter(event_type="saga.rollback_finished").order_by("seq").last()
    assert set(json.loads(finished.data)["compensations"].values()) == {CompensationStatus.SUCCEEDED}


def test_a_run_step_is_never_filed_under_another_tenants_direct_saga_of_its_runs_id(
    alice: User, make_agent: Any, start: Any
) -> None:
    """Expect (holds): globex's direct saga keyed by acme's run id, rolled back after acme's run step was asked for;
    the step succeeds unheard: the sweep files it under no rollback and compensates nothing."""
    run = start(make_agent(tools=["book"], script=BOOK_ONCE), alice)
    slow = _run_step_on_its_way(run.id, alice, "slow")
    foreign = Saga.objects.create(key=str(run.id), tenant="globex")
    Rollback.objects.create(saga=foreign, trigger=RollbackTrigger.ON_DEMAND, requested_by="globex-operator")
    _succeeds_unheard(slow, {"bookingId": "B-slow", "item": "slow"})

    assert _sweep_at(dt.timedelta(minutes=10))["late_steps"] == 0

    assert ("cancel", "B-slow") not in LOG and not foreign.compensations.exists()
    assert not Saga.objects.get(key=str(run.id), tenant="acme").compensations.filter(step_call=slow).exists()


def test_an_upgraded_database_with_the_old_mark_reads_past_steps_again_and_compensates_none_twice(alice: User) -> None:
    """Expect (holds): the old ``ended_direct_steps`` mark left, no ``ended_saga_steps``: the scan reads from the
    oldest again; a late step it compensated before is not compensated a second time."""
    direct_call("book", {"item": "a"}, saga="upgraded", user=alice)
    slow = unheard_call("book", {"item": "slow"}, saga="upgraded", user=alice)
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.RUNNING, finished_at=None)
    direct_call("explode", {"reason": "boom"}, saga="upgraded", user=alice)
    _succeeds_unheard(slow, {"bookingId": "B-slow", "item": "slow"})
    assert _sweep_at(dt.timedelta(minutes=10))["late_steps"] == 1
    SweepMark.objects.filter(name=ENDED_STEPS_MARK).update(name="ended_direct_steps")

    assert _sweep_at(dt.timedelta(minutes=20))["late_steps"] == 0

    assert LOG.count(("cancel", "B-slow")) == 1
    assert Saga.objects.get(key="upgraded").compensations.filter(step_call=slow).count() == 1
    assert SweepMark.objects.filter(name=ENDED_STEPS_MARK).exists()
