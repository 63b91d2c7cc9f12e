"""Review cs (2026-12-06): sagas under late and lost events, the review of reviews bv, ce, cg, cl and cp.

Each finding's test failed on the reviewed code (main at ea55f42) and passes now.

Findings:

1. A direct step asked for before its saga's rollback (still running then) that succeeded after it, its notification
   lost, was never compensated nor shown: ``record_missing_steps`` runs only when a rollback is asked for, the sweep
   read failures only, and the saga read ``compensated`` over a booking left in place. Fixed: the sweep reads the
   direct steps that settled since its mark (``SweepMark`` ``ended_direct_steps``, index ``toolcall_ended_direct_step``,
   toolhub 0043; ``toolhub.sagas.unheard.repair_ended_steps``) and records such a step as hearing it would
   (``saga_record_step``: filed under that rollback, compensated, or held under a held one).
2. A failure the held scan's mark had passed because a step asked for after it was on its way (review ce: the caller
   carrying on) was never read again when that step then ended without succeeding (rejected, expired, cancelled,
   unknown): no rollback, nothing shown (review cg's "Left"). Fixed by the same scan: a step that ended so has its
   saga's failures older than ``SAGA_UNHEARD_FAILURE_HOURS`` read again, and held for an operator when nothing
   carries them on now (younger ones the automatic window reads each tick).

The unheard-failure scans moved from ``recovery`` to ``toolhub.sagas.unheard``, the mark's range read to
``toolhub.sagas.sweep_marks.marked_batch`` (one helper for both marks); review cg's tests read their mark by name.

Checked and holding:
- Two sweepers and the late step's own notification at once (PostgreSQL, forced): all wait on the saga's row, one
  records the step, the others find its compensation; the booking is cancelled once (pinned).
- Tenants: the new scan matches a step to a rollback of its own tenant's saga (``saga__key``, ``saga__tenant``) and
  reads again the failures of its own tenant's saga only: another tenant's step of a saga of the same key is never
  filed under acme's rollback (pinned in finding 1's test). Another tenant's operator posting a held saga's retry URL
  (``/admin/sagas/saga/<id>/retry/``) is sent away, nothing compensated (pinned); the list actions on another
  tenant's held saga or compensation change nothing (``tests/tenancy/test_admin_console.py``); the dashboard figure
  counts the viewer's tenants only (review cg).
- An operator's decision on a held rollback racing the sweep: ``compensation_retry`` / ``compensation_resolve`` and
  every sweep write lock the saga's row first; a late step filed under a held rollback is held
  (``plan_compensation``), whatever the operator decided on the others, so the saga keeps needing attention.
- Read, not driven here: a late step's compensation is an ordinary one once recorded (``advance`` launches it): one
  that fails is retried (``retry_scheduled``) then ``failed`` (attention); one whose call hangs stays ``running``,
  its rollback not advanced over it (``_stalled_rollbacks``), until its call settles, applied by the sweep
  (``synced``) if that notification was lost too.
- Cost (PostgreSQL): the new scan reads ``limit`` rows of its partial index a tick from its mark (60,000 calls, no
  seq scan of the calls, no subquery run more than ``limit`` times); with the mark set a tick reads none of the old
  ones. It reads steps five minutes after they settled (``ENDED_STEP_MARGIN``), so the mark never passes a step whose
  transaction had not committed when it was read.
"""

import datetime as dt

import psycopg
import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.helpers import console
from tests.sagas.sample_tools import LOG
from tests.security_review.direct_sagas import direct_call, unheard_call
from tests.security_review.pg_races import dsn, in_thread, wait_for_lock_waiter
from tests.security_review.query_plans import ago, analyze, clone, explained, max_loops, uuid_of
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.sagas.models import CompensationStatus, Saga, SagaStatus, SweepMark
from toolhub.sagas.recovery import sagas_sweep
from toolhub.sagas.services import saga_call_settled
from toolhub.sagas.unheard import ENDED_STEPS_MARK

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("saga_tools")]

WINDOW = dt.timedelta(days=7)  # SAGA_UNHEARD_FAILURE_HOURS's default


def _sweep_at(later: dt.timedelta) -> dict[str, int]:
    """One sweep tick run ``later`` from now (a notification it repairs is older than its settling margin)."""
    at = timezone.now() + later
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timezone, "now", lambda: at)
        return sagas_sweep()


def _ends_unheard(call: ToolCall, status: CallStatus) -> None:
    """``call`` settles as ``status`` now, and the sagas never hear of it (the process died after the commit)."""
    ToolCall.objects.filter(pk=call.pk).update(status=status, finished_at=timezone.now())


