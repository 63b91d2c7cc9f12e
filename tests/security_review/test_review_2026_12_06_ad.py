"""Review of 2026-12-06 (ad): review n's rewrite of the sagas sweep's stalled rollbacks and of ``runs_to_wake``.

Findings: none.

Checked and found holding:

- ``runs_to_wake`` (scalar subqueries, ``Coalesce(own rollback open, any saga rollback open)``) returns the same runs
  as the ``Exists`` form it replaced (kept here as the reference) over every combination of: agent compensating on
  error or not; no failed call, a failed call of the current turn, of an earlier turn, a failed compensation call;
  the failed call's own rollback none / open / finished / one open and one finished / only on a compensation call;
  another rollback of the saga none / open / finished; on SQLite and PostgreSQL. The own-rollback subquery orders
  ``finished_at IS NULL`` descending (TRUE first on both), so it is TRUE when any own rollback is open, FALSE when all
  finished and NULL only when there is none, where ``Coalesce`` falls to "any open rollback of the saga" (never
  NULL); the NOT of the exclude therefore never meets a NULL.
- ``_stalled_rollbacks`` leaves out exactly the sagas ``advance`` returns on at once (a compensation ``running``:
  in the pipeline or held for approval, or ``retry_scheduled``, due or not): a due retry is started by the sweep's
  first loop (``compensation_retry_due``), which advances the saga itself; ``saga_advance`` on it did nothing. A
  saga whose compensations need attention (failed, unknown, held) with nothing pending is read, and ``advance``
  closes its rollback (as before), so it is read once and not again: it does not eat later batches; the saga stays
  ``needs_attention``, which (with the compensations' attention statuses, not the rollbacks) is what the console's
  attention list and filters read (``toolhub.sagas.selectors``, ``admin``). The sweep is global (not per tenant) by
  design: each saga is advanced under its own lock, for its own tenant.

Measured, not changed (the open-calls plan review n left open), PostgreSQL, ``explained``:

- A partial index ``toolhub_toolcall (run_id, turn) WHERE status IN (awaiting_result, pending_approval, queued,
  running)`` is never used by ``runs_to_wake`` as written: ``status NOT IN (settled)`` does not imply the index's
  predicate, so review n's fixture keeps its Seq Scan on ``toolhub_toolcall`` (hash anti join) with the index made.
- Naming the live statuses removes the seq scan with or without that index (``toolcall_status_created`` serves it),
  but at review d's volume the planner then leaves ``agentrun_to_wake`` (live runs through the status index, sorted,
  hash anti join) with the index too (it reads ``toolcall_status_created``, not the new index). Full sweep: review
  d 0.9 ms now, 2.7 ms named, 1.8 ms named + index; review n 25.6 ms now, 15.2 ms named, 12.9 ms named + index. Not
  a clear gain: no migration added.
"""

import itertools
import uuid
from datetime import datetime, timedelta

import pytest
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from agents_app.models import AgentRun, RunStatus
from agents_app.selectors import runs_to_wake
from agents_app.services import agent_create
from toolhub.models import SETTLED_STATUSES, CallKind, CallStatus, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Rollback, RollbackTrigger, Saga, SagaStatus
from toolhub.sagas.recovery import _stalled_rollbacks, sagas_sweep
from toolhub.sagas.services import saga_advance

pytestmark = pytest.mark.django_db

FAILED = ("none", "this_turn", "earlier_turn", "compensation_call")
OWN = ("none", "open", "finished", "open_and_finished", "on_compensation_call")
SAGA = ("none", "open", "finished")


def _old_runs_to_wake(*, idle_since: datetime) -> list[uuid.UUID]:
    """``runs_to_wake`` as it stood before review n (d0505ac^), the reference the rewrite must match."""
    open_calls = ToolCall.objects.filter(run_id=OuterRef("id"), turn=OuterRef("turn"), kind=CallKind.CALL).exclude(
        status__in=list(SETTLED_STATUSES)
    )
    in_turn = {"failed_call__run_id": OuterRef("id"), "failed_call__turn": OuterRef("turn")}
    unfinished = Rollback.objects.filter(finished_at__isnull=True)
    failed = ToolCall.objects.filter(
        run_id=OuterRef("id"), turn=OuterRef("turn"), kind=CallKind.CALL, status=CallStatus.FAILED
    )
    rolling_back = (
        Q(agent__compensate_on_error=True)
        & Exists(failed)
        & (
            Exists(unfinished.filter(failed_call__kind=CallKind.CALL, **in_turn))
            | (
                ~Exists(Rollback.objects.filter(failed_call__kind=CallKind.CALL, **in_turn))
                & Exists(unfinished.filter(saga__run_id=OuterRef("id")))
            )
        )
    )
    leased = Q(step_lease_until__gt=timezone.now())
    return list(
        AgentRun.objects.filter(status__in=[RunStatus.RUNNING, RunStatus.WAITING], updated_at__lt=idle_since)
        .exclude(leased)
        .exclude(Exists(open_calls))
        .exclude(rolling_back)
        .order_by("updated_at", "id")
        .values_list("id", flat=True)
    )


