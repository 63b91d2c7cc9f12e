"""Review dq (2026-12-05): the runs sweep (``agents_app.selectors.runs_to_wake``, ``sweep_runs_task``).

Findings:
- The sweep took up to 500 idle ``running`` runs with an unordered LIMIT, counting runs that cannot go on (a model
  step within its lease; a call of the turn still queued, running, held or awaiting its result: ``run_advance``
  returns IDLE for them and writes nothing). Under a worker backlog those filled the batch every minute, and a
  run whose wake-up was really lost (its turn's last call settled, the advance message lost) could stay outside
  the 500 forever; the LIMIT followed ``AgentRun.Meta.ordering`` (newest created first), so the oldest were the
  ones left out. Fixed in ``runs_to_wake``: SQL selects only runs the loop would step (no step lease in force,
  no open call of the current turn, no rollback of its turn's failed call under way), oldest-waiting
  (``updated_at``) first, bounded.
- A run waiting for the rollback of its turn's failed call (``saga_rollback_on_failure``, agent compensating on
  error) was woken on every sweep for nothing, and with oldest-first ordering it would have stayed at the front
  of the batch: excluded too (the compensations' settles wake it; a lost one is swept once the rollback
  finished). An unrelated (on-demand) rollback under way does not hold the run, so it is still woken.

Checked and holds:
- A queued call whose message was lost is re-dispatched by ``toolhub.sweeper.calls_redispatch_stale`` (advancing
  its run does nothing for it: ``_begin_step`` returns IDLE while a call is open), and its settle wakes the run;
  a lost step (lease lapsed) is still swept and counted (``lost_steps``); a fresh run whose first advance was lost
  (turn 0, no calls) is still swept; extra wake-ups stay harmless (row lock, lease, step token).
"""

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from agents_app.loop import Advance, run_advance
from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.selectors import runs_to_wake
from agents_app.tasks import advance_run_task, sweep_runs_task
from tests.security_review.direct_sagas import compensation_under_way
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.sagas.models import Rollback, RollbackTrigger, Saga

pytestmark = pytest.mark.django_db

#: A conversation whose last turn asked for a tool call: its results are due before the model is asked again.
ASKED = [
    {"role": "user", "content": "x"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {}}]},
]
BLOCKED = 260  # of each kind below: 520 runs that cannot go on, more than one sweep's 500


def _runs(agent: Agent, user: User, count: int, **fields: Any) -> list[AgentRun]:
    return AgentRun.objects.bulk_create(
        AgentRun(agent=agent, user=user, tenant="acme", input="x", turn=1, **fields) for _ in range(count)
    )


def _calls(runs: list[AgentRun], status: CallStatus) -> None:
    ToolCall.objects.bulk_create(
        ToolCall(tool_name="record_effect", status=status, run_id=run.pk, turn=1, kind=CallKind.CALL, tenant="acme")
        for run in runs
    )


def _idle(runs: list[AgentRun], since: Any) -> None:
    AgentRun.objects.filter(pk__in=[run.pk for run in runs]).update(updated_at=since)


def _blocked_runs(agent: Agent, user: User) -> list[AgentRun]:
    """Running runs that cannot go on: half with a step in its lease, half waiting on a running call."""
    leased = _runs(agent, user, BLOCKED, step_lease_until=timezone.now() + timedelta(hours=1), step_token=uuid.uuid4())
    calling = _runs(agent, user, BLOCKED)
    _calls(calling, CallStatus.RUNNING)
    return leased + calling


@pytest.mark.parametrize("lost_first", [True, False])
def test_a_lost_wake_up_is_swept_past_more_than_a_batch_of_runs_that_cannot_go_on(
    alice: User, monkeypatch: pytest.MonkeyPatch, lost_first: bool
) -> None:
    """Found: 501+ idle running runs that cannot go on filled the sweep's unordered 500 and starved a lost wake-up.

    Expect: the next sweep sends an advance for the run whose last call settled (and only for runs that can go on).
    """
    agent = Agent.objects.create(name="backlog", script=[{"content": "ok"}])
    lost: list[AgentRun] = []
    if lost_first:
        lost = _runs(agent, alice, 1, status=RunStatus.WAITING)
    blocked = _blocked_runs(agent, alice)
    if not lost_first:
        lost = _runs(agent, alice, 1, status=RunStatus.WAITING)
    _calls(lost, CallStatus.SUCCEEDED)  # its call settled; the message that should have advanced it was lost
    # the blocked ones waited longer than the lost one (first case) or less long (second case)
    _idle(blocked, timezone.now() - timedelta(minutes=10 if lost_first else 2))
    _idle(lost, timezone.now() - timedelta(minutes=5))
    sent: list[str] = []
    monkeypatch.setattr(advance_run_task, "delay", sent.append)

    sweep_runs_task(idle_seconds=60)

    assert sent == [str(lost[0].pk)]


