"""Celery tasks of the sagas: thin wrappers around one service each."""

from celery import shared_task

from toolhub.sagas.recovery import sagas_sweep


@shared_task(name="toolhub.sagas.tasks.sagas_sweep_task", ignore_result=True)
def sagas_sweep_task() -> None:
    """Run due compensation retries, apply call outcomes a lost notification missed, resume stalled rollbacks."""
    sagas_sweep()
