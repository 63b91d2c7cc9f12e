"""Integration fixtures: real PostgreSQL (the pytest-django test database), Redis and Celery workers."""

import os
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.db import connection

from tests.agents.conftest import make_developer
from tests.conftest import IN_CI, service_reachable
from tests.integration.workers import Worker, purge_queue
from toolhub.models import Tenant


def _require_services() -> None:
    """Under CI a missing service is a failure with a clear reason, never a skip."""
    if connection.vendor != "postgresql":
        pytest.fail("integration tests need DATABASE_URL pointing at PostgreSQL (run them with `make test`)")
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis") or not service_reachable(broker, 6379):
        pytest.fail(f"integration tests need a reachable Redis in CELERY_BROKER_URL (got {broker!r}; CI={IN_CI})")


@pytest.fixture(scope="session")
def celery_worker(django_db_setup: None, django_db_blocker: pytest.FixtureRequest) -> Iterator[Worker]:
    """One worker process with two pool processes for the whole session."""
    with django_db_blocker.unblock():
        _require_services()
    purge_queue()
    worker = Worker("itest", concurrency=2).start()
    yield worker
    worker.stop()


@pytest.fixture
def developer(tenant: Tenant) -> User:
    """A member of acme in the developers group, who creates the agents alice runs."""
    return make_developer("dev", tenant)
