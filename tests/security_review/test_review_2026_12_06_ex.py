"""Review ex (2026-12-06): the sagas' held late steps under finished rollbacks, and expired console sessions.

Each finding's test failed on the reviewed code (main at d9460e9) and passes now.

Findings:

1. A late step filed *held* under a rollback that had already finished (its outcome became unknown after the rollback
   was asked for, or it succeeded late under a ``held_for_operator`` rollback) was filed under it without opening it
   again: only a step to compensate at once reopened its rollback (``plan_compensation``). The rollback kept its
   ``finished_at`` and ``told_at``, its one ``saga.rollback_finished`` entry never named the held step (nor did the
   ``compensation.held`` event name the rollback), and a run's conversation, told "rolled back", was never told that
   a step of it sits with an unknown outcome waiting for an operator. Operators were told (the saga goes
   ``needs_attention``, the dashboard counts it: checked, holding); auditors and the conversation were not, and the
   README said any late step filed under a finished rollback opens it again. Fixed in the one place late steps are
   planned (``plan_compensation``): a finished rollback a late step is filed under is opened again whatever the
   step's status, ``saga.rollback_reopened`` saying whether it is held, and the callers advance the saga, so the
   rollback finishes again at once (nothing to run) with an outcome naming the step ``held``, ``told_at`` cleared for
   the conversation's next wake-up. An unknown step a *new* rollback finds is filed under that new one, as before,
   never reopening an older one.
2. Expired console sessions were never deleted: ``clearsessions`` was in no beat schedule, so ``django_session`` grew
   with every sign-in for ever (a session's row is only deleted on sign-out, password change or revocation).
   Fixed as the other housekeeping is: ``toolhub.session_store.sessions_clear_expired`` (bounded batches through the
   ``expire_date`` index) behind a thin task, ``toolhub.tasks.sessions_clear_task``, scheduled by beat
   (``toolhub-sessions-clear``, every 15 minutes); README's Production section says so.

Checked and holding:
- The held late step makes the saga ``needs_attention`` (``refresh_status``) and the acme operator's dashboard figure
  counts it; operators retry or resolve it as any held compensation.
- A held step's own ``compensation.held`` event is in the saga's tenant's chain; the chains verify.
- ``saga_record_step`` advances the saga only for a step filed under a rollback (pending or held), not for every
  recorded step: no added statements on the ordinary settle of a compensable step.

Found, not fixed: a run's conversation reads its reopened rollback's note at the run's next wake-up. A heard late step
wakes it (its own settle: tested above), but one whose notification was lost too and that the sweep files after the
run ended wakes nothing (the runs sweep wakes running and waiting runs only): the note waits in the rollback
(``told_at`` unset) until something wakes the run. Operators and the trail are told at once. Closed by review fk:
every reopen of a run's rollback wakes the run (``rollback_reopened``).
"""

import datetime as dt
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.utils import timezone

from tests.helpers import assert_audit_intact
from tests.sagas.sample_tools import LOG
from tests.security_review.direct_sagas import direct_call, unheard_call
from tests.security_review.test_review_2026_12_06_ce import EIGHT_DAYS, _age
from tests.security_review.test_review_2026_12_06_da import BOOK_ONCE, _run_step_on_its_way, _sweep_at
from toolhub.api.keys import key_digest
from toolhub.calls import call_transition
from toolhub.celery import app as celery_app
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.sagas.dashboard import sagas_attention_figures
from toolhub.sagas.models import CompensationStatus, Saga, SagaStatus
from toolhub.sagas.recovery import sagas_sweep
from toolhub.sagas.services import saga_call_settled, saga_rollback_on_demand
from toolhub.session_store import SessionStore, sessions_clear_expired

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("saga_tools")]


def _last_finished(rollback_id: int) -> dict[str, Any]:
    """The data of the newest ``saga.rollback_finished`` entry of rollback ``rollback_id``."""
    finished = [
        json.loads(event.data)
        for event in AuditEvent.objects.filter(event_type="saga.rollback_finished").order_by("seq")
        if json.loads(event.data)["rollback"] == rollback_id
    ]
    assert finished, "the rollback never finished"
    return finished[-1]


