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
import multiprocessing
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import connections, transaction
from django.db.models import F, Func, TextField
from django.db.models.functions import Cast
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


#: The string encoder ``json.dumps(..., ensure_ascii=False)`` uses (the C one when available).
_encode_string = json.encoder.encode_basestring


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


#: The columns an event's hash covers, in the order :func:`hash_columns` takes them.
HASHED_COLUMNS = (
    "chain",
    "seq",
    "event_type",
    "call_id",
    "run_id",
    "tool_name",
    "status",
    "tenant",
    "actor",
    "created_at",
    "data",
    "prev_hash",
)


def hash_columns(
    chain: int,
    seq: int,
    event_type: str,
    call_id: uuid.UUID | str | None,
    run_id: uuid.UUID | str | None,
    tool_name: str,
    status: str,
    tenant: str,
    actor: str,
    created_at: dt.datetime,
    data: str,
    prev_hash: str,
) -> str:
    """The hash of one event from its columns as stored (:data:`HASHED_COLUMNS`); no model instance needed."""
    return _hash_text(
        chain,
        seq,
        event_type,
        call_id,
        run_id,
        tool_name,
        status,
        tenant,
        actor,
        _timestamp(created_at),
        data,
        prev_hash,
    )


def _hash_text(
    chain: int,
    seq: int,
    event_type: str,
    call_id: uuid.UUID | str | None,
    run_id: uuid.UUID | str | None,
    tool_name: str,
    status: str,
    tenant: str,
    actor: str,
    created_at: str,
    data: str,
    prev_hash: str,
) -> str:
    """:func:`hash_columns` with the timestamp already written as ``_timestamp`` writes it.

    The hashed text is :func:`canonical_json` of the columns by name; it is written out here directly
    (the same keys in sorted order, the same string encoder), which makes ``verify_audit`` several
    times faster than building and sorting a dict per event. Anything unusual takes the general path.
    """
    try:
        text = (
            '{"actor":'
            + _encode_string(actor)
            + ',"call_id":'
            + (_encode_string(str(call_id)) if call_id else "null")
            + ',"chain":'
            + str(int(chain))
            + ',"created_at":'
            + _encode_string(created_at)
            + ',"data":'
            + _encode_string(data)
            + ',"event_type":'
            + _encode_string(event_type)
            + ',"prev_hash":'
            + _encode_string(prev_hash)
            + ',"run_id":'
            + (_encode_string(str(run_id)) if run_id else "null")
            + ',"seq":'
            + str(int(seq))
            + ',"status":'
            + _encode_string(status)
            + ',"tenant":'
            + _encode_string(tenant)
            + ',"tool_name":'
            + _encode_string(tool_name)
            + "}"
        )
    except TypeError:  # a column that is not text (None): the general path writes it as JSON does
        text = canonical_json(
            {
                "chain": chain,
                "seq": seq,
                "event_type": event_type,
                "call_id": str(call_id) if call_id else None,
                "run_id": str(run_id) if run_id else None,
                "tool_name": tool_name,
                "status": status,
                "tenant": tenant,
                "actor": actor,
                "created_at": created_at,
                "data": data,
                "prev_hash": prev_hash,
            }
        )
    return hashlib.sha256(text.encode()).hexdigest()


def compute_hash(event: AuditEvent) -> str:
    """Hash every column that matters, as stored, together with the previous hash."""
    return hash_columns(*(getattr(event, column) for column in HASHED_COLUMNS))


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
    progress: Callable[[int], None] | None = None, batch_size: int = 2000, workers: int = 1
) -> tuple[int, list[AuditProblem]]:
    """Recompute every chain; return the number of events checked and the first problem per chain.

    Each chain is read through a server-side cursor (constant memory). With ``workers`` > 1 on
    PostgreSQL, outside a transaction, chains are verified in that many processes at once, each on its
    own connection; ``progress`` is then told the count as each chain finishes.
    """
    heads = {head.chain: (head.seq, head.hash) for head in AuditChainHead.objects.all()}
    chains = sorted(set(heads) | set(_chains_with_events()))
    jobs = [(chain, heads.get(chain), batch_size) for chain in chains]
    checked = 0
    problems: list[AuditProblem] = []
    connection = transaction.get_connection()
    if workers > 1 and len(jobs) > 1 and connection.vendor == "postgresql" and not connection.in_atomic_block:
        # Forked children must not share the parent's socket: close it, each child opens its own.
        connections.close_all()
        with multiprocessing.get_context("fork").Pool(min(workers, len(jobs))) as pool:
            results = pool.imap(_verify_chain_job, jobs)
            for count, problem in results:
                checked += count
                if progress is not None:
                    progress(checked)
                if problem is not None:
                    problems.append(problem)
        return checked, problems
    for chain, head, size in jobs:

        def counted(count: int, base: int = checked) -> None:
            if progress is not None:
                progress(base + count)

        count, problem = _verify_chain(chain, head, size, counted)
        checked += count
        if problem is not None:
            problems.append(problem)
    return checked, problems


