"""A bare Celery task: one insert, no governance; the benchmarks' baseline for the Celery path."""

from celery import shared_task

from tests.testapp.models import PlainRecord


@shared_task(name="tests.testapp.tasks.bare_insert_task", ignore_result=True, acks_late=True)
def bare_insert_task(name: str, payload: dict) -> None:
    """Insert one row."""
    PlainRecord.objects.create(name=name, payload=payload)