def _step_settled_after_the_rollback(key: str, user: User) -> tuple[ToolCall, ToolCall]:
    """Saga ``key``: a booked step, a slow one still running when a heard failure rolled the saga back, that slow
    step then succeeding unheard; returns ``(slow, failed)``."""
    direct_call("book", {"item": "a"}, saga=key, user=user)
    slow = unheard_call("book", {"item": "slow"}, saga=key, user=user)
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.RUNNING, finished_at=None)
    failed = direct_call("explode", {"reason": "boom"}, saga=key, user=user)
    saga = Saga.objects.get(key=key)
    assert saga.status == SagaStatus.COMPENSATED and LOG.count(("cancel", "B-a")) == 1
    _ends_unheard(slow, CallStatus.SUCCEEDED)
    return slow, failed


def test_a_step_settling_unheard_after_its_saga_was_rolled_back_is_compensated(alice: User) -> None:
    """Found: a slow step asked for before a failure (its worker still running) succeeded after the saga had been
    rolled back, and the notification of its success was lost: no compensation was ever recorded for it, the saga
    read ``compensated`` with a booking left in place, and nothing showed an operator. Expect: the sweep finds the
    step settled unheard after a rollback asked for after it, files it under that rollback and compensates it, as
    hearing it would have."""
    # Another tenant's step of a saga of the same key, asked for then and settling unheard too: not acme's saga's.
    theirs = unheard_call("book", {"item": "theirs"}, saga="late-step", user=alice)
    ToolCall.objects.filter(pk=theirs.pk).update(tenant="globex", status=CallStatus.RUNNING, finished_at=None)
    slow, failed = _step_settled_after_the_rollback("late-step", alice)
    _ends_unheard(theirs, CallStatus.SUCCEEDED)

    assert _sweep_at(dt.timedelta(minutes=10))["late_steps"] == 1

    saga = Saga.objects.get(key="late-step")
    late = saga.compensations.get(step_call=slow)
    assert late.status == CompensationStatus.SUCCEEDED, late.status
    assert late.rollback == saga.rollbacks.get(failed_call=failed)
    assert ("cancel", "B-slow") in LOG and saga.status == SagaStatus.COMPENSATED
    assert not Saga.objects.filter(tenant="globex").exists() and ("cancel", "B-theirs") not in LOG
    _sweep_at(dt.timedelta(minutes=20))
    assert LOG.count(("cancel", "B-slow")) == 1


def test_a_failure_passed_by_the_mark_is_held_once_the_step_that_carried_on_ends_without_succeeding(
    alice: User,
) -> None:
    """Found: a failure nobody heard of, eight days old, was passed by the held scan (its mark moved on) because a
    step asked for after it was still waiting for its approval (the caller carrying on); that step was then rejected
    (or cancelled, or expired): the failure had nothing left carrying on, yet no scan read it again, so its saga was
    never rolled back, held or shown. Expect: once that step has ended without succeeding, the failure is held for an
    operator as any late failure is, once."""
    booked = unheard_call("book", {"item": "a"}, saga="carried", user=alice)
    failed = unheard_call("explode", {"reason": "boom"}, saga="carried", user=alice)
    waiting = unheard_call("book", {"item": "b"}, saga="carried", user=alice)
    now = timezone.now()
    for call, age in ((booked, 3), (failed, 2), (waiting, 1)):
        ago = now - dt.timedelta(days=8, seconds=age)
        ToolCall.objects.filter(pk=call.pk).update(created_at=ago, finished_at=ago)
    ToolCall.objects.filter(pk=waiting.pk).update(status=CallStatus.PENDING_APPROVAL, finished_at=None)
    assert sagas_sweep() == {"retried": 0, "synced": 0, "advanced": 0, "rolled_back": 0, "held": 0, "late_steps": 0}
    _ends_unheard(waiting, CallStatus.REJECTED)

    counts = _sweep_at(dt.timedelta(minutes=10))

    assert counts["held"] == 1, counts
    saga = Saga.objects.get(key="carried")
    assert saga.rollbacks.get().failed_call_id == failed.id and saga.rollbacks.get().held_for_operator
    assert saga.compensations.get(step_call=booked).status == CompensationStatus.HELD
    assert saga.status == SagaStatus.NEEDS_ATTENTION
    assert [entry for entry in LOG if entry[0] == "cancel"] == []
    assert _sweep_at(dt.timedelta(minutes=20))["held"] == 0


