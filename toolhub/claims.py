"""Claiming queued calls: a worker takes a call (or a batch) once, committed before anything runs.

Of two deliveries racing for the same call, the guarded UPDATE lets exactly one win; the claim and its
audit event are one statement on PostgreSQL (``toolhub.calls``). A delivery that carries a ``ClaimHint``
claims without reading the call first: the statement that claims it returns its row.
"""

import functools
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from toolhub.audit_hash import chain_for
from toolhub.authorization import agent_tools_sql
from toolhub.calls import CALL_TABLE, call_transition
from toolhub.dispatch import call_lease
from toolhub.governance import governance_hold
from toolhub.models import CallStatus, ToolCall
from toolhub.prepared import prepared_cursor
from toolhub.rowread import columns_sql, instance_of
from toolhub.rowwrite import new_instance
from toolhub.storable import storable_text

__all__ = ["ClaimHint", "tool_call_claim", "tool_calls_claim"]


@dataclass(frozen=True)
class ClaimHint:
    """What a queued call's message tells its worker, so the claim needs no read of the call first.

    The claim's audit event hashes the call's tool, tenant and run, and its attempt; the claim's UPDATE moves
    the row only while it still holds exactly these, so a stale or wrong hint claims nothing and the worker
    reads the call as it would without one. A hint grants nothing: permissions are checked after the claim.
    """

    tool_name: str
    tenant: str
    run_id: uuid.UUID | None
    attempts: int

    @classmethod
    def of(cls, call: ToolCall) -> "ClaimHint":
        """The hint of a call as it is queued."""
        return cls(call.tool_name, call.tenant, call.run_id, call.attempts)

    def message(self) -> list[Any]:
        """The hint as a task message carries it (JSON)."""
        return [self.tool_name, self.tenant, str(self.run_id) if self.run_id else None, self.attempts]

    @classmethod
    def from_message(cls, value: Any) -> "ClaimHint | None":
        """The hint of a message, or None for one that is missing or malformed (the claim then reads the call).

        Malformed includes values no call row holds (the broker is trusted less than the database): a text with
        a NUL or a lone surrogate, or an attempt outside the column's range, would make the claim's statement
        raise instead of missing.
        """
        if not isinstance(value, list | tuple) or len(value) != 4:
            return None
        tool_name, tenant, run_id, attempts = value
        if not (_column_text(tool_name) and _column_text(tenant) and type(attempts) is int):
            return None
        if not 0 <= attempts < _MAX_ATTEMPT:
            return None
        try:
            return cls(tool_name, tenant, uuid.UUID(run_id) if run_id is not None else None, attempts)
        except (TypeError, ValueError, AttributeError):
            return None


#: Above any attempt a call's row holds (``attempts``, a positive integer column: 32 bits), so the claim's ``+ 1`` fits.
_MAX_ATTEMPT = 2**31 - 1


def _column_text(value: Any) -> bool:
    """Whether ``value`` is a text a call's row may hold as it is: no NUL, no lone surrogate (``storable_text``)."""
    return isinstance(value, str) and storable_text(value) == value


def tool_call_claim(*, call_id: uuid.UUID, worker: str, hint: ClaimHint | None = None) -> ToolCall | None:
    """Atomically take a ``queued`` call for this worker; ``None`` if another delivery took it already."""
    claimed = tool_calls_claim(call_id=call_id, worker=worker, limit=1, hint=hint)
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


