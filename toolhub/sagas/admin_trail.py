"""A saga's audit trail on its admin pages, a page at a time, saying when a page is not the whole of it.

An auditor reading the saga's page must never take a cut trail for the whole: each page shows ``TRAIL_PAGE`` events,
oldest first; when more follow, it says how many of how many it shows and links the next page (keyed by the last
event shown, so every page is one indexed read, whatever the trail's length). A page asked after an event that is not
on the trail (another saga's or tenant's, an id no event has, text that is no id) shows the start and says so: read as
the page asked for, an auditor following a stale or edited link would take the first events for later ones.
"""

from dataclasses import dataclass

from django.db.models import Q
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from toolhub.admin_helpers import pretty_json
from toolhub.admin_tables import admin_table, time_cell
from toolhub.models import AuditEvent
from toolhub.sagas.models import Saga
from toolhub.sagas.selectors import saga_audit_events

__all__ = ["TRAIL_PAGE", "TrailPage", "trail_page", "trail_html"]

#: Events shown on one page of a saga's trail.
TRAIL_PAGE = 500


@dataclass(frozen=True)
class TrailPage:
    """One page of a saga's trail: its events, how many came before them, and the whole trail's count when cut."""

    events: list[AuditEvent]
    before: int
    total: int | None  # counted only when the trail does not fit on this page
    next_after: int | None
    #: Asked after something that is no event of this trail: the page is its start, and says so.
    unknown_after: bool = False


#: The largest id of an event (a ``bigint``): a larger ``after`` names none (and is never sent to the database).
_LARGEST_ID = 2**63 - 1


def _event_id(after: str) -> int | None:
    """``after`` as an event id when it is one written in ASCII digits within the ids' range, else ``None``.

    ``str.isdigit`` alone accepts ``²`` and other digits ``int`` refuses, and ``int`` refuses more than
    ``sys.get_int_max_str_digits()`` digits: both were a 500.
    """
    if not (after.isascii() and after.isdigit()) or len(after) > len(str(_LARGEST_ID)):
        return None
    value = int(after)
    return value if value <= _LARGEST_ID else None


def trail_page(saga: Saga, after: str | None = None) -> TrailPage:
    """The ``TRAIL_PAGE`` events of ``saga``'s trail after event ``after`` (an id on it; else from the start, said)."""
    trail = saga_audit_events(saga)
    start = None
    event_id = _event_id(after) if after else None
    if event_id is not None:
        start = trail.filter(id=event_id).values_list("created_at", "id").first()
    unknown = bool(after) and start is None
    page = trail
    before = 0
    if start is not None:
        later = Q(created_at__gt=start[0]) | Q(created_at=start[0], id__gt=start[1])
        page = trail.filter(later)
        before = trail.filter(~later).count()
    rows = list(page[: TRAIL_PAGE + 1])
    if len(rows) <= TRAIL_PAGE and before == 0:
        return TrailPage(events=rows, before=0, total=None, next_after=None, unknown_after=unknown)
    events = rows[:TRAIL_PAGE]
    more = len(rows) > TRAIL_PAGE
    return TrailPage(
        events=events,
        before=before,
        total=trail.count(),
        next_after=events[-1].pk if more and events else None,
        unknown_after=unknown,
    )


def trail_html(saga: Saga, page: TrailPage) -> SafeString:
    """The page's table, and, when it is not the whole trail, which part it is and the link to the next page."""
    table = admin_table(
        "saga-audit-events",
        ("When", "Event", "Tool", "Status", "Actor", "Data"),
        (
            (time_cell(e.created_at), e.event_type, e.tool_name, e.status, e.actor, pretty_json(e.payload))
            for e in page.events
        ),
    )
    url = reverse("admin:sagas_saga_audit_events", args=[saga.pk])
    if page.unknown_after:
        unknown = format_html(
            '<p class="errornote" id="saga-audit-events-unknown">{}</p>',
            "The page asked for follows no event of this saga's trail (another saga's, or an id no event of it has): "
            "its trail is shown from the start.",
        )
        table = format_html("{}{}", unknown, table)
    if page.total is None:
        return format_html("{}", table)
    shown = (
        format_html("the first {} of {} events", len(page.events), f"{page.total:,}")
        if page.before == 0
        else format_html("events {} to {} of {}", page.before + 1, page.before + len(page.events), f"{page.total:,}")
    )
    following = (
        format_html(' <a href="{}?after={}">The next {}</a>.', url, page.next_after, TRAIL_PAGE)
        if page.next_after is not None
        else ""
    )
    note = format_html(
        '<p class="errornote" id="saga-audit-events-cut">This trail is cut: {} are shown, oldest first.{} '
        '<a href="{}">From the start</a>.</p>',
        shown,
        following,
        url,
    )
    return format_html("{}{}", note, table)