def _chains_with_events() -> list[int]:
    """The chains that hold events: on PostgreSQL a skip scan of the (chain, seq) index, not a DISTINCT scan."""
    connection = transaction.get_connection()
    if connection.vendor != "postgresql":
        return list(AuditEvent.objects.values_list("chain", flat=True).distinct())
    table = AuditEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH RECURSIVE chains(chain) AS ((SELECT chain FROM {table} ORDER BY chain LIMIT 1) UNION ALL "
            f"SELECT (SELECT e.chain FROM {table} e WHERE e.chain > chains.chain ORDER BY e.chain LIMIT 1) "
            "FROM chains WHERE chains.chain IS NOT NULL) SELECT chain FROM chains WHERE chain IS NOT NULL"
        )
        return [chain for (chain,) in cursor.fetchall()]


_VERIFIED_COLUMNS = ("id", *HASHED_COLUMNS, "hash")

#: ``_timestamp``'s text (UTC, microseconds always written), as PostgreSQL writes it.
_PG_TIMESTAMP = "to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"


def _chain_rows(chain: int) -> Any:
    """One chain's events in seq order as tuples of :data:`_VERIFIED_COLUMNS`.

    On PostgreSQL the timestamp and the ids arrive as the text the hash covers: parsing them into
    Python objects only to write them out again would cost more than the hash itself.
    """
    events = AuditEvent.objects.filter(chain=chain).order_by("seq")
    if transaction.get_connection().vendor != "postgresql":
        return events.values_list(*_VERIFIED_COLUMNS)
    events = events.annotate(
        v_call_id=Cast("call_id", TextField()),
        v_run_id=Cast("run_id", TextField()),
        v_created_at=Func(F("created_at"), template=_PG_TIMESTAMP, output_field=TextField()),
    )
    renamed = {"call_id": "v_call_id", "run_id": "v_run_id", "created_at": "v_created_at"}
    return events.values_list(*(renamed.get(column, column) for column in _VERIFIED_COLUMNS))


def _verify_chain_job(job: tuple[int, tuple[int, str] | None, int]) -> tuple[int, AuditProblem | None]:
    chain, head, batch_size = job
    try:
        return _verify_chain(chain, head, batch_size, None)
    finally:
        connections.close_all()


def _verify_chain(
    chain: int, head: tuple[int, str] | None, batch_size: int, progress: Callable[[int], None] | None
) -> tuple[int, AuditProblem | None]:
    """Walk one chain in seq order; return the events checked and its first problem, if any."""
    checked = 0
    expected_seq, prev_hash, problem = 1, "", None
    # Inside a transaction the server-side cursor streams; outside one it would be WITH HOLD, which
    # PostgreSQL materializes whole before the first row.
    with transaction.atomic():
        rows = _chain_rows(chain).iterator(chunk_size=batch_size)
        as_text = transaction.get_connection().vendor == "postgresql"
        for event_id, *columns, stored_hash in rows:
            checked += 1
            if progress is not None:
                progress(checked)
            seq, event_prev_hash = columns[1], columns[-1]
            if seq != expected_seq:
                problem = AuditProblem(chain, event_id, seq, f"expected seq {expected_seq}: events are missing")
            elif event_prev_hash != prev_hash:
                problem = AuditProblem(chain, event_id, seq, "previous hash does not match: chain was altered")
            elif (_hash_text(*columns) if as_text else hash_columns(*columns)) != stored_hash:
                problem = AuditProblem(chain, event_id, seq, "hash does not match its content: event was altered")
            if problem:
                break
            expected_seq, prev_hash = seq + 1, stored_hash
    if problem is None and head is not None and (head[0] != expected_seq - 1 or head[1] != prev_hash):
        problem = AuditProblem(
            chain,
            None,
            expected_seq - 1,
            f"chain head says seq {head[0]}: the newest events were removed",
        )
    return checked, problem
