"""Synthetic tool calls with their audit events, written fast, for measuring the console at scale.

``manage.py generate_calls N`` appends ``N`` calls of the catalogue's tools to the tenants given, each
with the events a real call of its status leaves (about four per call), with valid hash chains that
continue from the current chain heads, so ``verify_audit`` passes over them. Rows go in with
PostgreSQL's ``COPY`` (bulk inserts elsewhere), in batches of one transaction each, each holding the
chain heads locked so that no real append interleaves.
"""

import datetime as dt
import io
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from toolhub.audit_hash import HASHED_COLUMNS, canonical_json, chain_for, hash_columns, tenant_chain_base
from toolhub.conf import toolhub_settings
from toolhub.models import AuditChainHead, AuditEvent, CallStatus, ToolCall

__all__ = ["SyntheticSpec", "generate_calls", "STATUS_WEIGHTS"]

#: The share of each status among generated calls, and the call events each status leaves.
STATUS_WEIGHTS: dict[str, tuple[int, tuple[str, ...]]] = {
    CallStatus.SUCCEEDED: (80, ("requested", "queued", "running", "succeeded")),
    CallStatus.FAILED: (6, ("requested", "queued", "running", "failed")),
    CallStatus.DENIED: (4, ("requested", "denied")),
    CallStatus.INVALID: (2, ("requested", "invalid")),
    CallStatus.REJECTED: (3, ("requested", "pending_approval", "rejected")),
    CallStatus.PENDING_APPROVAL: (1, ("requested", "pending_approval")),
    CallStatus.COMPENSATED: (2, ("requested", "queued", "running", "succeeded", "compensated")),
    CallStatus.EXPIRED: (2, ("requested", "pending_approval", "expired")),
}


@dataclass(frozen=True)
class SyntheticSpec:
    """What to generate: how many calls, of which tools and tenants, over how many days up to now."""

    count: int
    tools: Sequence[str]
    tenants: Sequence[str]
    agents: Sequence[str] = ("support-bot", "order-bot", "research-bot", "ops-bot")
    user_ids: Sequence[int | None] = (None,)
    days: int = 30
    batch_size: int = 20_000
    seed: int = 1


_CALL_COLUMNS = (
    "id",
    "kind",
    "tool_name",
    "tool_version",
    "status",
    "arguments",
    "raw_arguments",
    "context",
    "tenant",
    "user_id",
    "agent_name",
    "run_id",
    "turn",
    "position",
    "model_call_id",
    "saga_id",
    "approval_hash",
    "result",
    "error",
    "error_detail",
    "attempts",
    "worker",
    "progress",
    "created_at",
    "queued_at",
    "started_at",
    "finished_at",
    "updated_at",
)
#: An event row as generated: the hashed columns in ``hash_columns``' order, then the hash.
_EVENT_COLUMNS = (*HASHED_COLUMNS, "hash")


def generate_calls(spec: SyntheticSpec, progress: Callable[[int], None] | None = None) -> tuple[int, int]:
    """Write ``spec.count`` calls and their events; return (calls, events) written."""
    if not spec.tools or not spec.tenants:
        raise ValueError("synthetic calls need at least one tool and one tenant")
    rng = random.Random(spec.seed)
    statuses = list(STATUS_WEIGHTS)
    weights = [STATUS_WEIGHTS[status][0] for status in statuses]
    now = timezone.now()
    start = now - dt.timedelta(days=spec.days)
    step = dt.timedelta(days=spec.days) / max(spec.count, 1)
    calls_written = events_written = 0
    while calls_written < spec.count:
        size = min(spec.batch_size, spec.count - calls_written)
        with transaction.atomic():
            heads = _lock_heads(spec.tenants)
            calls: list[tuple[Any, ...]] = []
            events: list[tuple[Any, ...]] = []
            for offset in range(size):
                created = start + step * (calls_written + offset)
                status = rng.choices(statuses, weights)[0]
                _one_call(rng, spec, status, created, heads, calls, events)
            _copy(ToolCall._meta.db_table, _CALL_COLUMNS, calls)
            _copy(AuditEvent._meta.db_table, _EVENT_COLUMNS, events)
            for chain, (seq, head_hash) in heads.items():
                AuditChainHead.objects.filter(chain=chain).update(seq=seq, hash=head_hash)
        calls_written += size
        events_written += len(events)
        if progress is not None:
            progress(calls_written)
    return calls_written, events_written


