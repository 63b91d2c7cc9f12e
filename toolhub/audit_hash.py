"""What an audit event's hash covers, and how: canonical JSON text, chains, the hashed columns.

An event's hash is SHA-256 over :func:`canonical_json` of its columns by name (:data:`HASHED_COLUMNS`),
the previous hash of its chain among them, exactly as the database stores and returns them. Appends
(``toolhub.audit``) have the database finish the text around the two values only a chain's head knows
(:func:`hash_parts`); ``verify_audit`` (``toolhub.audit_verify``) recomputes every hash here.

The pure functions live in ``toolhub.audit_hash_core`` (no Django), re-exported here, so that the offline
verifier of an exported trail (``toolhub.audit_file_verify``) hashes exactly as toolhub does.
"""

import uuid
import zlib

from toolhub import audit_hash_core
from toolhub.audit_hash_core import (
    HASHED_COLUMNS,
    TENANT_SHARDS,
    canonical_json,
    hash_columns,
    hash_parts,
    hash_text,
    hashed_timestamp,
    in_own_chain,
    owner_chain_base,
    tenant_chain_base,
    tenant_chains,
)
from toolhub.conf import toolhub_settings
from toolhub.models import AuditEvent

__all__ = [
    "HASHED_COLUMNS",
    "TENANT_SHARDS",
    "canonical_json",
    "chain_for",
    "compute_hash",
    "hash_columns",
    "hash_parts",
    "hash_text",
    "hashed_timestamp",
    "in_own_chain",
    "owner_chain_base",
    "tenant_chain_base",
    "tenant_chains",
]


def chain_for(key: uuid.UUID | str | None, tenant: str = "") -> int:
    """Pick a chain by a stable key, so one call's events stay in one chain, in order.

    A tenant's events go to chains of that tenant alone (``AUDIT_CHAINS`` of them): its auditors can
    verify them without reading another tenant's events, and their sequence numbers count only its own.
    """
    shard = 0 if key is None else zlib.crc32(str(key).encode()) % toolhub_settings().AUDIT_CHAINS
    # through the module: one definition, the one tenant_chains uses too
    return audit_hash_core.tenant_chain_base(tenant) + shard if tenant else shard


def compute_hash(event: AuditEvent) -> str:
    """Hash every column that matters, as stored, together with the previous hash."""
    return hash_columns(*(getattr(event, column) for column in HASHED_COLUMNS))
