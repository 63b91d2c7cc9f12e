"""Governance lookups cached per process behind a version stamp, so any change applies to the very next call.

Every table whose rows decide who may call what (the catalogue, tool groups, grants, tenants and memberships,
users' superuser and active bits and groups, and tables other apps watch such as approval rules) carries a trigger
that stamps ``toolhub_governanceversion`` in the same transaction as the change, whatever wrote it: the
admin, a service, a bulk update or raw SQL (a TRUNCATE included). A call reads that one row; when its stamp
differs from the one the process cached under, the cache is dropped. There is no time to live: a revoked
grant, a disabled tool or a changed rule is seen by the next call in every process.

Stamps come from a sequence on PostgreSQL and from random numbers on SQLite, so a change that rolls back
never hands its stamp to a later, different change (a process may have cached what it saw in between).
Without the row (an emptied database), nothing is cached.
"""

import contextvars
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from django.db import connection as default_connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import DatabaseError

__all__ = [
    "governance_watch",
    "governance_watched_tables",
    "governance_cached",
    "governance_cached_many",
    "GovernanceHold",
    "governance_scope",
    "governance_stamp_after_sql",
    "GOVERNANCE_STAMP_CHECK",
    "GOVERNANCE_STAMP_SQL",
    "governance_stamp",
    "governance_hold",
    "governance_scope_stamp",
    "governance_triggers_install",
]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

#: Entries a process keeps for one stamp before it starts afresh (principals times lookups).
MAX_ENTRIES = 10_000

_READ_STAMP = "SELECT stamp FROM toolhub_governanceversion WHERE id = 1"

#: Watched tables and the statement events that change what they govern.
_watched: dict[str, str] = {}


def governance_watch(table: str, *, events: str = "INSERT OR UPDATE OR DELETE") -> None:
    """Stamp a new governance version whenever ``table`` changes (installed by ``migrate``).

    ``events``: the statements that change it; on PostgreSQL a watched DELETE covers TRUNCATE too.

    Apps whose tables feed authorization or approval policy call this from ``AppConfig.ready``.
    """
    _watched[table] = events


def governance_watched_tables() -> dict[str, str]:
    """The watched tables and their trigger events: the apps' and the accounts' (named from ``AUTH_USER_MODEL``).

    The accounts' tables are read from the user model each time (``toolhub.account_tables``), never spelled
    ``auth_user``: a project with its own user model keeps its users, their groups and permissions elsewhere.
    """
    from toolhub.account_tables import account_governance_tables

    return {**_watched, **account_governance_tables()}


class _Cache:
    """What one process loaded while the stamp was ``stamp``."""

    def __init__(self, stamp: int | None) -> None:
        self.stamp = stamp
        self.entries: dict[Hashable, Any] = {}

    def get(self, key: Hashable, loader: Callable[[], T]) -> T:
        try:
            return self.entries[key]
        except KeyError:
            pass
        value = loader()
        self._keep(key, value)
        return value

    def get_many(self, keys: list[K], loader: Callable[[list[K]], Mapping[K, T]]) -> dict[K, T]:
        # One dict read throughout: another thread's ``_keep`` may start afresh (a new dict) between a test and a read.
        entries = self.entries
        found = {key: entries[key] for key in keys if key in entries}
        missing = [key for key in keys if key not in found]
        if missing:
            loaded = loader(missing)
            for key in missing:
                found[key] = loaded[key]
                self._keep(key, loaded[key])
        return found

    def _keep(self, key: Hashable, value: Any) -> None:
        if self.stamp is not None:
            if len(self.entries) >= MAX_ENTRIES:
                self.entries = {}
            self.entries[key] = value


_lock = threading.Lock()
_current = _Cache(None)
_scope: contextvars.ContextVar[_Cache | None] = contextvars.ContextVar("toolhub_governance_scope", default=None)


def _read_stamp() -> int | None:
    try:
        with default_connection.cursor() as cursor:
            cursor.execute(_READ_STAMP)
            row = cursor.fetchone()
    except DatabaseError:
        # Before the migration that creates the table: no caching. Inside a transaction this would
        # abort it, so only an unmigrated database ever gets here.
        return None
    return row[0] if row else None


def _snapshot(stamp: int | None = None) -> _Cache:
    """The cache for the current stamp: the scope's, else under ``stamp`` (read by the caller) or one read now."""
    global _current
    scoped = _scope.get()
    if scoped is not None:
        return scoped
    if stamp is None:
        stamp = _read_stamp()
    if stamp is None:
        return _Cache(None)
    with _lock:
        if _current.stamp != stamp:
            _current = _Cache(stamp)
        return _current


