"""Review fc (2026-12-06): an operator's retry of a compensation under a finished rollback.

Each finding's test failed on the reviewed code (main at 346f72f) and passes now.

Findings:

1. An operator's retry (``compensation_retry``: the Sagas and Compensations admin's "Retry", ``saga_retry``,
   ``compensations_retry``) of a failed, unknown or held compensation whose rollback had finished ran it without
   opening that rollback again: ``close_rollbacks`` only finishes unfinished rollbacks, so no
   ``saga.rollback_finished`` ever named the retry's outcome, and the rollback's ``told_at`` stayed set, so a run's
   conversation, told "NOT rolled back" (or "an operator decides"), was never told that the step was rolled back
   after all. The compensation's own events and the saga's status recorded it; auditors reading the rollback's trail,
   and the model, did not. Review ex had made a late step filed under a finished rollback open it again
   (``records._reopen``). The retry path now does the same, by that one mechanism (renamed ``reopen_rollback``, its
   ``cause`` given by the caller): ``compensation_retry`` opens the compensation's finished rollback again
   (``saga.rollback_reopened`` saying ``retried`` with the compensation's id and its ``previous_status``), so the
   rollback finishes again once the retry settles, its ``saga.rollback_finished`` naming the outcome, ``told_at``
   cleared for the conversation's next wake-up (the compensation's call settling wakes the run). README (Sagas) says so.

Checked and holding:
- A bulk retry (``saga_retry``) of several compensations of one finished rollback opens it once (the first retry; the
  rollback is then unfinished, so the next retries find it open) and it finishes again once, naming both outcomes;
  the chains verify (tested).
- A retry while the compensation's rollback is still under way (another of its compensations running or pending) finds
  it unfinished and reopens nothing; ``advance`` finishes it once none is left to run, naming the retried outcome
  (read in code: ``compensation_retry`` reopens only a rollback with ``finished_at`` set, read under the saga's lock).
- A compensation without a rollback is left as it was (nothing to reopen).
- The late-step reopen (review ex) keeps its event data (``late_step``, ``held``): its tests pass unchanged.

Closed after this review: resolving a compensation by hand (``compensation_resolve``) under a finished rollback did
not open it again either (the rollback's trail kept its status before the resolution); it now reopens it through the
same ``reopen_rollback`` and finishes again at once. A resolution wakes no run: the conversation hears the note at the
run's next wake-up.
"""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.helpers import assert_audit_intact
from tests.sagas.sample_tools import LOG, RELEASE_FAILS
from tests.security_review.direct_sagas import direct_call
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.sagas.models import CompensationStatus, Saga, SagaStatus
from toolhub.sagas.recovery import compensation_resolve, compensation_retry, saga_retry
from toolhub.sagas.services import saga_rollback_on_demand

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("saga_tools")]

RESERVE_ONCE = [
    {"content": "", "tool_calls": [{"name": "reserve", "arguments": {"item": "seat"}}]},
    {"content": "reserved"},
]


def _rollback_events(event_type: str, rollback_id: int) -> list[dict[str, Any]]:
    """The data of the ``event_type`` entries of rollback ``rollback_id``, oldest first."""
    return [
        data
        for data in (json.loads(e.data) for e in AuditEvent.objects.filter(event_type=event_type).order_by("seq"))
        if data.get("rollback") == rollback_id
    ]


def _one_attempt(settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 1}


def test_a_retried_compensation_under_a_finished_rollback_is_named_by_it_and_told_to_the_conversation(
    alice: User, acme_operator: User, make_agent: Any, start: Any, settings: Any
) -> None:
    """Found: a run rolled back whose compensation failed (the rollback finished, the conversation told "NOT rolled
    back"), retried by an operator once the cause was fixed, was compensated without opening the rollback again: its
    one ``saga.rollback_finished`` named the compensation ``failed`` and the conversation was never told it was rolled
    back after all. Expect: the retry opens the rollback again (``saga.rollback_reopened``, ``retried``), it finishes
    again naming the compensation ``succeeded``, and the run's conversation gets a second note saying so."""
    _one_attempt(settings)
    run = start(make_agent(tools=["reserve"], script=RESERVE_ONCE), alice)
    RELEASE_FAILS["on"] = True
    saga_rollback_on_demand(saga_key=str(run.id), run_id=run.id, tenant="acme", actor="alice")
    saga = Saga.objects.get(run_id=run.id)
    rollback = saga.rollbacks.get()
    failed = saga.compensations.get()
    assert failed.status == CompensationStatus.FAILED and rollback.finished_at is not None
    run.refresh_from_db()
    notes = [m["content"] for m in run.messages if m["role"] == "system"]
    assert len(notes) == 1 and "NOT rolled back" in notes[0], notes

    RELEASE_FAILS["on"] = False
    compensation_retry(compensation=failed, actor=f"user:{acme_operator.username}", by=acme_operator)

    failed.refresh_from_db()
    assert failed.status == CompensationStatus.SUCCEEDED and ("release", "seat") in LOG
    reopened = _rollback_events("saga.rollback_reopened", rollback.pk)
    assert len(reopened) == 1, reopened
    assert reopened[0]["retried"] == failed.pk and reopened[0]["previous_status"] == CompensationStatus.FAILED
    finished = _rollback_events("saga.rollback_finished", rollback.pk)
    assert [f["compensations"][str(failed.sequence)] for f in finished] == ["failed", "succeeded"], finished
    run.refresh_from_db()
    notes = [m["content"] for m in run.messages if m["role"] == "system"]
    assert len(notes) == 2, notes
    assert 'reserve({"item":"seat"}): rolled back (by release)' in notes[1], notes[1]
    rollback.refresh_from_db()
    assert rollback.finished_at is not None and rollback.told_at is not None
    saga.refresh_from_db()
    assert saga.status == SagaStatus.COMPENSATED
    assert_audit_intact()


