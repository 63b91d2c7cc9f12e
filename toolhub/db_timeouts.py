"""Time bounds on every PostgreSQL connection: a statement, and a transaction left idle, cannot hold on for ever.

PostgreSQL bounds neither by default: a slow or stuck query held its connection, its locks and the request or worker
waiting on it; a transaction left idle (a streamed export whose client stopped reading, a request stuck between
statements) held its snapshot and row locks, delaying vacuum. ``DATABASE_STATEMENT_TIMEOUT`` and
``DATABASE_IDLE_IN_TRANSACTION_TIMEOUT`` (seconds; 0 leaves the server's) are set on each connection as it opens,
never lengthening a shorter bound the server, role, database or the URL's ``options`` set. Set with ``SET`` rather
than the URL's startup ``options``, which PgBouncer refuses by default. ``migrate`` lifts them for its connection
(``RESET``: back to the server's or role's): an index build or table rewrite may take longer than any request. An
operator's command lifts the statement bound for every connection of its process (``operator_statements_unbounded``):
its operator watches it, and its work (a whole trail read or written, a wait on the locks of live traffic) may take
longer than a request's. Behind a pooler in transaction mode (``TOOLHUB["TRANSACTION_POOLER"]``) none of this sends a
session-level setting: the bounds are the role's, lifted only with ``SET LOCAL`` (``toolhub.db_pooler``).
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg.errors
from django.conf import settings
from django.db import DatabaseError, OperationalError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from toolhub.db_pooler import pooled, transactions_unbounded

#: The settings (seconds) and the PostgreSQL parameters they bound (milliseconds).
BOUNDS = {
    "DATABASE_STATEMENT_TIMEOUT": "statement_timeout",
    "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT": "idle_in_transaction_session_timeout",
}

# One round trip for both; a parameter already bounded below toolhub's keeps its value (0 there means none). Each
# row gives the parameter's value after it (ms), toolhub's or not: what an atomic tool's transaction must outlast.
_BOUND_SQL = """
SELECT name, ms, CASE WHEN bounded THEN set_config(name, ms::text, false) END
FROM (SELECT s.name, b.ms > 0 AS bounded, CASE WHEN b.ms <= 0 THEN s.setting::bigint WHEN s.setting::bigint = 0
             THEN b.ms ELSE LEAST(s.setting::bigint, b.ms) END AS ms
      FROM pg_settings s JOIN (VALUES (%s, %s::bigint), (%s, %s::bigint)) AS b(name, ms) ON s.name = b.name) AS bound
"""

#: The attribute of a connection holding its session's idle bound (ms, 0: none), as read when it was last set.
_IDLE_BOUND_ATTRIBUTE = "toolhub_idle_bound_ms"


#: How many operator commands this process runs (nested: ``load_demo`` runs ``toolhub_roles``); while any, no
#: statement bound of toolhub's on its connections. Process-wide: a command's forked workers inherit it.
_operator_commands = 0


def connection_bounded(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """``connection_created``: bound a new PostgreSQL connection's statements and idle transactions."""
    if connection.vendor != "postgresql":
        return
    if pooled():  # the role's bounds; the session's idle bound is unknown (each transaction may get another)
        setattr(connection, _IDLE_BOUND_ATTRIBUTE, None)
        return
    bounds = [
        (name, 0 if _operator_commands and name == "statement_timeout" else int(getattr(settings, setting, 0)) * 1000)
        for setting, name in BOUNDS.items()
    ]
    with connection.cursor() as cursor:
        cursor.execute(_BOUND_SQL, [value for bound in bounds for value in bound])
        _idle_bound_learned(connection, {name: ms for name, ms, _ in cursor.fetchall()})


def _idle_bound_learned(connection: BaseDatabaseWrapper, settings_now: dict[str, Any]) -> None:
    """Keep the idle bound ``connection``'s session has now, whoever set it (toolhub, the server, role or URL)."""
    setattr(connection, _IDLE_BOUND_ATTRIBUTE, int(settings_now["idle_in_transaction_session_timeout"]))


