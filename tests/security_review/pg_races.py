"""Forcing one interleaving of PostgreSQL sessions in a test: a chain head held by another session, a wait
until a statement queues on a lock, an action run on a thread of its own (with its own connection)."""

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connection, connections

__all__ = ["chain_head_locked", "dsn", "in_thread", "wait_for_lock_waiter"]


def dsn() -> dict[str, Any]:
    params = connection.get_connection_params()
    return {k: v for k, v in params.items() if k in {"dbname", "user", "password", "host", "port"}}


@contextmanager
def chain_head_locked(chain: int) -> Iterator[psycopg.Connection]:
    """Another session holds chain ``chain``'s head row (an append to the tenant's chain not yet committed)."""
    locker = psycopg.connect(**dsn())
    locker.execute("SELECT seq FROM toolhub_auditchainhead WHERE chain = %s FOR UPDATE", [chain])
    try:
        yield locker
    finally:
        locker.rollback()
        locker.close()


def wait_for_lock_waiter(query_part: str, timeout: float = 10, *, count: int = 1) -> None:
    """Until ``count`` sessions of this database wait on a lock in a statement containing ``query_part``.

    Only the test's database: other test runs on the same server wait on their own locks. The server shows the first
    ``track_activity_query_size`` (1024) bytes of a statement: ``query_part`` is matched there.
    """
    watcher = psycopg.connect(**dsn(), autocommit=True)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            waiting = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
                "AND query ILIKE %s",
                [f"%{query_part}%"],
            ).fetchone()[0]
            if waiting >= count:
                return
            time.sleep(0.02)
        raise AssertionError(f"fewer than {count} sessions came to wait on a lock in {query_part!r}")
    finally:
        watcher.close()


def in_thread(action: Callable[[], Any], name: str = "") -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(action())
        except BaseException as exc:  # noqa: BLE001
            result.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, name=name or None)
    thread.start()
    return thread, result


def released_after_lock_wait(seconds: float, lockers: list[psycopg.Connection], timeout: float = 10) -> None:
    """Once a session of this database has waited for a lock past ``seconds``, roll the ``lockers`` back.

    For a wait that must outlast a statement bound (``toolhub.db_timeouts``): raises when none waited that long.
    """
    try:
        with psycopg.connect(**dsn(), autocommit=True) as watcher:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                waited = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' "
                    "AND clock_timestamp() - query_start > make_interval(secs => %s)",
                    [seconds],
                ).fetchone()[0]
                if waited:
                    return
                time.sleep(0.02)
        raise AssertionError(f"no session waited for a lock past {seconds} s")
    finally:
        for locker in lockers:
            locker.rollback()