def test_the_sweep_wakes_the_longest_waiting_runs_first(alice: User) -> None:
    """Found: the batch was an unordered LIMIT, so which runs past it waited another minute was the database's pick.

    The model's default ordering (newest created first) applied, so the oldest stalled runs came last.
    Expect: runs that can go on come oldest-waiting first, so every one is reached within a bounded number of sweeps.
    """
    agent = Agent.objects.create(name="order", script=[{"content": "ok"}])
    older = _runs(agent, alice, 2)  # created first: the model's newest-first ordering put them last
    newer = _runs(agent, alice, 3)
    AgentRun.objects.filter(pk__in=[run.pk for run in newer]).update(created_at=timezone.now() + timedelta(seconds=1))
    _idle(newer, timezone.now() - timedelta(minutes=2))
    for minutes, run in enumerate(older, start=5):
        _idle([run], timezone.now() - timedelta(minutes=minutes))

    assert runs_to_wake(idle_since=timezone.now(), limit=2) == [older[1].pk, older[0].pk]


def test_only_runs_the_loop_would_step_are_woken(alice: User) -> None:
    """Found: runs whose advance does nothing (a step in its lease, an open call, a rollback under way) were woken.

    Expect: they are left to what will wake them; a lapsed lease (a lost step), a fresh run whose first advance
    was lost, and a turn whose calls all settled are woken.
    """
    agent = Agent.objects.create(name="only", script=[{"content": "ok"}])
    now = timezone.now()
    (leased,) = _runs(agent, alice, 1, step_lease_until=now + timedelta(hours=1), step_token=uuid.uuid4())
    (lapsed,) = _runs(agent, alice, 1, step_lease_until=now - timedelta(seconds=1), step_token=uuid.uuid4())
    (fresh,) = AgentRun.objects.bulk_create([AgentRun(agent=agent, user=alice, tenant="acme", input="x")])
    open_runs = {}
    for status in (CallStatus.QUEUED, CallStatus.RUNNING, CallStatus.PENDING_APPROVAL, CallStatus.AWAITING_RESULT):
        (open_runs[status],) = _runs(agent, alice, 1)
        _calls([open_runs[status]], status)
    (settled,) = _runs(agent, alice, 1, status=RunStatus.WAITING)
    _calls([settled], CallStatus.FAILED)
    compensating = Agent.objects.create(name="compensating", script=[{"content": "ok"}], compensate_on_error=True)
    rollback_states = {}
    for name, finished_at, by_failure in (
        ("rolling_back", None, True),
        ("rolled_back", now, True),
        ("asked", None, False),
    ):
        (rollback_states[name],) = _runs(compensating, alice, 1, status=RunStatus.WAITING, messages=ASKED)
        _calls([rollback_states[name]], CallStatus.FAILED)
        saga = Saga.objects.create(key=str(rollback_states[name].pk), run_id=rollback_states[name].pk, tenant="acme")
        rollback = Rollback.objects.create(
            saga=saga,
            trigger=RollbackTrigger.STEP_FAILED if by_failure else RollbackTrigger.ON_DEMAND,
            failed_call=ToolCall.objects.get(run_id=rollback_states[name].pk) if by_failure else None,
            requested_by="agent:compensating",
            finished_at=finished_at,
        )
        if finished_at is None:
            compensation_under_way(saga, rollback)

    woken = set(runs_to_wake(idle_since=timezone.now() + timedelta(seconds=1)))

    # an on-demand rollback under way does not hold the run: only its failed call's rollback does (loop._begin_step)
    # (review dx: nor does one asked on demand, while the failed call has no rollback of its own: ``saga_rollback``
    # hands the one under way back, so the loop waits for it too)
    assert woken == {lapsed.pk, fresh.pk, settled.pk, rollback_states["rolled_back"].pk}
    # and the loop agrees: advancing any run left out does nothing
    for run in [leased, *open_runs.values(), rollback_states["rolling_back"], rollback_states["asked"]]:
        assert run_advance(run_id=run.pk) is Advance.IDLE
