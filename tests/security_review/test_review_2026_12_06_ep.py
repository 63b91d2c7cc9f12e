"""Review 2026-12-06 (ep): the review of review dv/ec's transaction pooler mode and the PostgreSQL time bounds.

Each finding's test failed on the reviewed code (main at 98885c5) and passes now.

Findings:

1. ``TRANSACTION_POOLER`` promised "no session-level SET", but ``toolhub.prepared.prepared_cursor`` still sent
   ``SET plan_cache_mode = force_generic_plan`` on each new connection's first prepared statement (every governed
   call's audited write). Behind a transaction pooler it lands on whichever server connection ran it: some server
   connections of the pool plan toolhub's prepared statements generically and others not, depending on which client
   opened first, and none of them keeps it for the client that sent it. Fixed in the mechanism the pooler mode already
   has: with the setting on, ``prepared_cursor`` sends nothing, and ``toolhub_db_roles`` sets ``plan_cache_mode`` on
   the role in this database with the bounds (``toolhub.db_pooler.role_settings_set``) while ``PREPARED_STATEMENTS``
   is on, so every server connection of the pool takes it when it opens.
2. A chunked read (``QuerySet.iterator()``) outside a transaction declared a server-side cursor ``WITH HOLD``
   (Django's default in autocommit): session state that outlives the statement that declared it. Behind a
   transaction pooler the next ``FETCH`` (or ``CLOSE``) may go to another server connection (``cursor ... does not
   exist``: the read fails), and the held cursor, its result materialized, stays on the first one serving others.
   ``audit_export``'s check of tenants sharing chains (``_shares_chains``) and the look-alike username check of
   ``createsuperuser`` (``reads_as_existing``) read that way. Django's answer, ``DISABLE_SERVER_SIDE_CURSORS``, would
   also load the big readers (``verify_audit``, the exports, which run inside transactions where a server-side cursor
   is transaction-local and fine) whole into memory. Fixed in ``toolhub.db_pooler`` (``connection_created``):
   with the setting on, a chunked read outside a transaction takes a client-side cursor; inside one it still streams
   from a server-side cursor (no ``WITH HOLD``). No check needed: nothing is asked of the operator.
3. ``toolhub.W014`` read the role's stored value with a pattern (``^0[a-z]*$``), but PostgreSQL keeps the value as
   written: a role set to ``'0 ms'``, ``'00'``, ``'0.0'`` or ``'0.4ms'`` (rounded to 0) runs unbounded while the check
   passed (and ``check --deploy --fail-level WARNING`` with it). Fixed in ``role_unbounded``: the applied value (same
   precedence) is read as PostgreSQL reads a millisecond bound (``set_config('lock_timeout', value, true)`` in a
   rolled-back transaction: setting the bound itself would bound the check's own next statement).

Checked and holding:
- No session advisory lock anywhere: the login guard and the checkpoint numbering use ``pg_advisory_xact_lock``
  (released with the transaction). No ``LISTEN``/``NOTIFY``, no ``SET ROLE``, no ``search_path`` set per session
  (the audit trigger functions carry their own ``SET search_path``), no temporary table. The Celery worker sends
  nothing at start (``toolhub.celery`` only closes old connections). The login guard's ``lock_timeout`` and the
  atomic tool's idle bound are ``set_config(..., true)``, the checkpoint's and ``written_past_bound``'s lift
  ``SET LOCAL``: transaction-local.
- An operator command behind the pooler: each of its transactions is lifted (``SET LOCAL``, first statement,
  savepoints included); a statement outside a transaction keeps the role's bound, which the README says.
- ``transaction_idle_at_least`` behind the pooler always sends its ``set_config(..., true)`` (the session's bound is
  unknown): it reads ``pg_settings.setting`` (milliseconds whatever unit the role's value was written in: ``'5min'``,
  ``'1h'``, ``300000``), keeps a longer bound and a ``0`` (none), and lengthens a shorter one for the transaction
  only (test 4). The precedence role-in-database, role, database of W014 is pinned by review ec.
- Prepared statements themselves are session state; the README already asks for PgBouncer 1.21+ with
  ``max_prepared_statements`` or ``PREPARED_STATEMENTS`` off.

Left (documented, not fixed): W014 reads only the catalogue (role in database, role, database); a bound set only in
``postgresql.conf`` (or ``ALTER SYSTEM``) is not seen, so the check warns although the pool is bounded (a false
warning, never a missed one). A test cannot set the server's configuration on a shared server. (Closed by review fg:
the check now reads the server's value, ``toolhub.db_pooler.server_bounds``.)
"""

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.core.checks import run_checks
from django.core.management import call_command
from django.db import connection, transaction
from django.test import override_settings