def migrate_unbounded(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """``pre_migrate``: the migrating connection goes back to the server's or role's bounds, without toolhub's."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return
    if pooled():  # no RESET to leave on a pooled server connection: migrate runs as the owner, which has no bound
        setattr(connection, _IDLE_BOUND_ATTRIBUTE, None)
        return
    with connection.cursor() as cursor:
        cursor.execute("; ".join(f"RESET {name}" for name in BOUNDS.values()))
        cursor.execute("SELECT name, setting FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'")
        _idle_bound_learned(connection, dict(cursor.fetchall()))


@contextmanager
def operator_statements_unbounded() -> Iterator[None]:
    """While an operator's command runs, its process's connections go without toolhub's statement bound.

    The ones open now are ``RESET`` (back to the server's or role's bound, as ``migrate``'s), the ones opened meanwhile
    never take it; after the outermost command, the ones open before get their bound back and the others toolhub's.
    The idle bound stays. Behind a pooler in transaction mode, no session is touched: each transaction of the
    command's takes ``SET LOCAL`` instead (``toolhub.db_pooler.transactions_unbounded``).
    """
    if pooled():
        with transactions_unbounded():
            yield
        return
    global _operator_commands
    _operator_commands += 1
    before: dict[str, str] = {}

    def lift(connection: BaseDatabaseWrapper, cursor: Any) -> None:
        cursor.execute("SHOW statement_timeout")
        before[connection.alias] = cursor.fetchone()[0]
        cursor.execute("RESET statement_timeout")

    def restore(connection: BaseDatabaseWrapper, cursor: Any) -> None:
        if connection.alias in before:
            cursor.execute("SELECT set_config('statement_timeout', %s, false)", [before[connection.alias]])
        else:
            connection_bounded(None, connection)

    try:
        if _operator_commands == 1:
            _each_open_connection(lift)
        yield
    finally:
        _operator_commands -= 1
        if not _operator_commands:
            _each_open_connection(restore)


def _each_open_connection(action: Callable[[BaseDatabaseWrapper, Any], None]) -> None:
    """``action(connection, cursor)`` on each open PostgreSQL connection of this thread that can take a statement.

    One the server ended (or whose transaction failed) is left as it is: its owner sees its own error, not this one.
    """
    for connection in connections.all(initialized_only=True):
        if connection.vendor != "postgresql" or connection.connection is None or connection.needs_rollback:
            continue
        try:
            with connection.cursor() as cursor:
                action(connection, cursor)
        except DatabaseError:
            continue


#: What an atomic tool's transaction is allowed idle beyond the tool's own timeout (its outcome is written after).
IDLE_SPARE_SECONDS = 60

#: PostgreSQL's largest value of a millisecond bound (a 32-bit int, 24.8 days); a larger one is refused.
MAX_BOUND_MS = 2**31 - 1

_IDLE_AT_LEAST_SQL = """
SELECT set_config(name, GREATEST(setting::bigint, %s)::text, true)
FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout' AND setting::bigint > 0
"""


def transaction_idle_at_least(seconds: float) -> None:
    """Let the current transaction stay idle ``seconds`` and a spare minute, when its session's idle bound is shorter.

    An atomic tool runs inside its transaction, idle between its statements, for up to its timeout: the idle bound
    would end its session (and its work) first. That is the bound the session has, toolhub's or a shorter one of the
    server, role or URL (kept for everything else), read when it was set. ``SET LOCAL``: the bound is back when the
    transaction ends. No statement at all for a tool within it (every tool with the default timeout). A session whose
    bound was never read (not opened by Django) takes the statement.
    """
    # A tool's timeout may be any positive number (the default up to 100 years): past PostgreSQL's range, its largest.
    needed_ms = min((seconds + IDLE_SPARE_SECONDS) * 1000, MAX_BOUND_MS)
    connection = connections["default"]
    if connection.vendor != "postgresql":
        return
    bound_ms = getattr(connection, _IDLE_BOUND_ATTRIBUTE, None)
    if bound_ms is not None and (not bound_ms or needed_ms <= bound_ms):
        return
    with connection.cursor() as cursor:
        cursor.execute(_IDLE_AT_LEAST_SQL, [int(needed_ms)])


def transaction_statements_unbounded() -> None:
    """Lift the statement bound for the rest of the current transaction (``SET LOCAL``), on PostgreSQL.

    For the work an operator or beat asks of the whole trail, which may rightly take longer than a request: an audit
    checkpoint waits for the one being signed and checks every chain since the last. Inside ``transaction.atomic``.
    """
    connection = connections["default"]
    if connection.vendor == "postgresql" and int(getattr(settings, "DATABASE_STATEMENT_TIMEOUT", 0)):
        _statement_bound_lifted(connection)


def _statement_bound_lifted(connection: BaseDatabaseWrapper) -> None:
    """No statement bound for the rest of ``connection``'s current transaction (``SET LOCAL``)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = 0")


_T = TypeVar("_T")


def cancelled_by_bound(exc: BaseException) -> bool:
    """Whether a database error is a statement cancelled (``statement_timeout``, or an operator's cancel)."""
    return isinstance(exc, OperationalError) and isinstance(exc.__cause__, psycopg.errors.QueryCanceled)


def written_past_bound(write: Callable[[], _T]) -> _T:
    """``write()``; cancelled by the statement bound (its locks waited for past it), again without that bound.

    A call's outcome is written after its tool's effects happened: cancelled, it was lost, the call left
    ``running``. The retry waits for the locks as long as their holder keeps them (itself under the bounds), in a
    transaction of its own (``SET LOCAL``: the bound is back after). Outside any transaction only: inside one the
    cancel aborted it, and its owner decides. No statement more unless the bound fired.
    """
    connection = connections["default"]
    try:
        return write()
    except OperationalError as exc:
        if not cancelled_by_bound(exc) or connection.in_atomic_block:
            raise
    with transaction.atomic():
        _statement_bound_lifted(connection)
        return write()