def test_a_step_of_unknown_outcome_after_a_finished_rollback_is_told_to_the_conversation(
    alice: User, make_agent: Any, start: Any
) -> None:
    """Found: a run step still running when its run was rolled back, whose worker died after (outcome unknown), was
    filed held under the finished rollback without opening it: the conversation, told "rolled back", never heard
    that a step of the run waits for an operator, and the rollback's trail never named it. Expect: the rollback is
    opened again and finishes again at once naming the step ``held``; the conversation gets a second note saying its
    outcome is unknown and an operator decides."""
    run = start(make_agent(tools=["book"], script=BOOK_ONCE), alice)
    slow = _run_step_on_its_way(run.id, alice, "slow")
    saga_rollback_on_demand(saga_key=str(run.id), run_id=run.id, tenant="acme", actor="alice")
    run.refresh_from_db()
    assert len([m for m in run.messages if m["role"] == "system"]) == 1

    # Its worker died: the calls' sweeper settles it ``needs_attention``, heard (call_settled after commit).
    call_transition(slow, to=CallStatus.NEEDS_ATTENTION, allowed_from={CallStatus.RUNNING}, actor="sweeper")

    saga = Saga.objects.get(run_id=run.id)
    late = saga.compensations.get(step_call=slow)
    rollback = saga.rollbacks.get()
    assert late.status == CompensationStatus.HELD and late.rollback == rollback
    assert AuditEvent.objects.filter(event_type="saga.rollback_reopened", call_id=slow.id).count() == 1
    assert _last_finished(rollback.pk)["compensations"][str(late.sequence)] == CompensationStatus.HELD
    run.refresh_from_db()
    notes = [m["content"] for m in run.messages if m["role"] == "system"]
    assert len(notes) == 2, notes
    assert 'book({"item":"slow"}): its own outcome is unknown; an operator decides' in notes[1], notes[1]
    rollback.refresh_from_db()
    assert rollback.finished_at is not None and rollback.told_at is not None
    saga.refresh_from_db()
    assert saga.status == SagaStatus.NEEDS_ATTENTION


def test_a_late_step_of_unknown_outcome_found_by_the_sweep_is_named_by_its_finished_rollback(
    alice: User, acme_operator: User
) -> None:
    """Found: a direct step asked for before a rollback that finished, whose outcome became unknown and whose
    notification was lost, was filed held under that rollback by the sweep without opening it: the rollback's only
    ``saga.rollback_finished`` named the first step alone. Expect: the sweep files it held, the rollback is opened
    again (``saga.rollback_reopened`` naming the step, ``held``) and finishes again naming it ``held``; the saga needs
    attention and the acme operator's dashboard counts it (that part held already); the chains verify."""
    direct_call("reserve", {"item": "a"}, saga="late-held", user=alice)
    slow = unheard_call("reserve", {"item": "slow"}, saga="late-held", user=alice)
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.RUNNING, finished_at=None)
    direct_call("explode", {"reason": "boom"}, saga="late-held", user=alice)
    saga = Saga.objects.get(key="late-held", tenant="acme")
    rollback = saga.rollbacks.get()
    assert saga.status == SagaStatus.COMPENSATED and rollback.finished_at is not None
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.NEEDS_ATTENTION, finished_at=timezone.now())

    assert _sweep_at(dt.timedelta(minutes=10))["late_steps"] == 1

    late = saga.compensations.get(step_call=slow)
    assert late.status == CompensationStatus.HELD and late.rollback_id == rollback.pk
    reopened = AuditEvent.objects.get(event_type="saga.rollback_reopened")
    assert reopened.call_id == slow.pk and reopened.tenant == "acme"
    assert json.loads(reopened.data) == {
        "saga": "late-held",
        "rollback": rollback.pk,
        "late_step": str(slow.pk),
        "held": True,
    }
    outcome = _last_finished(rollback.pk)["compensations"]
    assert outcome[str(late.sequence)] == CompensationStatus.HELD, outcome
    rollback.refresh_from_db()
    assert rollback.finished_at is not None
    saga.refresh_from_db()
    assert saga.status == SagaStatus.NEEDS_ATTENTION
    assert [f.value for f in sagas_attention_figures(acme_operator, timezone.now())] == ["1"]
    assert _sweep_at(dt.timedelta(minutes=20))["late_steps"] == 0
    assert AuditEvent.objects.filter(event_type="saga.rollback_reopened").count() == 1
    assert_audit_intact()


