"""The floor of a governed call: the fewest statements its guarantees need, in raw SQL on toolhub's own tables.

A governed call must make its intent durable before the tool acts (a committed call row with its audit
events) and its outcome durable after (a committed update with its audit event). Each is one statement,
committed by itself: the row's change, the chain head's advance and the events, with the chain hashes
finished by the database (the statement ``toolhub.audit_sql`` builds, which ``verify_audit`` accepts).
This module issues exactly those two statements, prepared as toolhub's are, beside the tool's
own work: no ORM, no policy, no governance read. The benchmark shows how far from it toolhub stands.
"""

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any, Protocol

__all__ = [
    "raw_sql_approval",
    "raw_sql_atomic_floor",
    "raw_sql_floor",
    "raw_sql_queued_intent",
    "raw_sql_run_complete",
    "raw_sql_worker_floor",
]

_CALL_INSERT = (
    "INSERT INTO toolhub_toolcall (id, kind, tool_name, tool_version, status, arguments, "
    "raw_arguments, context, tenant, agent_name, turn, position, model_call_id, saga_id, approval_hash, error, "
    "error_detail, attempts, worker, progress, created_at, queued_at, started_at, lease_expires_at, updated_at) "
    "VALUES (%s, 'call', %s, '', 'running', %s, '', %s, %s, '', 0, 0, '', '', '', '', '', 1, 'floor', '[]', "
    "%s, %s, %s, %s, %s)"
)
_SETTLED_CALL_INSERT = (
    "INSERT INTO toolhub_toolcall (id, kind, tool_name, tool_version, status, arguments, "
    "raw_arguments, context, tenant, agent_name, turn, position, model_call_id, saga_id, approval_hash, error, "
    "error_detail, attempts, worker, progress, created_at, queued_at, started_at, finished_at, result, updated_at) "
    "VALUES (%s, 'call', %s, '', 'succeeded', %s, '', %s, %s, '', 0, 0, '', '', '', '', '', 1, 'floor', '[]', "
    "%s, %s, %s, %s, %s, %s)"
)
_QUEUED_CALL_INSERT = (
    "INSERT INTO toolhub_toolcall (id, kind, tool_name, tool_version, status, arguments, "
    "raw_arguments, context, tenant, agent_name, turn, position, model_call_id, saga_id, approval_hash, error, "
    "error_detail, attempts, worker, progress, created_at, queued_at, updated_at) "
    "VALUES (%s, 'call', %s, '', 'queued', %s, '', %s, %s, '', 0, 0, '', '', '', '', '', 0, '', '[]', %s, %s, %s)"
)
_CALL_CLAIM = (
    "UPDATE toolhub_toolcall SET status = 'running', attempts = 1, worker = 'floor', started_at = %s, "
    "lease_expires_at = %s, updated_at = %s WHERE id = %s AND status = 'queued'"
)
_CALL_RELEASE = (
    "UPDATE toolhub_toolcall SET status = 'queued', queued_at = %s, updated_at = %s "
    "WHERE id = %s AND status = 'pending_approval'"
)
#: The decision and the request's move, written in the release's statement (its ``writes``).
_DECISION = (
    "INSERT INTO approvals_approvaldecision (request_id, decided_by_id, decided_by_name, decision, "
    "comment, round, arguments_hash, created_at) VALUES (%s, %s, %s, 'approve', '', 1, %s, %s)"
)
_REQUEST_APPROVED = (
    "UPDATE approvals_approvalrequest SET status = 'approved', decided_at = %s WHERE id = %s AND status = 'pending'"
)
_RUN_COMPLETE = (
    "UPDATE agents_app_agentrun SET status = 'completed', output = %s, updated_at = %s "
    "WHERE id = %s AND status IN ('running', 'waiting')"
)
_CALL_SETTLE = (
    "UPDATE toolhub_toolcall SET status = 'succeeded', result = %s, finished_at = %s, "
    "lease_expires_at = NULL, updated_at = %s WHERE id = %s AND status = 'running'"
)


class _Write(Protocol):
    def __call__(
        self,
        change: str,
        change_params: list[Any],
        call_id: uuid.UUID,
        events: list[tuple[str, str]],
        *,
        writes: tuple[tuple[str, list[Any]], ...] = (),
    ) -> bool: ...


def _appender(tool_name: str, tenant: str) -> _Write:
    """``write(change, change_params, call_id, events)``: the call row's change with its audit events, one statement;
    whether the change touched its row.

    The statement is toolhub's own (``toolhub.audit_sql``), on a cursor bound and prepared by the server as
    toolhub's writes are. Each event is ``(event_type, status)``; outside a transaction it commits by itself.
    ``writes``: more rows written in the same statement (toolhub's ``writes``), each with its parameters.
    """
    from django.db import connection

    from toolhub.audit_hash import canonical_json, chain_for, hash_parts, hashed_timestamp
    from toolhub.audit_sql import appended_params, appended_sql
    from toolhub.prepared import prepared_cursor

    cursor = prepared_cursor(connection)
    data = canonical_json({})

    def write(
        change: str,
        change_params: list[Any],
        call_id: uuid.UUID,
        events: list[tuple[str, str]],
        *,
        writes: tuple[tuple[str, list[Any]], ...] = (),
    ) -> bool:
        chain, now = chain_for(call_id, tenant), dt.datetime.now(dt.UTC)
        parts = [
            hash_parts(chain, event, call_id, None, tool_name, status, tenant, "floor", hashed_timestamp(now), data)
            for event, status in events
        ]
        params = appended_params(
            [*(param for _, write_params in writes for param in write_params), *change_params],
            parts,  # type: ignore[arg-type]
            chain=chain,
            call_id=call_id,
            run_id=None,
            tool_name=tool_name,
            tenant=tenant,
            created_at=now,
            columns=[(event, status, "floor", data) for event, status in events],
        )
        cursor.execute(appended_sql(len(events), change, tuple(sql for sql, _ in writes)), params)
        return bool(cursor.fetchone()[0])  # whether the change touched its row (a lost claim touches none)

    return write


