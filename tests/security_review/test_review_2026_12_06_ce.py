"""Review ce (2026-12-06): review of reviews bv (the sagas sweep holds late failures) and br (``GovernanceHold``).

Each finding's test failed on the reviewed code (main at e274cd0) and passes now.

Findings:

1. A step asked for before a *held* rollback (the sweep's, for a failure found after
   ``SAGA_UNHEARD_FAILURE_HOURS``) that settled after it was planned ``pending`` under that rollback
   (``plan_compensation``'s ``late_for``) and compensated at once, by nobody: the held rollback undid a step on its
   own, which is what holding it was to prevent. Fixed: the rollback keeps that it is held
   (``Rollback.held_for_operator``, sagas 0008) and a late step filed under it is held as its other steps are.
2. Review bv's "a step asked for after the failure settled is the caller carrying on" counted such a step only once
   it had succeeded: one still waiting for its approval or running when the sweep came let the failure be rolled
   back, and the step was compensated when it succeeded (filed under that rollback), which a heard failure never
   does. Fixed in ``recovery._newest_step_left``: a step done or on its way (an unsettled status) carries on.
3. One ``GET /api/v1/calls/?status=...`` made two caller views, each with its own ``GovernanceHold`` (the status
   filter's, then the serializers'): a governance change between them listed a row under ``?status=invalid`` that
   the same response showed ``denied``. Fixed: ``caller_view_for(request)``, one view per request, used by both.

Checked and holds:
- Four eyes on held steps: resolving one is refused to its step's user (``compensation_settle_refusal``); retrying
  one adds the operator to ``retried_by``, and the compensation's approval request bars the step's user (its
  requester) and every retrier (``compensation_askers``); the sweep's held rollback names nobody (``asked_by``).
- Operators see a held rollback: ``held`` is an attention status, so the saga ``needs_attention`` (the sagas and
  compensations admin lists' "needs attention" filter, ``sagas_needing_attention``), and
  ``saga.rollback_requested`` says ``held_for_operator`` with the held steps. The admin dashboard counts calls and
  approvals only, no saga figure: sagas needing attention are found on the sagas list (left as it is).
- A failure held in the second window is not rolled back automatically later: its rollback names it (the next
  tick's ``rolled_back_by``), so neither window reads it again.
- Window boundaries: both windows are read with one ``now``: ``[now - W, now]`` automatic, ``[now - 2W, now - W)``
  held; a failure exactly at ``now - W`` is rolled back automatically once, never held too (pinned by a test).
- Cost on PostgreSQL: each window is one statement through ``toolcall_failed_direct_step`` (reviews bd, bn, d's
  plan tests read both), a bounded range of the partial index, with scalar subqueries per failure. The held window
  reads every handled failure between one and two windows old each tick, as the first reads the last window's:
  twice what bn measured per tick, still bounded (bn's 20,000 old failures start just past ``now - 2W``).
- ``GovernanceHold``: made per ``CallerView`` (one per serializer context, filter or MCP status answer), never
  module-level or cached; only ``CallerView._authorizing`` passes one; the pipeline's authorization
  (``governance_scope`` without ``hold``) reads the stamp fresh or checks it in its write, so execution never
  decides under a response's hold; what a view shows as callable is re-authorized when a call is made, a refusal
  answered as the pipeline answers it (the unknown-tool message).

Left: a failure older than twice ``SAGA_UNHEARD_FAILURE_HOURS`` (the sweep stopped longer than that) is still never
read; reading it would need a mark of the last completed sweep rather than a fixed window (see the report).
"""

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from tests.sagas.sample_tools import LOG
from tests.security_review.direct_sagas import unheard_call
from toolhub import pipeline
from toolhub.models import CallStatus, Grant, GrantEffect, ToolCall
from toolhub.sagas.models import CompensationStatus, Saga, SagaStatus
from toolhub.sagas.recovery import sagas_sweep
from toolhub.sagas.services import saga_call_settled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("saga_tools")]

EIGHT_DAYS = dt.timedelta(days=8)


def _age(call: ToolCall, by: dt.timedelta, **columns: object) -> None:
    """Move ``call`` back by ``by`` (asked for and finished), setting ``columns`` too."""
    ToolCall.objects.filter(pk=call.pk).update(
        created_at=call.created_at - by, finished_at=(call.finished_at or call.created_at) - by, **columns
    )


