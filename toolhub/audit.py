"""The tamper-evident audit trail: append to a hash chain, and verify every chain.

Each event belongs to one of ``AUDIT_CHAINS`` chains, picked by a stable key (the call or run id),
so that concurrent writers on different calls do not queue behind one lock. Appends to a chain
lock its head row, so a chain never forks. Hashes are computed over canonical text exactly as the
database stores and returns it.
"""

import datetime as dt
import functools
import hashlib
import json
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from toolhub.conf import toolhub_settings
from toolhub.models import AuditChainHead, AuditEvent, ToolCall

__all__ = [
    "canonical_json",
    "audit_append",
    "audit_call_event",
    "audit_call_events",
    "EventSpec",
    "redact",
    "arguments_diff",
    "redacted_arguments_text",
    "verify_audit_chains",
    "AuditProblem",
    "REDACTED",
]

REDACTED = "***redacted***"


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def canonical_json(value: Any) -> str:
    """Serialize with sorted keys and no whitespace: the same data always gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_default)


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


def redacted_arguments_text(sensitive: frozenset[str] | set[str], raw: str | Mapping[str, Any] | None) -> str:
    """Arguments as the model sent them (JSON text or a mapping), as text fit to keep: sensitive values replaced.

    Text that cannot be parsed is withheld whole when the tool has sensitive parameters, since any part
    of it might be one of their values.
    """
    if sensitive:
        try:
            parsed = json.loads(raw) if isinstance(raw, str) else raw
        except (ValueError, RecursionError):
            return "(withheld: unparsable arguments of a tool with sensitive parameters)"
        if not isinstance(parsed, Mapping):
            return "(withheld: arguments of a tool with sensitive parameters)"
        raw = redact(parsed, sensitive)
    try:
        return raw if isinstance(raw, str) else canonical_json(raw) if raw is not None else ""
    except (RecursionError, ValueError, TypeError):
        return "(not shown: arguments that cannot be written as JSON, e.g. nested too deeply)"


def chain_for(key: uuid.UUID | str | None) -> int:
    """Pick a chain by a stable key, so one call's events stay in one chain, in order."""
    chains = toolhub_settings().AUDIT_CHAINS
    if key is None:
        return 0
    return zlib.crc32(str(key).encode()) % chains


def _timestamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds")


def compute_hash(event: AuditEvent) -> str:
    """Hash every column that matters, as stored, together with the previous hash."""
    material = canonical_json(
        {
            "chain": event.chain,
            "seq": event.seq,
            "event_type": event.event_type,
            "call_id": str(event.call_id) if event.call_id else None,
            "run_id": str(event.run_id) if event.run_id else None,
            "tool_name": event.tool_name,
            "status": event.status,
            "tenant": event.tenant,
            "actor": event.actor,
            "created_at": _timestamp(event.created_at),
            "data": event.data,
            "prev_hash": event.prev_hash,
        }
    )
    return hashlib.sha256(material.encode()).hexdigest()


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
    )
    assert written is not None
    return written[0]


def audit_call_event(
    call: ToolCall, event_type: str, *, actor: str, data: Mapping[str, Any] | None = None
) -> AuditEvent:
    """Record a call's event (its new status included) in the call's chain."""
    written = audit_call_events(call, [EventSpec(event_type, actor, data)])
    assert written is not None
    return written[0]


def audit_call_events(
    call: ToolCall, events: list[EventSpec], *, change: tuple[str, list[Any]] | None = None
) -> list[AuditEvent] | None:
    """Record several events of one call at once: one lock of the chain head, one insert, one head update.

    ``change`` is the SQL (and parameters) of the INSERT or conditional UPDATE of the call row these events
    record; it runs in the same statement as the head's advance. When it touches no row, nothing is
    appended and ``None`` is returned (another writer won the race).
    """
    return _append_many(
        events,
        call_id=call.id,
        run_id=call.run_id,
        tool_name=call.tool_name,
        status=call.status,
        tenant=call.tenant,
        change=change,
    )


_HEAD_ADVANCE = "UPDATE toolhub_auditchainhead SET seq = seq + %s WHERE chain = %s RETURNING seq, hash"

#: The change and the head's advance in one statement; the head moves only if the change touched a row.
_CHANGE_AND_HEAD_ADVANCE = (
    "WITH change AS ({change} RETURNING 1), "
    "head AS (UPDATE toolhub_auditchainhead SET seq = seq + %s WHERE chain = %s AND EXISTS (SELECT 1 FROM change) "
    "RETURNING seq, hash) "
    "SELECT (SELECT count(*) FROM change), head.seq, head.hash FROM (SELECT 1) AS one LEFT JOIN head ON true"
)


