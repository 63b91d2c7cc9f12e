"""Time bounds behind a pooler in transaction mode (``TOOLHUB["TRANSACTION_POOLER"]``): none set per session.

Behind PgBouncer in transaction pooling a client's ``SET`` (or ``set_config(..., false)``) or ``RESET`` stays on the
server connection that ran it, which then serves other clients' transactions: an operator command's or ``migrate``'s
``RESET`` left a pooled server connection that later served requests without a statement bound, and a client's own
bounds did not follow it to its next transaction. With the setting on, toolhub sends no session-level setting at all:

- the bounds are the role's (``ALTER ROLE ... IN DATABASE ... SET``), which every server connection of the pool takes
  when it opens; ``toolhub_db_roles`` sets them for the role it manages (``role_settings_set``) and ``check --deploy``
  names a role without them that the server's configuration does not set either (``toolhub.W014``);
- an operator command lifts the statement bound with ``SET LOCAL`` as each of its transactions begins
  (``transactions_unbounded``); its statements outside a transaction keep the role's bound;
- ``migrate`` lifts nothing: it runs as the owner role, which toolhub does not bound;
- the generic plans of prepared statements (``toolhub.prepared``) are the role's too (``plan_cache_mode``);
- a chunked read (``QuerySet.iterator()``) outside a transaction takes a client-side cursor
  (``connection_chunked_reads``): Django's server-side cursor there is ``WITH HOLD``, which outlives the statement
  that declared it, so its next ``FETCH`` could reach another server connection. Inside a transaction the server-side
  cursor is the transaction's own and still streams (Django's ``DISABLE_SERVER_SIDE_CURSORS`` would load every
  export and verification whole into memory).
"""

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning, register
from django.db import DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from toolhub.conf import toolhub_settings
from toolhub.prepared import GENERIC_PLAN_SETTING

#: The settings (seconds) and the PostgreSQL parameters they bound (as ``toolhub.db_timeouts.BOUNDS``).
ROLE_BOUNDS = {
    "DATABASE_STATEMENT_TIMEOUT": "statement_timeout",
    "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT": "idle_in_transaction_session_timeout",
}

_LIFT_SQL = "SET LOCAL statement_timeout = 0"


def pooled() -> bool:
    """Whether toolhub connects through a pooler in transaction mode (no session-level setting is sent)."""
    return toolhub_settings().TRANSACTION_POOLER


def role_settings_set(cursor: Any, quoted_role: str, quoted_database: str, time_zone: str) -> list[str]:
    """Bound ``quoted_role``'s sessions in ``quoted_database`` as toolhub's settings say (0: left as it is).

    Returns what was set (``name=value``). The role's settings hold on every server connection a pooler opens for it.
    Its ``TimeZone`` becomes Django's too: Django sets it per session (``set_config``) where it differs; so does the
    plan of prepared statements, which ``toolhub.prepared`` sets per session without a pooler.
    """
    cursor.execute(f"ALTER ROLE {quoted_role} IN DATABASE {quoted_database} SET timezone = %s", [time_zone])
    done = [f"TimeZone={time_zone}"]
    if toolhub_settings().PREPARED_STATEMENTS:
        name, value = GENERIC_PLAN_SETTING
        cursor.execute(f"ALTER ROLE {quoted_role} IN DATABASE {quoted_database} SET {name} = {value}")
        done.append(f"{name}={value}")
    for setting, name in ROLE_BOUNDS.items():
        ms = int(getattr(settings, setting, 0)) * 1000
        if ms > 0:
            cursor.execute(f"ALTER ROLE {quoted_role} IN DATABASE {quoted_database} SET {name} = {ms}")
            done.append(f"{name}={ms}ms")
    return done