class GovernanceHold:
    """One governance read kept for several scopes (one response's): ``governance_scope(hold=)``.

    The first scope reads the stamp (or uses the process's cache as ``governance_scope`` does); the later ones look
    up in what that read found and loaded, whatever the process has seen since. They never put an older stamp
    back as the process's current one, which would have every checked write of the process fail and decide again.
    """

    def __init__(self) -> None:
        self._cache: _Cache | None = None

    @property
    def stamp(self) -> int | None:
        """The stamp of the governance held (``None``: not read yet, or nothing cached)."""
        return self._cache.stamp if self._cache is not None else None


@contextmanager
def governance_scope(
    *, checked_by_write: bool = False, stamp: int | None = None, hold: GovernanceHold | None = None
) -> Iterator[int | None]:
    """Read the stamp once for everything looked up inside (one governed call's decisions); yield it.

    ``checked_by_write``: the caller's write checks the yielded stamp itself (``GOVERNANCE_STAMP_CHECK``
    in the same statement) and decides again when it moved, so the stamp this process last saw is
    used without reading it: a call that changes nothing pays no read for its governance.
    ``stamp``: the caller has just read it (``GOVERNANCE_STAMP_SQL`` in a read of its own, in its current
    transaction), so it stands for the read this scope would make: fresh as that read, one round trip fewer.
    ``hold``: the governance its first scope read, for the decisions of one reply made over several scopes
    (``GovernanceHold``); a stamp read earlier is never passed as ``stamp``.
    """
    scoped = _scope.get()
    if scoped is not None:
        yield scoped.stamp
        return
    if hold is not None and hold._cache is not None:
        cache = hold._cache
    else:
        current = _current
        cache = current if checked_by_write and current.stamp is not None else _snapshot(stamp)
        if hold is not None:
            hold._cache = cache
    token = _scope.set(cache)
    try:
        yield cache.stamp
    finally:
        _scope.reset(token)


def governance_scope_stamp() -> int | None:
    """The stamp of the ``governance_scope`` this runs in, read by nothing (``None`` outside one, or unknown)."""
    scoped = _scope.get()
    return scoped.stamp if scoped is not None else None


def governance_stamp(*, assume_current: bool) -> int | None:
    """The stamp this process's cache holds (``assume_current``: without reading it, when it has one) or reads.

    For a write that checks the stamp itself (``GOVERNANCE_STAMP_CHECK``): when that check fails, read it.
    """
    return governance_hold(assume_current=assume_current).stamp


def governance_hold(*, assume_current: bool) -> GovernanceHold:
    """``governance_stamp``'s governance itself, held: a later ``governance_scope(hold=)`` decides under it.

    A write that checked the stamp (a worker's claim) and decides after it (the re-check) keeps what it checked, not
    the number: passed as ``governance_scope(stamp=)`` once another thread read a newer one, that older stamp would
    go back as the process's current cache (empty, reloaded under the older label) and fail every checked write.
    """
    hold = GovernanceHold()
    current = _current
    hold._cache = current if assume_current and current.stamp is not None else _snapshot()
    return hold


#: The governance stamp as a scalar subquery: a read that needs it anyway carries it (``governance_scope(stamp=)``).
GOVERNANCE_STAMP_SQL = f"({_READ_STAMP})"

#: A condition true while the governance stamp is still ``%s``: a write guarded by it fails (touches no row)
#: when a governance change committed after the stamp its decisions were made under. It reads the stamp in
#: the statement's snapshot, taken before the statement waits for a lock (an audit chain's head): on
#: PostgreSQL the guarded write also returns the stamp read after its locks (``governance_stamp_after_sql``), and a
#: writer whose stamp moved meanwhile checks again before it acts (``ToolCall.governance_moved``).
GOVERNANCE_STAMP_CHECK = "EXISTS (SELECT 1 FROM toolhub_governanceversion WHERE id = 1 AND stamp = %s)"


def governance_stamp_after_sql(written: str) -> str:
    """PostgreSQL: the stamp as committed once ``written`` (SQL over what the statement wrote) is evaluated."""
    return f"toolhub_governance_stamp_after({written})"


def governance_cached(key: Hashable, loader: Callable[[], T]) -> T:
    """``loader()``'s value, cached until the next governance change; treat it as read-only."""
    return _snapshot().get(key, loader)


def governance_cached_many(keys: Iterable[K], loader: Callable[[list[K]], Mapping[K, T]]) -> dict[K, T]:
    """Each key's value, cached like ``governance_cached``; the keys not cached yet are loaded by one ``loader`` call.

    ``loader(missing)`` returns a value for each key it is given: lookups that would each cost a query (one per
    tenant of a reader) cost one together.
    """
    return _snapshot().get_many(list(dict.fromkeys(keys)), loader)