from toolhub.confusable_names import reads_as_existing
from toolhub.db_timeouts import transaction_idle_at_least
from toolhub.exports import export_rows
from toolhub.models import ToolCall
from toolhub.prepared import prepared_cursor

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def pooled() -> Iterator[None]:
    with override_settings(TOOLHUB={**settings.TOOLHUB, "TRANSACTION_POOLER": True, "PREPARED_STATEMENTS": True}):
        yield


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement psycopg's client-side cursors send (Django's, raw ones and ``Connection.execute``)."""
    statements: list[str] = []
    original = psycopg.Cursor.execute

    def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        statements.append(query if isinstance(query, str) else repr(query))
        return original(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    return statements


@pytest.fixture
def declared(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each server-side cursor opened, whether it is ``WITH HOLD`` (outlives its transaction: session state)."""
    holds: list[bool] = []
    original = psycopg.ServerCursor.execute

    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        holds.append(self.withhold)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(psycopg.ServerCursor, "execute", execute)
    return holds


def _role_settings(role: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(array_agg(c), '{}') FROM pg_db_role_setting r, unnest(r.setconfig) c "
            "WHERE r.setrole = (SELECT oid FROM pg_roles WHERE rolname = %s) "
            "AND r.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [role],
        )
        return sorted(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_behind_a_transaction_pooler_prepared_statements_set_nothing_for_the_session(
    pooled: None, sent: list[str]
) -> None:
    """Found: with ``TRANSACTION_POOLER`` on, a connection's first prepared cursor still sent
    ``SET plan_cache_mode = force_generic_plan``: it stays on whichever server connection ran it, which then serves
    other clients, while the others never get it. Expect: no session-level ``SET`` from a prepared cursor behind the
    pooler; ``toolhub_db_roles`` sets ``plan_cache_mode`` on the role instead (every server connection takes it)."""
    connection.close()
    try:
        for _ in range(3):  # prepared from the second execution
            with prepared_cursor(connection) as cursor:
                cursor.execute("SELECT count(*) FROM toolhub_toolcall WHERE attempts = %s", [1])
        with connection.cursor() as cursor:
            cursor.execute("SHOW plan_cache_mode")
            mode = cursor.fetchone()[0]
    finally:
        connection.close()
    call_command("toolhub_db_roles", "--role", "toolhub_ep_pooled", stdout=None)

    assert [
        statement for statement in sent if statement.startswith("SET ") and not statement.startswith("SET LOCAL ")
    ] == []
    assert mode == "auto"  # this session's own, untouched
    assert "plan_cache_mode=force_generic_plan" in _role_settings("toolhub_ep_pooled")


@pytest.mark.django_db(transaction=True)
def test_behind_a_transaction_pooler_a_chunked_read_outside_a_transaction_holds_no_cursor(
    pooled: None, declared: list[bool]
) -> None:
    """Found: ``QuerySet.iterator()`` outside a transaction (``createsuperuser``'s look-alike check, ``audit_export``'s
    shared-chains check) declared a server-side cursor ``WITH HOLD``: behind a transaction pooler its ``FETCH`` may
    reach another server connection (the read fails) and the held cursor stays on the first one. Expect: behind the
    pooler no cursor is held past its transaction; the same reads return the same rows."""
    connection.close()
    try:
        found = reads_as_existing("nobody-here")
        ids = list(ToolCall.objects.values_list("id", flat=True).iterator(chunk_size=10))
    finally:
        connection.close()

    assert found is None and ids == []
    assert True not in declared, declared


@pytest.mark.django_db(transaction=True)
def test_behind_a_transaction_pooler_a_chunked_read_inside_a_transaction_still_streams(
    pooled: None, declared: list[bool]
) -> None:
    """Holds: the big readers (an export, ``verify_audit``) read inside a transaction, where a server-side cursor is
    transaction-local and streams: behind the pooler they keep it (not loaded whole into memory), never held."""
    list(export_rows(ToolCall.objects.all()))
    with transaction.atomic():
        list(ToolCall.objects.values_list("id", flat=True).iterator(chunk_size=10))

    assert declared == [False, False]


@pytest.mark.django_db(transaction=True)
@override_settings(DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=300)
def test_behind_a_transaction_pooler_an_atomic_tools_idle_bound_reads_the_roles_value_in_any_unit(
    pooled: None,
) -> None:
    """Holds: behind the pooler the session's idle bound is unknown, so an atomic tool's transaction reads it from the
    server: the role's ``'5min'`` is 300000 ms (lengthened for a longer tool, kept for a shorter one), ``0`` stays
    none, and the bound is back after the transaction."""

    def idle_in(seconds: float, setting: str) -> tuple[str, str]:
        with connection.cursor() as cursor:
            cursor.execute(f"SET idle_in_transaction_session_timeout = {setting}")  # stands for the role's
        with transaction.atomic():
            transaction_idle_at_least(seconds)
            with connection.cursor() as cursor:
                cursor.execute("SHOW idle_in_transaction_session_timeout")
                inside = cursor.fetchone()[0]
        with connection.cursor() as cursor:
            cursor.execute("SHOW idle_in_transaction_session_timeout")
            return inside, cursor.fetchone()[0]

    try:
        longer = idle_in(600, "'5min'")
        shorter = idle_in(10, "'5min'")
        unbounded = idle_in(600, "0")
        hours = idle_in(600, "'1h'")
    finally:
        connection.close()

    assert longer == ("11min", "5min")
    assert shorter == ("5min", "5min")
    assert unbounded == ("0", "0")
    assert hours == ("1h", "1h")


@pytest.mark.django_db
@override_settings(DATABASE_STATEMENT_TIMEOUT=45, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=300)
def test_behind_a_transaction_pooler_the_check_reads_a_zero_bound_however_it_is_written(pooled: None) -> None:
    """Found: ``toolhub.W014`` read the role's stored text with a pattern (``0``, ``0ms``, ``0s`` unbounded): PostgreSQL
    keeps the value as written, and ``'0 ms'``, ``'00'`` or ``'0.4ms'`` (rounded to 0) leave the role unbounded while
    the check passed, every server connection of the pool running without a bound. Expect: the value is read as
    PostgreSQL applies it: those name both bounds; ``'1h'``, ``'0.6ms'`` (1 ms) and ``300000`` read as bounded."""

    def w014() -> list[str]:
        return [message.msg for message in run_checks(include_deployment_checks=True) if message.id == "toolhub.W014"]

    with connection.cursor() as cursor:
        cursor.execute("SELECT quote_ident(current_user), quote_ident(current_database())")
        role, database = cursor.fetchone()
        alter = f"ALTER ROLE {role} IN DATABASE {database} SET"
        cursor.execute(f"{alter} statement_timeout = '0 ms'")
        cursor.execute(f"{alter} idle_in_transaction_session_timeout = '00'")
        both = w014()
        cursor.execute(f"{alter} idle_in_transaction_session_timeout = '0.4ms'")
        rounded = w014()
        cursor.execute(f"{alter} statement_timeout = '1h'")
        cursor.execute(f"{alter} idle_in_transaction_session_timeout = '0.6ms'")
        bounded = w014()
        cursor.execute(f"{alter} idle_in_transaction_session_timeout = 300000")
        cursor.execute("SHOW lock_timeout")
        lock_timeout = cursor.fetchone()[0]

    assert len(both) == 1 and "statement_timeout, idle_in_transaction_session_timeout" in both[0], both
    assert len(rounded) == 1 and "idle_in_transaction_session_timeout" in rounded[0], rounded
    assert bounded == [] and w014() == []
    assert lock_timeout == "0"  # the check's reading left nothing behind
