"""Review bv (2026-12-06): review of the saga recovery rewrite (bd, bn: the sweep starts from failed direct steps).

Each test failed on the reviewed code (main at 864332f) and passes now.

Findings:

1. An unheard failure that aged past ``SAGA_UNHEARD_FAILURE_HOURS`` unhandled (the sweep stopped for a week, or the
   failure predates the sweep's repair) was silently never rolled back: no rollback, the saga ``open``, nothing in
   the trail or on the operators' pages. Fixed: the sweep also reads the window before (``SAGA_UNHEARD_FAILURE_HOURS``
   to twice that, the same partial index) and rolls such a saga back *held*: a rollback names the failure, its
   completed steps are held for an operator (``compensation.held``), the saga needs attention, and
   ``saga.rollback_requested`` says ``automatic`` and why (``held_for_operator``). Operators compensate (retry) or
   resolve each held step as for any held step, with their four-eyes rules.
2. The sweep took "the caller carried on" from a step that *finished* after the failure was asked for: a slower
   step asked for *before* the failure (the caller never saw the failure) that finished after it left the unheard
   failure alone for ever, its step never compensated, where a heard failure rolls that step back. Fixed in
   ``recovery._newest_step_left``: a step carries on only when it was asked for after the failure settled.

Checked and holds:
- Saga ids across kinds and tenants: a direct call (REST, MCP, ``direct``) naming a run's id in its tenant is refused,
  in any UUID spelling (``_names_a_run`` parses it), even before the run's first call (``saga_key_reserved``); sagas,
  steps and rollbacks are keyed by (key, tenant), the sweep's subqueries match the failure's tenant, so another
  tenant's saga of the same key (a run's id included) is never read or rolled back; run ids are server UUIDs.
- Double rollback: sweep and operator at once, or two sweepers, lock the saga row (``saga_rollback``); the second
  finds the steps already pending (returns the unfinished rollback) or the failure's rollback
  (``saga_rollback_once_per_failure``); the next tick skips the failure (no step left: ``taken_by``).
- No compensation for a step without a side effect: only ``succeeded`` steps of compensable tools are recorded
  (``record_missing_steps``); a failed or invalid step is never compensated; an unknown one is held.
- Runs: the sweep reads direct steps only (``run_id IS NULL``); a run's saga is rolled back by its own loop or
  the runs sweep; ``POST /sagas/{id}/rollback/`` refuses a run's saga (409).
- Four eyes: an automatic rollback names nobody (``asked_by`` empty): a compensation's approval is still barred to
  its step's user (the requester) and to every operator who retried it or chose to compensate a held step.
- Cost: one statement through ``toolcall_failed_direct_step`` per window (two ranges now), actions bounded by
  ``limit`` (one saga_rollback per saga per tick).
"""

import datetime as dt
import json

import pytest
from django.contrib.auth.models import User

from tests.sagas.sample_tools import LOG
from tests.security_review.direct_sagas import direct_call, unheard_call
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.sagas.models import CompensationStatus, Saga, SagaStatus
from toolhub.sagas.recovery import compensation_retry, sagas_sweep
from toolhub.sagas.selectors import sagas_needing_attention

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("saga_tools")]


def _shift(call: ToolCall, **delta: float) -> None:
    """Move a call's times by ``delta`` (``created=``, ``finished=``: seconds, negative for the past)."""
    ToolCall.objects.filter(pk=call.pk).update(
        created_at=call.created_at + dt.timedelta(seconds=delta.get("created", 0)),
        finished_at=(call.finished_at or call.created_at) + dt.timedelta(seconds=delta.get("finished", 0)),
    )


def test_an_unheard_failure_older_than_the_window_is_held_for_an_operator(alice: User) -> None:
    """Found: a failed direct step whose notification was lost and that aged past ``SAGA_UNHEARD_FAILURE_HOURS``
    unhandled was never rolled back and never shown: the saga stayed ``open``, no audit event, no operator page.
    Expect: the sweep rolls it back held: the saga needs attention, its step held (not compensated on its own), the
    rollback names the failure, ``saga.rollback_requested`` says automatic and why; an operator's retry undoes it."""
    booked = unheard_call("book", {"item": "a"}, saga="week-old", user=alice)
    failed = unheard_call("explode", {"reason": "boom"}, saga="week-old", user=alice)
    eight_days = -8 * 24 * 3600.0
    _shift(booked, created=eight_days, finished=eight_days)
    _shift(failed, created=eight_days + 1, finished=eight_days + 1)

    counts = sagas_sweep()

    saga = Saga.objects.get(key="week-old")
    assert counts["rolled_back"] == 0 and counts["held"] == 1
    assert saga.status == SagaStatus.NEEDS_ATTENTION and saga in sagas_needing_attention()
    held = saga.compensations.get()
    assert held.status == CompensationStatus.HELD and held.step_call_id == booked.id
    assert saga.rollbacks.get().failed_call_id == failed.id and LOG == [("book", "a")]
    event = AuditEvent.objects.get(event_type="saga.rollback_requested")
    data = json.loads(event.data)
    assert data["automatic"] is True and data["held_for_operator"] and data["compensate"] == []
    assert data["held"] == [[held.sequence, "book"]]
    assert sagas_sweep()["held"] == 0  # once

    compensation_retry(compensation=held, actor="user:operator")
    held.refresh_from_db()
    assert held.status == CompensationStatus.SUCCEEDED and LOG[-1] == ("cancel", "B-a")


def test_an_unheard_failure_beside_a_slower_earlier_step_is_rolled_back(alice: User) -> None:
    """Found: a step asked for before the failure, that finished after it (the caller never saw the failure), read
    as "the caller carried on": the unheard failure was never rolled back and the step never compensated (heard,
    the same failure rolls that step back). Expect: the sweep rolls the saga back, the slow step compensated."""
    failed = unheard_call("explode", {"reason": "boom"}, saga="slow", user=alice)
    slow = direct_call("book", {"item": "a"}, saga="slow", user=alice)
    assert slow.status == CallStatus.SUCCEEDED
    _shift(slow, created=-60.0)  # asked for a minute before the failure, finished after it

    assert sagas_sweep()["rolled_back"] == 1

    saga = Saga.objects.get(key="slow")
    assert saga.status == SagaStatus.COMPENSATED and saga.rollbacks.get().failed_call_id == failed.id
    assert saga.compensations.get().status == CompensationStatus.SUCCEEDED


def test_a_step_asked_for_after_the_failure_still_carries_on(alice: User) -> None:
    """Expect (holds, pinned): a step asked for after the unheard failure settled leaves the failure alone."""
    unheard_call("explode", {"reason": "boom"}, saga="on", user=alice)
    direct_call("book", {"item": "a"}, saga="on", user=alice)

    assert sagas_sweep()["rolled_back"] == 0
    saga = Saga.objects.get(key="on")
    assert saga.status == SagaStatus.OPEN and not saga.rollbacks.exists()
