"""The audit hash itself, free of Django: canonical JSON text, chain numbers, an event's hash from its columns.

Kept apart from ``toolhub.audit_hash`` (which re-exports it) so that an offline verifier
(``toolhub.audit_file_verify``) computes every hash with these very functions, without a database or
Django settings: one way to compute a hash, inside toolhub and out.
"""

import datetime as dt
import functools
import hashlib
import json
import uuid
from decimal import Decimal
from typing import Any

__all__ = [
    "HASHED_COLUMNS",
    "TENANT_SHARDS",
    "canonical_json",
    "hash_columns",
    "hash_parts",
    "hash_text",
    "hashed_timestamp",
    "in_own_chain",
    "owner_chain_base",
    "tenant_chain_base",
    "tenant_chains",
]


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


#: ``json.dumps`` with these options builds an encoder on every call; this one is built once (it keeps no state).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_default)


def canonical_json(value: Any) -> str:
    """Serialize with sorted keys and no whitespace: the same data always gives the same text."""
    return _CANONICAL.encode(value)


#: Chains below this number are the platform's (events of no tenant, and every event written before
#: chains were kept per tenant); a tenant's chains start at a multiple of it (``tenant_chain_base``).
TENANT_SHARDS = 4096


@functools.lru_cache(maxsize=4096)
def tenant_chain_base(tenant: str) -> int:
    """The first chain of ``tenant``: 40 bits of a hash of its slug, times ``TENANT_SHARDS``.

    Derived, not allocated, so every process (and an offline verifier) agrees on it without a lookup;
    below 2**53, so JSON readers that hold numbers as doubles keep it exact. ``Tenant.audit_chain_base``
    stores it unique, so a slug that would share another tenant's chains is refused when it is created.
    """
    digest = hashlib.blake2b(tenant.encode(), digest_size=5).digest()
    return (int.from_bytes(digest, "big") + 1) * TENANT_SHARDS


def tenant_chains(tenant: str) -> range:
    """The chain numbers that may hold ``tenant``'s events (those written since chains are kept per tenant)."""
    base = tenant_chain_base(tenant)
    return range(base, base + TENANT_SHARDS)


def in_own_chain(chain: int, tenant: str) -> bool:
    """Whether an event of ``tenant`` in ``chain`` is in a chain of that tenant's own (not a shared one)."""
    return bool(tenant) and chain in tenant_chains(tenant)


def owner_chain_base(chain: int) -> int | None:
    """The first chain of the tenant whose chains hold ``chain``; None for the platform's shared chains."""
    return chain - chain % TENANT_SHARDS if chain >= TENANT_SHARDS else None


def hashed_timestamp(moment: dt.datetime) -> str:
    """A moment as an event's hashed text writes it (UTC, microseconds always written)."""
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
    return hash_text(
        chain,
        seq,
        event_type,
        call_id,
        run_id,
        tool_name,
        status,
        tenant,
        actor,
        hashed_timestamp(created_at),
        data,
        prev_hash,
    )


def hash_text(
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
    """:func:`hash_columns` with the timestamp already written as ``hashed_timestamp`` writes it.

    The hashed text is :func:`canonical_json` of the columns by name. It is written out by
    :func:`hash_parts` (the same keys in sorted order, the same string encoder), which makes
    ``verify_audit`` several times faster than building and sorting a dict per event.
    """
    parts = hash_parts(chain, event_type, call_id, run_id, tool_name, status, tenant, actor, created_at, data)
    if parts is None or (prev_hash and not prev_hash.isalnum()):
        # A column that is not text (None), or a stored previous hash that is not one (a tampered row,
        # which verification reports anyway): the general path writes it exactly as JSON does.
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
    else:
        before, middle, after = parts
        text = before + prev_hash + middle + str(int(seq)) + after
    return hashlib.sha256(text.encode()).hexdigest()


def hash_parts(
    chain: int,
    event_type: str,
    call_id: uuid.UUID | str | None,
    run_id: uuid.UUID | str | None,
    tool_name: str,
    status: str,
    tenant: str,
    actor: str,
    created_at: str,
    data: str,
) -> tuple[str, str, str] | None:
    """An event's hashed text around the two values only its chain's head knows: the previous hash and seq.

    The text is ``before + prev_hash + middle + str(seq) + after``, so the database can finish it and
    hash it in the statement that advances the head (``toolhub.audit_sql``). None when a column is not
    text: such an event takes the general path. A previous hash is hex (or empty) and needs no escaping.
    """
    try:
        before = (
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
            + ',"prev_hash":"'
        )
        middle = '","run_id":' + (_encode_string(str(run_id)) if run_id else "null") + ',"seq":'
        after = (
            ',"status":'
            + _encode_string(status)
            + ',"tenant":'
            + _encode_string(tenant)
            + ',"tool_name":'
            + _encode_string(tool_name)
            + "}"
        )
    except TypeError:
        return None
    return before, middle, after
