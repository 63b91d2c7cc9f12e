"""Verification of the audit trail: recompute every chain's hashes from the rows as stored.

Each chain is read in seq order through a server-side cursor (constant memory); on PostgreSQL the
chains are verified in parallel processes. A chain verifies against alteration and deletion inside it;
its head catches the removal of its newest events, and a chain holding events but no head is reported (signed
checkpoints, ``toolhub.checkpoints``, catch a rewritten head).
"""

import multiprocessing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connections, transaction
from django.db.models import F, Func, TextField
from django.db.models.functions import Cast

from toolhub.audit_hash import HASHED_COLUMNS, hash_columns, hash_text, tenant_chains
from toolhub.models import AuditChainHead, AuditEvent

__all__ = ["AuditProblem", "ChainResult", "verify_audit_chains", "verify_chains"]


@dataclass(frozen=True)
class AuditProblem:
    """The first place a chain does not verify."""

    chain: int
    event_id: int | None
    seq: int
    reason: str
    #: The walk's end disagrees with the chain head read before it (the head may have moved since).
    at_head: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        where = f"event #{self.event_id}" if self.event_id is not None else f"after seq {self.seq}"
        return f"chain {self.chain}: {where} (seq {self.seq}): {self.reason}"


@dataclass(frozen=True)
class ChainResult:
    """One chain's verification: how many of its events were checked, and its first problem (None: intact)."""

    chain: int
    events: int
    problem: AuditProblem | None


def verify_audit_chains(
    progress: Callable[[int], None] | None = None, batch_size: int = 2000, workers: int = 1, tenant: str | None = None
) -> tuple[int, list[AuditProblem]]:
    """Recompute every chain; return the number of events checked and the first problem per chain.

    ``tenant``: only that tenant's chains (``toolhub.audit_hash.chain_for``), which hold its events alone;
    an event of another tenant found in them is a problem, named without the event.
    """
    results = verify_chains(progress=progress, batch_size=batch_size, workers=workers, tenant=tenant)
    return sum(result.events for result in results), [result.problem for result in results if result.problem]


def verify_chains(
    progress: Callable[[int], None] | None = None, batch_size: int = 2000, workers: int = 1, tenant: str | None = None
) -> list[ChainResult]:
    """Recompute every chain (or ``tenant``'s); one result per chain, in chain order.

    Each chain is read through a server-side cursor (constant memory). With ``workers`` > 1 on
    PostgreSQL, outside a transaction, chains are verified in that many processes at once, each on its
    own connection; ``progress`` is then told the count as each chain finishes.
    """
    chains_range = tenant_chains(tenant) if tenant else None
    head_rows = AuditChainHead.objects.all()
    if chains_range is not None:
        head_rows = head_rows.filter(chain__gte=chains_range.start, chain__lt=chains_range.stop)
    heads = {head.chain: (head.seq, head.hash) for head in head_rows}
    chains = sorted(set(heads) | set(_chains_with_events(chains_range)))
    jobs = [(chain, heads.get(chain), batch_size, tenant) for chain in chains]
    checked = 0
    results: list[ChainResult] = []
    connection = transaction.get_connection()
    if workers > 1 and len(jobs) > 1 and connection.vendor == "postgresql" and not connection.in_atomic_block:
        # Forked children must not share the parent's socket: close it, each child opens its own.
        connections.close_all()
        with multiprocessing.get_context("fork").Pool(min(workers, len(jobs))) as pool:
            for chain, (count, problem) in zip(chains, pool.imap(_verify_chain_job, jobs), strict=True):
                checked += count
                if progress is not None:
                    progress(checked)
                results.append(ChainResult(chain, count, problem))
        return results
    for chain, head, size, _ in jobs:

        def counted(count: int, base: int = checked) -> None:
            if progress is not None:
                progress(base + count)

        count, problem = _verify_chain(chain, head, size, counted, tenant)
        checked += count
        results.append(ChainResult(chain, count, problem))
    return results


