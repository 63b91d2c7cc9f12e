"""Review 2026-12-06 (fn): PostgreSQL connection handling behind a transaction pooler (``toolhub.db_pooler``,
``toolhub.db_timeouts``, ``toolhub.dbroles``).

Each finding's test failed on the reviewed code (main at 3fc511b) and passes now.

Findings:

1. ``toolhub.W014`` read the server's bound from ``pg_settings.reset_val`` whenever the session's *current* value came
   from a ``SET`` (source ``session``), but ``reset_val`` is what this session started with, not what the server gives
   a new connection: a long-lived pooled server connection that opened while the role (or database) had a bound, on
   which any client later ran a session ``SET``, kept that bound as its ``reset_val`` after the DBA removed it from
   the role. The check passed (and ``check --deploy --fail-level WARNING`` with it) while every new server connection
   of the pool ran statements without a bound (reproduced through PgBouncer 1.18, below). Fixed in
   ``server_bounds``: each bound is reset for a rolled-back savepoint (``set_config(name, NULL, true)``), which gives
   it the session's starting value *and its source*; only a value the server's own configuration gave (default,
   ``postgresql.conf``, ``ALTER SYSTEM``, command line) counts, any other (role, database, client ``options``) reads
   as unknown and the check warns. The guess from the connection's ``options`` is no longer needed.

Checked and holding:

- ``SET LOCAL`` / ``set_config(..., true)`` with the pooler mode on: the operator command's lift (first statement of
  each transaction), the checkpoint's lift, the atomic tool's longer idle bound and the login guard's ``lock_timeout``
  apply inside their transaction and are gone in the next transaction on the same connection (another request or
  tenant behind the pooler), committed or rolled back; no bound is left at session level (test 2). They fire: a role
  bounded at 300 ms cancels a request's long statement, an operator transaction runs it, the next request's is
  cancelled again; an atomic tool's transaction outlasts the role's idle bound, the next idle transaction does not
  (test 4).
- Documented (no test: operational): ``toolhub_db_roles``' settings reach a server connection only when it opens;
  the pooler's open ones keep their starting values until replaced (seen through PgBouncer). The command's report
  and the README now say so (PgBouncer's ``RECONNECT``).
- Documented (corrected): the README asked for PgBouncer 1.21+ with ``max_prepared_statements`` to keep
  ``PREPARED_STATEMENTS`` on; psycopg clears its prepared statements with ``DEALLOCATE ALL`` after every rollback of
  a connection holding any (test 5 pins it on toolhub's connection), and PgBouncer handles ``DEALLOCATE ALL`` only
  from 1.22 (its changelog; 1.21 passes it to the server connection, where it drops the statements PgBouncer keeps
  there for every client). Not probed against 1.21/1.22 (Debian here ships 1.18, which keeps no prepared statement):
  the README and ``conf.py`` now say 1.22.
- grep of toolhub, agents_app, approvals, demo: no session advisory lock (the login guard and checkpoint numbering
  take ``pg_advisory_xact_lock``), no ``LISTEN``/``NOTIFY``, no ``SET ROLE``/``SET SESSION``/``search_path`` per
  session, no temporary table, no ``DECLARE ... WITH HOLD`` of toolhub's own. The only session ``SET``s
  (``connection_bounded``, ``migrate_unbounded``, the operator lift, ``plan_cache_mode``) are skipped with
  ``TRANSACTION_POOLER`` on. Prepared statements (``toolhub.prepared``) are session state: documented (PgBouncer 1.21+
  with ``max_prepared_statements``, or ``PREPARED_STATEMENTS`` off). Every ``.iterator()`` outside a transaction
  (``audit_export``'s shared-chain check, ``sessions_end``, the look-alike username check) goes through
  ``connection_chunked_reads`` (client-side cursor); exports and ``verify_audit`` stream inside a transaction (test 3).
- Tenant scoping under the pooler: no query scopes rows by session state (no row-level security, no
  ``current_setting`` of a tenant): every scope is a ``WHERE`` in the statement, so which server connection runs it
  does not matter. ``toolhub.dbroles`` scopes privileges (append-only audit tables), not rows; its ``ALTER ROLE ...
  IN DATABASE ... SET`` is catalogue state every new server connection takes.
- Probed by hand against PgBouncer 1.18 (``pool_mode = transaction``, ``default_pool_size = 1``: every client on one
  server connection), toolhub as a role set up by ``toolhub_db_roles`` (30 s / 2 min), ``TRANSACTION_POOLER`` on,
  ``PREPARED_STATEMENTS`` off, a second plain client reading the statement, idle and lock bounds after each step:
  30s/2min/0 throughout; inside an operator transaction 0/2min, an atomic tool's 30s/61min, the checkpoint's 0/2min,
  the login guard's restored; after a rolled-back transaction 30s/2min; chunked reads in and outside a transaction
  worked, no cursor left on the server. Finding 1 reproduced there: a client's
  ``SET statement_timeout = '45s'``, then ``ALTER ROLE ... RESET statement_timeout``: ``check --deploy`` gave no
  W014 although a new server connection had ``statement_timeout`` 0; with the fix it names ``statement_timeout``.
"""