def test_a_late_step_under_a_finished_held_rollback_reopens_it_and_is_named_held(alice: User) -> None:
    """Found: a step still running when the sweep held a late failure's rollback (``held_for_operator``, finished at
    once: nothing to run) that succeeded after it was filed held under it without opening it: its one
    ``saga.rollback_finished`` named the first step only. Expect: the rollback is opened again (``held``) and finishes
    again at once naming both steps ``held``; nothing is compensated until an operator decides."""
    booked = unheard_call("book", {"item": "a"}, saga="late", user=alice)
    failed = unheard_call("explode", {"reason": "boom"}, saga="late", user=alice)
    slow = unheard_call("book", {"item": "b"}, saga="late", user=alice)
    _age(booked, EIGHT_DAYS)
    _age(failed, EIGHT_DAYS - dt.timedelta(seconds=1))
    _age(slow, EIGHT_DAYS + dt.timedelta(seconds=1), status=CallStatus.RUNNING)
    assert sagas_sweep()["held"] == 1
    rollback = Saga.objects.get(key="late").rollbacks.get()
    assert rollback.held_for_operator and rollback.finished_at is not None
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.SUCCEEDED, finished_at=timezone.now())

    saga_call_settled(call_id=slow.id)

    saga = Saga.objects.get(key="late")
    outcome = _last_finished(rollback.pk)["compensations"]
    assert sorted(outcome.values()) == [CompensationStatus.HELD, CompensationStatus.HELD], outcome
    reopened = json.loads(AuditEvent.objects.get(event_type="saga.rollback_reopened", call_id=slow.pk).data)
    assert reopened["held"] is True and reopened["rollback"] == rollback.pk
    rollback.refresh_from_db()
    assert rollback.finished_at is not None and saga.status == SagaStatus.NEEDS_ATTENTION
    assert [entry for entry in LOG if entry[0] == "cancel"] == []


def _session(*, expired: bool) -> str:
    """A console session stored now (its row by the key's digest); ``expired``: its expiry a day ago. Its key."""
    store = SessionStore()
    store["_auth_user_id"] = "1"
    store.create()
    if expired:
        Session.objects.filter(session_key=key_digest(store.session_key or "")).update(
            expire_date=timezone.now() - dt.timedelta(days=1)
        )
    return store.session_key or ""


def test_expired_console_sessions_are_cleared_by_beat_and_live_ones_kept() -> None:
    """Found: nothing deleted expired sessions (``clearsessions`` was in no beat schedule): ``django_session`` grew with
    every sign-in for ever. Expect: beat schedules ``toolhub.tasks.sessions_clear_task``, a task Celery knows; run, it
    deletes the expired rows and keeps the live one, which still signs its holder in."""
    entries = [e for e in celery_app.conf.beat_schedule.values() if e["task"] == "toolhub.tasks.sessions_clear_task"]
    assert len(entries) == 1 and float(entries[0]["schedule"]) <= 3600, celery_app.conf.beat_schedule
    live = _session(expired=False)
    gone = [_session(expired=True) for _ in range(3)]
    assert Session.objects.count() == 4

    celery_app.tasks["toolhub.tasks.sessions_clear_task"].delay()

    assert list(Session.objects.values_list("session_key", flat=True)) == [key_digest(live)]
    assert SessionStore(live).load() == {"_auth_user_id": "1"}
    assert all(not SessionStore().exists(key) for key in gone)


def test_clearing_expired_sessions_is_bounded_a_call() -> None:
    """Expect: one call deletes at most ``batch`` x ``batches`` expired rows (a first run over years of sign-ins is
    no single long delete), and reports how many; the next call goes on."""
    for _ in range(5):
        _session(expired=True)
    assert sessions_clear_expired(batch=2, batches=2) == 4
    assert sessions_clear_expired(batch=2, batches=2) == 1
    assert sessions_clear_expired() == 0 and not Session.objects.exists()
