"""Fixtures shared by every test: users with their roles, API clients, the Celery mode.

Unit and API tests run Celery eagerly (in-process). Tests marked ``integration`` talk to real
PostgreSQL, Redis and Celery worker processes; under CI=true a missing service fails them.
"""

import os
import socket
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

import pytest
from django.contrib.auth.models import Group, Permission, User
from rest_framework.test import APIClient

from tests.helpers import RequestCall, principal_for
from toolhub.celery import app as celery_app
from toolhub.models import Tenant, TenantMembership, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

IN_CI = os.environ.get("CI", "").lower() == "true"
CHROMIUM = "/usr/bin/chromium"


def service_reachable(url: str, default_port: int) -> bool:
    """Whether a TCP service named by a URL answers on its port."""
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or default_port), timeout=2):
            return True
    except OSError:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Outside CI, integration and browser tests need what a developer may not have: say so instead of failing.

    Under CI=true nothing is skipped: a missing service or browser fails its tests.
    """
    if IN_CI:
        return
    if not os.path.exists(CHROMIUM):
        no_browser = pytest.mark.skip(reason=f"browser tests need {CHROMIUM} (Debian's chromium package)")
        for item in items:
            if "browser" in item.keywords:
                item.add_marker(no_browser)
    database = os.environ.get("DATABASE_URL", "")
    broker = os.environ.get("CELERY_BROKER_URL", "")
    missing = []
    if not database.startswith("postgres"):
        missing.append("DATABASE_URL pointing at PostgreSQL")
    elif not service_reachable(database, 5432):
        missing.append("a reachable PostgreSQL")
    if not broker.startswith("redis"):
        missing.append("CELERY_BROKER_URL pointing at Redis")
    elif not service_reachable(broker, 6379):
        missing.append("a reachable Redis")
    if missing:
        marker = pytest.mark.skip(reason=f"integration test needs {', '.join(missing)} (use `make test`)")
        for item in items:
            if "integration" in item.keywords:
                item.add_marker(marker)
    if missing[:1] and "PostgreSQL" in missing[0]:
        no_postgres = pytest.mark.skip(reason=f"this test needs {missing[0]} (use `make test`)")
        for item in items:
            if "postgres" in item.keywords:
                item.add_marker(no_postgres)


@pytest.fixture(scope="session", autouse=True)
def _flush_by_delete_past_the_audit_guard() -> Iterator[None]:
    """Empty the tables between transactional tests with DELETE, in replica mode, instead of one TRUNCATE.

    pytest-django empties every table after each transactional test (1,053 of them). PostgreSQL's TRUNCATE
    gives every table and index new files: 0.32 s a flush, measured over tests/tenancy/test_api_boundary.py and
    tests/api/test_governed_calls.py, where a DELETE of the few rows a test left takes 7 ms (the two files ran in
    22 s instead of 50). Rolled-back tests leave the same dead rows for autovacuum.

    The audit tables refuse both statements (migration 0007's triggers). The flush, and nothing else, runs in
    replica mode, where ordinary triggers, foreign key checks among them, do not fire, so the order of the
    DELETEs does not matter; only a superuser may ask for that, never the application's role. A flush that
    resets sequences or cascades (``reset_sequences``, ``available_apps``) keeps Django's TRUNCATE.
    """
    from django.db.backends.postgresql.operations import DatabaseOperations

    original = DatabaseOperations.sql_flush

    def sql_flush(
        self: DatabaseOperations,
        style: Any,
        tables: Sequence[str],
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if not tables:
            return []
        if reset_sequences or allow_cascade:
            statements = original(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        else:
            statements = [f"DELETE FROM {self.quote_name(table)}" for table in tables]
        return ["SET LOCAL session_replication_role = replica", *statements]

    DatabaseOperations.sql_flush = sql_flush  # type: ignore[method-assign]
    yield
    DatabaseOperations.sql_flush = original  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _celery_mode(request: pytest.FixtureRequest) -> Iterator[None]:
    """Eager tasks for unit and API tests; real workers for integration tests."""
    eager = "integration" not in request.keywords
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = eager
    yield
    celery_app.conf.task_always_eager = previous


@pytest.fixture
def lockout_on(settings: Any) -> None:
    """The login lockout (django-axes) on: the suite runs with it off (``tests/settings.py``), as ``Client.login``
    authenticates without a request, which axes refuses. A module testing the lockout uses this fixture."""
    settings.AXES_ENABLED = True


@pytest.fixture
def tenant(db: None) -> Tenant:
    tenant, _ = Tenant.objects.get_or_create(slug="acme", defaults={"name": "ACME Corp"})
    return tenant


@pytest.fixture
def other_tenant(db: None) -> Tenant:
    tenant, _ = Tenant.objects.get_or_create(slug="globex", defaults={"name": "Globex"})
    return tenant


@pytest.fixture
def alice(tenant: Tenant) -> User:
    """A user who starts runs (a requester), member of tenant acme."""
    user = User.objects.create_user("alice", "alice@example.com", "alice-password")
    TenantMembership.objects.create(user=user, tenant=tenant)
    return user


@pytest.fixture
def operator(tenant: Tenant) -> User:
    """A staff user allowed to decide approval requests."""
    user = User.objects.create_user("operator", "operator@example.com", "operator-password", is_staff=True)
    group, _ = Group.objects.get_or_create(name="operators")
    group.permissions.set(
        Permission.objects.filter(
            content_type__app_label__in=["approvals", "toolhub", "agents_app"],
            codename__regex=r"^(view_|decide_approvalrequest$|change_tooldefinition$)",
        )
    )
    user.groups.add(group)
    TenantMembership.objects.create(user=user, tenant=tenant)
    return user


@pytest.fixture
def second_operator(operator: User, tenant: Tenant) -> User:
    user = User.objects.create_user("operator2", "operator2@example.com", "operator2-password", is_staff=True)
    user.groups.add(Group.objects.get(name="operators"))
    TenantMembership.objects.create(user=user, tenant=tenant)
    return user


@pytest.fixture
def viewer(tenant: Tenant) -> User:
    """A staff user without the permission to decide approvals."""
    user = User.objects.create_user("viewer", "viewer@example.com", "viewer-password", is_staff=True)
    TenantMembership.objects.create(user=user, tenant=tenant)
    return user


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def alice_client(alice: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(alice)
    return client


@pytest.fixture
def operator_client(operator: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(operator)
    return client


@pytest.fixture
def request_call(db: None, django_capture_on_commit_callbacks: Any) -> RequestCall:
    """Request a governed call as a model would and run what its commit triggers; return the fresh row.

    Suites that always act for one tenant or user override this fixture with their defaults.
    """

    def request(
        tool_name: str,
        arguments: str | Mapping[str, Any] | None,
        user: User | None = None,
        run_id: uuid.UUID | None = None,
        *,
        tenant: str = "",
        agent_name: str = "",
        agent_tools: frozenset[str] | None = None,
        context: Mapping[str, Any] | None = None,
        interaction: Mapping[str, Any] | None = None,
    ) -> ToolCall:
        principal = principal_for(user, tenant=tenant, agent_name=agent_name, agent_tools=agent_tools)
        with django_capture_on_commit_callbacks(execute=True):
            call = tool_call_request(
                request=CallRequest(
                    tool_name=tool_name,
                    arguments=arguments,
                    principal=principal,
                    context=ToolContext(context or {}),
                    interaction_context=interaction,
                    run_id=run_id,
                )
            )
        call.refresh_from_db()
        return call

    return request


@pytest.fixture
def committed(django_capture_on_commit_callbacks: Any) -> Callable[..., Any]:
    """Call ``fn`` and run everything its commit triggers (Celery is eager), as a committed request would."""

    def call(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    return call
