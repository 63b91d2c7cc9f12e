"""The tamper-evident audit trail: append events to hash chains, and what of arguments they may show.

Each event belongs to one of ``AUDIT_CHAINS`` chains of its tenant (or of the platform, for events of
no tenant), picked by a stable key (the call or run id), so that concurrent writers on different calls
do not queue behind one lock and a tenant's chains hold its events alone (``audit_hash.chain_for``). Appends to a chain
lock its head row, so a chain never forks. Hashes are computed over canonical text exactly as the
database stores and returns it (``toolhub.audit_hash``).
"""

import datetime as dt
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from django.db import NotSupportedError, transaction
from django.utils import timezone

from toolhub.audit_hash import canonical_json, chain_for, compute_hash, hash_parts, hashed_timestamp
from toolhub.audit_sql import appended_params, appended_sql
from toolhub.models import AuditChainHead, AuditEvent, ToolCall
from toolhub.prepared import prepared_cursor

if TYPE_CHECKING:
    from toolhub.tools.definition import Tool

__all__ = [
    "audit_append",
    "audit_call_event",
    "audit_call_events",
    "audit_call_change",
    "EventSpec",
    "Write",
    "WriteMissedError",
    "redact",
    "arguments_diff",
    "redacted_arguments_text",
    "REDACTED",
]

REDACTED = "***redacted***"


def redact(arguments: Mapping[str, Any], sensitive: frozenset[str] | set[str]) -> dict[str, Any]:
    """Return ``arguments`` with the values of sensitive names replaced, for anything shown or logged."""
    return {key: (REDACTED if key in sensitive else value) for key, value in arguments.items()}


def arguments_diff(
    before: Mapping[str, Any], after: Mapping[str, Any], sensitive: frozenset[str] | set[str]
) -> dict[str, Any]:
    """``{name: {"before": ..., "after": ...}}`` for every argument that differs; sensitive values redacted."""
    return {
        key: {"before": REDACTED, "after": REDACTED}
        if key in sensitive
        else {"before": before.get(key), "after": after.get(key)}
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    }


def redacted_arguments_text(tool: "Tool | None", raw: str | Mapping[str, Any] | None) -> str:
    """Arguments as the model sent them (JSON text or a mapping), as text fit to keep: ``tool.withheld`` redacted.

    For a tool with sensitive parameters, that is their values and those of every name it does not declare
    (a misspelt ``PIN``); text that cannot be parsed is withheld whole, since any part of it might be one.
    For a name that is no tool (``tool`` ``None``: misspelt, removed), which values were sensitive is unknown,
    so every value is withheld and the names kept, as for a call of a tool no longer registered.
    """
    if tool is None or tool.sensitive:
        whose = "an unknown tool" if tool is None else "a tool with sensitive parameters"
        if raw is None or raw == "":
            return ""
        try:
            parsed = json.loads(raw) if isinstance(raw, str) else raw
        except (ValueError, RecursionError):
            return f"(withheld: unparsable arguments of {whose})"
        if not isinstance(parsed, Mapping):
            return f"(withheld: arguments of {whose})"
        raw = redact(parsed, tool.withheld(parsed) if tool is not None else frozenset(parsed))
    try:
        return raw if isinstance(raw, str) else canonical_json(raw) if raw is not None else ""
    except (RecursionError, ValueError, TypeError):
        return "(not shown: arguments that cannot be written as JSON, e.g. nested too deeply)"


@dataclass(frozen=True)
class EventSpec:
    """One event to append: what happened, who did it, and its data."""

    event_type: str
    actor: str
    data: Mapping[str, Any] | None = None
    #: The status the event records, when it is not the one the call is left in (a transition passed through).
    status: str | None = None


def audit_append(
    *,
    event_type: str,
    actor: str,
    data: Mapping[str, Any] | None = None,
    call_id: uuid.UUID | None = None,
    run_id: uuid.UUID | None = None,
    tool_name: str = "",
    status: str = "",
    tenant: str = "",
) -> AuditEvent:
    """Append one event to its chain; must run inside the transaction of the change it records."""
    written = _append_many(
        [EventSpec(event_type, actor, data)],
        call_id=call_id,
        run_id=run_id,
        tool_name=tool_name,
        status=status,
        tenant=tenant,
    ).events
    assert written is not None
    return written[0]


def audit_call_event(
    call: ToolCall, event_type: str, *, actor: str, data: Mapping[str, Any] | None = None
) -> AuditEvent:
    """Record a call's event (its new status included) in the call's chain."""
    written = audit_call_events(call, [EventSpec(event_type, actor, data)])
    assert written is not None
    return written[0]


#: A write of another row that commits with an audited change: its SQL (an INSERT or UPDATE) and parameters.
Write = tuple[str, list[Any]]


