"""Review 2026-12-06 (dv): the PostgreSQL time bounds behind PgBouncer in transaction pooling (review do's finding).

Findings (each fails on 954c1d1, passes with the fix):

1. The README recommends PgBouncer in transaction pooling, but toolhub bounded each connection with session-level
   ``set_config(name, value, false)`` on ``connection_created``, ``migrate`` sent ``RESET``, and an operator command
   ``RESET`` the statement bound of every open connection and gave it back with ``set_config(..., false)``. Behind a
   transaction pooler each of those lands on whichever server connection ran it and then serves *other* clients: an
   operator command's or ``migrate``'s ``RESET`` left a pooled server connection serving requests without a statement
   bound, and a client's bounds did not follow it to its next transaction. There was no way to run without them.
   ``TOOLHUB["TRANSACTION_POOLER"]`` (``toolhub.db_pooler``) now sends no session-level setting at all: the bounds
   are the role's (``toolhub_db_roles`` sets them with ``ALTER ROLE ... IN DATABASE ... SET``), an operator command
   lifts the statement bound with ``SET LOCAL`` as each of its transactions begins, ``migrate`` lifts nothing (it runs
   as the owner, which toolhub does not bound), an atomic tool's idle bound is ``SET LOCAL`` as before (always sent:
   the session's bound is unknown), and ``check --deploy`` names a role without the bounds (``toolhub.W014``).

Checked and holding:
- ``transaction_statements_unbounded``, ``written_past_bound`` and ``transaction_idle_at_least`` were already
  transaction-local (``SET LOCAL`` / ``set_config(..., true)``): they hold behind a transaction pooler (the first
  test sends both in pooled mode and finds no session-level setting).
- Without the setting nothing changes (a direct connection, or a session pooler): the session bounds, ``migrate``'s
  ``RESET`` and the operator commands' lift are as reviews cw, cz, dm and do left them; ``toolhub_db_roles`` sets no
  role bound (a role bound would bound operator commands, whose ``RESET`` returns to it).
- Probed by hand against PgBouncer 1.18 in ``pool_mode = transaction``, ``pool_size = 1`` (a toolhub process and a
  second plain client sharing one server connection; not a committed test: the tests must not need PgBouncer).
  Setting off, no role bound: the other client saw ``statement_timeout`` 0, then 30s once toolhub's connection opened
  (its ``set_config`` leaked to it), 0 after an operator command's statement (its ``RESET``), 30s after the command,
  0 after ``migrate_unbounded``. Setting on, the role bounded by ``toolhub_db_roles``: 30s throughout for the other
  client; the operator command saw 0 inside its transaction and the role's 30s outside one; ``check --deploy`` gave
  ``toolhub.W014`` connecting as a role without bounds and nothing as the bounded role.

Limits (documented, not fixed): behind the pooler an operator command's statements outside a transaction keep the
role's bound, and a transaction whose first statement is a raw psycopg one (``toolhub.prepared``) is not lifted;
``verify_audit --workers``' forked processes inherit the lift (the wrapper lives on the connection objects the fork
copies; read from the code, not probed).
"""

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.core.checks import run_checks
from django.core.management import call_command
from django.db import connection, transaction
from django.test import override_settings

from toolhub.db_timeouts import migrate_unbounded, transaction_idle_at_least, transaction_statements_unbounded
from toolhub.operator_command import OperatorCommand

pytestmark = [pytest.mark.postgres]

#: A statement that changes a setting for the session (not the transaction): ``SET x``, ``SET SESSION x``, ``RESET``,
#: ``set_config(..., false)``.
SESSION_LEVEL = re.compile(
    r"(^|;)\s*(RESET\b|SET\s+(?!LOCAL\b)(SESSION\s+)?\w)|set_config\s*\([^;]*?,\s*false\s*\)", re.IGNORECASE
)


