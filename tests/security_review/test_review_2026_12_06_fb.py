"""Review fb (2026-12-06): review ex's two commits, read and probed. No finding: everything asked of them holds.

Review ex (7f460ca) made a late saga step filed *held* under a finished rollback open it again (``plan_compensation``
``_reopen``; ``saga_record_step`` now advances for any step filed under a rollback; ``hold_unknown_steps`` files with
``file_late=False``), and (6569f25) had beat delete expired console sessions (``sessions_clear_expired`` behind
``toolhub.tasks.sessions_clear_task``, every 15 minutes).

Checked and holding (tests below pin the sharpest):
- No reopen loop: a step is planned once (``saga_record_step`` returns its existing compensation first, under the
  saga's lock), so it opens a finished rollback once; heard again and swept again, the rollback is not reopened
  nor finished again, and the trail has one ``saga.rollback_reopened`` and two ``saga.rollback_finished`` for it.
- Tenant of the filing: the saga is found by ``(key, call.tenant)`` and ``late_for`` comes from that saga's own
  rollbacks: another tenant's saga of the same key, its rollback finished, is neither reopened nor written to.
- Hot path: an ordinary compensable step (no rollback asked after it; or one settled after a finished rollback) is
  filed ``recorded`` and ``advance`` is not called, so no statement is added to its settle; a step asked for after
  a finished rollback does not reopen it. The approvepath statement-count tests pass unchanged.
- A new rollback's unknown steps are filed under it (``file_late=False``), never reopening an older finished one
  (ex's own tests).
- ``sessions_clear_expired``: compares aware UTC ``timezone.now()`` with the aware ``expire_date`` (``USE_TZ``), so
  time zones play no part; a worker clock ahead by *d* deletes only rows expiring within *d* (which Django would
  refuse *d* later anyway), a session expiring a minute from now is kept. Each batch is a short SELECT of at most
  ``batch`` keys through the ``expire_date`` index and a DELETE re-checking ``expire_date`` (a row extended meanwhile
  stays); no server-side cursor or session state, so it runs behind ``TRANSACTION_POOLER``. Run twice at once, the
  second deletes nothing more (a row gone is counted by one run only) and neither fails. Sessions are global
  (no tenant column): a tenant-agnostic task is right.

Left (pre-existing, not ex's): an operator's retry of a held compensation under a finished rollback runs it without
opening that rollback again, so its outcome is not named by a ``saga.rollback_finished`` nor told to a conversation
(``compensation_retry``); the compensation's own events and the saga's status carry it.
"""

import datetime as dt
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.utils import timezone

from tests.helpers import assert_audit_intact
from tests.security_review.direct_sagas import direct_call, unheard_call
from tests.security_review.test_review_2026_12_06_da import _sweep_at
from toolhub.api.keys import key_digest
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.sagas import services
from toolhub.sagas.models import CompensationStatus, Rollback, RollbackTrigger, Saga, SagaStatus
from toolhub.sagas.services import saga_call_settled
from toolhub.session_store import SessionStore, sessions_clear_expired

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("saga_tools")]


def _events(event_type: str, rollback_id: int) -> int:
    return sum(
        1
        for event in AuditEvent.objects.filter(event_type=event_type)
        if json.loads(event.data).get("rollback") == rollback_id
    )


def _late_held(alice: User) -> tuple[Saga, Rollback, ToolCall]:
    """acme's saga ``late-held``: one step, a failure rolled back (finished), a step running since before it."""
    direct_call("reserve", {"item": "a"}, saga="late-held", user=alice)
    slow = unheard_call("reserve", {"item": "slow"}, saga="late-held", user=alice)
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.RUNNING, finished_at=None)
    direct_call("explode", {"reason": "boom"}, saga="late-held", user=alice)
    saga = Saga.objects.get(key="late-held", tenant="acme")
    rollback = saga.rollbacks.get()
    assert rollback.finished_at is not None
    return saga, rollback, slow


def test_a_held_late_step_reopens_its_rollback_once_however_often_it_is_heard(alice: User) -> None:
    """Holds (no finding): could the same held step open its finished rollback again at each hearing or sweep,
    flooding the trail? Expect: heard three times and swept twice, one ``saga.rollback_reopened``, the rollback
    finished twice in all (first, and again naming the held step), still finished; the chains verify."""
    saga, rollback, slow = _late_held(alice)
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.NEEDS_ATTENTION, finished_at=timezone.now())

    for _ in range(3):
        saga_call_settled(call_id=slow.id)
    _sweep_at(dt.timedelta(minutes=10))
    _sweep_at(dt.timedelta(minutes=20))

    assert saga.compensations.filter(step_call=slow, status=CompensationStatus.HELD).count() == 1
    assert _events("saga.rollback_reopened", rollback.pk) == 1
    assert _events("saga.rollback_finished", rollback.pk) == 2
    rollback.refresh_from_db()
    assert rollback.finished_at is not None
    saga.refresh_from_db()
    assert saga.status == SagaStatus.NEEDS_ATTENTION
    assert_audit_intact()