import time
from collections.abc import Iterator

import psycopg
import pytest
from django.conf import settings
from django.core.checks import run_checks
from django.db import DatabaseError, OperationalError, connection, transaction
from django.test import override_settings

from tests.security_review.pg_races import dsn
from toolhub import login_guard
from toolhub.audit import audit_append
from toolhub.db_pooler import transactions_unbounded
from toolhub.db_timeouts import cancelled_by_bound, transaction_idle_at_least, transaction_statements_unbounded
from toolhub.models import AuditEvent
from toolhub.prepared import prepared_cursor

pytestmark = [pytest.mark.postgres]

BOUNDS = ["statement_timeout", "idle_in_transaction_session_timeout"]
POOLED = {**settings.TOOLHUB, "TRANSACTION_POOLER": True}


def _w014() -> list[str]:
    with override_settings(TOOLHUB=POOLED):
        return [message.msg for message in run_checks(include_deployment_checks=True) if message.id == "toolhub.W014"]


@pytest.fixture
def administrator() -> Iterator[tuple[psycopg.Connection, str]]:
    """A second session (the DBA's), and ``ALTER ROLE <this role> IN DATABASE <this database>``; reset after."""
    admin = psycopg.connect(**dsn(), autocommit=True)
    role, database = admin.execute("SELECT quote_ident(current_user), quote_ident(current_database())").fetchone()
    alter = f"ALTER ROLE {role} IN DATABASE {database}"
    try:
        yield admin, alter
    finally:
        admin.execute(f"{alter} RESET ALL")
        admin.close()
        connection.close()  # no session of the test's left with the role's bounds


def _settings(names: list[str]) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", [names])
        return dict(cursor.fetchall())


@pytest.mark.django_db(transaction=True)
@override_settings(DATABASE_STATEMENT_TIMEOUT=45, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=300)
def test_w014_does_not_take_a_long_sessions_start_for_the_servers_bound(
    administrator: tuple[psycopg.Connection, str],
) -> None:
    """Found: ``server_bounds`` took ``pg_settings.reset_val`` as the server's bound whenever the session's value came
    from a ``SET``; a long-lived (pooled) session that started under a role bound since removed, with a client's
    ``SET`` on top, kept the removed bound there: W014 passed while a new server connection got no statement bound.
    Expect: a starting value that came from the role or database (not the server's configuration) reads as unknown,
    and W014 names the bound; a role still bounded passes."""
    admin, alter = administrator
    admin.execute(f"{alter} SET statement_timeout = 30000")
    admin.execute(f"{alter} SET idle_in_transaction_session_timeout = 300000")
    connection.close()
    with connection.cursor() as cursor:  # a new session: it starts with the role's bounds
        cursor.execute("SET statement_timeout = 45000")  # any client's SET on the shared server connection
    bounded = _w014()
    admin.execute(f"{alter} RESET statement_timeout")  # the DBA takes the bound off the role
    new_connection = psycopg.connect(**dsn(), autocommit=True)
    try:
        unbounded_now = new_connection.execute("SELECT setting FROM pg_settings WHERE name = 'statement_timeout'")
        new_statement_bound = unbounded_now.fetchone()[0]
    finally:
        new_connection.close()
    stale = _w014()

    assert bounded == []
    assert new_statement_bound == "0"  # the premise: the server itself does not bound statements
    assert len(stale) == 1 and "in this database: statement_timeout: " in stale[0], stale


