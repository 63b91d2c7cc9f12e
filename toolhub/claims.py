"""Claiming queued calls: a worker takes a call (or a batch) once, committed before anything runs.

Of two deliveries racing for the same call, the guarded UPDATE lets exactly one win; the claim and its
audit event are one statement on PostgreSQL (``toolhub.calls``).
"""

import functools
import uuid
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from toolhub.audit import chain_for
from toolhub.calls import call_transition
from toolhub.governance import governance_stamp
from toolhub.models import CallStatus, ToolCall
from toolhub.pipeline import call_lease
from toolhub.rowread import columns_sql, instance_of

__all__ = ["tool_call_claim", "tool_calls_claim"]


def tool_call_claim(*, call_id: uuid.UUID, worker: str) -> ToolCall | None:
    """Atomically take a ``queued`` call for this worker; ``None`` if another delivery took it already."""
    claimed = tool_calls_claim(call_id=call_id, worker=worker, limit=1)
    return claimed[0] if claimed else None


#: Oldest queued calls first; a row another worker is claiming right now is skipped, not waited for.
_CLAIMABLE = (
    "SELECT * FROM toolhub_toolcall WHERE status = %s AND (id = %s OR id IN ("
    "SELECT id FROM toolhub_toolcall WHERE status = %s AND id <> %s ORDER BY queued_at LIMIT %s "
    "FOR UPDATE SKIP LOCKED)) FOR UPDATE SKIP LOCKED"
)


def _claimable_sql() -> str:
    """The claim query for this database: SQLite (the embedded default) has no row locks, one writer at a time."""
    if connection.features.has_select_for_update_skip_locked:
        return _CLAIMABLE
    return _CLAIMABLE.replace(" FOR UPDATE SKIP LOCKED", "")


def tool_calls_claim(*, call_id: uuid.UUID, worker: str, limit: int) -> list[ToolCall]:
    """Claim ``call_id`` and up to ``limit - 1`` other queued calls in one transaction (group commit).

    Every claim (the call's ``running`` row, its lease and its audit event) is committed before any of
    these calls runs, so at-most-once holds as for a single claim; the messages of the other calls find
    them taken and do nothing. Leases add up along the batch (each call may wait for those before it).
    Audit appends go chain by chain in chain order, so two workers claiming batches never deadlock on
    the chain heads, and each chain's sequence stays gapless. Returned in execution order: ``call_id``
    first, then the oldest queued first.
    """
    from toolhub.tools.registry import registry

    if limit == 1:
        return _claim_one(call_id, worker)
    key = ToolCall._meta.pk.get_db_prep_value(call_id, connection)  # SQLite stores UUIDs as text
    with transaction.atomic():
        rows = list(ToolCall.objects.raw(_claimable_sql(), [CallStatus.QUEUED, key, CallStatus.QUEUED, key, limit - 1]))
        now = timezone.now()
        rows.sort(key=lambda call: (call.id != call_id, call.queued_at or now))
        lease = timedelta()
        claims: list[tuple[ToolCall, Any]] = []
        for call in rows:
            tool = registry.get(call.tool_name)
            # The first call's lease as for a single claim; each later one may also wait for those before it.
            lease += call_lease(tool) if not claims else timedelta(seconds=tool.effective_timeout if tool else 0.0)
            claims.append((call, now + lease))
        claimed: set[uuid.UUID] = set()
        for call, expires in sorted(claims, key=lambda claim: chain_for(claim[0].id)):
            attempt = call.attempts + 1
            if call_transition(
                call,
                to=CallStatus.RUNNING,
                allowed_from={CallStatus.QUEUED},
                actor=f"worker:{worker}",
                data={"attempt": attempt},
                attempts=attempt,
                worker=worker[:200],
                started_at=now,
                lease_expires_at=expires,
            ):
                claimed.add(call.id)
    return [call for call, _ in claims if call.id in claimed]


@functools.cache
def _queued_call_sql() -> str:
    """One queued call's row (written once: the ORM would compile the query on every delivery)."""
    return f"SELECT {columns_sql(ToolCall, 'c')} FROM {ToolCall._meta.db_table} c WHERE c.id = %s AND c.status = %s"


def _queued_call(key: Any) -> ToolCall | None:
    with connection.cursor() as cursor:
        cursor.execute(_queued_call_sql(), [key, CallStatus.QUEUED])
        row = cursor.fetchone()
    return None if row is None else instance_of(ToolCall, row)


def _claim_one(call_id: uuid.UUID, worker: str) -> list[ToolCall]:
    """Claim one queued call: read it, then move it to ``running`` with a guarded UPDATE (no row lock needed).

    Of two deliveries racing for it, the guarded UPDATE lets exactly one win; with its audit event it is
    one statement on PostgreSQL, committed before the tool runs. The UPDATE also checks that the
    governance stamp is still the one this process's cache holds, so the re-check that follows needs no
    read of its own; when the stamp moved, the stamp is read and the claim tried again.
    """
    from toolhub.tools.registry import registry

    key = ToolCall._meta.pk.get_db_prep_value(call_id, connection)  # SQLite stores UUIDs as text
    for attempt in range(_CLAIM_ATTEMPTS):
        call = _queued_call(key)
        if call is None:
            return []
        stamp = governance_stamp(assume_current=attempt == 0)
        now = timezone.now()
        claimed = call_transition(
            call,
            to=CallStatus.RUNNING,
            allowed_from={CallStatus.QUEUED},
            actor=f"worker:{worker}",
            data={"attempt": call.attempts + 1},
            # the last attempt does not check: a stream of governance changes must not starve a call
            checked_stamp=stamp if attempt < _CLAIM_ATTEMPTS - 1 else None,
            attempts=call.attempts + 1,
            worker=worker[:200],
            started_at=now,
            lease_expires_at=now + call_lease(registry.get(call.tool_name)),
        )
        if claimed:
            return [call]
    return []


#: Claims of one delivery, the first under the stamp this process last saw.
_CLAIM_ATTEMPTS = 3