def _append_many(
    events: list[EventSpec],
    *,
    call_id: uuid.UUID | None,
    run_id: uuid.UUID | None,
    tool_name: str,
    status: str,
    tenant: str,
    change: tuple[str, list[Any]] | None = None,
) -> list[AuditEvent] | None:
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        raise RuntimeError("audit events must be written inside the transaction of the change they record")
    chain = chain_for(call_id or run_id)
    # Advancing the head locks its row until commit (appends to a chain are serialized) and reads
    # the previous hash in the same statement.
    with connection.cursor() as cursor:
        row = None
        if change is not None and connection.vendor == "postgresql":
            cursor.execute(_CHANGE_AND_HEAD_ADVANCE.format(change=change[0]), [*change[1], len(events), chain])
            changed, *head = cursor.fetchone()
            if not changed:
                return None
            row = tuple(head) if head[0] is not None else None
        elif change is not None:
            cursor.execute(*change)
            if not cursor.rowcount:
                return None
        if row is None:
            cursor.execute(_HEAD_ADVANCE, [len(events), chain])
            row = cursor.fetchone()
        if row is None:
            AuditChainHead.objects.get_or_create(chain=chain)
            cursor.execute(_HEAD_ADVANCE, [len(events), chain])
            row = cursor.fetchone()
    last_seq, prev_hash = row
    now = timezone.now()
    written = []
    for offset, spec in enumerate(events):
        event = AuditEvent(
            chain=chain,
            seq=last_seq - len(events) + 1 + offset,
            event_type=spec.event_type,
            call_id=call_id,
            run_id=run_id,
            tool_name=tool_name,
            status=spec.status or status,
            tenant=tenant or "",
            actor=spec.actor[:200],
            created_at=now,
            data=canonical_json(spec.data or {}),
            prev_hash=prev_hash,
        )
        event.hash = compute_hash(event)
        prev_hash = event.hash
        written.append(event)
    _write(connection, written, chain=chain, head_hash=prev_hash)
    return written


def _write(connection: Any, events: list[AuditEvent], *, chain: int, head_hash: str) -> None:
    """Insert the events and move the chain head's hash: one statement on PostgreSQL, two elsewhere."""
    if connection.vendor != "postgresql":
        AuditEvent.objects.bulk_create(events)
        AuditChainHead.objects.filter(chain=chain).update(hash=head_hash)
        return
    columns, row = _insert_shape()
    params: list[Any] = [head_hash, chain]
    for event in events:
        params.extend(field.get_db_prep_save(getattr(event, field.attname), connection) for field in _EVENT_FIELDS)
    sql = (
        "WITH head AS (UPDATE toolhub_auditchainhead SET hash = %s WHERE chain = %s) "
        f"INSERT INTO toolhub_auditevent ({columns}) VALUES {', '.join([row] * len(events))} RETURNING id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        ids = [pk for (pk,) in cursor.fetchall()]
    for event, pk in zip(events, ids, strict=True):
        event.id = pk
        event._state.adding = False
        event._state.db = connection.alias


_EVENT_FIELDS = [field for field in AuditEvent._meta.concrete_fields if not field.primary_key]


@functools.cache
def _insert_shape() -> tuple[str, str]:
    """The column list and one row's placeholders of an event INSERT (PostgreSQL), built once."""
    columns = ", ".join(f'"{field.column}"' for field in _EVENT_FIELDS)
    return columns, "(" + ", ".join(["%s"] * len(_EVENT_FIELDS)) + ")"


@dataclass(frozen=True)
class AuditProblem:
    """The first place a chain does not verify."""

    chain: int
    event_id: int | None
    seq: int
    reason: str

    def __str__(self) -> str:
        where = f"event #{self.event_id}" if self.event_id is not None else f"after seq {self.seq}"
        return f"chain {self.chain}: {where} (seq {self.seq}): {self.reason}"


def verify_audit_chains(
    progress: Callable[[int], None] | None = None, batch_size: int = 2000
) -> tuple[int, list[AuditProblem]]:
    """Recompute every chain; return the number of events checked and the first problem per chain."""
    checked = 0
    problems: list[AuditProblem] = []
    heads = {head.chain: head for head in AuditChainHead.objects.all()}
    chains = set(heads) | set(AuditEvent.objects.values_list("chain", flat=True).distinct())
    for chain in sorted(chains):
        expected_seq, prev_hash, problem = 1, "", None
        for event in _iter_chain(chain, batch_size):
            checked += 1
            if progress is not None:
                progress(checked)
            if event.seq != expected_seq:
                problem = AuditProblem(chain, event.id, event.seq, f"expected seq {expected_seq}: events are missing")
            elif event.prev_hash != prev_hash:
                problem = AuditProblem(chain, event.id, event.seq, "previous hash does not match: chain was altered")
            elif compute_hash(event) != event.hash:
                problem = AuditProblem(chain, event.id, event.seq, "hash does not match its content: event was altered")
            if problem:
                break
            expected_seq, prev_hash = event.seq + 1, event.hash
        head = heads.get(chain)
        if problem is None and head is not None and (head.seq != expected_seq - 1 or head.hash != prev_hash):
            problem = AuditProblem(
                chain,
                None,
                expected_seq - 1,
                f"chain head says seq {head.seq}: the newest events were removed",
            )
        if problem:
            problems.append(problem)
    return checked, problems


def _iter_chain(chain: int, batch_size: int) -> Iterator[AuditEvent]:
    last_seq = 0
    while True:
        batch = list(AuditEvent.objects.filter(chain=chain, seq__gt=last_seq).order_by("seq")[:batch_size])
        if not batch:
            return
        yield from batch
        last_seq = batch[-1].seq