@pytest.mark.django_db(transaction=True)
@override_settings(DATABASE_STATEMENT_TIMEOUT=45, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=300)
def test_transaction_local_bounds_never_reach_the_next_transaction_on_the_connection(
    administrator: tuple[psycopg.Connection, str],
) -> None:
    """Holding (regression): with ``TRANSACTION_POOLER`` on, one connection (one pooled server connection) serves a
    request that lifts or lengthens its bounds (an operator command's transaction, a checkpoint, an atomic tool, the
    login guard's ``lock_timeout``, one rolled back), then another request's transaction. Expect: each change applies
    inside its own transaction only; the next transaction sees the role's bounds, and none is set per session."""
    admin, alter = administrator
    admin.execute(f"{alter} SET statement_timeout = 30000")
    admin.execute(f"{alter} SET idle_in_transaction_session_timeout = 120000")
    names = [*BOUNDS, "lock_timeout"]
    role_values = {"statement_timeout": "30000", "idle_in_transaction_session_timeout": "120000", "lock_timeout": "0"}
    inside: dict[str, dict[str, str]] = {}
    after: dict[str, dict[str, str]] = {}

    def next_request(label: str) -> None:
        with transaction.atomic():
            after[label] = _settings(names)

    with override_settings(TOOLHUB=POOLED):
        connection.close()  # opened with the pooler mode on: toolhub sends no session setting
        next_request("opened")
        with transactions_unbounded(), transaction.atomic():
            inside["operator"] = _settings(names)
        next_request("operator")
        with transaction.atomic():
            transaction_statements_unbounded()
            inside["checkpoint"] = _settings(names)
        next_request("checkpoint")
        with transaction.atomic():
            transaction_idle_at_least(3600)
            inside["atomic tool"] = _settings(names)
        next_request("atomic tool")
        with transaction.atomic():
            login_guard._pair_locked_in_postgresql("alice", "192.0.2.1")
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('lock_timeout', '1234ms', true)")  # the guard's bound, while held
            inside["login guard"] = _settings(names)
        next_request("login guard")
        with pytest.raises(RuntimeError), transaction.atomic():
            transaction_statements_unbounded()
            transaction_idle_at_least(3600)
            raise RuntimeError("the request failed")
        next_request("rolled back")
        with connection.cursor() as cursor:
            cursor.execute("SELECT name, source FROM pg_settings WHERE name = ANY(%s)", [names])
            sources = dict(cursor.fetchall())

    assert inside["operator"]["statement_timeout"] == "0"
    assert inside["checkpoint"]["statement_timeout"] == "0"
    assert inside["atomic tool"]["idle_in_transaction_session_timeout"] == str((3600 + 60) * 1000)
    assert inside["login guard"]["lock_timeout"] == "1234"
    assert after == dict.fromkeys(after, role_values) and len(after) == 6, after
    assert "session" not in sources.values(), sources


@pytest.mark.django_db(transaction=True)
def test_chunked_reads_leave_no_cursor_on_the_pooled_connection(administrator: tuple[psycopg.Connection, str]) -> None:
    """Holding (regression): with ``TRANSACTION_POOLER`` on, a chunked read outside a transaction (a new connection's
    first statement included) declares no server-side cursor (``WITH HOLD`` would outlive it on the server
    connection); inside a transaction it streams from one that ends with the transaction. Expect: no cursor is left
    on the session after either, and the rows read are all the rows."""
    for n in range(3):
        with transaction.atomic():
            audit_append(event_type="platform.note", actor="system", data={"n": n})
    total = AuditEvent.objects.count()
    seen_cursors: list[list[str]] = []

    def cursors() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT name FROM pg_cursors")
            return [name for (name,) in cursor.fetchall()]

    with override_settings(TOOLHUB=POOLED):
        connection.close()
        outside = list(AuditEvent.objects.values_list("pk", flat=True).iterator(chunk_size=1))
        seen_cursors.append(cursors())
        with transaction.atomic():
            rows = AuditEvent.objects.values_list("pk", flat=True).iterator(chunk_size=1)
            first = next(rows, None)
            held = cursors()
            inside = ([] if first is None else [first]) + list(rows)
        seen_cursors.append(cursors())

    assert total >= 3 and len(outside) == len(inside) == total
    assert seen_cursors == [[], []]
    assert len(held) == 1  # inside a transaction it still streams from a server-side cursor