class WriteMissedError(RuntimeError):
    """A write that goes with an audited change touched no row (a guarded UPDATE lost its race).

    Raised after the statement: the caller's transaction, rolled back by it, keeps none of it.
    """


def audit_call_events(
    call: ToolCall,
    events: list[EventSpec],
    *,
    change: tuple[str, list[Any]] | None = None,
    instances: bool = True,
    writes: Sequence[Write] = (),
    stamp_after: bool = False,
) -> list[AuditEvent] | None:
    """Record several events of one call at once: one lock of the chain head, one insert, one head update.

    ``change`` is the SQL (and parameters) of the INSERT or conditional UPDATE of the call row these events
    record; it runs in the same statement as the head's advance. When it touches no row, nothing is
    appended and ``None`` is returned (another writer won the race). ``instances=False``: ``[]`` is
    returned instead of the events written, for callers that only ask whether the change happened.
    ``writes``: rows of the same decision written with them, before the change and whether or not it touches
    its row (one statement on PostgreSQL; elsewhere statements of their own in the caller's transaction).
    Each is to touch a row; ``WriteMissedError`` is raised when one does not (it belongs inside a transaction).
    ``stamp_after`` (a change guarded by the governance stamp): the stamp read after the statement's locks is
    set as ``call.stamp_after_write`` (PostgreSQL; None elsewhere, where writers do not wait in one statement).
    """
    appended = _append_for_call(
        call, events, change=change, instances=instances, writes=writes, stamp_after=stamp_after
    )
    call.stamp_after_write = appended.stamp_after
    return appended.events


def audit_call_change(
    call: ToolCall, events: list[EventSpec], *, change: tuple[str, list[Any]], returning: str, stamp_after: bool = False
) -> tuple[Any, ...] | None:
    """PostgreSQL: ``audit_call_events`` for a change whose row comes back, as the change left it.

    ``returning`` is the change's RETURNING list; the row's values are returned in its order, or None when
    the change touched no row (nothing appended). For a writer that holds only the row's key and the
    columns its events hash: the row costs no read of its own.
    """
    if transaction.get_connection().vendor != "postgresql":
        raise NotSupportedError("a change's row comes back with its audit events on PostgreSQL only")
    appended = _append_for_call(
        call, events, change=change, instances=False, returning=returning, stamp_after=stamp_after
    )
    call.stamp_after_write = appended.stamp_after
    return None if appended.events is None else appended.row


def _append_for_call(call: ToolCall, events: list[EventSpec], **options: Any) -> "_Appended":
    """``_append_many`` for events of ``call``: its id, run, tool, status and tenant go on every event."""
    return _append_many(
        events,
        call_id=call.id,
        run_id=call.run_id,
        tool_name=call.tool_name,
        status=call.status,
        tenant=call.tenant,
        **options,
    )


class _Appended(NamedTuple):
    """An append's result: its events (None: the change touched no row; [] when not asked for) and returned row."""

    events: list[AuditEvent] | None
    row: tuple[Any, ...] = ()
    stamp_after: int | None = None


_HEAD_ADVANCE = "UPDATE toolhub_auditchainhead SET seq = seq + %s WHERE chain = %s RETURNING seq, hash"


def _append_many(
    events: list[EventSpec],
    *,
    call_id: uuid.UUID | None,
    run_id: uuid.UUID | None,
    tool_name: str,
    status: str,
    tenant: str,
    change: tuple[str, list[Any]] | None = None,
    instances: bool = True,
    writes: Sequence[Write] = (),
    returning: str = "",
    stamp_after: bool = False,
) -> _Appended:
    """Append ``events`` (after ``writes`` and ``change``, when given); no events when the change touched no row.

    On PostgreSQL the change, the head's advance and the events are one statement, atomic by itself
    (``toolhub.audit_sql``); elsewhere they are separate statements inside the caller's transaction.
    ``instances=False``: the caller only needs to know whether the append happened, so no model
    instances of the events are made there (an empty list means it did).
    """
    connection = transaction.get_connection()
    # Events record a change: made in the caller's transaction, or (``change``) in the same statement.
    single_statement = change is not None and connection.vendor == "postgresql"
    if not (connection.in_atomic_block or single_statement):
        raise RuntimeError("audit events must be written inside the transaction of the change they record")
    batch = _Batch(chain_for(call_id or run_id, tenant or ""), call_id, run_id, tool_name, tenant or "", timezone.now())
    rows = [
        (spec.event_type, spec.status or status, spec.actor[:200], canonical_json(spec.data or {})) for spec in events
    ]
    if connection.vendor == "postgresql":
        moment = hashed_timestamp(batch.created_at)
        parts = [
            hash_parts(batch.chain, kind, call_id, run_id, tool_name, row_status, batch.tenant, actor, moment, data)
            for kind, row_status, actor, data in rows
        ]
        if all(part is not None for part in parts):
            return _append_in_one_statement(
                connection,
                batch,
                rows,
                parts,  # type: ignore[arg-type]
                change,
                instances,
                writes,
                returning,
                stamp_after,
            )
    if returning:
        raise NotSupportedError("a change's row comes back with its events only in one statement")
    if not connection.in_atomic_block:  # text the database cannot finish (never for a call's own columns)
        with transaction.atomic(savepoint=False):
            return _Appended(_append_in_steps(connection, batch.events(rows), change, writes))
    return _Appended(_append_in_steps(connection, batch.events(rows), change, writes))


