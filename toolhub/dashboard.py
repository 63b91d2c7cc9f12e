"""The admin index's dashboard: pending approvals, calls by status, approval latency, calls per tool over time.

Every figure is scoped to the viewer's tenants and reads a bounded window (``DASHBOARD_HOURS``, the last
24 hours by default) on the calls' ``created_at`` and ``(status, created_at)`` indexes, so its cost does not
grow with the table. Apps add figures without the core importing them: ``dashboard_figure(provider)``
registers a callable ``(user, since) -> [(label, value), ...]``, or ``(label, value, url)`` to link the page that
lists what it counts (the approvals app adds its latency, the sagas app the sagas needing attention).
The chart is SVG drawn on the server: no script, no CDN.
"""

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from django.db.models import Count
from django.db.models.functions import TruncHour
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from toolhub.conf import toolhub_settings
from toolhub.models import CallStatus, ToolCall
from toolhub.tenancy import scoped

__all__ = ["Dashboard", "Figure", "dashboard", "dashboard_figure", "svg_chart", "DASHBOARD_TOP_TOOLS"]


class Figure(NamedTuple):
    """One figure of the dashboard: what it counts, its value, and the page that lists it (``""``: none)."""

    label: str
    value: str
    url: str = ""


FigureProvider = Callable[[Any, dt.datetime], Sequence[tuple[str, str] | tuple[str, str, str]]]

_providers: list[FigureProvider] = []

#: The chart draws this many tools (the busiest in the window); the rest are summed as "other".
DASHBOARD_TOP_TOOLS = 6

_COLOURS = ("#417690", "#e07b39", "#5b9e4d", "#b0413e", "#7b5ea7", "#c9a227", "#8a8a8a")


def dashboard_figure(provider: FigureProvider) -> FigureProvider:
    """Register a provider of extra figures for the dashboard (called once per page, with the viewer)."""
    if provider not in _providers:
        _providers.append(provider)
    return provider


@dataclass
class Dashboard:
    hours: int
    pending_approvals: int
    by_status: list[tuple[str, int]]
    figures: list[Figure] = field(default_factory=list)
    chart: SafeString = field(default_factory=lambda: SafeString(""))


def dashboard(user: Any, now: dt.datetime | None = None) -> Dashboard:
    """The dashboard's figures for ``user``'s tenants over the last ``DASHBOARD_HOURS`` hours."""
    hours = toolhub_settings().DASHBOARD_HOURS
    now = now or timezone.now()
    since = now - dt.timedelta(hours=hours)
    calls = scoped(ToolCall.objects.all(), user)
    pending = calls.filter(status=CallStatus.PENDING_APPROVAL).count()
    recent = calls.filter(created_at__gte=since)
    counts = dict(recent.order_by().values_list("status").annotate(n=Count("id")))
    by_status = [(label, counts[value]) for value, label in CallStatus.choices if counts.get(value)]
    buckets = [
        since.replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=index) for index in range(hours + 1)
    ]
    per_tool: dict[str, dict[dt.datetime, int]] = {}
    rows = (
        recent.order_by()
        .annotate(hour=TruncHour("created_at", tzinfo=dt.UTC))
        .values_list("tool_name", "hour")
        .annotate(n=Count("id"))
    )
    for tool_name, hour, count in rows:
        per_tool.setdefault(tool_name, {})[hour] = count
    figures = [Figure(*figure) for provider in _providers for figure in provider(user, since)]
    return Dashboard(
        hours=hours,
        pending_approvals=pending,
        by_status=by_status,
        figures=figures,
        chart=svg_chart(per_tool, buckets),
    )


def svg_chart(per_tool: dict[str, dict[dt.datetime, int]], buckets: list[dt.datetime]) -> SafeString:
    """Calls per hour of the busiest tools as lines (the rest summed as "other"), with a legend."""
    if not per_tool:
        return format_html('<p class="toolhub-chart-empty">{}</p>', "No calls in this window.")
    busiest = sorted(per_tool, key=lambda name: -sum(per_tool[name].values()))
    shown = busiest[:DASHBOARD_TOP_TOOLS]
    series = {name: [per_tool[name].get(bucket, 0) for bucket in buckets] for name in shown}
    rest = busiest[DASHBOARD_TOP_TOOLS:]
    if rest:
        series["other"] = [sum(per_tool[name].get(bucket, 0) for name in rest) for bucket in buckets]
    width, height, left, bottom = 720, 220, 40, 24
    top_value = max(1, max(max(values) for values in series.values()))
    step = (width - left - 10) / max(1, len(buckets) - 1)

    def point(index: int, value: int) -> str:
        x = left + index * step
        y = 10 + (height - bottom - 10) * (1 - value / top_value)
        return f"{x:.1f},{y:.1f}"

    lines = format_html_join(
        "",
        '<polyline fill="none" stroke="{}" stroke-width="2" points="{}"><title>{}</title></polyline>',
        (
            (_COLOURS[index % len(_COLOURS)], " ".join(point(i, v) for i, v in enumerate(values)), name)
            for index, (name, values) in enumerate(series.items())
        ),
    )
    ticks = format_html_join(
        "",
        '<text x="{}" y="{}" font-size="10" text-anchor="middle">{}</text>',
        (
            (f"{left + index * step:.1f}", height - 6, bucket.strftime("%H:%M"))
            for index, bucket in enumerate(buckets)
            if index % max(1, len(buckets) // 6) == 0
        ),
    )
    legend = format_html_join(
        "",
        '<li><svg class="toolhub-swatch" width="10" height="10"><rect width="10" height="10" fill="{}"/></svg>{}</li>',
        ((_COLOURS[index % len(_COLOURS)], name) for index, name in enumerate(series)),
    )
    return format_html(
        '<svg id="calls-per-tool-chart" role="img" aria-label="Calls per tool per hour" viewBox="0 0 {} {}" '
        'width="100%" preserveAspectRatio="xMinYMin meet">'
        '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="currentColor" stroke-opacity="0.3"/>'
        '<text x="4" y="14" font-size="10">{}</text><text x="4" y="{}" font-size="10">0</text>{}{}</svg>'
        '<ul class="toolhub-legend">{}</ul>',
        width,
        height,
        left,
        height - bottom,
        width - 10,
        height - bottom,
        top_value,
        height - bottom,
        lines,
        ticks,
        legend,
    )