def _slept(seconds: float) -> bool:
    """Whether ``pg_sleep(seconds)`` ran to its end (not cancelled by the statement bound)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(%s)", [seconds])
    except OperationalError as exc:
        if not cancelled_by_bound(exc):
            raise
        return False
    return True


@pytest.mark.django_db(transaction=True)
def test_the_roles_bounds_and_their_transaction_local_lifts_fire_as_set(
    administrator: tuple[psycopg.Connection, str],
) -> None:
    """Holding (regression): the bounds do not only read right, they fire. With ``TRANSACTION_POOLER`` on and the role
    bounded (statement 300 ms, idle 400 ms), a request's long statement is cancelled; an operator command's
    transaction runs it; the next request's is cancelled again; an atomic tool's transaction may stay idle longer than
    the role's bound, and the next transaction left idle as long ends its session (the lift did not stay)."""
    admin, alter = administrator
    admin.execute(f"{alter} SET statement_timeout = 300")
    admin.execute(f"{alter} SET idle_in_transaction_session_timeout = 400")
    results: dict[str, bool] = {}

    with override_settings(TOOLHUB=POOLED):
        connection.close()
        with transaction.atomic():
            results["request"] = _slept(0.6)
        with transactions_unbounded(), transaction.atomic():
            results["operator"] = _slept(0.6)
        with transaction.atomic():
            results["next request"] = _slept(0.6)
        with transaction.atomic():
            transaction_idle_at_least(1)
            time.sleep(0.8)
            results["atomic tool idle"] = _slept(0)
        ended: list[str] = []
        try:
            with transaction.atomic():
                _slept(0)
                time.sleep(0.8)
                try:
                    results["next idle"] = _slept(0)
                except DatabaseError as exc:
                    ended.append(getattr(exc.__cause__, "sqlstate", ""))
                    raise
        except DatabaseError:
            results["next idle"] = False
        connection.close()

    assert results == {
        "request": False,
        "operator": True,
        "next request": False,
        "atomic tool idle": True,
        "next idle": False,
    }
    assert ended == ["25P03"]  # idle_in_transaction_session_timeout: the server ended the session


@pytest.mark.django_db(transaction=True)
@override_settings(TOOLHUB={**settings.TOOLHUB, "PREPARED_STATEMENTS": True})
def test_a_rollback_drops_every_prepared_statement_of_the_session() -> None:
    """Holding (regression; the premise of the README's PgBouncer version): once ``toolhub.prepared`` has prepared a
    statement, a rolled-back transaction makes psycopg send ``DEALLOCATE ALL`` before the next statement (it clears
    its cache on every rollback). PgBouncer handles ``DEALLOCATE ALL`` only from 1.22 (1.21 passes it to the server
    connection, dropping the statements it keeps there for every client). Expect: the session's prepared statements
    are gone after a rollback, so the README asks for 1.22 or newer."""
    connection.close()
    for _ in range(3):
        with prepared_cursor(connection) as cursor:
            cursor.execute("SELECT count(*) FROM toolhub_auditevent WHERE chain = %s", [0])
            cursor.fetchone()

    def prepared() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_prepared_statements")
            return int(cursor.fetchone()[0])

    before = prepared()
    with pytest.raises(RuntimeError), transaction.atomic():
        prepared()
        raise RuntimeError("the request failed")
    after = prepared()
    connection.close()

    assert before == 1
    assert after == 0
