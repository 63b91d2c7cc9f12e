"""How the console shows small tables and long ids, in one place (``admin/toolhub/table.html``, ``console.css``).

Admin pages build small read-only tables (a saga's attempts, a run's calls, a request's decisions):
they all render through :func:`admin_table`, so they look alike and wide values scroll inside their
cell. Ids (UUIDs, hashes) are shown short by :func:`short_id`, with the full value on hover and in
the clipboard when copied.
"""

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.template.loader import render_to_string
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import template_localtime

__all__ = ["admin_table", "short_id", "time_cell", "duration"]

#: Ids longer than this are cut on screen (the width of ``.toolhub-id-short`` in console.css).
SHORT_ID_CHARS = 8


def admin_table(table_id: str, headers: Sequence[str], rows: Iterable[Sequence[Any]], *, empty: str = "None.") -> str:
    """A read-only table: each cell is escaped unless it is already safe HTML (a link, a short id, JSON)."""
    body = [list(row) for row in rows]
    html = render_to_string(
        "admin/toolhub/table.html", {"table_id": table_id, "headers": headers, "rows": body, "empty": empty}
    )
    return mark_safe(html)  # noqa: S308 - rendered by the template engine, which escapes every unsafe cell


def short_id(value: Any) -> SafeString | str:
    """An id cut short on screen (``console.css``); hovering shows it whole, copying copies it whole."""
    if value in (None, ""):
        return "-"
    text = str(value)
    if len(text) <= SHORT_ID_CHARS:
        return format_html('<code class="toolhub-id">{}</code>', text)
    return format_html('<code class="toolhub-id toolhub-id-short" title="{}">{}</code>', text, text)


def time_cell(value: datetime | None) -> SafeString | str:
    """A moment on one line as every page shows it (``DATETIME_FORMAT``: to the second, with its time zone).

    The exact ISO value is shown on hover.
    """
    if value is None:
        return "-"
    return format_html(
        '<time class="toolhub-time" datetime="{}" title="{}">{}</time>',
        value.isoformat(),
        value.isoformat(timespec="milliseconds"),
        date_format(template_localtime(value), "DATETIME_FORMAT"),
    )


def duration(value: timedelta | None) -> str:
    """A duration people read at a glance: ``850 ms``, ``7.3 s``, ``2 min 5 s``, ``3 h 12 min``."""
    if value is None:
        return "-"
    seconds = value.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"
