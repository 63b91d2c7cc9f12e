"""Streaming exports of tool calls (CSV, JSON Lines) for auditors: constant memory, redacted, audited.

Rows come through a server-side cursor in chunks and leave as they are written, so a million-row
export holds one chunk at a time. Only listed columns leave: arguments with the tool's sensitive
values redacted (withheld whole for a tool the code no longer registers, whose sensitive names are
unknown); never the raw arguments, the context, the result or the error detail.
"""

import csv
import json
import logging
from collections.abc import Iterable, Iterator
from typing import Any

from django.db import connections, transaction
from django.db.models import Func, QuerySet, TextField
from django.db.models.functions import Cast

from toolhub.audit import audit_append, redact
from toolhub.models import ToolCall
from toolhub.selectors import withheld_names
from toolhub.tools.registry import registry

__all__ = ["EXPORT_COLUMNS", "EXPORT_FORMATS", "WITHHELD", "export_rows", "export_stream", "export_record"]

logger = logging.getLogger(__name__)

#: The columns an export holds, in order; ``user`` is the username, ``arguments`` redacted JSON text.
EXPORT_COLUMNS = (
    "id",
    "created_at",
    "tool_name",
    "status",
    "kind",
    "tenant",
    "agent_name",
    "user",
    "run_id",
    "model_call_id",
    "saga_id",
    "attempts",
    "started_at",
    "finished_at",
    "error",
    "arguments",
)
_FIELDS = tuple("user__username" if column == "user" else column for column in EXPORT_COLUMNS)
_TIMES = frozenset({"created_at", "started_at", "finished_at"})
_UUIDS = frozenset({"id", "run_id"})

EXPORT_FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}

WITHHELD = "(withheld: the tool is no longer registered, so its sensitive arguments are unknown)"

_CHUNK = 2000

#: One exported call: the values of EXPORT_COLUMNS as text (None for none, attempts an int); the last,
#: ``arguments``, is JSON text.
Row = tuple[Any, ...]


class _IsoText(Func):
    """A timestamp as ISO 8601 text written by PostgreSQL (cheaper than parsing it into a datetime here)."""

    template = "to_json(%(expressions)s) #>> '{}'"
    output_field = TextField()


def export_rows(calls: QuerySet[ToolCall]) -> Iterator[Row]:
    """Each call of ``calls`` (already scoped and filtered) as an export row, read in chunks on the server."""
    # A transaction keeps the server-side cursor streaming (outside one it is WITH HOLD, materialized
    # whole on the server first); it ends when the response is consumed or closed.
    with transaction.atomic():
        yield from _rows(calls)


def _rows(calls: QuerySet[ToolCall]) -> Iterator[Row]:
    ordered = calls.order_by("-created_at", "-id")
    as_text = connections[calls.db].vendor == "postgresql"
    if as_text:
        # PostgreSQL writes timestamps, ids and arguments as text: no per-value parsing here.
        names = {}
        for field in _FIELDS:
            if field in _TIMES:
                names[f"x_{field}"] = _IsoText(field)
            elif field in _UUIDS or field == "arguments":
                names[f"x_{field}"] = Cast(field, TextField())
        ordered = ordered.annotate(**names)
        fields = [f"x_{field}" if f"x_{field}" in names else field for field in _FIELDS]
    else:
        fields = list(_FIELDS)
    sensitive_by_tool: dict[str, frozenset[str] | None] = {}
    for values in ordered.values_list(*fields).iterator(chunk_size=_CHUNK):
        row = list(values) if as_text else _as_text(values)
        tool_name = row[2]
        if tool_name not in sensitive_by_tool:
            tool = registry.get(tool_name)
            sensitive_by_tool[tool_name] = tool.sensitive if tool is not None else None
        if sensitive_by_tool[tool_name] is None:
            row[-1] = _WITHHELD_JSON
        else:
            # as the pages withhold (``withheld_names``): its sensitive names, and any it does not declare (an
            # export reads no tool version, so it never knows an undeclared name for an open schema's extra)
            row[-1] = _redacted(row[-1], tool_name)
        yield tuple(row)


_WITHHELD_JSON = json.dumps(WITHHELD)


def _redacted(arguments: str, tool_name: str) -> str:
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError):
        return _WITHHELD_JSON
    if not isinstance(parsed, dict):
        return _WITHHELD_JSON
    return json.dumps(redact(parsed, withheld_names(tool_name, parsed)), ensure_ascii=False)


def _as_text(values: tuple[Any, ...]) -> list[Any]:
    """A row read as Python values (databases other than PostgreSQL) in the shape PostgreSQL gives."""
    row = []
    for column, value in zip(EXPORT_COLUMNS, values, strict=True):
        if value is None or column == "attempts":
            row.append(value)
        elif column in _TIMES:
            row.append(value.isoformat())
        elif column == "arguments":
            row.append(json.dumps(value, ensure_ascii=False))
        else:
            row.append(str(value))
    return row


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    """A CSV field that a spreadsheet shows as text: one starting like a formula gets a leading quote.

    Agent names, errors and ids come from models and users; opened in a spreadsheet, ``=HYPERLINK(...)``
    would run. None is written as an empty field.
    """
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


class _Line:
    """A file-like object whose ``write`` hands back what it is given (for ``csv.writer``)."""

    def write(self, value: str) -> str:
        return value


def export_stream(rows: Iterable[Row], export_format: str) -> Iterator[str]:
    """``rows`` as CSV (a header first) or JSON Lines, yielded a chunk of lines at a time."""
    if export_format not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {export_format!r}; use one of {', '.join(EXPORT_FORMATS)}")
    writer = csv.writer(_Line())
    if export_format == "csv":
        yield writer.writerow(EXPORT_COLUMNS)
    buffer: list[str] = []
    count = 0
    for row in rows:
        if export_format == "csv":
            buffer.append(writer.writerow([_cell(value) for value in row]))
        else:
            # The arguments are JSON text already: spliced in, not parsed and written again.
            head = json.dumps(dict(zip(EXPORT_COLUMNS[:-1], row[:-1], strict=True)), ensure_ascii=False)
            buffer.append(f'{head[:-1]}, "arguments": {row[-1]}}}\n')
        count += 1
        if len(buffer) >= 500:
            yield "".join(buffer)
            buffer.clear()
    if buffer:
        yield "".join(buffer)
    logger.info("toolhub export finished: %s rows as %s", count, export_format)


def export_record(
    *, actor: str, export_format: str, query: dict[str, str], calls: QuerySet[ToolCall], scope: list[str] | None
) -> None:
    """Record in the audit trail that someone exported calls: who, in which format, with which filters.

    One event in the chain of each tenant whose calls the export holds, so each tenant's auditors see who
    took their calls away, whatever other tenants the exporter also belongs to. An event names only its own
    tenant: the exporter's other tenants and tenant filters stay out of it (acme's auditors do not learn a
    tenant's name from it). An export holding no call is recorded in the exporter's one tenant (``scope``),
    else in the platform's chain.
    """
    tenants = sorted(calls.order_by().values_list("tenant", flat=True).distinct())
    if not tenants:
        tenants = scope if scope and len(scope) == 1 else [""]
    filters = {key: value for key, value in query.items() if key.split("__")[0] != "tenant"}
    with transaction.atomic():
        for tenant in tenants:
            audit_append(
                event_type="calls.exported",
                actor=actor,
                data={"format": export_format, "query": filters, "tenants": [tenant] if tenant else None},
                tenant=tenant,
            )
