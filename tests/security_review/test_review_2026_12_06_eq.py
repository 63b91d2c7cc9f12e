"""Review eq (2026-12-06): review of the review of the saga sweep's marks, reopened rollbacks, Compensation.tenant.

Each finding's test failed on the reviewed code (main at 98885c5) and passes now.

Findings:

1. A transaction open with writes that holds the sweep's marks back (``sweep_marks.oldest_open_write``) was surfaced
   to nobody but the log: a forgotten ``BEGIN; UPDATE ...`` in a psql session, a reporting tool's or a migration's
   session of the application role, idle in its transaction (toolhub's idle bound is set on toolhub's own
   connections only, and the server's default is none), paused the ended-steps and held-failures scans for as long
   as it stayed open: late steps stayed uncompensated under sagas read ``compensated``, old failures unheld, and the
   operators' pages showed nothing (a warning a tick in the worker's log only). Fixed in the shared mechanism:
   ``sweep_marks.holding_back`` says which session holds the scans back (open with writes past the margin, or of
   another role whose start is unreadable), and the sagas' dashboard provider shows it on the admin index to
   whoever may view sagas (how long), naming the session (pid, application, since when; never its query) to those
   who cross the tenant boundary (a database session is no tenant's; they can end it), until it ends.

Checked and holding:
- A transaction begun before a tick that writes only after it (``backend_xid`` is NULL until the first write, so the
  tick does not see it): the step is stamped ``finished_at`` as it is written (``execution._finish``), after the
  tick's ``until`` (its now less the margin), so the next tick reads it once it commits (pinned below).
- A prepared transaction (``pg_prepared_xacts``) would hide from ``pg_stat_activity``; toolhub never prepares one and
  the server runs with ``max_prepared_transactions = 0`` (PREPARE TRANSACTION refused). A standby never writes the
  calls; the sweep reads and moves its marks on the primary (no database router). Another database's sessions cannot
  write this database's tables (``datname = current_database()`` leaves them out rightly).
- The margin is a constant (``ENDED_STEP_MARGIN``, 5 min), not a setting: nothing to misconfigure (negative, huge).
- The reopened rollback: two late steps heard at once are filed under the saga's row lock one after the other (the
  first reopens, the second finds it open; ``step_call`` is one-to-one: never recorded twice); a sweep and a hearing
  at once start the compensation once (``guarded_update`` from ``pending``); the late compensation runs for the
  step's user and tenant, its row carries the saga's tenant (``Compensation.save``).
- ``Compensation.tenant``: a ``QuerySet.update`` to another tenant is refused on PostgreSQL by the composite key
  (pinned by review eh); the admin shows it read-only (``editable=False``); the tenant admin never renames a slug
  (``FixedIdentity``), so no saga moves between tenants through toolhub.
"""

import json

import psycopg
import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.helpers import console
from tests.sagas.sample_tools import LOG
from tests.security_review.direct_sagas import direct_call, unheard_call
from tests.security_review.pg_races import dsn, in_thread, wait_for_lock_waiter
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.sagas.models import CompensationStatus, Saga, SagaStatus
from toolhub.sagas.recovery import sagas_sweep
from toolhub.sagas.services import saga_call_settled
from toolhub.sagas.unheard import ENDED_STEP_MARGIN

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("saga_tools")]