def test_a_held_late_step_never_reopens_another_tenants_rollback(alice: User) -> None:
    """Holds (no finding): globex has a saga of the same key whose rollback finished after acme's late step was
    asked for. Expect: acme's held late step reopens acme's rollback only; globex's keeps its finish and told time
    and its saga has no new trail entry."""
    stamp = timezone.now() + dt.timedelta(hours=1)
    other = Saga.objects.create(key="late-held", tenant="globex", status=SagaStatus.COMPENSATED)
    theirs = Rollback.objects.create(saga=other, trigger=RollbackTrigger.ON_DEMAND, requested_by="globex-op")
    Rollback.objects.filter(pk=theirs.pk).update(requested_at=stamp, finished_at=stamp, told_at=stamp)
    saga, rollback, slow = _late_held(alice)
    globex_events = AuditEvent.objects.filter(tenant="globex").count()
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.NEEDS_ATTENTION, finished_at=timezone.now())

    saga_call_settled(call_id=slow.id)

    assert saga.compensations.get(step_call=slow).rollback_id == rollback.pk
    assert _events("saga.rollback_reopened", rollback.pk) == 1
    assert _events("saga.rollback_reopened", theirs.pk) == 0
    theirs.refresh_from_db()
    assert (theirs.finished_at, theirs.told_at) == (stamp, stamp)
    assert AuditEvent.objects.filter(tenant="globex").count() == globex_events
    other.refresh_from_db()
    assert other.status == SagaStatus.COMPENSATED


def test_an_ordinary_step_is_not_advanced_nor_reopens_a_rollback_before_it(alice: User, monkeypatch: Any) -> None:
    """Holds (no finding): ex's ``advance`` for any step filed under a rollback must not reach an ordinary step's
    settle. Expect: a compensable step with no rollback, and one asked for after a finished rollback, are filed
    ``recorded`` without ``advance`` being called; the finished rollback is not reopened."""
    advanced: list[int] = []
    real = services.advance
    monkeypatch.setattr(services, "advance", lambda saga, actor: (advanced.append(saga.pk), real(saga, actor)))

    first = direct_call("reserve", {"item": "a"}, saga="plain", user=alice)
    saga = Saga.objects.get(key="plain", tenant="acme")
    assert saga.compensations.get(step_call=first).status == CompensationStatus.RECORDED
    assert advanced == []

    direct_call("explode", {"reason": "boom"}, saga="plain", user=alice)
    rollback = saga.rollbacks.get()
    assert rollback.finished_at is not None
    assert advanced, "the rollback advanced through the patched advance (the probe sees it)"
    advanced.clear()
    after = direct_call("reserve", {"item": "b"}, saga="plain", user=alice)

    assert saga.compensations.get(step_call=after).status == CompensationStatus.RECORDED
    assert saga.compensations.get(step_call=after).rollback_id is None
    assert advanced == []
    assert _events("saga.rollback_reopened", rollback.pk) == 0


def _session(expires_in: dt.timedelta) -> str:
    store = SessionStore()
    store["_auth_user_id"] = "1"
    store.create()
    Session.objects.filter(session_key=key_digest(store.session_key or "")).update(
        expire_date=timezone.now() + expires_in
    )
    return store.session_key or ""


def test_clearing_expired_sessions_keeps_the_nearly_expired_and_runs_twice_harmlessly() -> None:
    """Holds (no finding): a session about to expire is live; a second run (beat twice at once, or a retry) after
    the first deletes nothing more and does not fail. Expect: the row expiring in a minute stays and signs in, the
    ones expired a second and a day ago go, counted once."""
    soon = _session(dt.timedelta(minutes=1))
    for ago in (dt.timedelta(seconds=-1), dt.timedelta(days=-1)):
        _session(ago)

    assert sessions_clear_expired() + sessions_clear_expired() == 2

    assert list(Session.objects.values_list("session_key", flat=True)) == [key_digest(soon)]
    assert SessionStore(soon).load() == {"_auth_user_id": "1"}
