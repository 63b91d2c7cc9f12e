"""Celery tasks of the agent loop."""

import uuid
from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from agents_app.loop import run_advance
from agents_app.models import AgentRun, RunStatus


@shared_task(name="agents_app.tasks.advance_run_task", acks_late=True, ignore_result=True)
def advance_run_task(run_id: str) -> None:
    """Take a run one model turn further if it is ready; extra deliveries do nothing."""
    run_advance(run_id=uuid.UUID(run_id))


@shared_task(name="agents_app.tasks.sweep_runs_task", ignore_result=True)
def sweep_runs_task(idle_seconds: float = 60.0) -> None:
    """Wake running runs that nobody advanced lately (a lost message, a worker that died mid-step)."""
    cutoff = timezone.now() - timedelta(seconds=idle_seconds)
    for run_id in AgentRun.objects.filter(status=RunStatus.RUNNING, updated_at__lt=cutoff).values_list("id", flat=True)[
        :500
    ]:
        advance_run_task.delay(str(run_id))
