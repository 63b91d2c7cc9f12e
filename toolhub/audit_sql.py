"""One audited change as one PostgreSQL statement: the row's change, the chain head's advance, the events.

A governed call's write is a call row's INSERT or guarded UPDATE plus its audit events. Each event's
hash covers its chain's previous hash and its seq, which only the locked chain head knows; every other
part of the hashed text is known before the statement runs (``toolhub.audit_hash.hash_parts``). So the
database finishes the text and hashes it (``sha256``) while it advances the head, and inserts the
events with those hashes, all in the statement that changes the row: one round trip, and, outside a
transaction, one commit. ``verify_audit`` recomputes every hash in Python from the stored columns.

The statement's text depends only on the number of events (and the change's own SQL), so it is built
once per shape; the per-event values travel as one JSON parameter (few parameters: psycopg
keeps the statement's conversion). The head row is upserted, so a chain's first event needs
no prior row, and the head moves only if the change touched a row (of two racing writers, the loser
appends nothing).
"""

import functools
import json
from typing import Any

from toolhub.governance import governance_stamp_after_sql

__all__ = ["appended_params", "appended_sql"]

_HEAD = "toolhub_auditchainhead"
_EVENTS = "toolhub_auditevent"


#: The per-event values, one JSON list each: the hashed text's parts before the previous hash (b), between
#: it and seq (m) and after seq (a); the event's type (t), status (s), actor (x) and data (d).
_KEYS = ("b", "m", "a", "t", "s", "x", "d")


def _array(key: str) -> str:
    """SQL of the given JSON's list ``key`` as ``text[]``, in its order."""
    return (
        f"ARRAY(SELECT e.v FROM json_array_elements_text(given.j -> '{key}') WITH ORDINALITY AS e(v, k) ORDER BY e.k)"
    )


def _hash(index: int, previous: str, base: str) -> str:
    """SQL of event ``index``'s hash (1-based) from the previous hash and the chain's seq before the append."""
    return (
        f"encode(sha256(convert_to(p.b[{index}] || {previous} || p.m[{index}] || (({base}) + {index})::text "
        f"|| p.a[{index}], 'UTF8')), 'hex')"
    )


def _last_hash(count: int, previous: str, base: str) -> str:
    """SQL of the newest hash after ``count`` events, each nested in the next."""
    expression = previous
    for index in range(1, count + 1):
        expression = _hash(index, expression, base)
    return expression


@functools.lru_cache(maxsize=256)
def appended_sql(
    count: int, change: str | None, writes: tuple[str, ...] = (), returning: str = "", stamp_after: bool = False
) -> str:
    """The statement appending ``count`` events (after ``change``, a row's INSERT or UPDATE, when given).

    ``writes``: INSERTs or UPDATEs of other rows that commit with the change (an approval's decision row),
    run first in the same statement whether or not the change touches its row; each is to touch one.
    Parameters, in order: the writes' own; the change's own; the per-event values as one JSON object
    (:data:`_KEYS`); the chain; the chain again, call id, run id, tool name, tenant and time of the events.
    Returns one row: whether the change touched a row (1 without a change), the chain's seq before the
    append, the hashes (the previous one first), the new events' ids in seq order, and whether every write
    touched a row, and with ``stamp_after`` the governance stamp read after the events were written (so
    after the head's lock; NULL without); then, with ``returning`` (the change's RETURNING list), the changed
    row's columns (NULLs when it touched none), so a writer that holds only a row's key needs no read of it.
    """
    if count < 1:
        raise ValueError("an append writes at least one event")
    changed = "EXISTS (SELECT 1 FROM change)" if change else "true"
    base = f"head.seq - {count}"
    laterals = " ".join(
        f"CROSS JOIN LATERAL (SELECT {_hash(index, 'head.previous_hash' if index == 1 else f'l{index - 1}.h', base)} "
        f"AS h) l{index}"
        for index in range(1, count + 1)
    )
    first_hash = _last_hash(count, "''", "0")
    arrays = ", ".join(f"{_array(key)} AS {key}" for key in _KEYS)
    hashes = ", ".join(["head.previous_hash", *(f"l{index}.h" for index in range(1, count + 1))])
    with_writes = "".join(f"w{index} AS ({write} RETURNING 1), " for index, write in enumerate(writes, start=1))
    written_all = " AND ".join(f"EXISTS (SELECT 1 FROM w{index})" for index in range(1, len(writes) + 1)) or "true"
    with_change = f"change AS ({change} RETURNING {returning or 1}), " if change else ""
    returned = ", r.* FROM (SELECT 1) AS one LEFT JOIN change AS r ON true" if change and returning else ""
    # Its argument depends on the written events: evaluated once they are, after the head's lock was taken.
    after = governance_stamp_after_sql("(SELECT count(*) FROM written)") if stamp_after else "NULL::bigint"
    return (
        f"WITH {with_writes}{with_change}"
        f"p AS (SELECT {arrays} FROM (SELECT %s::json AS j) AS given), "
        f"head AS (INSERT INTO {_HEAD} AS h (chain, seq, hash, previous_hash) "
        f"SELECT %s, {count}, {first_hash}, '' FROM p WHERE {changed} "
        f"ON CONFLICT (chain) DO UPDATE SET seq = h.seq + {count}, "
        f"hash = (SELECT {_last_hash(count, 'h.hash', 'h.seq')} FROM p), previous_hash = h.hash "
        "RETURNING seq, previous_hash), "
        f"chained AS (SELECT head.seq - {count} AS base, ARRAY[{hashes}] AS hashes FROM head CROSS JOIN p {laterals}), "
        f"written AS (INSERT INTO {_EVENTS} (chain, seq, event_type, call_id, run_id, tool_name, status, tenant, "
        "actor, created_at, data, prev_hash, hash) "
        "SELECT %s, c.base + v.k, v.event_type, %s::uuid, %s::uuid, %s, v.status, %s, v.actor, %s::timestamptz, "
        "v.data, c.hashes[v.k], c.hashes[v.k + 1] "
        "FROM chained c CROSS JOIN p CROSS JOIN unnest(p.t, p.s, p.x, p.d) "
        "WITH ORDINALITY AS v(event_type, status, actor, data, k) RETURNING id, seq) "
        f"SELECT {'(SELECT count(*) FROM change)' if change else '1'}, (SELECT base FROM chained), "
        f"(SELECT hashes FROM chained), ARRAY(SELECT id FROM written ORDER BY seq), {written_all}, {after}{returned}"
    )


#: The encoder of the statement's JSON parameter, built once (``json.dumps`` with options builds one per call).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def appended_params(
    change_params: list[Any],
    parts: list[tuple[str, str, str]],
    *,
    chain: int,
    call_id: Any,
    run_id: Any,
    tool_name: str,
    tenant: str,
    created_at: Any,
    columns: list[tuple[str, str, str, str]],
) -> list[Any]:
    """The parameters of :func:`appended_sql`; ``columns`` are each event's (type, status, actor, data)."""
    values = [*zip(*parts, strict=True), *zip(*columns, strict=True)]
    given = _COMPACT.encode(dict(zip(_KEYS, values, strict=True)))
    return [*change_params, given, chain, chain, call_id, run_id, tool_name, tenant, created_at]
