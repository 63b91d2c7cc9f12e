"""The floor of a governed call: the fewest statements its guarantees need, in raw SQL on toolhub's own tables.

A governed call must make its intent durable before the tool acts (a committed call row with its audit
events) and its outcome durable after (a committed update with its audit event): two transactions, each
with the row change plus the chain head's advance in one statement and the events plus the head's new
hash in a second, beside the tool's own work. This module issues exactly that, hand-written SQL on a raw
psycopg connection (no ORM, no policy, no governance read), with hashes ``verify_audit_chains`` accepts,
so the benchmark can show how far from this floor toolhub stands where a goal is out of physical reach.
"""

import datetime as dt
import types
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["raw_sql_floor"]

_CALL_INSERT = (
    "WITH change AS (INSERT INTO toolhub_toolcall (id, kind, tool_name, tool_version, status, arguments, "
    "raw_arguments, context, tenant, agent_name, turn, position, model_call_id, saga_id, approval_hash, error, "
    "error_detail, attempts, worker, progress, created_at, queued_at, started_at, lease_expires_at, updated_at) "
    "VALUES (%s, 'call', %s, '', 'running', %s, '', %s, %s, '', 0, 0, '', '', '', '', '', 1, 'floor', '[]', "
    "%s, %s, %s, %s, %s) RETURNING 1) "
    "UPDATE toolhub_auditchainhead SET seq = seq + 3 WHERE chain = %s AND EXISTS (SELECT 1 FROM change) "
    "RETURNING seq, hash"
)
_CALL_SETTLE = (
    "WITH change AS (UPDATE toolhub_toolcall SET status = 'succeeded', result = %s, finished_at = %s, "
    "lease_expires_at = NULL, updated_at = %s WHERE id = %s AND status = 'running' RETURNING 1) "
    "UPDATE toolhub_auditchainhead SET seq = seq + 1 WHERE chain = %s AND EXISTS (SELECT 1 FROM change) "
    "RETURNING seq, hash"
)
_EVENT_COLUMNS = (
    "chain, seq, event_type, call_id, run_id, tool_name, status, tenant, actor, created_at, data, prev_hash, hash"
)
_EVENT_ROW = "(%s, %s, %s, %s, NULL, %s, %s, %s, %s, %s, %s, %s, %s)"


def raw_sql_floor(tool: Callable[..., Any], tool_name: str, tenant: str) -> Callable[[], None]:
    """A callable doing one governed call's minimum: intent committed, the tool, outcome committed."""
    from django.db import connection
    from psycopg.types.json import Jsonb

    from toolhub.audit import canonical_json, chain_for, compute_hash
    from toolhub.conf import toolhub_settings
    from toolhub.tools.context import ToolContext

    connection.ensure_connection()
    raw = connection.connection
    arguments = {"note": "benchmark"}
    with raw.cursor() as cursor:
        cursor.execute(
            "INSERT INTO toolhub_auditchainhead (chain, seq, hash) SELECT g, 0, '' FROM generate_series(0, %s) AS g "
            "ON CONFLICT (chain) DO NOTHING",
            [toolhub_settings().AUDIT_CHAINS - 1],
        )

    def append(
        cursor: Any, chain: int, head: tuple[int, str], call_id: uuid.UUID, events: list[tuple[str, str]]
    ) -> None:
        last_seq, prev_hash = head
        now = dt.datetime.now(dt.UTC)
        rows: list[Any] = []
        for offset, (event_type, status) in enumerate(events):
            event = types.SimpleNamespace(
                chain=chain,
                seq=last_seq - len(events) + 1 + offset,
                event_type=event_type,
                call_id=call_id,
                run_id=None,
                tool_name=tool_name,
                status=status,
                tenant=tenant,
                actor="floor",
                created_at=now,
                data=canonical_json({}),
                prev_hash=prev_hash,
            )
            prev_hash = compute_hash(event)  # type: ignore[arg-type]
            rows.extend(
                [chain, event.seq, event_type, call_id, tool_name, status, tenant, "floor", now, event.data]
                + [event.prev_hash, prev_hash]
            )
        cursor.execute(
            f"WITH head AS (UPDATE toolhub_auditchainhead SET hash = %s WHERE chain = %s) "
            f"INSERT INTO toolhub_auditevent ({_EVENT_COLUMNS}) VALUES {', '.join([_EVENT_ROW] * len(events))}",
            [prev_hash, chain, *rows],
        )

    def governed_floor() -> None:
        call_id = uuid.uuid4()
        chain = chain_for(call_id)
        now = dt.datetime.now(dt.UTC)
        lease = now + dt.timedelta(seconds=60)
        with raw.transaction(), raw.cursor() as cursor:
            cursor.execute(
                _CALL_INSERT,
                [call_id, tool_name, Jsonb(arguments), Jsonb({}), tenant, now, now, now, lease, now, chain],
            )
            head = cursor.fetchone()
            append(
                cursor,
                chain,
                head,
                call_id,
                [("call.requested", "queued"), ("call.queued", "queued"), ("call.running", "running")],
            )
        result = tool(note=arguments["note"], ctx=ToolContext(tenant=tenant).with_values(call_id=str(call_id)))
        now = dt.datetime.now(dt.UTC)
        with raw.transaction(), raw.cursor() as cursor:
            cursor.execute(_CALL_SETTLE, [Jsonb(result), now, now, call_id, chain])
            head = cursor.fetchone()
            append(cursor, chain, head, call_id, [("call.succeeded", "succeeded")])

    return governed_floor
