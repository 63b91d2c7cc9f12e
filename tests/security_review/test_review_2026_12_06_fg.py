"""Review 2026-12-06 (fg): ``toolhub.W014`` and a bound the server's configuration sets (review ep's leftover).

Each finding's test failed on the reviewed code (main at 346f72f) and passes now.

Findings:

1. ``toolhub.W014`` read only the catalogue (role in database, role, database: ``pg_db_role_setting``). A bound set
   only in ``postgresql.conf``, with ``ALTER SYSTEM`` or on the server's command line was not seen: the check warned
   although every server connection of the pool is bounded, and ``check --deploy --fail-level WARNING`` failed on
   such servers. Fixed in ``toolhub.db_pooler``: with no value in the catalogue, the check reads the server's
   (``server_bounds``: ``pg_settings.reset_val``, what a new server connection starts with), never this session's
   value (toolhub's own connection carries session-level bounds when it opened with the pooler off, and a pooled
   server connection may carry another client's ``SET``). A value the check cannot tell apart from the client's
   (its connection opened with ``options`` naming the bound, or the session's value came from the client or
   from a catalogue setting since removed) reads as unknown: the check warns (PgBouncer does not pass a client's
   ``options`` to its server connections).

Checked and holding:
- The precedence role in database > role > database (review ec) is unchanged and still over the server's value: a
  role-in-database ``0`` unbounds a server-bounded pool (test 1).
- On this (unbounded) server a role without bounds is still named, whatever this session's own bounds, and a role
  with both is not (test 3, real PostgreSQL, as reviews dv, ec and ep).
- The server's value is read in milliseconds (``reset_val`` of an integer setting in its base unit): no unit to parse.
"""

import psycopg
import pytest
from django.conf import settings
from django.core.checks import run_checks
from django.db import connection
from django.test import override_settings

from tests.security_review.pg_races import dsn
from toolhub import db_pooler

pytestmark = [pytest.mark.postgres]

BOUNDS = ["statement_timeout", "idle_in_transaction_session_timeout"]


def _w014() -> list[str]:
    with override_settings(TOOLHUB={**settings.TOOLHUB, "TRANSACTION_POOLER": True}):
        return [message.msg for message in run_checks(include_deployment_checks=True) if message.id == "toolhub.W014"]


def _alter_role() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT quote_ident(current_user), quote_ident(current_database())")
        role, database = cursor.fetchone()
    return f"ALTER ROLE {role} IN DATABASE {database} SET"


@pytest.mark.django_db
@override_settings(DATABASE_STATEMENT_TIMEOUT=45, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=300)
def test_the_pooler_check_reads_a_bound_the_servers_configuration_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: ``toolhub.W014`` read only the role's and the database's settings: a server bounded in
    ``postgresql.conf`` (or ``ALTER SYSTEM``) with no role setting was named as unbounded, failing
    ``check --deploy --fail-level WARNING``. Expect: with nothing in the catalogue the server's value counts (injected
    here: a test cannot change the shared server's configuration); a role-in-database ``0`` still unbounds it; a
    server unbounded, or whose value cannot be read, is named."""
    server: dict[str, int | None] = {}
    monkeypatch.setattr(db_pooler, "server_bounds", lambda cursor, names: {name: server.get(name) for name in names})

    server.update(statement_timeout=30000, idle_in_transaction_session_timeout=300000)
    bounded_by_server = _w014()
    with connection.cursor() as cursor:
        cursor.execute(f"{_alter_role()} statement_timeout = '0 ms'")
    overridden = _w014()
    with connection.cursor() as cursor:
        cursor.execute(f"{_alter_role()} statement_timeout = '5min'")
    server.update(idle_in_transaction_session_timeout=0)
    server_unbounded = _w014()
    server.update(idle_in_transaction_session_timeout=None)
    unknown = _w014()

    assert bounded_by_server == []
    assert len(overridden) == 1 and "in this database: statement_timeout: " in overridden[0], overridden
    assert (
        len(server_unbounded) == 1 and "in this database: idle_in_transaction_session_timeout: " in server_unbounded[0]
    )
    assert len(unknown) == 1 and "in this database: idle_in_transaction_session_timeout: " in unknown[0]


@pytest.mark.django_db
def test_the_servers_bound_is_read_as_a_new_connection_gets_it_not_as_this_session_has_it() -> None:
    """Found: (as test 1) the server's value was not read. Expect: ``server_bounds`` gives what a new connection
    without client options starts with (``reset_val``), not this session's ``SET`` (toolhub's own connection carries
    its session bounds when the pooler is off); a connection that opened with ``options`` naming a bound reads it as
    unknown, since its starting value is the client's."""
    fresh = psycopg.connect(**dsn())
    with_options = psycopg.connect(**dsn(), options="-c statement_timeout=43210")
    try:
        new_connection = {
            name: int(value)
            for name, value in fresh.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", [BOUNDS])
        }
        with connection.cursor() as cursor:
            cursor.execute("SET statement_timeout = 43210")
            cursor.execute("SET idle_in_transaction_session_timeout = 43210")
            read = db_pooler.server_bounds(cursor, BOUNDS)
        with with_options.cursor() as cursor:
            optioned = db_pooler.server_bounds(cursor, BOUNDS)
    finally:
        fresh.close()
        with_options.close()

    assert read == new_connection and 43210 not in read.values(), (read, new_connection)
    assert optioned == {**new_connection, "statement_timeout": None}


@pytest.mark.django_db
@override_settings(DATABASE_STATEMENT_TIMEOUT=45, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=300)
def test_on_an_unbounded_server_the_check_still_names_a_role_without_bounds() -> None:
    """Holding (regression): on this server (no bound configured: the suite's PostgreSQL) a role without bounds is
    named although this session carries its own bounds (``SET``), and a role with both is not."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_settings WHERE name = ANY(%s) AND reset_val <> '0'", [BOUNDS])
        configured = [row[0] for row in cursor.fetchall()]
        cursor.execute("SET statement_timeout = 45000")
        cursor.execute("SET idle_in_transaction_session_timeout = 300000")
    unbounded = _w014()
    with connection.cursor() as cursor:
        cursor.execute(f"{_alter_role()} statement_timeout = 45000")
        cursor.execute(f"{_alter_role()} idle_in_transaction_session_timeout = '5min'")
    bounded = _w014()

    assert configured == []  # the premise: the suite's server sets no bound itself
    assert len(unbounded) == 1, unbounded
    assert "in this database: statement_timeout, idle_in_transaction_session_timeout: " in unbounded[0]
    assert bounded == []
