"""A bare Celery task: one insert, no governance; the benchmarks' baseline for the Celery path."""

from celery import shared_task

from tests.testapp.models import PlainRecord


@shared_task(name="tests.testapp.tasks.bare_insert_task", ignore_result=True, acks_late=True)
def bare_insert_task(name: str, payload: dict) -> None:
    """Insert one row."""
    PlainRecord.objects.create(name=name, payload=payload)


@shared_task(name="tests.testapp.tasks.floor_call_task", ignore_result=True, acks_late=True)
def floor_call_task(call_id: str) -> None:
    """The raw-SQL floor of a governed call on a worker (``benchmarks.floor``): claim, the tool, the outcome."""
    import uuid

    from benchmarks.floor import raw_sql_worker_floor
    from tests.testapp.tools import record_effect

    raw_sql_worker_floor(uuid.UUID(call_id), record_effect, "record_effect", "acme")


@shared_task(name="tests.testapp.tasks.floor_approved_call_task", ignore_result=True, acks_late=True)
def floor_approved_call_task(call_id: str, run_id: str) -> None:
    """The raw-SQL floor of an approved call of a run on a worker: claim, the tool, the outcome, the run completed."""
    import uuid

    from benchmarks.floor import raw_sql_run_complete, raw_sql_worker_floor
    from tests.testapp.tools import risky_effect

    if raw_sql_worker_floor(uuid.UUID(call_id), risky_effect, "risky_effect", "acme"):
        raw_sql_run_complete(uuid.UUID(run_id), "done")
