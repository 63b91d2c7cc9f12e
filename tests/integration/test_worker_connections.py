"""Workers keep their database connection for DATABASE_CONN_MAX_AGE, like web processes, and replace a dead one.

Celery's Django fixup would close it before and after every task; settings.py (CELERY_DB_REUSE_MAX)
and toolhub/celery.py make workers follow Django's own rules instead. Each test starts its own worker
on its own queue, its connections named (``application_name``) so pg_stat_activity tells them apart.
"""

import os
import uuid
from collections.abc import Iterator

import pytest
from django.db import connection

from tests.integration.conftest import AppRole
from tests.integration.workers import Worker, wait_for
from tests.testapp.models import PlainRecord
from tests.testapp.tasks import bare_insert_task
from toolhub.celery import app as celery_app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def own_queue() -> Iterator[str]:
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = f"{previous}-connections"
    yield celery_app.conf.task_default_queue
    celery_app.control.purge()
    celery_app.conf.task_default_queue = previous


def _worker(app_database_role: AppRole, conn_max_age: str) -> tuple[Worker, str]:
    name = f"conn-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    worker = Worker(
        name,
        concurrency=1,
        DATABASE_URL=f"{app_database_role.url}?application_name={name}",
        DATABASE_CONN_MAX_AGE=conn_max_age,
    )
    return worker.start(), name


def _backends(application_name: str) -> list[tuple[int, object]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, backend_start FROM pg_stat_activity WHERE application_name = %s ORDER BY pid",
            [application_name],
        )
        return cursor.fetchall()


def _insert(name: str) -> None:
    bare_insert_task.delay(name, {})
    wait_for(lambda: PlainRecord.objects.filter(name=name).exists(), timeout=30, what=f"the task inserting {name}")


def test_a_worker_reuses_its_connection_across_tasks_and_replaces_a_terminated_one(
    own_queue: str, app_database_role: AppRole
) -> None:
    worker, name = _worker(app_database_role, conn_max_age="60")
    try:
        _insert("first")
        kept = wait_for(lambda: _backends(name), timeout=10, what="the worker's connection after its task")
        for index in range(3):
            _insert(f"again-{index}")
        assert _backends(name) == kept, "every task reused the one connection"

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [kept[0][0]])
        wait_for(lambda: _backends(name) != kept, timeout=10, what="the terminated backend to go")

        _insert("after-terminate")  # checked before use, found dead, replaced: the task succeeds
        replaced = _backends(name)
        assert len(replaced) == 1 and replaced[0][0] != kept[0][0]
    finally:
        worker.stop()


def test_without_conn_max_age_a_worker_closes_its_connection_after_each_task(
    own_queue: str, app_database_role: AppRole
) -> None:
    worker, name = _worker(app_database_role, conn_max_age="0")
    try:
        for index in range(2):
            _insert(f"fresh-{index}")
            wait_for(lambda: _backends(name) == [], timeout=10, what="the worker to close its connection")
    finally:
        worker.stop()
