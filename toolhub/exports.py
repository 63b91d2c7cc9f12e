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

from django.db import transaction
from django.db.models import QuerySet

from toolhub.audit import audit_append, redact
from toolhub.models import ToolCall
from toolhub.tools.registry import registry

__all__ = ["EXPORT_COLUMNS", "EXPORT_FORMATS", "export_rows", "export_stream", "export_record"]

logger = logging.getLogger(__name__)

#: The columns an export holds, in order; ``user`` is the username, ``arguments`` redacted JSON.
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

EXPORT_FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}

WITHHELD = "(withheld: the tool is no longer registered, so its sensitive arguments are unknown)"

_CHUNK = 2000


def export_rows(calls: QuerySet[ToolCall]) -> Iterator[dict[str, Any]]:
    """Each call of ``calls`` (already scoped and filtered) as an export row, read in chunks on the server."""
    sensitive_by_tool: dict[str, frozenset[str] | None] = {}
    # A transaction keeps the server-side cursor streaming (outside one it is WITH HOLD, materialized
    # whole on the server first); it ends when the response is consumed or closed.
    with transaction.atomic():
        yield from _rows(calls, sensitive_by_tool)


def _rows(calls: QuerySet[ToolCall], sensitive_by_tool: dict[str, frozenset[str] | None]) -> Iterator[dict[str, Any]]:
    rows = calls.order_by("-created_at", "-id").values_list(*_FIELDS).iterator(chunk_size=_CHUNK)
    arguments_at = len(_FIELDS) - 1
    for values in rows:
        row = dict(zip(EXPORT_COLUMNS, values, strict=True))
        tool_name = row["tool_name"]
        if tool_name not in sensitive_by_tool:
            tool = registry.get(tool_name)
            sensitive_by_tool[tool_name] = tool.sensitive if tool is not None else None
        sensitive = sensitive_by_tool[tool_name]
        arguments = values[arguments_at]
        if sensitive is None or (sensitive and not isinstance(arguments, dict)):
            row["arguments"] = WITHHELD
        elif sensitive:
            row["arguments"] = redact(arguments, sensitive)
        row["user"] = row["user"] or ""
        yield row


def _text(value: Any) -> Any:
    if value is None:
        return ""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return value


class _Line:
    """A file-like object whose ``write`` hands back what it is given (for ``csv.writer``)."""

    def write(self, value: str) -> str:
        return value


def export_stream(rows: Iterable[dict[str, Any]], export_format: str) -> Iterator[str]:
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
            buffer.append(writer.writerow([_text(row[column]) for column in EXPORT_COLUMNS]))
        else:
            buffer.append(json.dumps(row, default=str, ensure_ascii=False) + "\n")
        count += 1
        if len(buffer) >= 500:
            yield "".join(buffer)
            buffer.clear()
    if buffer:
        yield "".join(buffer)
    logger.info("toolhub export finished: %s rows as %s", count, export_format)


def export_record(*, actor: str, export_format: str, query: dict[str, str], tenants: list[str] | None) -> None:
    """Record in the audit trail that someone exported calls: who, in which format, with which filters."""
    with transaction.atomic():
        audit_append(
            event_type="calls.exported",
            actor=actor,
            data={"format": export_format, "query": query, "tenants": tenants},
            tenant=tenants[0] if tenants and len(tenants) == 1 else "",
        )
