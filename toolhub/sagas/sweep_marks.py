"""The sweep's marked scans: read a range of an index from where the last completed scan reached, a batch a tick.

A scan that finds what a lost notification or a stopped sweep left behind reads by when a row settled, from its
``SweepMark`` on: a sweep back after any outage reads every row it missed, and a tick reads only what settled since
the last one. The mark moves only from the value the tick read (two sweepers at once: one moves it).
"""

import datetime as dt
import uuid
from collections.abc import Callable

from django.db.models import QuerySet

from toolhub.models import ToolCall
from toolhub.sagas.models import SweepMark

__all__ = ["marked_batch"]


def marked_batch(
    name: str, rows: QuerySet[ToolCall], *, until: dt.datetime, limit: int
) -> tuple[list[uuid.UUID], Callable[[], None]]:
    """The ids of ``rows`` settled from mark ``name`` until ``until``, and how to move the mark past them.

    Read oldest first by ``finished_at``; the mark moves once the batch is handled.

    No mark (a first run, on an upgrade too): from the oldest. At most ``limit`` rows: a batch that filled it moves
    the mark to its newest row (by ``finished_at, id``), the next tick carries on after it; otherwise to ``until``.
    Move it only after the batch was handled: a batch that raised is read again the next tick.
    """
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