def _lock_heads(tenants: Sequence[str]) -> dict[int, tuple[int, str]]:
    """The heads of every chain the tenants' calls may go to, created when missing, locked until the batch commits."""
    shards = toolhub_settings().AUDIT_CHAINS
    chains = sorted(
        {(tenant_chain_base(tenant) if tenant else 0) + shard for tenant in tenants for shard in range(shards)}
    )
    existing = set(AuditChainHead.objects.filter(chain__in=chains).values_list("chain", flat=True))
    AuditChainHead.objects.bulk_create(
        [AuditChainHead(chain=chain) for chain in chains if chain not in existing], ignore_conflicts=True
    )
    locked = AuditChainHead.objects.select_for_update().filter(chain__in=chains).order_by("chain")
    return {head.chain: (head.seq, head.hash) for head in locked}


def _one_call(
    rng: random.Random,
    spec: SyntheticSpec,
    status: str,
    created: dt.datetime,
    heads: dict[int, tuple[int, str]],
    calls: list[tuple[Any, ...]],
    events: list[tuple[Any, ...]],
) -> None:
    call_id = uuid.UUID(int=rng.getrandbits(128), version=4)
    run_id = uuid.UUID(int=rng.getrandbits(128), version=4)
    tool = spec.tools[rng.randrange(len(spec.tools))]
    tenant = spec.tenants[rng.randrange(len(spec.tenants))]
    agent = spec.agents[rng.randrange(len(spec.agents))]
    user_id = spec.user_ids[rng.randrange(len(spec.user_ids))]
    arguments = canonical_json({"item": f"item-{rng.randrange(10_000)}", "quantity": rng.randrange(1, 10)})
    steps = STATUS_WEIGHTS[status][1]
    moments = [created + dt.timedelta(milliseconds=40 * index) for index in range(len(steps))]
    ran = "running" in steps
    finished = moments[-1] if status in (CallStatus.SUCCEEDED, CallStatus.FAILED, CallStatus.COMPENSATED) else None
    calls.append(
        (
            call_id,
            "call",
            tool,
            "1",
            status,
            arguments,
            arguments,
            "{}",
            tenant,
            user_id,
            agent,
            run_id,
            1,
            0,
            f"call_{call_id.hex[:12]}",
            "",
            "",
            '{"ok": true}' if status == CallStatus.SUCCEEDED else None,
            "The tool failed." if status == CallStatus.FAILED else "",
            "",
            1 if ran else 0,
            "synthetic" if ran else "",
            "[]",
            created,
            moments[1] if ran else None,
            moments[2] if ran else None,
            finished,
            moments[-1],
        )
    )
    chain = chain_for(call_id, tenant)
    seq, prev_hash = heads[chain]
    for step_name, moment in zip(steps, moments, strict=True):
        seq += 1
        data = canonical_json({"synthetic": True} if step_name != "requested" else {"arguments": arguments})
        row = (
            chain,
            seq,
            f"call.{step_name}",
            call_id,
            run_id,
            tool,
            step_name if step_name != "requested" else "",
            tenant,
            "synthetic" if step_name != "requested" else f"agent:{agent}",
            moment,
            data,
            prev_hash,
        )
        prev_hash = hash_columns(*row)
        events.append((*row, prev_hash))
    heads[chain] = (seq, prev_hash)


def _copy(table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
    """Insert ``rows`` with COPY on PostgreSQL, with one bulk INSERT per thousand rows elsewhere."""
    if not rows:
        return
    quoted = ", ".join(connection.ops.quote_name(column) for column in columns)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            buffer = io.StringIO()
            for row in rows:
                buffer.write("\t".join(_copy_text(value) for value in row))
                buffer.write("\n")
            with cursor.cursor.copy(f"COPY {table} ({quoted}) FROM STDIN") as copy:
                copy.write(buffer.getvalue())
            return
        placeholders = "(" + ", ".join(["%s"] * len(columns)) + ")"
        for index in range(0, len(rows), 1000):
            chunk = rows[index : index + 1000]
            cursor.execute(
                f"INSERT INTO {table} ({quoted}) VALUES {', '.join([placeholders] * len(chunk))}",
                [_insert_value(value) for row in chunk for value in row],
            )


def _copy_text(value: Any) -> str:
    """One value in COPY's text format."""
    if value is None:
        return "\\N"
    if isinstance(value, dt.datetime):
        return value.isoformat()
    text = str(value)
    if "\\" in text or "\t" in text or "\n" in text or "\r" in text:
        text = text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return text


def _insert_value(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return value.hex
    if isinstance(value, dt.datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value