def test_a_step_settling_after_a_held_rollback_is_held_too(alice: User) -> None:
    """Found: a step asked for before the sweep held a late failure's rollback, settled after it, was filed under that
    rollback ``pending`` and compensated at once, nobody deciding: the held rollback undid a step on its own.
    Expect: it is held like the rollback's other steps; nothing is compensated until an operator decides."""
    booked = unheard_call("book", {"item": "a"}, saga="late", user=alice)
    failed = unheard_call("explode", {"reason": "boom"}, saga="late", user=alice)
    slow = unheard_call("book", {"item": "b"}, saga="late", user=alice)
    _age(booked, EIGHT_DAYS)
    _age(failed, EIGHT_DAYS - dt.timedelta(seconds=1))
    # Asked for before the failure, still running when the sweep held the rollback (a worker that took days).
    _age(slow, EIGHT_DAYS + dt.timedelta(seconds=1), status=CallStatus.RUNNING)

    assert sagas_sweep()["held"] == 1
    ToolCall.objects.filter(pk=slow.pk).update(status=CallStatus.SUCCEEDED, finished_at=timezone.now())
    saga_call_settled(call_id=slow.id)

    saga = Saga.objects.get(key="late")
    late = saga.compensations.get(step_call=slow)
    assert late.status == CompensationStatus.HELD, late.status
    rollback = saga.rollbacks.get()
    assert late.rollback_id == rollback.pk and rollback.held_for_operator
    assert saga.status == SagaStatus.NEEDS_ATTENTION
    assert [entry for entry in LOG if entry[0] == "cancel"] == []


def test_a_failure_exactly_one_window_old_is_rolled_back_once_not_held(alice: User) -> None:
    """Expect (holds, pinned): a failure asked for exactly ``SAGA_UNHEARD_FAILURE_HOURS`` before the sweep's ``now``
    is in the automatic window only: rolled back once, its step compensated, not held by the second window too."""
    booked = unheard_call("book", {"item": "a"}, saga="edge", user=alice)
    failed = unheard_call("explode", {"reason": "boom"}, saga="edge", user=alice)
    now = timezone.now()
    window = dt.timedelta(days=7)  # SAGA_UNHEARD_FAILURE_HOURS's default
    ToolCall.objects.filter(pk=booked.pk).update(created_at=now - window, finished_at=now - window)
    ToolCall.objects.filter(pk=failed.pk).update(created_at=now - window, finished_at=now - window)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timezone, "now", lambda: now)
        counts = sagas_sweep()

    assert counts["rolled_back"] == 1 and counts["held"] == 0
    saga = Saga.objects.get(key="edge")
    assert saga.rollbacks.get().failed_call_id == failed.id
    assert saga.compensations.get().status == CompensationStatus.SUCCEEDED
    assert saga.status == SagaStatus.COMPENSATED


def test_a_step_asked_for_after_the_failure_still_running_carries_on(alice: User) -> None:
    """Found: a step asked for after an unheard failure settled (the caller carrying on) counted only once it had
    succeeded: still running (or waiting for its approval) when the sweep came, the failure was rolled back, and the
    step was then compensated when it succeeded, filed under that rollback. Heard, the same failure is rolled back
    before the step is asked for, which is never compensated. Expect: the failure is left alone; the step, once
    succeeded, is the saga's next step (recorded), nothing compensated."""
    unheard_call("book", {"item": "a"}, saga="on-going", user=alice)
    unheard_call("explode", {"reason": "boom"}, saga="on-going", user=alice)
    going = unheard_call("book", {"item": "b"}, saga="on-going", user=alice)
    ToolCall.objects.filter(pk=going.pk).update(status=CallStatus.RUNNING, finished_at=None)

    assert sagas_sweep()["rolled_back"] == 0
    ToolCall.objects.filter(pk=going.pk).update(status=CallStatus.SUCCEEDED, finished_at=timezone.now())
    saga_call_settled(call_id=going.id)

    saga = Saga.objects.get(key="on-going")
    assert not saga.rollbacks.exists() and saga.status == SagaStatus.OPEN
    assert saga.compensations.get(step_call=going).status == CompensationStatus.RECORDED
    assert [entry for entry in LOG if entry[0] == "cancel"] == []


@pytest.mark.django_db
def test_one_response_filters_and_shows_a_call_under_one_governance(
    alice: User, alice_client: APIClient, settings: Any
) -> None:
    """Found: ``GET /api/v1/calls/?status=invalid`` made two caller views (the status filter's, the serializers'),
    each reading the governance: a grant given between them listed a call as ``invalid`` and showed it ``denied``.
    Expect: one view per request: the rows a filter selects read as it selected them."""
    Grant.objects.create(tool_name="book", user=alice, effect=GrantEffect.DENY)
    assert alice_client.post("/api/v1/calls/", {"tool": "book", "arguments": {"item": "a"}}, format="json")
    assert ToolCall.objects.get().status == CallStatus.DENIED
    Grant.objects.filter(tool_name="book").delete()  # granted again, as it would be mid-response
    real, reads = pipeline.visible_tool_names, []

    def changing(principal: Any) -> list[str]:
        reads.append(principal)
        return [] if len(reads) == 1 else real(principal)  # the first read is from before the grant

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "visible_tool_names", changing)
        rows = alice_client.get("/api/v1/calls/?status=invalid").json()["results"]

    assert [row["status"] for row in rows] == ["invalid"], rows
