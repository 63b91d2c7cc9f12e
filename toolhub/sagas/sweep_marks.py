"""The sweep's marked scans: read a range of an index from where the last completed scan reached, a batch a tick.

A scan that finds what a lost notification or a stopped sweep left behind reads by when a row settled, from its
``SweepMark`` on: a sweep back after any outage reads every row it missed, and a tick reads only what settled since
the last one. The mark moves only from the value the tick read (two sweepers at once: one moves it).

A row is stamped inside the transaction that writes it and seen only once that commits: a transaction may stay open
longer than any fixed margin (an atomic tool's, idle up to its timeout, settles the steps its inner calls made inside
it). On PostgreSQL the mark never passes the start of the oldest transaction of this database still open with writes
(less a margin): a row it stamped is read once it commits. One held open past the margin (a stuck session, an idle
bound of 0) pauses the scans until it ends: each tick logs a warning naming its session, and the admin index shows
it to whoever may view sagas (``holding_back``, read by ``toolhub.sagas.dashboard``) until it ends.
"""

import datetime as dt
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection
from django.db.models import QuerySet

from toolhub.models import ToolCall
from toolhub.sagas.models import SweepMark

__all__ = ["OpenWrite", "holding_back", "marked_batch", "oldest_open_write"]

logger = logging.getLogger(__name__)

# Other sessions' transactions of this database that wrote (hold a transaction id): one of them may have stamped a row
# nobody sees yet. A session of another role shows its ``backend_xid`` but no ``xact_start`` without
# ``pg_read_all_stats`` (not granted: it reads every session's query text in the cluster); one whose role may write the
# calls counts as begun before any mark (first), one that may not (a reporting role) stamps none and is left out.
_OLDEST_OPEN_WRITE_SQL = """
SELECT xact_start, pid, application_name, usename FROM pg_stat_activity
WHERE datname = current_database() AND backend_xid IS NOT NULL AND pid <> pg_backend_pid()
  AND (xact_start IS NOT NULL OR has_table_privilege(usesysid, 'toolhub_toolcall', 'INSERT, UPDATE'))
ORDER BY xact_start NULLS FIRST LIMIT 1
"""


@dataclass(frozen=True)
class OpenWrite:
    """The oldest transaction of this database still open with writes: when it began and whose session it is.

    ``started`` is ``None`` for a session of another role whose start this role may not read: it may have begun
    before any mark, so no mark moves while it is open.
    """

    started: dt.datetime | None
    pid: int
    application: str
    role: str = ""


def oldest_open_write() -> OpenWrite | None:
    """The oldest transaction of this database still open with writes (PostgreSQL), else ``None``."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(_OLDEST_OPEN_WRITE_SQL)
        row = cursor.fetchone()
    return OpenWrite(row[0], int(row[1]), str(row[2] or ""), str(row[3] or "")) if row else None


def holding_back(*, now: dt.datetime, margin: dt.timedelta) -> OpenWrite | None:
    """The transaction that holds the sweep's scans back at ``now``, else ``None``: open with writes past ``margin``.

    For operators (``toolhub.sagas.dashboard``): the log alone left a forgotten session (a psql ``BEGIN``, a tool's
    session of the application role, no idle bound) pausing the compensation of late steps unseen for as long as it
    stayed open. One of another role, whose start this role may not read, holds them back whenever it is open.
    """
    oldest = oldest_open_write()
    if oldest is None or (oldest.started is not None and now - oldest.started <= margin):
        return None
    return oldest


def _held_back(name: str, oldest: OpenWrite, *, until: dt.datetime, margin: dt.timedelta) -> None:
    """Warn that ``oldest`` holds mark ``name`` back past the margin: the scan waits for it, compensation with it.

    Names the session (pid, application) for an operator to end or wait for; never its query (anyone's data).
    """
    assert oldest.started is not None  # an unreadable start: ``_unreadable``
    held = until - (oldest.started - margin)
    if held > margin:
        logger.warning(
            "sagas sweep: mark %s held back %d s by a transaction open with writes since %s (pid %d, application "
            "%r); steps and failures settled after it wait for it to end (end or commit that session if stuck)",
            name,
            int(held.total_seconds()),
            oldest.started.isoformat(),
            oldest.pid,
            oldest.application[:64],
        )


def _unreadable(name: str, oldest: OpenWrite) -> None:
    """Warn that mark ``name`` waits for ``oldest``, another role's write whose start this role may not read."""
    logger.warning(
        "sagas sweep: mark %s waits for a transaction open with writes of role %r (pid %d, application %r) whose "
        "start this role may not read (pg_read_all_stats); steps and failures settled since wait for it to end "
        "(run toolhub's processes as its application role)",
        name,
        oldest.role[:64],
        oldest.pid,
        oldest.application[:64],
    )


def marked_batch(
    name: str, rows: QuerySet[ToolCall], *, until: dt.datetime, margin: dt.timedelta, limit: int
) -> tuple[list[uuid.UUID], Callable[[], None]]:
    """The ids of ``rows`` settled from mark ``name`` until ``until``, and how to move the mark past them.

    Read oldest first by ``finished_at``; the mark moves once the batch is handled.

    No mark (a first run, on an upgrade too): from the oldest. At most ``limit`` rows: a batch that filled it moves
    the mark to its newest row (by ``finished_at, id``), the next tick carries on after it; otherwise to ``until``.
    Move it only after the batch was handled: a batch that raised is read again the next tick. Never past the start of
    a transaction still open with writes (``oldest_open_write``), less ``margin``: a row may be stamped before its
    transaction's first statement (Python's clock, then the write), or by a host whose clock runs behind.
    """
    oldest = oldest_open_write()
    if oldest is not None and oldest.started is None:
        _unreadable(name, oldest)
        return [], lambda: None
    if oldest is not None and oldest.started is not None and oldest.started - margin < until:
        _held_back(name, oldest, until=until, margin=margin)
        until = oldest.started - margin
    mark = SweepMark.objects.filter(name=name).values_list("reached", "reached_pk").first()
    rows = rows.filter(finished_at__lt=until)
    if mark is not None:
        # A range of the index from ``reached``; a cut batch's last row and those before it at its instant left out.
        rows = rows.filter(finished_at__gte=mark[0])
        if mark[1]:
            rows = rows.exclude(finished_at=mark[0], id__lte=mark[1])
    batch = list(rows.order_by("finished_at", "id").values_list("id", "finished_at")[:limit])
    reached = (batch[-1][1], str(batch[-1][0])) if len(batch) == limit else (until, "")

    def move() -> None:
        if mark is None:
            SweepMark.objects.get_or_create(name=name, defaults={"reached": reached[0], "reached_pk": reached[1]})
        elif reached[0] >= mark[0]:
            SweepMark.objects.filter(name=name, reached=mark[0], reached_pk=mark[1]).update(
                reached=reached[0], reached_pk=reached[1]
            )

    return [pk for pk, _ in batch], move