# --- the triggers ------------------------------------------------------------------------------------

_PG_FUNCTION = """
CREATE SEQUENCE IF NOT EXISTS toolhub_governance_stamp;
CREATE OR REPLACE FUNCTION toolhub_governance_bump() RETURNS trigger AS $$
BEGIN
    INSERT INTO toolhub_governanceversion (id, stamp) VALUES (1, nextval('toolhub_governance_stamp'))
    ON CONFLICT (id) DO UPDATE SET stamp = EXCLUDED.stamp;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql SET search_path = __SCHEMA__, pg_temp;
CREATE OR REPLACE FUNCTION toolhub_governance_stamp_after(bigint) RETURNS bigint AS $$
BEGIN
    -- VOLATILE: its query takes a fresh snapshot, after whatever the statement calling it waited for.
    RETURN (SELECT stamp FROM toolhub_governanceversion WHERE id = 1);
END;
$$ LANGUAGE plpgsql VOLATILE SET search_path = __SCHEMA__, pg_temp;
"""
# Both functions name their table and sequence in their own schema only (``pg_temp`` last, as the audit triggers'
# functions do since migration 0032): a temporary table a session creates cannot take the stamp in their place.


def _pg_events(events: str) -> str:
    """``events`` as PostgreSQL's trigger fires on them: a watched DELETE includes TRUNCATE.

    TRUNCATE removes every row without firing DELETE triggers (an operator revoking every grant at once from
    psql); unstamped, each process would go on answering from what it cached. SQLite has no TRUNCATE (its
    ``DELETE FROM t`` fires the row triggers).
    """
    return f"{events} OR TRUNCATE" if "DELETE" in events.split(" OR ") else events


def _quoted_events(events: str, quote: Callable[[str], str]) -> list[str]:
    """``events`` one by one, the columns of an ``UPDATE OF`` quoted (``quote``: the connection's ``quote_name``).

    Unquoted, PostgreSQL folds a column's name to lower case: a user model's flag in a column such as ``IsActive``
    (``db_column``, a legacy table) was not found, and installing the triggers raised (``migrate`` stopped).
    """
    quoted = []
    for event in events.split(" OR "):
        verb, _, columns = event.partition(" OF ")
        if columns:
            event = f"{verb} OF {', '.join(quote(column.strip()) for column in columns.split(','))}"
        quoted.append(event)
    return quoted


def governance_triggers_install(connection: BaseDatabaseWrapper | None = None) -> list[str]:
    """Create (or replace) the stamp row and a trigger on every watched table that exists; return those tables."""
    connection = connection or default_connection
    existing = set(connection.introspection.table_names())
    if "toolhub_governanceversion" not in existing:
        return []
    watched = governance_watched_tables()
    tables = [table for table in sorted(watched) if table in existing]
    quote = connection.ops.quote_name
    events = {table: " OR ".join(_quoted_events(watched[table], quote)) for table in tables}
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT current_schema()")
            cursor.execute(_PG_FUNCTION.replace("__SCHEMA__", quote(cursor.fetchone()[0])))
            cursor.execute(
                "INSERT INTO toolhub_governanceversion (id, stamp) VALUES (1, nextval('toolhub_governance_stamp')) "
                "ON CONFLICT (id) DO NOTHING"
            )
            for table in tables:
                cursor.execute(f"DROP TRIGGER IF EXISTS toolhub_governance_bump ON {quote(table)}")
                cursor.execute(
                    f"CREATE TRIGGER toolhub_governance_bump AFTER {_pg_events(events[table])} ON {quote(table)} "
                    "FOR EACH STATEMENT EXECUTE FUNCTION toolhub_governance_bump()"
                )
        elif connection.vendor == "sqlite":
            # Not INSERT OR REPLACE: an outer statement's conflict clause (Django's INSERT OR IGNORE of m2m
            # rows) overrides the trigger's, which would then keep the old stamp.
            bump = (
                "UPDATE toolhub_governanceversion SET stamp = random() WHERE id = 1; "
                "INSERT OR IGNORE INTO toolhub_governanceversion (id, stamp) VALUES (1, random())"
            )
            cursor.execute("INSERT OR IGNORE INTO toolhub_governanceversion (id, stamp) VALUES (1, random())")
            for table in tables:
                for event in _quoted_events(watched[table], quote):
                    name = quote(f"toolhub_gov_{table}_{event.split()[0].lower()}")
                    cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
                    cursor.execute(f"CREATE TRIGGER {name} AFTER {event} ON {quote(table)} BEGIN {bump}; END")
    return tables