def tool_calls_claim(*, call_id: uuid.UUID, worker: str, limit: int, hint: ClaimHint | None = None) -> list[ToolCall]:
    """Claim ``call_id`` and up to ``limit - 1`` other queued calls in one transaction (group commit).

    Every claim (the call's ``running`` row, its lease and its audit event) is committed before any of
    these calls runs, so at-most-once holds as for a single claim; the messages of the other calls find
    them taken and do nothing. Leases add up along the batch (each call may wait for those before it).
    Audit appends go chain by chain in chain order, so two workers claiming batches never deadlock on
    the chain heads, and each chain's sequence stays gapless. Returned in execution order: ``call_id``
    first, then the oldest queued first. ``hint``: what the delivery says of ``call_id`` (a single claim only).
    """
    from toolhub.tools.registry import registry

    if limit == 1:
        return _claim_one(call_id, worker, hint)
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
        for call, expires in sorted(claims, key=lambda claim: chain_for(claim[0].id, claim[0].tenant)):
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
    with prepared_cursor(connection) as cursor:
        cursor.execute(_queued_call_sql(), [key, CallStatus.QUEUED])
        row = cursor.fetchone()
    return None if row is None else instance_of(ToolCall, row)


def _claim_one(call_id: uuid.UUID, worker: str, hint: ClaimHint | None) -> list[ToolCall]:
    """Claim one queued call: move it to ``running`` with a guarded UPDATE (no row lock needed).

    Of two deliveries racing for it, the guarded UPDATE lets exactly one win; with its audit event it is
    one statement on PostgreSQL, committed before the tool runs. The UPDATE also checks that the
    governance stamp is still the one this process's cache holds, so the re-check that follows needs no
    read of its own; when the stamp moved, the stamp is read and the claim tried again. The call is read
    first, unless the delivery's ``hint`` says what the claim needs (PostgreSQL: the claim returns the row,
    and the agent's tools the re-check needs, as ``agent_tools_at_claim``); a claim under a hint that no longer
    holds misses, and the call is read as without one.
    """
    key = ToolCall._meta.pk.get_db_prep_value(call_id, connection)  # SQLite stores UUIDs as text
    first = 0
    if hint is not None and connection.vendor == "postgresql":
        hinted = new_instance(
            ToolCall,
            id=call_id,
            status=CallStatus.QUEUED,
            tool_name=hint.tool_name,
            tenant=hint.tenant,
            run_id=hint.run_id,
            attempts=hint.attempts,
        )
        read = agent_tools_sql()
        also = (f"{read.expression(CALL_TABLE)} AS agent_tools",) if read is not None else ()
        if _claim(hinted, worker, attempt=0, refresh=True, also_returned=also):
            if read is not None:
                hinted.agent_tools_at_claim = read.tools(hinted.also_returned[0])
                hinted.delegated_by_at_claim = read.delegated_by(hinted.also_returned[0])
            return [hinted]
        first = 1
    for attempt in range(first, _CLAIM_ATTEMPTS):
        call = _queued_call(key)
        if call is None:
            return []
        if _claim(call, worker, attempt=attempt):
            return [call]
    return []


def _claim(
    call: ToolCall, worker: str, *, attempt: int, refresh: bool = False, also_returned: tuple[str, ...] = ()
) -> bool:
    """Move ``call`` (queued in its ``attempts``) to ``running`` for ``worker``: claim try ``attempt`` of a delivery."""
    from toolhub.tools.registry import registry

    held = governance_hold(assume_current=attempt == 0)
    stamp = held.stamp
    checked = stamp if attempt < _CLAIM_ATTEMPTS - 1 else None
    now = timezone.now()
    claimed = call_transition(
        call,
        to=CallStatus.RUNNING,
        allowed_from={CallStatus.QUEUED},
        actor=f"worker:{worker}",
        data={"attempt": call.attempts + 1},
        # the last attempt does not check: a stream of governance changes must not starve a call
        checked_stamp=checked,
        decided_stamp=stamp,  # unchecked or not, whether it held after the claim's locks (``governance_moved``)
        # a hinted claim: only in the hinted attempt, and the row comes back with the move
        attempt=call.attempts if refresh else None,
        refresh=refresh,
        also_returned=also_returned,
        attempts=call.attempts + 1,
        worker=worker[:200],
        started_at=now,
        lease_expires_at=now + call_lease(registry.get(call.tool_name)),
    )
    if claimed:
        call.claim_hold = held if checked is not None else None
    return claimed


#: Claims of one delivery, the first under the stamp this process last saw.
_CLAIM_ATTEMPTS = 3
