"""Review dr (2026-12-06): sagas' steps that settle unheard, the review of today's reviews cs, da and dj.

Each finding's test failed on the reviewed code (main at dc76274) and passes now.

Findings:

1. A rollback asked for (a second failure heard, or on demand) that found a late step settled unheard under an
   earlier, finished rollback filed it there and opened that rollback again (``saga.rollback_reopened``), then
   returned early as "nothing new to compensate": no ``advance``, no ``refresh_status``. The late compensation sat
   ``pending`` until the sweep's stalled-rollback repair, the saga read ``compensated`` over it meanwhile (the API's
   answer to the operator who asked, too), and no ``saga.rollback_finished`` followed the reopen. Fixed in
   ``saga_rollback``: that path advances the saga and refreshes its status too, returning the reopened rollback as
   it then stands.
2. The sweep's marks (``marked_batch``: ended saga steps, held failures) moved to a fixed margin before the sweep's
   now (``ENDED_STEP_MARGIN``, 5 min) whatever transaction was still open. A step is stamped ``finished_at`` inside
   the transaction that settles it and is seen only at its commit, and a transaction may stay open past 5 minutes:
   the idle bound is 600 s (a transaction idle 5 to 10 minutes between statements is allowed), and an atomic tool's
   transaction stays open up to its timeout (``transaction_idle_at_least`` lifts the idle bound), any step settled
   inside it visible only at its end. Such a step was behind the mark when it became visible, never read: its
   booking left in place, the saga ``compensated``. Fixed in ``marked_batch``: on PostgreSQL the mark never passes
   the start of the oldest transaction of this database still open with writes (``pg_stat_activity``:
   ``backend_xid`` set), less the margin. Reviews cs's and dj's forced races held a row lock (a write) while moving
   the sweepers' clock 10 minutes on; they now backdate the step 10 minutes on the real clock instead (same race).

Checked and holding:
- Two sweepers and a late hearing at once, a batch failing then retried, the mark's boundaries: pinned by reviews cs,
  da and dj; still pass with the marks capped by open writes (the sweeper's own session is left out of the cap).
- A step that ended ``failed`` or ``cancelled`` (``expired``, ``rejected``) unheard is never compensated: the
  ended-steps scan records only ``succeeded`` and ``needs_attention`` steps; others only make a direct saga's older
  failures read again.
- Another tenant's step is never filed under acme's rollback: ``_rolled_back_after_it`` and ``saga_record_step``
  both match the saga by the step's tenant (pinned by cs, dj).
- Compensations are not steps: ``kind=compensation`` is outside ``STEP_KINDS``, so neither the ended-steps scan nor
  ``saga_record_step`` plans a compensation of a compensation call.
- A reopened rollback whose compensation fails, its trail and ``verify_audit``: pinned by dj (saga needs attention,
  the rollback finishes again naming it ``failed``, chains verify).

Not fixed (argued, not driven): the cap reads ``pg_stat_activity``; sessions of another database role show no
``xact_start`` there without ``pg_read_all_stats``, so the sweeper must run as the workers' role (or hold that
role) for the cap to see their transactions. While a long transaction with writes stays open, the scans wait
for it (late steps compensated after it ends, never skipped).
"""

import datetime as dt
import json

import psycopg
import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.sagas.sample_tools import LOG
from tests.security_review.direct_sagas import direct_call, unheard_call
from tests.security_review.pg_races import dsn
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.sagas.models import CompensationStatus, Saga, SagaStatus
from toolhub.sagas.recovery import sagas_sweep
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.sagas.unheard import ENDED_STEP_MARGIN

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("saga_tools")]


def _late_step_after_a_finished_rollback(user: User, key: str) -> tuple[Saga, ToolCall]:
    """Saga ``key`` rolled back (finished) while a ``book`` step was on its way, that step then succeeded unheard."""
    direct_call("book", {"item": "a"}, saga=key, user=user)
    slow = unheard_call("book", {"item": "slow"}, saga=key, user=user)
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.RUNNING, finished_at=None)
    direct_call("explode", {"reason": "boom"}, saga=key, user=user)
    saga = Saga.objects.get(key=key)
    assert saga.status == SagaStatus.COMPENSATED and saga.rollbacks.get().finished_at is not None
    ToolCall.objects.filter(pk=slow.pk).update(
        status=CallStatus.SUCCEEDED, result={"bookingId": "B-slow", "item": "slow"}, finished_at=timezone.now()
    )
    return saga, slow


