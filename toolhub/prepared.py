"""Cursors whose statements PostgreSQL binds and, once repeated, prepares: the hot path's SQL planned once.

Django binds parameters on the client, so PostgreSQL parses and plans every statement afresh. The
statements a governed call, an approval or a loop step repeats on every call (the one-statement audited
writes of ``toolhub.audit_sql``, the locked reads of a request or a run, the guarded moves of
``toolhub.transitions``) are built once per process as text; this cursor lets each connection plan
each of them once too.
"""

import functools
import weakref
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.utils.connection import ConnectionProxy

__all__ = ["prepared_cursor"]

#: Executions of one statement on one connection before psycopg prepares it.
_PREPARE_AFTER = 2
#: The session setting that plans prepared statements generically; behind a transaction pooler the role's instead
#: (``toolhub_db_roles``, ``toolhub.db_pooler.role_settings_set``): a session's ``SET`` would stay on one server
#: connection of the pool.
GENERIC_PLAN_SETTING = ("plan_cache_mode", "force_generic_plan")
#: Connections whose session plans prepared statements generically (see ``prepared_cursor``).
_GENERIC_PLANS: "weakref.WeakSet[Any]" = weakref.WeakSet()


def prepared_cursor(connection: BaseDatabaseWrapper) -> CursorWrapper:
    """A cursor whose statements the server binds and, once repeated, prepares (psycopg 3).

    Django binds parameters on the client, so PostgreSQL parses and plans every statement afresh: for
    the audited write, planning alone cost about as much as running it. A server-binding cursor lets psycopg
    prepare a statement once it repeats (``prepare_threshold``; Django leaves it unset, which psycopg reads
    as never), so each connection plans each shape once. Wrapped as Django wraps its own cursors: errors,
    execute wrappers and query logging (``CaptureQueriesContext``, the query-count tests) behave the same.
    ``PREPARED_STATEMENTS`` off, or a database other than PostgreSQL: Django's usual cursor.

    The session plans prepared statements generically (``plan_cache_mode``): PostgreSQL would otherwise plan
    each of the first five executions afresh (about a millisecond for the audited writes), then keep doing so
    whenever the generic plan looks costlier. Every statement prepared this way looks rows up by key, where
    the generic plan is the custom one; only prepared statements read this setting, and only these cursors
    prepare.

    ``connection`` may be ``django.db.connection``: it is resolved to its wrapper once here, since every
    attribute read through that proxy looks the wrapper up again (a few µs each, several per cursor).
    """
    from toolhub.conf import toolhub_settings

    if isinstance(connection, ConnectionProxy):
        connection = connections[connection._alias]
    configured = toolhub_settings()
    if connection.vendor != "postgresql" or not configured.PREPARED_STATEMENTS:
        return connection.cursor()
    server_binding_cursor, idle = _psycopg()
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:
        # Only server-binding cursors ever prepare, so Django's own (client-binding) queries are unaffected.
        raw.prepare_threshold = _PREPARE_AFTER
    if raw not in _GENERIC_PLANS and raw.autocommit and raw.info.transaction_status == idle:
        # Outside a transaction, so that no rollback can take it back; behind a transaction pooler (no session-level
        # setting: ``toolhub.db_pooler``) the role's.
        if not configured.TRANSACTION_POOLER:
            raw.execute("SET plan_cache_mode = force_generic_plan")  # GENERIC_PLAN_SETTING
        _GENERIC_PLANS.add(raw)
    cursor = server_binding_cursor(raw)
    if connection.queries_logged:
        return _StatementDebugCursor(cursor, connection)
    return connection.make_cursor(cursor)


@functools.cache
def _psycopg() -> tuple[Any, Any]:
    """The server-binding cursor class and the idle transaction status, imported once (psycopg only)."""
    from django.db.backends.postgresql.base import ServerBindingCursor
    from psycopg.pq import TransactionStatus

    return ServerBindingCursor, TransactionStatus.IDLE


class _StatementDebugCursor(CursorDebugWrapper):
    """Logs the statement's text as given: a prepared statement's executed text is not kept by psycopg."""

    def execute(self, sql: str, params: Any = None) -> Any:
        with self.debug_sql(sql, params):
            return CursorWrapper.execute(self, sql, params)