@pytest.mark.postgres
def test_two_sweepers_and_the_late_notification_at_once_compensate_a_late_step_once(alice: User) -> None:
    """Expect (holds, pinned on PostgreSQL): two sweepers and the step's own notification, arriving late, all find the
    late step at once and wait on the saga's row: one records it (``compensation.recorded`` once, filed under the
    rollback), the others find its compensation; the booking is cancelled once."""
    slow, _ = _step_settled_after_the_rollback("raced", alice)
    # Settled ten minutes ago (past ``ENDED_STEP_MARGIN``), on the real clock: the locker's transaction starts now, and
    # the mark stops short of a transaction still open with writes (review dr), as the sweepers' clock would if moved.
    ToolCall.objects.filter(pk=slow.pk).update(finished_at=timezone.now() - dt.timedelta(minutes=10))
    locker = psycopg.connect(**dsn())
    locker.execute("SELECT id FROM sagas_saga WHERE key = 'raced' FOR UPDATE")
    try:
        threads = [in_thread(sagas_sweep, name=f"sweeper-{n}") for n in range(2)]
        threads.append(in_thread(lambda: saga_call_settled(call_id=slow.id), name="notification"))
        wait_for_lock_waiter("sagas_saga", 15, count=3)
        locker.rollback()
        for thread, _ in threads:
            thread.join(30)
    finally:
        locker.close()
    results = [result[0] for _, result in threads]
    assert not any(isinstance(r, BaseException) for r in results), results
    saga = Saga.objects.get(key="raced")
    assert saga.compensations.get(step_call=slow).status == CompensationStatus.SUCCEEDED
    assert AuditEvent.objects.filter(event_type="compensation.recorded", call_id=slow.id).count() == 1
    assert LOG.count(("cancel", "B-slow")) == 1 and saga.status == SagaStatus.COMPENSATED


def test_another_tenants_operator_cannot_retry_a_held_saga_from_its_page(
    alice: User, acme_operator: User, globex_operator: User
) -> None:
    """Expect (holds): a saga the sweep held (a failure found nine days late) is retried from its page by its own
    tenant's operators only: another tenant's operator posting its retry URL is sent away, nothing compensated."""
    unheard_call("book", {"item": "a"}, saga="held", user=alice)
    failed = unheard_call("explode", {"reason": "boom"}, saga="held", user=alice)
    ago = timezone.now() - dt.timedelta(days=9)
    ToolCall.objects.filter(saga_id="held").update(created_at=ago, finished_at=ago)
    ToolCall.objects.filter(pk=failed.pk).update(created_at=ago + dt.timedelta(seconds=1))
    assert sagas_sweep()["held"] == 1
    saga = Saga.objects.get(key="held")

    response = console(globex_operator).post(f"/admin/sagas/saga/{saga.pk}/retry/")

    assert response.status_code == 302 and f"/{saga.pk}/" not in response["Location"], response["Location"]
    assert saga.compensations.get().status == CompensationStatus.HELD
    assert [entry for entry in LOG if entry[0] == "cancel"] == []


@pytest.mark.postgres
def test_the_ended_steps_scan_reads_its_partial_index_a_batch_at_a_time(alice: User) -> None:
    """Expect (cost): 30,000 direct saga steps that succeeded weeks ago among 30,000 other calls: a first run reads
    ``limit`` of them through ``toolcall_ended_saga_step`` (the calls never read whole, no subquery run more than
    ``limit`` times); once its mark is set, a tick reads none of them."""
    template = ToolCall.objects.create(tool_name="book", status="succeeded", tenant="acme", saga_id="x")
    clone(
        ToolCall,
        template,
        60_000,
        id=uuid_of("cs"),
        saga_id="CASE WHEN g % 2 = 0 THEN '' ELSE 'old-' || (g / 10) END",
        created_at=ago("60 * 24 * 14 + g"),
        finished_at=ago("60 * 24 * 14 + g"),
    )
    analyze()

    first = explained(lambda: sagas_sweep(limit=50))
    ended = [plan for _, plan in first if "toolcall_ended_saga_step" in plan]
    assert ended and not [plan for _, plan in first if "Seq Scan on toolhub_toolcall" in plan], first
    assert max(max_loops(plan) for _, plan in first) <= 50, first
    SweepMark.objects.filter(name=ENDED_STEPS_MARK).update(reached=timezone.now() - dt.timedelta(hours=1))
    steady = explained(sagas_sweep)
    assert max(max_loops(plan) for _, plan in steady) < 5, steady