def _at(later_than_now: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """Toolhub's clock ``later_than_now`` margins on from now (the session's ``xact_start`` stays real)."""
    at = timezone.now() + ENDED_STEP_MARGIN * later_than_now
    monkeypatch.setattr(timezone, "now", lambda: at)


def test_a_session_holding_the_sweep_back_shows_on_the_operators_dashboard(
    acme_operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: a session of this database idle in a transaction that wrote (a forgotten psql ``BEGIN``) held the
    sweep's marks back for as long as it stayed open, late steps left uncompensated meanwhile, and only the worker's
    log said so: nothing on the admin operators read.
    Expect: while it is held past the margin the admin index shows the sweep held back to a tenant's operator, and
    names the session (pid, application; never its query) to a platform operator (a database session is no tenant's,
    and only they can end it); nothing once the session ends."""
    platform = User.objects.create_superuser("platform", "platform@example.com", "platform-password")
    stuck = psycopg.connect(**dsn(), application_name="forgotten-psql")
    try:
        stuck.execute("UPDATE toolhub_tenant SET name = name WHERE slug = 'acme'")
        pid = stuck.info.backend_pid
        _at(2, monkeypatch)

        theirs = console(acme_operator).get("/admin/").content.decode()
        ours = console(platform).get("/admin/").content.decode()

        assert "sagas sweep held back" in theirs, theirs
        assert f"pid {pid}" not in theirs and "forgotten-psql" not in theirs
        assert "sagas sweep held back" in ours and f"pid {pid}" in ours and "forgotten-psql" in ours, ours
        assert "toolhub_tenant" not in ours  # its query is nobody's business
    finally:
        stuck.rollback()
        stuck.close()
    assert "sagas sweep held back" not in console(acme_operator).get("/admin/").content.decode()


def test_a_transaction_that_writes_only_after_a_tick_is_read_by_the_next(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked (holds): a transaction begun before a tick whose first write comes after it has no ``backend_xid``
    when the tick reads ``pg_stat_activity``, so it does not cap the mark; its step is stamped as it is written,
    after the tick's ``until``, and the next tick reads it once it commits.
    Expect: the late step is compensated under the finished rollback it was late for."""
    direct_call("book", {"item": "a"}, saga="late-writer", user=alice)
    slow = unheard_call("book", {"item": "slow"}, saga="late-writer", user=alice)
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.RUNNING, finished_at=None)
    direct_call("explode", {"reason": "boom"}, saga="late-writer", user=alice)
    saga = Saga.objects.get(key="late-writer")
    assert saga.status == SagaStatus.COMPENSATED

    writer = psycopg.connect(**dsn())
    try:
        writer.execute("SELECT 1")  # begun, nothing written: no transaction id yet
        assert sagas_sweep()["late_steps"] == 0
        writer.execute(
            "UPDATE toolhub_toolcall SET status = %s, result = %s, finished_at = %s WHERE id = %s",
            [CallStatus.SUCCEEDED, json.dumps({"bookingId": "B-slow", "item": "slow"}), timezone.now(), slow.pk],
        )
        writer.commit()
    finally:
        writer.close()
    _at(2, monkeypatch)

    assert sagas_sweep()["late_steps"] == 1
    assert saga.compensations.get(step_call=slow).status == CompensationStatus.SUCCEEDED
    assert ("cancel", "B-slow") in LOG


def test_two_late_steps_heard_at_once_are_each_compensated_once(alice: User) -> None:
    """Checked (holds): two steps that succeeded unheard after their saga's rollback finished, heard at the same
    moment by two processes, queue on the saga's row lock: the first reopens the rollback, the second files its step
    under it (open, or reopened again if the first already finished it).
    Expect: each booking cancelled exactly once, the saga ``compensated`` with no rollback left open, and the last
    rollback event of the saga its ``saga.rollback_finished``."""
    direct_call("book", {"item": "a"}, saga="two-late", user=alice)
    late = [unheard_call("book", {"item": f"late-{n}"}, saga="two-late", user=alice) for n in (1, 2)]
    ToolCall.objects.filter(pk__in=[c.pk for c in late]).update(status=CallStatus.RUNNING, finished_at=None)
    direct_call("explode", {"reason": "boom"}, saga="two-late", user=alice)
    saga = Saga.objects.get(key="two-late")
    assert saga.status == SagaStatus.COMPENSATED
    for n, call in enumerate(late, 1):
        ToolCall.objects.filter(pk=call.pk).update(
            status=CallStatus.SUCCEEDED, result={"bookingId": f"B-{n}", "item": f"late-{n}"}, finished_at=timezone.now()
        )

    locker = psycopg.connect(**dsn())
    try:
        locker.execute("SELECT id FROM sagas_saga WHERE id = %s FOR UPDATE", [saga.pk])
        threads = [in_thread(lambda call=call: saga_call_settled(call_id=call.pk)) for call in late]
        wait_for_lock_waiter("sagas_saga", count=2)
    finally:
        locker.rollback()
        locker.close()
    for thread, result in threads:
        thread.join(30)
        assert result == [None], result

    assert sorted(entry for entry in LOG if entry[0] == "cancel") == [
        ("cancel", "B-1"),
        ("cancel", "B-2"),
        ("cancel", "B-a"),
    ]
    assert {c.status for c in saga.compensations.all()} == {CompensationStatus.SUCCEEDED}
    saga.refresh_from_db()
    assert saga.status == SagaStatus.COMPENSATED
    assert not saga.rollbacks.filter(finished_at__isnull=True).exists()
    events = AuditEvent.objects.filter(event_type__startswith="saga.rollback_", data__contains='"two-late"')
    assert events.order_by("-id").values_list("event_type", flat=True).first() == "saga.rollback_finished"