#: One event to append as its columns: (event_type, status, actor, canonical JSON data).
_Row = tuple[str, str, str, str]


@dataclass(frozen=True)
class _Batch:
    """What the events of one append share: their chain, call or run, tool, tenant and time."""

    chain: int
    call_id: uuid.UUID | None
    run_id: uuid.UUID | None
    tool_name: str
    tenant: str
    created_at: dt.datetime

    def events(self, rows: list[_Row]) -> list[AuditEvent]:
        """The events of ``rows`` as unsaved model instances."""
        return [
            AuditEvent(
                chain=self.chain,
                event_type=event_type,
                call_id=self.call_id,
                run_id=self.run_id,
                tool_name=self.tool_name,
                status=status,
                tenant=self.tenant,
                actor=actor,
                created_at=self.created_at,
                data=data,
            )
            for event_type, status, actor, data in rows
        ]


def _append_in_steps(
    connection: Any, written: list[AuditEvent], change: tuple[str, list[Any]] | None, writes: Sequence[Write]
) -> list[AuditEvent] | None:
    """The writes, the change, the head's advance and the events as separate statements in the current transaction."""
    chain = written[0].chain
    # Advancing the head locks its row until commit (appends to a chain are serialized) and reads
    # the previous hash in the same statement.
    with connection.cursor() as cursor:
        for write in writes:
            cursor.execute(*write)
            if cursor.rowcount < 1:
                raise WriteMissedError(f"a write with the audited change touched no row: {write[0][:80]}")
        if change is not None:
            cursor.execute(*change)
            if not cursor.rowcount:
                return None
        cursor.execute(_HEAD_ADVANCE, [len(written), chain])
        row = cursor.fetchone()
        if row is None:
            AuditChainHead.objects.get_or_create(chain=chain)
            cursor.execute(_HEAD_ADVANCE, [len(written), chain])
            row = cursor.fetchone()
    last_seq, prev_hash = row
    for offset, event in enumerate(written):
        event.seq = last_seq - len(written) + 1 + offset
        event.prev_hash = prev_hash
        event.hash = compute_hash(event)
        prev_hash = event.hash
    _write(connection, written, chain=chain, head_hash=prev_hash)
    return written


def _append_in_one_statement(
    connection: Any,
    batch: _Batch,
    rows: list[_Row],
    parts: list[tuple[str, str, str]],
    change: tuple[str, list[Any]] | None,
    instances: bool,
    writes: Sequence[Write],
    returning: str,
    stamp_after: bool,
) -> _Appended:
    """PostgreSQL: the writes, the change, the head and the events in one statement; the database hashes."""
    params = appended_params(
        [*(param for _, write_params in writes for param in write_params), *(change[1] if change else [])],
        parts,
        chain=batch.chain,
        call_id=batch.call_id,
        run_id=batch.run_id,
        tool_name=batch.tool_name,
        tenant=batch.tenant,
        created_at=batch.created_at,
        columns=rows,
    )
    with prepared_cursor(connection) as cursor:
        statement = appended_sql(
            len(rows), change[0] if change else None, tuple(sql for sql, _ in writes), returning, stamp_after
        )
        cursor.execute(statement, params)
        changed, base, hashes, ids, written_all, after, *row = cursor.fetchone()
    if not written_all:
        raise WriteMissedError(f"a write with the audited change touched no row: {statement[:80]}")
    if not changed:
        return _Appended(None)
    if not instances:
        return _Appended([], tuple(row), after)
    written = batch.events(rows)
    for offset, (event, pk) in enumerate(zip(written, ids, strict=True)):
        event.id, event.seq = pk, base + offset + 1
        event.prev_hash, event.hash = hashes[offset], hashes[offset + 1]
        event._state.adding = False
        event._state.db = connection.alias
    return _Appended(written, tuple(row), after)


def _write(connection: Any, events: list[AuditEvent], *, chain: int, head_hash: str) -> None:
    """Insert the events and move the chain head's hash (databases other than PostgreSQL)."""
    AuditEvent.objects.bulk_create(events)
    AuditChainHead.objects.filter(chain=chain).update(hash=head_hash)