def test_held_steps_retried_together_under_a_finished_rollback_reopen_it_once(alice: User) -> None:
    """Found: a direct saga's steps of unknown outcome, held by its rollback (which finished at once, naming them
    ``held``), compensated at an operator's retry of the saga without opening the rollback again: the rollback's trail
    said ``held`` for ever. Expect: the retry opens it again, once for both (the first retry; the rollback is then
    under way until the last settles), and it finishes again once, naming both steps ``succeeded``."""
    direct_call("reserve", {"item": "known"}, saga="u", user=alice)
    unknown = [
        ToolCall.objects.create(
            tool_name="reserve",
            status=CallStatus.NEEDS_ATTENTION,
            arguments={"item": item},
            saga_id="u",
            tenant="acme",
            user=alice,
        )
        for item in ("maybe", "perhaps")
    ]
    direct_call("explode", {"reason": "boom"}, saga="u", user=alice)
    saga = Saga.objects.get(key="u", tenant="acme")
    rollback = saga.rollbacks.get()
    held = list(saga.compensations.filter(step_call__in=unknown).order_by("-sequence"))
    assert {c.status for c in held} == {CompensationStatus.HELD} and rollback.finished_at is not None

    assert saga_retry(saga=saga, actor="user:operator") == 2

    assert {c.status for c in saga.compensations.all()} == {CompensationStatus.SUCCEEDED}
    assert ("release", "maybe") in LOG and ("release", "perhaps") in LOG
    reopened = _rollback_events("saga.rollback_reopened", rollback.pk)
    assert [(r["retried"], r["previous_status"]) for r in reopened] == [(held[0].pk, "held")], reopened
    assert AuditEvent.objects.get(event_type="saga.rollback_reopened").call_id == held[0].step_call_id
    finished = _rollback_events("saga.rollback_finished", rollback.pk)
    named = [[f["compensations"][str(c.sequence)] for c in held] for f in finished]
    assert named == [["held", "held"], ["succeeded", "succeeded"]], finished
    rollback.refresh_from_db()
    assert rollback.finished_at is not None
    assert Saga.objects.get(pk=saga.pk).status == SagaStatus.COMPENSATED
    assert_audit_intact()


def test_a_held_step_resolved_by_hand_under_a_finished_rollback_is_named_by_it(alice: User) -> None:
    """Found (this review's note, closed after it): a held compensation resolved by hand under its finished rollback
    left that rollback's one ``saga.rollback_finished`` naming the step ``held`` for ever. Expect: the resolution
    opens it again (``resolved``, the status before) and it finishes again at once, naming the step ``resolved``."""
    direct_call("reserve", {"item": "known"}, saga="r", user=alice)
    unknown = ToolCall.objects.create(
        tool_name="reserve",
        status=CallStatus.NEEDS_ATTENTION,
        arguments={"item": "maybe"},
        saga_id="r",
        tenant="acme",
        user=alice,
    )
    direct_call("explode", {"reason": "boom"}, saga="r", user=alice)
    saga = Saga.objects.get(key="r", tenant="acme")
    rollback = saga.rollbacks.get()
    held = saga.compensations.get(step_call=unknown)
    assert held.status == CompensationStatus.HELD and rollback.finished_at is not None

    compensation_resolve(compensation=held, actor="user:operator", note="released by hand at the desk")

    reopened = _rollback_events("saga.rollback_reopened", rollback.pk)
    assert [(r["resolved"], r["previous_status"]) for r in reopened] == [(held.pk, "held")], reopened
    finished = _rollback_events("saga.rollback_finished", rollback.pk)
    assert [f["compensations"][str(held.sequence)] for f in finished] == ["held", "resolved"], finished
    rollback.refresh_from_db()
    assert rollback.finished_at is not None and rollback.told_at is None
    assert ("release", "maybe") not in LOG  # resolved by hand: nothing run
    assert_audit_intact()
