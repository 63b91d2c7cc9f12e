"""Review 2026-12-06 (cw): settings, system checks, operations commands and database time bounds (reviews cj, cm,
ck, bu), adversarially.

Findings (each fails on ea55f42, passes with the fix):

1. No statement ran under a time bound on PostgreSQL: a slow query (or a stuck one) held its connection, its locks
   and its request or worker for ever, and a transaction left idle (a streamed export whose client stopped reading, a
   request stuck between statements) held its snapshot and row locks for ever, delaying vacuum. Now every connection
   toolhub opens bounds both (``DATABASE_STATEMENT_TIMEOUT``, 60 s; ``DATABASE_IDLE_IN_TRANSACTION_TIMEOUT``,
   600 s, past the default tool timeout; 0 leaves the server's), keeping a shorter bound the server, role, database
   or URL set (``toolhub.db_timeouts``); ``migrate`` lifts toolhub's own bounds for its connection (an index build
   may take longer), back to what the server or role sets. An atomic tool, whose transaction stays open (idle,
   between its statements) while it works, takes an idle bound of its own timeout and a minute for that transaction.
2. ``toolhub.W010`` / ``W011`` warned of ``DJANGO_ALLOWED_HOSTS=*`` and ``http://`` origins only: ``.com`` (Django
   believes every ``*.com`` Host) and ``https://*.com`` (every ``.com`` site's forms pass CSRF) passed the deploy
   check, though as open. Both now name a pattern that spans a whole top-level domain.

Checked and holding:
- ``_env_int`` / ``_env_seconds`` / ``_env_rate`` / ``_env_bool`` / ``_env_choice`` strip surrounding whitespace and
  refuse negatives, NaN, ``inf`` and values past their range; ``int()`` reads unicode digits (``١٢``) and ``1_0`` as
  the number they spell (not a misreading: the value is still range-checked).
- A ``DATABASE_URL`` with ``sslmode`` and ``options`` keeps them in ``OPTIONS``; an unknown scheme
  (``postgresql+psycopg``) is refused naming the scheme only, never the password.
- The bounds are set with ``SET`` on ``connection_created`` (one statement, only on PostgreSQL), not as libpq startup
  ``options`` (PgBouncer refuses those by default, and they would override a shorter role setting); the test
  database's connection stays unbounded (its ``migrate`` lifts them), so the rest of the suite runs as before;
  an atomic tool within the idle bound (the default timeout) costs no statement (``test_atomic_tools``' count holds).
- Streamed exports (admin CSV, ``audit_export``) read in chunks, each ``FETCH`` a statement under the bound; a client
  that stops reading for the idle bound has its session ended (the export fails, the snapshot is released): read
  from the code, not tested here.
- ``_env_seconds`` takes ``1e-300`` (above 0): a checkpoint schedule that small makes beat fire constantly (not
  fixed: the operator's own value, and the check is the range cj chose).
- ``audit_export``'s ``--actor`` is free text recorded as given (the command runs with the database's rights anyway);
  ``audit_checkpoint`` prints the signed checkpoint (heads and signature), never the key.
"""

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.core import checks
from django.core.management import call_command
from django.db import OperationalError, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.test import override_settings

from tests.helpers import RequestCall
from tests.tenancy.conftest import make_user
from toolhub import ToolResult, tool
from toolhub.models import CallStatus, Tenant
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db
postgres = pytest.mark.postgres


def _opened(**options: str) -> BaseDatabaseWrapper:
    """A new connection to the test database, as toolhub opens one, with ``options`` over its ``OPTIONS``."""
    wrapper = connections.create_connection("default")
    wrapper.settings_dict = {**wrapper.settings_dict, "OPTIONS": {**wrapper.settings_dict["OPTIONS"], **options}}
    wrapper.ensure_connection()
    return wrapper


def _shown(wrapper: BaseDatabaseWrapper, name: str) -> str:
    with wrapper.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return str(cursor.fetchone()[0])


@postgres
def test_a_new_connection_bounds_its_statements_and_idle_transactions() -> None:
    """Found: no ``statement_timeout`` nor ``idle_in_transaction_session_timeout`` (PostgreSQL's default: none): a slow
    query or a transaction left idle held its connection and locks for ever. Expect: 1 min and 10 min by default."""
    opened = _opened()
    try:
        assert _shown(opened, "statement_timeout") == "1min"
        assert _shown(opened, "idle_in_transaction_session_timeout") == "10min"
    finally:
        opened.close()


@postgres
@override_settings(DATABASE_STATEMENT_TIMEOUT=1)
def test_a_statement_past_the_bound_is_cancelled() -> None:
    """Found: ``pg_sleep`` (any slow statement) ran as long as it liked. Expect: cancelled at the configured bound."""
    opened = _opened()
    try:
        began = time.monotonic()
        with pytest.raises(OperationalError, match="statement timeout"), opened.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(30)")
        assert time.monotonic() - began < 10
    finally:
        opened.close()