#: Of each bound wanted, the value PostgreSQL applies to this role here, as written (none: NULL): the role's in this
#: database over the role's own over the database's (a role-in-database ``0`` unbounds a bounded database).
_APPLIED_SQL = """
SELECT b.name, (
    SELECT substr(c.setting, strpos(c.setting, '=') + 1)
    FROM pg_db_role_setting r, unnest(r.setconfig) AS c(setting)
    WHERE r.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
      AND r.setrole IN (0, (SELECT oid FROM pg_roles WHERE rolname = current_user))
      AND split_part(c.setting, '=', 1) = b.name
    ORDER BY r.setrole <> 0 DESC, r.setdatabase <> 0 DESC
    LIMIT 1
) FROM unnest(%s::text[]) AS b(name)
"""

#: A value as PostgreSQL reads a millisecond bound (``'0 ms'``, ``'00'``, ``'0.4ms'``: ``0``): parsed by
#: ``lock_timeout``, of the same kind, for this transaction only (rolled back), since setting a bound itself would
#: bound the check's next statement or idle moment.
_READ_AS_BOUND_SQL = "SELECT set_config('lock_timeout', %s, true)"

#: Each bound back to the value this session started with, for a savepoint rolled back after: its ``source`` then
#: says where that value came from (``pg_settings`` has no column for it; ``reset_val`` alone would not tell a
#: starting value the server gave from one a role or database setting gave, since removed).
_STARTING_SQL = "SELECT set_config(name, NULL, true) FROM unnest(%s::text[]) AS b(name)"
_SERVER_SQL = "SELECT name, setting, source FROM pg_settings WHERE name = ANY(%s)"

#: Sources of a starting value that are the server's own configuration; any other (the client's startup ``options``,
#: which PgBouncer does not pass to its server connections, or the catalogue's settings as they were when this
#: session began, read afresh from the catalogue instead) is not the server's.
_THE_SERVERS = {"default", "environment variable", "configuration file", "command line"}


def server_bounds(cursor: Any, names: list[str]) -> dict[str, int | None]:
    """The value (milliseconds) of each bound in ``names`` the server itself gives a new connection; none: unknown.

    ``postgresql.conf``, ``ALTER SYSTEM``, the command line or the default: the value this session started with when
    the server's configuration gave it. Not the session's value, which toolhub's own ``SET`` (pooler off when the
    connection opened) or, behind a pooler, another client's may have changed; and not a starting value from the
    client's ``options`` or from a role or database setting, which a long-lived (pooled) session keeps after the
    setting is gone. Inside a transaction: the bounds are reset for a savepoint only, rolled back.
    """
    cursor.execute("SAVEPOINT toolhub_server_bounds")
    try:
        cursor.execute(_STARTING_SQL, [names])
        cursor.execute(_SERVER_SQL, [names])
        rows = cursor.fetchall()
    finally:
        cursor.execute("ROLLBACK TO SAVEPOINT toolhub_server_bounds")
        cursor.execute("RELEASE SAVEPOINT toolhub_server_bounds")
    bounds: dict[str, int | None] = dict.fromkeys(names)
    for name, setting, source in rows:
        if source in _THE_SERVERS:
            bounds[name] = int(setting)
    return bounds


def role_unbounded(using: str = "default") -> tuple[str, list[str]]:
    """The connecting role and the bounds toolhub's settings ask for that a new server connection of it lacks.

    The bound is the one PostgreSQL applies to a new connection: the role's in this database over the role's over the
    database's (the catalogue) over the server's configuration (``server_bounds``). A stored value is read as
    PostgreSQL applies it, not as written: it keeps ``'0 ms'`` or ``'00'`` as given.
    """
    wanted = [name for setting, name in ROLE_BOUNDS.items() if int(getattr(settings, setting, 0)) > 0]
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        cursor.execute("SELECT current_user")
        role = cursor.fetchone()[0]
        cursor.execute(_APPLIED_SQL, [wanted])
        applied = cursor.fetchall()
        server = server_bounds(cursor, wanted)
        missing = []
        for name, value in applied:
            if value is None:
                unbounded = not server[name]
            else:
                cursor.execute(_READ_AS_BOUND_SQL, [value])
                unbounded = cursor.fetchone()[0] == "0"
            if unbounded:
                missing.append(name)
        transaction.set_rollback(True, using=using)
        return role, missing