@pytest.fixture
def pooled() -> Iterator[None]:
    with override_settings(TOOLHUB={**settings.TOOLHUB, "TRANSACTION_POOLER": True}):
        yield


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement psycopg sends (Django's cursors, server-side cursors and raw ones alike)."""
    statements: list[str] = []

    def capturing(original: Any) -> Any:
        def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            statements.append(query if isinstance(query, str) else repr(query))
            return original(self, query, *args, **kwargs)

        return execute

    for cls in (psycopg.Cursor, psycopg.ServerCursor):
        monkeypatch.setattr(cls, "execute", capturing(cls.execute))
    monkeypatch.setattr(psycopg.Cursor, "executemany", capturing(psycopg.Cursor.executemany))
    return statements


class _Command(OperatorCommand):
    """An operator command that reads the statement bound inside a transaction and outside one."""

    seen: dict[str, str] = {}

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            _Command.seen["in a transaction"] = cursor.fetchone()[0]
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            _Command.seen["in the next one"] = cursor.fetchone()[0]
        with connection.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            _Command.seen["outside one"] = cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
@override_settings(DATABASE_STATEMENT_TIMEOUT=30, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=300)
def test_behind_a_transaction_pooler_no_session_level_setting_is_ever_sent(pooled: None, sent: list[str]) -> None:
    """Found: a new connection's bounds were ``set_config(..., false)``, ``migrate`` and operator commands sent
    ``RESET`` and ``set_config(..., false)``: behind a transaction pooler each stays on a server connection that
    then serves other clients. Expect: with ``TRANSACTION_POOLER`` none of them sends a session-level setting; the
    operator command's lift is ``SET LOCAL``, as the atomic tool's and the checkpoint's."""
    connection.close()
    with connection.cursor() as cursor:  # connection_created
        cursor.execute("SELECT 1")
    migrate_unbounded(None, using="default")
    call_command(_Command())
    with transaction.atomic():
        transaction_idle_at_least(10_000)
        transaction_statements_unbounded()
    connection.close()

    assert "SET LOCAL statement_timeout = 0" in sent
    assert any("set_config" in statement and "true" in statement for statement in sent)
    # Django's own: it sets the session's TimeZone where the server's differs (the role's, set by toolhub_db_roles
    # behind a pooler, makes it send none); the same value from every client of the pool.
    assert [s for s in sent if SESSION_LEVEL.search(s) and s != "SELECT set_config('TimeZone', %s, false)"] == []


@pytest.mark.django_db(transaction=True)
def test_behind_a_transaction_pooler_an_operator_command_lifts_its_bound_per_transaction(pooled: None) -> None:
    """Found: an operator command ``RESET`` the statement bound of its session, which behind a transaction pooler is a
    server connection that serves requests next. Expect: each of its transactions runs without the bound (``SET
    LOCAL``); its session, and the server connection after it, keep the role's bound."""
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = '7s'")  # stands for the role's bound this server connection has
    try:
        _Command.seen.clear()
        call_command(_Command())
        with connection.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            after = cursor.fetchone()[0]
    finally:
        connection.close()

    assert _Command.seen == {"in a transaction": "0", "in the next one": "0", "outside one": "7s"}
    assert after == "7s"


def _role_settings(role: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(array_agg(c), '{}') FROM pg_db_role_setting r, unnest(r.setconfig) c "
            "WHERE r.setrole = (SELECT oid FROM pg_roles WHERE rolname = %s) "
            "AND r.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [role],
        )
        return sorted(cursor.fetchone()[0])


@pytest.mark.django_db
@override_settings(DATABASE_STATEMENT_TIMEOUT=45, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=300)
def test_behind_a_transaction_pooler_toolhub_db_roles_bounds_the_role() -> None:
    """Found: behind a transaction pooler the only bounds that hold on every server connection are the role's, and
    ``toolhub_db_roles`` set none. Expect: with ``TRANSACTION_POOLER`` it sets both on the role, in this database;
    without it, none (operator commands' ``RESET`` returns to the role's bound)."""
    call_command("toolhub_db_roles", "--role", "toolhub_dv_direct", stdout=None)
    with override_settings(TOOLHUB={**settings.TOOLHUB, "TRANSACTION_POOLER": True}):
        call_command("toolhub_db_roles", "--role", "toolhub_dv_pooled", stdout=None)

    assert _role_settings("toolhub_dv_direct") == []
    assert _role_settings("toolhub_dv_pooled") == [
        "TimeZone=UTC",
        "idle_in_transaction_session_timeout=300000",
        "plan_cache_mode=force_generic_plan",  # review ep: the prepared statements' plan, no session SET
        "statement_timeout=45000",
    ]


@pytest.mark.django_db
@override_settings(DATABASE_STATEMENT_TIMEOUT=45, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=300)
def test_behind_a_transaction_pooler_the_deploy_check_names_a_role_without_bounds(pooled: None) -> None:
    """Found: nothing told an operator behind a transaction pooler that the role carries no bound. Expect:
    ``check --deploy`` names the role and the missing bounds (``toolhub.W014``) until the role has them."""

    def w014() -> list[str]:
        return [message.msg for message in run_checks(include_deployment_checks=True) if message.id == "toolhub.W014"]

    before = w014()
    with connection.cursor() as cursor:
        cursor.execute("SELECT quote_ident(current_user), quote_ident(current_database())")
        role, database = cursor.fetchone()
        cursor.execute(f"ALTER ROLE {role} IN DATABASE {database} SET statement_timeout = 45000")
        partly = w014()
        cursor.execute(f"ALTER ROLE {role} IN DATABASE {database} SET idle_in_transaction_session_timeout = '5min'")

    assert len(before) == 1
    assert "statement_timeout, idle_in_transaction_session_timeout" in before[0]
    assert len(partly) == 1
    assert "statement_timeout" not in partly[0].split(": ")[-1]
    assert w014() == []
