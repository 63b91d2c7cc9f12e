"""Integration fixtures: real PostgreSQL (the pytest-django test database), Redis and Celery workers."""

import os
import secrets
import warnings
from collections.abc import Iterator
from io import StringIO
from typing import NamedTuple

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection

from tests.agents.conftest import make_developer
from tests.conftest import IN_CI, service_reachable
from tests.integration.workers import Worker, app_database_url, purge_queue, use_worker_database_url
from toolhub.models import Tenant


def _require_services() -> None:
    """Under CI a missing service is a failure with a clear reason, never a skip."""
    if connection.vendor != "postgresql":
        pytest.fail("integration tests need DATABASE_URL pointing at PostgreSQL (run them with `make test`)")
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis") or not service_reachable(broker, 6379):
        pytest.fail(f"integration tests need a reachable Redis in CELERY_BROKER_URL (got {broker!r}; CI={IN_CI})")


class AppRole(NamedTuple):
    """The application role workers connect with, and their database URL."""

    name: str
    url: str


@pytest.fixture(scope="session", autouse=True)
def app_database_role(django_db_setup: None, django_db_blocker: pytest.FixtureRequest) -> Iterator[AppRole]:
    """Workers connect as the application role, as in production; this process stays the owner.

    The role is made by ``manage.py toolhub_db_roles`` (what an operator runs after ``migrate``), named
    after this session's test database so that concurrent test runs never share one, and dropped at the end.
    """
    with django_db_blocker.unblock():
        _require_services()
        role = f"{connection.settings_dict['NAME']}_app"[:63]
        password = secrets.token_urlsafe(18)
        os.environ["TOOLHUB_TEST_APP_PASSWORD"] = password
        try:
            call_command(
                "toolhub_db_roles", "--role", role, "--password-env", "TOOLHUB_TEST_APP_PASSWORD", stdout=StringIO()
            )
        finally:
            del os.environ["TOOLHUB_TEST_APP_PASSWORD"]
    url = app_database_url(role, password)
    use_worker_database_url(url)
    yield AppRole(role, url)
    use_worker_database_url(None)
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        try:
            cursor.execute(f"DROP OWNED BY {connection.ops.quote_name(role)}")
            cursor.execute(f"DROP ROLE {connection.ops.quote_name(role)}")
        except Exception as exc:  # noqa: BLE001 - a leftover role must not fail the run
            warnings.warn(f"could not drop the test application role {role}: {exc}", stacklevel=1)


@pytest.fixture(scope="session")
def celery_worker(
    django_db_setup: None, django_db_blocker: pytest.FixtureRequest, app_database_role: AppRole
) -> Iterator[Worker]:
    """One worker process with two pool processes for the whole session."""
    with django_db_blocker.unblock():
        _require_services()
    purge_queue()
    worker = Worker("itest", concurrency=2).start()
    yield worker
    worker.stop()


@pytest.fixture(autouse=True)
def _session_worker_idle_before_flush(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test on the session's worker, wait for the worker to be idle before the database is flushed.

    The database fixture is set up first here so that it is torn down (flushed) after this waits.
    """
    if "celery_worker" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("_django_db_helper")
    yield
    worker: Worker = request.getfixturevalue("celery_worker")
    try:
        worker.wait_idle()
    except AssertionError as exc:  # the test's own assertions decide; leftovers are dropped, not waited on
        warnings.warn(f"{exc}; purging the queue", stacklevel=1)
        purge_queue()


@pytest.fixture
def developer(tenant: Tenant) -> User:
    """A member of acme in the developers group, who creates the agents alice runs."""
    return make_developer("dev", tenant)
