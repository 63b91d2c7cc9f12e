"""Why an accepted remote tool is not offered: recorded on its row for the admin, audited when it changes.

The registry builds each accepted tool in every process (``provider._load``); one it cannot build (its server's
pattern budget spent, a schema it refuses) is left out, and a call of it finds no such tool. An operator reads
the reason on the tool's admin page instead of the server log; the trail says when a tool stopped, or started
again, to be offered. The reason names the check, never a schema value (the log says where).
"""

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.db.utils import DatabaseError

from toolhub.tools.linear_patterns import MAX_SERVER_PATTERN_BYTES, SharedPatternBudgetSpent

__all__ = ["record_usability", "unusable_reason"]

logger = logging.getLogger(__name__)


def unusable_reason(exc: BaseException) -> str:
    """What an operator reads about a tool the registry left out: which check refused it, no value of its schema."""
    if isinstance(exc, RecursionError):
        return "Not offered: its accepted schema nests too deeply to be checked. Ask the server for a flatter one."
    if isinstance(exc.__cause__, SharedPatternBudgetSpent):
        return (
            f"Not offered: the patterns of its server's tools together are past the server's budget "
            f"({MAX_SERVER_PATTERN_BYTES // 2**20} MiB; the tools accepted first keep theirs). Ask the server for "
            "fewer or smaller patterns, or have it stop offering tools nobody uses."
        )
    return (
        "Not offered: the registry refuses its accepted schema (not valid JSON Schema, an unsupported pattern or "
        "reference, or past the schema's own budget; the server log says where). Ask the server to change it, "
        "then fetch its tools and accept the new definition."
    )


def record_usability(rows: Iterable[Any], reasons: Mapping[int, str]) -> None:
    """Store each row's reason (``""``: offered) where it changed, with one audit event per change.

    Every process building the registry computes the same reasons: the write is conditional on the value read,
    so only one of them records (and audits) a change. A database that refuses the write (a read-only replica)
    leaves the registry as built: the log still names each tool left out.
    """
    from toolhub.audit import audit_append
    from toolhub.mcp_client.models import RemoteMcpTool

    for row in rows:
        reason = reasons.get(row.pk, "")
        if row.unusable_reason == reason:
            continue
        try:
            with transaction.atomic():  # a savepoint: a refused write never breaks the caller's transaction
                changed = RemoteMcpTool.objects.filter(pk=row.pk, unusable_reason=row.unusable_reason).update(
                    unusable_reason=reason
                )
                if changed:
                    audit_append(
                        event_type="remote_mcp.tool_unusable" if reason else "remote_mcp.tool_usable",
                        actor="system:registry",
                        tool_name=row.tool_name,
                        data={"server": row.server.name, "accepted_hash": row.accepted_hash, "reason": reason},
                    )
        except DatabaseError:
            logger.warning("Remote MCP tool %s: its usability could not be recorded", row.tool_name, exc_info=True)