@postgres
def test_a_shorter_bound_set_for_the_connection_is_kept_not_lengthened() -> None:
    """Found (with the bound): a shorter ``statement_timeout`` the URL, role or server set must not be lengthened to
    toolhub's default. Expect: the URL's 500 ms stays, and the idle bound it did not set is toolhub's."""
    opened = _opened(options="-c statement_timeout=500")
    try:
        assert _shown(opened, "statement_timeout") == "500ms"
        assert _shown(opened, "idle_in_transaction_session_timeout") == "10min"
    finally:
        opened.close()


@postgres
@override_settings(DATABASE_STATEMENT_TIMEOUT=0, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=0)
def test_zero_leaves_the_servers_bounds() -> None:
    """Found: (the setting's off switch) 0 must leave the server's or role's value, not set "no bound" over it.
    Expect: the server's defaults (none, on the test server)."""
    opened = _opened(options="-c statement_timeout=700")
    try:
        assert _shown(opened, "statement_timeout") == "700ms"
        assert _shown(opened, "idle_in_transaction_session_timeout") == "0"
    finally:
        opened.close()


@postgres
def test_migrate_runs_without_toolhubs_bound() -> None:
    """Found (with the bound): a migration's index build or table rewrite may take longer than a request's statement.
    Expect: ``migrate`` lifts toolhub's bounds on its connection, back to the server's (none, on the test server)."""
    connection_created.send(sender=type(connection), connection=connection)  # as when it opened
    assert _shown(connection, "statement_timeout") == "1min"

    call_command("migrate", verbosity=0)

    assert _shown(connection, "statement_timeout") == "0"
    assert _shown(connection, "idle_in_transaction_session_timeout") == "0"


#: What ``long_ledger_entry`` saw of its transaction's idle bound.
_seen_idle_bounds: list[str] = []


@tool(atomic=True, timeout=900)
def long_ledger_entry(note: str) -> ToolResult:
    """Record a ledger entry; the bookkeeping may take up to 15 minutes."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW idle_in_transaction_session_timeout")
        _seen_idle_bounds.append(str(cursor.fetchone()[0]))
    return ToolResult.text("recorded")


@pytest.fixture
def _long_tool() -> Iterator[None]:
    _seen_idle_bounds.clear()
    with registry.temporarily(long_ledger_entry):
        yield


@postgres
@pytest.mark.usefixtures("_long_tool")
def test_an_atomic_tool_longer_than_the_idle_bound_keeps_its_transaction(
    tenant: Tenant, request_call: RequestCall
) -> None:
    """Found (with the bound): an atomic tool runs inside its transaction, idle between its statements, for up to its
    timeout: one allowed 15 minutes had its session ended by the 10-minute idle bound, its work lost. Expect: its
    transaction's idle bound is its timeout and a minute (16 min), set for that transaction only."""
    connection_created.send(sender=type(connection), connection=connection)  # as when it opened

    call = request_call("long_ledger_entry", {"note": "q4"}, make_user("al", tenant=tenant), tenant="acme")

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert _seen_idle_bounds == ["16min"]


def _deploy_warnings(check_id: str) -> list[checks.CheckMessage]:
    return [found for found in checks.run_checks(include_deployment_checks=True) if found.id == check_id]


@pytest.mark.parametrize("pattern", [".com", ".COM"])
def test_check_deploy_warns_of_allowed_hosts_spanning_a_top_level_domain(settings: Any, pattern: str) -> None:
    """Found: ``DJANGO_ALLOWED_HOSTS=.com`` passed the deploy check (W010 looks for ``*`` only), yet Django believes a
    Host of any ``.com`` name, a forged one too. Expect: ``toolhub.W010`` naming it; ``.example.com`` is not."""
    settings.ALLOWED_HOSTS = ["toolhub.example.com", pattern]
    warned = _deploy_warnings("toolhub.W010")
    settings.ALLOWED_HOSTS = ["toolhub.example.com", ".example.com"]

    assert len(warned) == 1 and repr(pattern) in warned[0].msg
    assert _deploy_warnings("toolhub.W010") == []


@pytest.mark.parametrize("origin", ["https://*.com", "HTTPS://*.Org"])
def test_check_deploy_warns_of_a_csrf_origin_spanning_a_top_level_domain(settings: Any, origin: str) -> None:
    """Found: ``DJANGO_CSRF_TRUSTED_ORIGINS=https://*.com`` passed the deploy check (W011 looks for ``http://`` only),
    yet a form posted from any ``.com`` site passes CSRF. Expect: ``toolhub.W011`` naming it; ``https://*.example.com``
    is not."""
    settings.CSRF_TRUSTED_ORIGINS = ["https://toolhub.example.com", origin]
    warned = _deploy_warnings("toolhub.W011")
    settings.CSRF_TRUSTED_ORIGINS = ["https://toolhub.example.com", "https://*.example.com"]

    assert len(warned) == 1 and repr(origin) in warned[0].msg
    assert _deploy_warnings("toolhub.W011") == []