def _run_case(agent_id: int, failed: str, own: str, saga_rollback: str, index: int) -> AgentRun:
    run = AgentRun.objects.create(agent_id=agent_id, tenant="acme", input="x", status=RunStatus.WAITING, turn=2)
    saga = Saga.objects.create(key=str(run.id), run_id=run.id, tenant="acme", status=SagaStatus.COMPENSATING)

    def call(status: str, *, turn: int = 2, kind: str = CallKind.CALL) -> ToolCall:
        return ToolCall.objects.create(tool_name="t", status=status, tenant="acme", run_id=run.id, turn=turn, kind=kind)

    failed_call = {
        "none": lambda: call(CallStatus.SUCCEEDED),
        "this_turn": lambda: call(CallStatus.FAILED),
        "earlier_turn": lambda: call(CallStatus.FAILED, turn=1),
        "compensation_call": lambda: call(CallStatus.FAILED, kind=CallKind.COMPENSATION),
    }[failed]()

    def rollback(named: ToolCall | None, *, finished: bool) -> None:
        Rollback.objects.create(
            saga=saga,
            trigger=RollbackTrigger.STEP_FAILED if named else RollbackTrigger.ON_DEMAND,
            requested_by="saga",
            failed_call=named,
            finished_at=timezone.now() if finished else None,
        )

    # the own rollback names the turn's failed call when there is one, else another call of the turn
    own_call = failed_call if failed == "this_turn" else call(CallStatus.SUCCEEDED)
    if own in ("open", "open_and_finished"):
        rollback(own_call, finished=False)
    if own == "finished":
        rollback(own_call, finished=True)
    if own == "open_and_finished":
        rollback(call(CallStatus.FAILED), finished=True)
    if own == "on_compensation_call":
        rollback(call(CallStatus.FAILED, kind=CallKind.COMPENSATION), finished=False)
    if saga_rollback != "none":
        rollback(None, finished=saga_rollback == "finished")
    AgentRun.objects.filter(pk=run.pk).update(updated_at=timezone.now() - timedelta(hours=1, seconds=index))
    return run


def test_runs_to_wake_matches_the_exists_form_it_replaced_over_every_case() -> None:
    """Found: nothing (a check of review n's rewrite). Expect: the scalar-subquery ``runs_to_wake`` returns the same
    runs, in the same order, as the ``Exists`` form before it, over every combination of failed call, own rollback,
    other rollback of the saga and ``compensate_on_error`` (the Coalesce's NULL when there is no own rollback)."""
    agents = {
        flag: agent_create(name=f"a-{flag}", script=[{"content": "hi"}], compensate_on_error=flag).pk
        for flag in (True, False)
    }
    cases = {}
    for index, (flag, failed, own, other) in enumerate(itertools.product((True, False), FAILED, OWN, SAGA)):
        cases[_run_case(agents[flag], failed, own, other, index).pk] = (flag, failed, own, other)

    idle_since = timezone.now()
    old = _old_runs_to_wake(idle_since=idle_since)
    new = runs_to_wake(idle_since=idle_since, limit=len(cases))

    assert new == old, sorted(cases[pk] for pk in set(old) ^ set(new))
    # both branches are exercised: some runs are left waiting on a rollback, the rest are woken
    assert 0 < len(new) < len(cases)
    # the rows the Coalesce decides: own rollback finished, though the saga has another open, wakes the run
    waiting = {cases[pk] for pk in cases} - {cases[pk] for pk in new}
    assert (True, "this_turn", "finished", "open") not in waiting
    assert (True, "this_turn", "none", "open") in waiting
    assert (True, "this_turn", "on_compensation_call", "open") in waiting
    assert (True, "this_turn", "open_and_finished", "none") in waiting


def _saga_with(key: str, status: CompensationStatus, *, due: bool = False) -> Saga:
    saga = Saga.objects.create(key=key, tenant=key, status=SagaStatus.COMPENSATING)
    rollback = Rollback.objects.create(saga=saga, trigger=RollbackTrigger.ON_DEMAND, requested_by="alice")
    step = ToolCall.objects.create(tool_name="book", status=CallStatus.SUCCEEDED, tenant=key, saga_id=key)
    now = timezone.now()
    Compensation.objects.create(
        saga=saga,
        sequence=1,
        rollback=rollback,
        step_call=step,
        step_tool="book",
        tool_name="release",
        status=status,
        next_attempt_at=(now - timedelta(minutes=1) if due else now + timedelta(hours=1))
        if status == CompensationStatus.RETRY_SCHEDULED
        else None,
    )
    return saga


def test_stalled_rollbacks_are_the_sagas_advance_would_move() -> None:
    """Found: nothing (a check of review n's filter). Expect: a saga is read exactly when ``advance`` would not
    return at once (no compensation running or retry scheduled, due or not); a saga whose compensation needs
    attention is read once, its rollback closed, and it is not read again while it stays ``needs_attention``."""
    attention = {s: _saga_with(f"attn-{s}", s) for s in (CompensationStatus.FAILED, CompensationStatus.UNKNOWN)}
    held = _saga_with("held", CompensationStatus.HELD)
    done = _saga_with("done", CompensationStatus.SUCCEEDED)
    running = _saga_with("running", CompensationStatus.RUNNING)
    later = _saga_with("later", CompensationStatus.RETRY_SCHEDULED)
    due = _saga_with("due", CompensationStatus.RETRY_SCHEDULED, due=True)

    readable = set(_stalled_rollbacks())
    assert readable == {held.pk, done.pk, *(s.pk for s in attention.values())}
    assert not {running.pk, later.pk, due.pk} & readable

    for saga in (running, later, due):
        before = Compensation.objects.get(saga=saga).status
        # advance on these returns at once: reading them would only spend the batch
        saga_advance(saga_id=saga.pk)
        assert Compensation.objects.get(saga=saga).status == before
        assert saga.rollbacks.get().finished_at is None

    sagas_sweep()
    assert set(_stalled_rollbacks()) == set()
    for saga in (held, *attention.values()):
        saga.refresh_from_db()
        assert saga.status == SagaStatus.NEEDS_ATTENTION
        assert saga.rollbacks.get().finished_at is not None