@register("toolhub", deploy=True)
def check_pooler_role_bounds(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``--deploy`` with ``TRANSACTION_POOLER``: toolhub sets no bound itself, the role or server must set them."""
    if not pooled() or connections["default"].vendor != "postgresql":
        return []
    try:
        role, missing = role_unbounded()
    except DatabaseError as exc:
        problem = f"could not be read ({type(exc).__name__})"
        role, first = (
            "<the application role>",
            (
                "Make the database reachable as the application role (DATABASE_URL) and run the check again; if the "
                "bounds are missing, run"
            ),
        )
    else:
        if not missing:
            return []
        problem = f"are not set for role {role!r} in this database: {', '.join(missing)}"
        first = "Run"
    return [
        Warning(
            f"TOOLHUB['TRANSACTION_POOLER'] is on, so toolhub sets no time bound per session, and the role's bounds "
            f"{problem}: its statements and idle transactions may run for ever.",
            hint=f"{first} `manage.py toolhub_db_roles --role {role}` as the owner with the same settings (it sets "
            "DATABASE_STATEMENT_TIMEOUT and DATABASE_IDLE_IN_TRANSACTION_TIMEOUT on the role), or ALTER ROLE ... "
            "IN DATABASE ... SET statement_timeout = ...; idle_in_transaction_session_timeout likewise (or set both "
            "in postgresql.conf). A bound given only in the connection's options does not reach the pool.",
            id="toolhub.W014",
        )
    ]


def _lift_at_transaction_start(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict) -> Any:
    """An execute wrapper: the first statement of a transaction goes after ``SET LOCAL statement_timeout = 0``."""
    connection = context["connection"]
    raw = connection.connection
    if connection.vendor == "postgresql" and raw is not None and not connection.get_autocommit():
        from psycopg.pq import TransactionStatus

        if raw.info.transaction_status == TransactionStatus.IDLE:
            raw.execute(_LIFT_SQL)  # begins the transaction: the lift ends with it, on whichever server connection
    return execute(sql, params, many, context)


@contextmanager
def transactions_unbounded() -> Iterator[None]:
    """While it lasts, each transaction of this thread's connections runs without the statement bound (``SET LOCAL``).

    Django's statements only (a raw psycopg statement opening a transaction keeps the bound); statements outside a
    transaction keep the role's bound.
    """
    with ExitStack() as stack:
        for connection in connections.all():
            stack.enter_context(connection.execute_wrapper(_lift_at_transaction_start))
        yield


def connection_chunked_reads(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """``connection_created``: behind the pooler, a chunked read outside a transaction takes a client-side cursor.

    Outside a transaction Django declares its server-side cursor ``WITH HOLD``: session state, which a transaction
    pooler does not keep (the next ``FETCH`` may reach another server connection: "cursor does not exist"), and which
    stays on the server connection that declared it. Such a read is materialized whole on the server anyway; a
    client-side cursor reads the same rows. Read when the cursor is made, so the setting may change at run time.

    ``create_cursor`` is replaced, not ``chunked_cursor``: a new connection opens inside ``chunked_cursor`` (its
    first statement a chunked read), and Django makes the cursor only once it is open, through this replacement.
    """
    if connection.vendor != "postgresql" or "create_cursor" in vars(connection):
        return
    create_cursor = connection.create_cursor

    def chunked_cursor_held_by_none(name: str | None = None) -> Any:
        if name and pooled() and connection.get_autocommit():
            return create_cursor(None)
        return create_cursor(name)

    connection.create_cursor = chunked_cursor_held_by_none  # type: ignore[method-assign]