def _compensated_at_once(saga: Saga, slow: ToolCall) -> None:
    late = saga.compensations.get(step_call=slow)
    assert late.status == CompensationStatus.SUCCEEDED, late.status
    assert ("cancel", "B-slow") in LOG
    saga.refresh_from_db()
    assert saga.status == SagaStatus.COMPENSATED
    assert not saga.rollbacks.filter(finished_at__isnull=True).exists()
    assert AuditEvent.objects.filter(event_type="saga.rollback_reopened", call_id=slow.id).count() == 1
    # The rollback finished again, its outcome naming the late step's compensation.
    finished = AuditEvent.objects.filter(tenant="acme", event_type="saga.rollback_finished", data__contains=saga.key)
    outcomes = [json.loads(event.data)["compensations"] for event in finished]
    assert any(outcome.get(str(late.sequence)) == CompensationStatus.SUCCEEDED for outcome in outcomes), outcomes


def test_a_second_failure_heard_compensates_a_late_step_it_finds_at_once(alice: User) -> None:
    """Found: a second failure of a direct saga, heard, found a step that had succeeded unheard after the first
    rollback finished: ``record_missing_steps`` filed it under that rollback and reopened it, then ``saga_rollback``
    returned early (nothing recorded for a new rollback) without starting it; the booking stayed in place until the
    sweep's next tick, the saga read ``compensated`` over a pending compensation.
    Expect: the late step is compensated at once (in process here), the saga reads ``compensated`` with nothing
    pending, and the reopened rollback finishes again (``saga.rollback_finished`` after the reopen)."""
    saga, slow = _late_step_after_a_finished_rollback(alice, "second-failure")

    direct_call("explode", {"reason": "again"}, saga="second-failure", user=alice)

    _compensated_at_once(saga, slow)


def test_an_on_demand_rollback_that_finds_only_a_late_step_compensates_it(alice: User) -> None:
    """Found: an operator's rollback on demand whose only work was a step that had succeeded unheard after an earlier
    finished rollback got that rollback back reopened, but nothing started: the answer read ``compensated`` while the
    booking was still in place, waiting for the sweep.
    Expect: the late step's compensation runs at once and the saga returned reads as it stands."""
    saga, slow = _late_step_after_a_finished_rollback(alice, "on-demand")

    returned = saga_rollback_on_demand(saga_key="on-demand", tenant="acme", actor="alice")

    _compensated_at_once(saga, slow)
    assert returned.status == SagaStatus.COMPENSATED


def _sweep_at(later: dt.timedelta) -> dict[str, int]:
    """One sweep tick run ``later`` from now."""
    at = timezone.now() + later
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timezone, "now", lambda: at)
        return sagas_sweep()


@pytest.mark.postgres
def test_a_step_settled_in_a_transaction_open_past_the_margin_is_not_passed_by_the_mark(alice: User) -> None:
    """Found: the ended-steps scan's mark moved to ``ENDED_STEP_MARGIN`` (5 min) before the sweep's now, whatever
    transaction was still open: a step stamped ``finished_at`` inside a transaction that committed more than 5 min
    later was behind the mark the moment it became visible, never read, its booking left in place under a saga read
    ``compensated``. Such transactions exist: the idle bound is 600 s, and an atomic tool's transaction stays open
    (idle bound lifted: ``transaction_idle_at_least``) up to its timeout, the steps its inner calls made settled in it.
    Expect: while a transaction that wrote stays open the mark stops at its start; once it commits the next tick reads
    the step and compensates it under the rollback it was late for."""
    saga, slow = _late_step_after_a_finished_rollback(alice, "long-transaction")
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.RUNNING, result=None, finished_at=None)
    writer = psycopg.connect(**dsn())
    try:
        writer.execute(
            "UPDATE toolhub_toolcall SET status = %s, result = %s, finished_at = %s WHERE id = %s",
            [CallStatus.SUCCEEDED, json.dumps({"bookingId": "B-slow", "item": "slow"}), timezone.now(), slow.pk],
        )
        # Still open 10 minutes on (within an atomic tool's timeout): the sweep cannot see the step yet.
        assert _sweep_at(ENDED_STEP_MARGIN * 2)["late_steps"] == 0
        writer.commit()
    finally:
        writer.close()

    assert _sweep_at(ENDED_STEP_MARGIN * 3)["late_steps"] == 1

    late = saga.compensations.get(step_call=slow)
    assert late.status == CompensationStatus.SUCCEEDED and late.rollback == saga.rollbacks.get()
    assert ("cancel", "B-slow") in LOG