def _chains_with_events(within: range | None = None) -> list[int]:
    """The chains that hold events: on PostgreSQL a skip scan of the (chain, seq) index, not a DISTINCT scan."""
    connection = transaction.get_connection()
    low, high = (within.start, within.stop) if within is not None else (0, 2**63 - 1)
    if connection.vendor != "postgresql":
        events = AuditEvent.objects.filter(chain__gte=low, chain__lt=high)
        return list(events.values_list("chain", flat=True).distinct())
    table = AuditEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH RECURSIVE chains(chain) AS ((SELECT chain FROM {table} WHERE chain >= %s AND chain < %s "
            "ORDER BY chain LIMIT 1) UNION ALL "
            f"SELECT (SELECT e.chain FROM {table} e WHERE e.chain > chains.chain AND e.chain < %s "
            "ORDER BY e.chain LIMIT 1) "
            "FROM chains WHERE chains.chain IS NOT NULL) SELECT chain FROM chains WHERE chain IS NOT NULL",
            [low, high, high],
        )
        return [chain for (chain,) in cursor.fetchall()]


_VERIFIED_COLUMNS = ("id", *HASHED_COLUMNS, "hash")
#: Where an event's tenant is among the hashed columns of a verified row.
_TENANT = HASHED_COLUMNS.index("tenant")

#: ``hashed_timestamp``'s text (UTC, microseconds always written), as PostgreSQL writes it.
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


def _verify_chain_job(job: tuple[int, tuple[int, str] | None, int, str | None]) -> tuple[int, AuditProblem | None]:
    chain, head, batch_size, tenant = job
    try:
        return _verify_chain(chain, head, batch_size, None, tenant)
    finally:
        connections.close_all()


#: Times a chain is walked again when its head moved during the walk (calls appended meanwhile).
_HEAD_MOVES = 3


def _verify_chain(
    chain: int,
    head: tuple[int, str] | None,
    batch_size: int,
    progress: Callable[[int], None] | None,
    tenant: str | None = None,
) -> tuple[int, AuditProblem | None]:
    """Walk one chain; when its end disagrees with the head read before, read the head again.

    The heads are read first and the chains walked after, so on a live system a call appended meanwhile
    carries the walk past the head read: that is a head that moved, not a tail removed. A head that still
    disagrees when read again (or is gone) is the problem.
    """
    for _ in range(_HEAD_MOVES):
        checked, problem = _walk_chain(chain, head, batch_size, progress, tenant)
        if problem is None or not problem.at_head:
            return checked, problem
        # A chain first appended to after the heads were read has a head now; one whose head is still
        # missing lost it (deleted, or moved to another chain): the problem stands.
        fresh = AuditChainHead.objects.filter(chain=chain).values_list("seq", "hash").first()
        if fresh is None or (head is not None and tuple(fresh) == tuple(head)):
            return checked, problem
        head = (fresh[0], fresh[1])
    return checked, problem


def _walk_chain(
    chain: int,
    head: tuple[int, str] | None,
    batch_size: int,
    progress: Callable[[int], None] | None,
    tenant: str | None = None,
) -> tuple[int, AuditProblem | None]:
    """Walk one chain in seq order; return the events checked and its first problem, if any.

    ``tenant``: the chain is that tenant's; an event of another one ends the walk (two tenants' chain
    numbers collide), reported without naming it.
    """
    checked = 0
    expected_seq, prev_hash, problem = 1, "", None
    # The newest event and the first one past the head's seq: what a disagreeing head names (see _head_problem).
    last_id: int | None = None
    beyond: tuple[int, int] | None = None
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
            if tenant is not None and columns[_TENANT] != tenant:
                reason = "holds an event of another tenant: two tenants share this chain, verify it as a whole"
                problem = AuditProblem(chain, None, seq, reason)
            elif seq != expected_seq:
                problem = AuditProblem(chain, event_id, seq, f"expected seq {expected_seq}: events are missing")
            elif event_prev_hash != prev_hash:
                problem = AuditProblem(chain, event_id, seq, "previous hash does not match: chain was altered")
            elif (hash_text(*columns) if as_text else hash_columns(*columns)) != stored_hash:
                problem = AuditProblem(chain, event_id, seq, "hash does not match its content: event was altered")
            if problem:
                break
            expected_seq, prev_hash, last_id = seq + 1, stored_hash, event_id
            if head is not None and beyond is None and seq > head[0]:
                beyond = (event_id, seq)
    if problem is None and head is None and checked:
        # Every append moves its chain's head in the same transaction: events without one lost it.
        problem = AuditProblem(chain, None, expected_seq - 1, "the chain has events but no chain head: it was removed")
    elif problem is None and head is not None and (head[0] != expected_seq - 1 or head[1] != prev_hash):
        problem = _head_problem(chain, head[0], expected_seq - 1, last_id, beyond)
    return checked, problem


def _head_problem(
    chain: int, head_seq: int, last_seq: int, last_id: int | None, beyond: tuple[int, int] | None
) -> AuditProblem:
    """How an intact chain disagrees with its head, naming the first event to look at when there is one.

    Past the head: events appended without moving it (inserted), or the head set back. At it with another
    hash: the newest event was replaced, or the head rewritten. Short of it: the newest events were removed.
    """
    if beyond is not None:
        reason = f"the chain head says seq {head_seq}: this event and those after it (to seq {last_seq}) lie beyond it"
        return AuditProblem(chain, beyond[0], beyond[1], reason + ": inserted, or the head was set back", True)
    if head_seq == last_seq and last_id is not None:
        reason = "the newest event is not the one its chain head names: it was replaced, or the head rewritten"
        return AuditProblem(chain, last_id, last_seq, reason, True)
    return AuditProblem(chain, None, last_seq, f"chain head says seq {head_seq}: the newest events were removed", True)
