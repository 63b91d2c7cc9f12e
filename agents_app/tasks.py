"""Celery tasks of the agent loop."""

import uuid
from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from agents_app.loop import STEP_LEASE_MARGIN_SECONDS, run_advance
from agents_app.models import MAX_MODEL_DEADLINE_SECONDS
from agents_app.selectors import runs_to_wake
from agents_app.subagents import runs_waiting_on_parked_calls, subagent_calls_settle_ended
from toolhub.tasks import OwnTimeLimits

#: A step waits at most its provider's deadline for the model; the rest is bookkeeping in the database.
ADVANCE_SOFT_TIME_LIMIT = MAX_MODEL_DEADLINE_SECONDS + STEP_LEASE_MARGIN_SECONDS


@shared_task(
    name="agents_app.tasks.advance_run_task",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=ADVANCE_SOFT_TIME_LIMIT,
    time_limit=ADVANCE_SOFT_TIME_LIMIT + 30,
    Request=OwnTimeLimits,  # a message's own, tighter limits would cut a step within its model's deadline
)
def advance_run_task(run_id: str) -> None:
    """Take a run one model turn further if it is ready; extra deliveries do nothing."""
    run_advance(run_id=uuid.UUID(run_id))


@shared_task(name="agents_app.tasks.sweep_runs_task", ignore_result=True)
def sweep_runs_task(idle_seconds: float = 60.0) -> None:
    """Wake runs that nobody advanced lately and may go on (see ``runs_to_wake``).

    First, settle the subagent calls whose child ended while nothing heard it (``subagent_calls_settle_ended``), and
    move to ``waiting`` the runs whose parked call's suspension nobody heard (``runs_waiting_on_parked_calls``).
    """
    subagent_calls_settle_ended()
    runs_waiting_on_parked_calls()
    for run_id in runs_to_wake(idle_since=timezone.now() - timedelta(seconds=idle_seconds)):
        advance_run_task.delay(str(run_id))