_INTENT_EVENTS = [("call.requested", "queued"), ("call.queued", "queued"), ("call.running", "running")]


def raw_sql_floor(tool: Callable[..., Any], tool_name: str, tenant: str) -> Callable[[], None]:
    """A callable doing one governed call's minimum: intent committed, the tool, outcome committed."""
    from psycopg.types.json import Jsonb

    from toolhub.tools.context import ToolContext

    write = _appender(tool_name, tenant)
    arguments = {"note": "benchmark"}

    def governed_floor() -> None:
        call_id = uuid.uuid4()
        now = dt.datetime.now(dt.UTC)
        lease = now + dt.timedelta(seconds=60)
        intent = [call_id, tool_name, Jsonb(arguments), Jsonb({}), tenant, now, now, now, lease, now]
        write(_CALL_INSERT, intent, call_id, _INTENT_EVENTS)
        result = tool(note=arguments["note"], ctx=ToolContext(tenant=tenant).with_values(call_id=str(call_id)))
        now = dt.datetime.now(dt.UTC)
        write(_CALL_SETTLE, [Jsonb(result), now, now, call_id], call_id, [("call.succeeded", "succeeded")])

    return governed_floor


def raw_sql_atomic_floor(tool: Callable[..., Any], tool_name: str, tenant: str) -> Callable[[], None]:
    """An atomic call's minimum: in one transaction, the tool's writes, then the settled row with all its events."""
    from django.db import transaction
    from psycopg.types.json import Jsonb

    from toolhub.tools.context import ToolContext

    write = _appender(tool_name, tenant)
    arguments = {"note": "benchmark"}
    events = [*_INTENT_EVENTS, ("call.succeeded", "succeeded")]

    def governed_atomic_floor() -> None:
        call_id = uuid.uuid4()
        with transaction.atomic():
            result = tool(note=arguments["note"], ctx=ToolContext(tenant=tenant).with_values(call_id=str(call_id)))
            now = dt.datetime.now(dt.UTC)
            row = [call_id, tool_name, Jsonb(arguments), Jsonb({}), tenant, now, now, now, now, Jsonb(result), now]
            write(_SETTLED_CALL_INSERT, row, call_id, events)

    return governed_atomic_floor


def raw_sql_queued_intent(tool_name: str, tenant: str) -> Callable[[], uuid.UUID]:
    """The asking side's minimum for a call a worker runs: the queued row with its two events, one statement."""
    from psycopg.types.json import Jsonb

    write = _appender(tool_name, tenant)

    def queued_intent() -> uuid.UUID:
        call_id, now = uuid.uuid4(), dt.datetime.now(dt.UTC)
        row = [call_id, tool_name, Jsonb({"note": "benchmark"}), Jsonb({}), tenant, now, now, now]
        write(_QUEUED_CALL_INSERT, row, call_id, _INTENT_EVENTS[:2])
        return call_id

    return queued_intent


def raw_sql_worker_floor(call_id: uuid.UUID, tool: Callable[..., Any], tool_name: str, tenant: str) -> bool:
    """A worker's minimum for a queued call: the claim committed with its event, the tool, the outcome with its.

    Returns whether this delivery ran the call (False: another one holds its claim).
    """
    from psycopg.types.json import Jsonb

    from toolhub.tools.context import ToolContext

    write = _appender(tool_name, tenant)
    now = dt.datetime.now(dt.UTC)
    if not write(_CALL_CLAIM, [now, now + dt.timedelta(seconds=60), now, call_id], call_id, [_INTENT_EVENTS[2]]):
        return False  # another delivery holds the claim: nothing runs twice
    result = tool(note="benchmark", ctx=ToolContext(tenant=tenant).with_values(call_id=str(call_id)))
    now = dt.datetime.now(dt.UTC)
    return write(_CALL_SETTLE, [Jsonb(result), now, now, call_id], call_id, [("call.succeeded", "succeeded")])


def raw_sql_approval(
    request_id: int,
    call_id: uuid.UUID,
    arguments_hash: str,
    user_id: int,
    username: str,
    *,
    tool_name: str,
    tenant: str,
) -> None:
    """An approval's minimum: the decision, the request's move and the call's release with both events, one statement.

    The call then goes to a worker as any queued call (``raw_sql_worker_floor``).
    """
    now = dt.datetime.now(dt.UTC)
    writes = (
        (_DECISION, [request_id, user_id, username, arguments_hash, now]),
        (_REQUEST_APPROVED, [now, request_id]),
    )
    events = [("approval.approve", "queued"), ("call.queued", "queued")]
    _appender(tool_name, tenant)(_CALL_RELEASE, [now, now, call_id], call_id, events, writes=writes)


def raw_sql_run_complete(run_id: uuid.UUID, output: str) -> None:
    """The run's minimum once its only call settled: completed with its output, one statement."""
    from django.db import connection

    from toolhub.prepared import prepared_cursor

    now = dt.datetime.now(dt.UTC)
    with prepared_cursor(connection) as cursor:
        cursor.execute(_RUN_COMPLETE, [output, now, run_id])
