"""The registry's source of remote tools: accepted definitions become ``Tool`` values the pipeline governs.

The registry freezes at startup, but administrators add servers and accept tools later. Instead of a
second way in, the registry consults this provider (registered before the freeze) for names it does
not hold: ``registry.get``, ``names`` and ``all`` see remote tools as they see code tools, and
``registry.refusal`` tells authorization why one may not be called (quarantined, server disabled,
no credential for the caller's tenant). What a tool shows the model is its *accepted* definition,
never what the server says now; the handler checks the pin again right before each call.
"""

import logging
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from django.core.exceptions import SynchronousOnlyOperation
from django.db import transaction
from django.db.models import F
from django.db.utils import DatabaseError

from toolhub.audit_hash import canonical_json
from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolDefinitionError, ToolError
from toolhub.governance import governance_cached
from toolhub.mcp_client.usability import record_usability, unusable_reason
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Tool
from toolhub.tools.linear_patterns import shared_pattern_budget

__all__ = ["RemoteToolProvider", "record_remote_usability", "remote_tool_provider"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Entry:
    tool: Tool
    server: str
    status: str
    enabled: bool
    credential_required: bool
    tenants: frozenset[str]


class RemoteToolProvider:
    """Remote MCP tools whose definition an administrator accepted, read through the governance cache."""

    def names(self) -> list[str]:
        return sorted(self._entries())

    def get(self, name: str) -> Tool | None:
        entry = self._entries().get(name) if "__" in name else None
        return entry.tool if entry is not None else None

    def refusal(self, name: str, tenant: str | None) -> str | None:
        """Why a call of ``name`` for ``tenant`` is refused now, or ``None`` (also for names not provided here)."""
        entry = self._entries().get(name) if "__" in name else None
        if entry is None:
            return None
        if not entry.enabled:
            return f"Remote MCP server {entry.server!r} is disabled by an administrator; do not call {name!r}."
        if entry.status == "quarantined":
            from toolhub.mcp_client.models import RemoteMcpTool
            from toolhub.mcp_client.services import quarantine_message

            row = RemoteMcpTool.objects.select_related("server").filter(tool_name=name).first()
            return quarantine_message(row) if row is not None else f"Tool {name!r} is quarantined."
        if entry.credential_required and (tenant or "") not in entry.tenants:
            return (
                f"Remote MCP server {entry.server!r} has no credential for tenant {tenant or '(none)'!r}; "
                f"{name!r} cannot be called for it. An administrator must add a remote MCP credential for this tenant."
            )
        return None

    def _entries(self) -> dict[str, _Entry]:
        try:
            return governance_cached(("remote_mcp_tools",), _load)
        except (DatabaseError, RuntimeError, SynchronousOnlyOperation):
            # No database here (a build step, a test without one, an event loop's thread: async callers ask
            # through sync_to_async when they need remote tools): no remote tools, the registry's own still work.
            return {}


def _load() -> dict[str, _Entry]:
    from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpTool

    try:
        with transaction.atomic():  # a savepoint: before ``migrate`` the tables are missing, nothing else breaks
            rows = list(
                RemoteMcpTool.objects.select_related("server")
                .exclude(accepted_hash="")
                .exclude(status="removed")
                # A server's tools share one pattern budget: the tools accepted first keep theirs, so accepting a
                # new one (named ``aaa``) never pushes out a tool in use; every process reads the same order.
                .order_by("server_id", F("accepted_at").asc(nulls_first=True), "tool_name")
            )
            tenants: dict[int, set[str]] = {}
            for server_id, tenant in RemoteMcpCredential.objects.values_list("server_id", "tenant"):
                tenants.setdefault(server_id, set()).add(tenant)
    except DatabaseError:
        return {}
    entries: dict[str, _Entry] = {}
    unusable: dict[int, str] = {}
    by_server: dict[int, list[Tool]] = {}
    for _, server_rows in groupby(rows, key=lambda row: row.server_id):
        server_rows = list(server_rows)
        # A server lists as many tools as it likes: their patterns' probing is bounded together, in name order.
        with shared_pattern_budget(f"remote MCP server {server_rows[0].server.name!r}"):
            for row in server_rows:
                try:
                    tool = _build(row)
                except (ToolDefinitionError, RecursionError) as exc:
                    # One server's schema (a RecursionError is a RuntimeError, which ``_entries`` takes for "no
                    # database") must leave out its own tool only, never every remote tool of every server.
                    logger.warning("Remote MCP tool %s is unusable: %s", row.tool_name, exc)
                    unusable[row.pk] = unusable_reason(exc)
                    continue
                entries[row.tool_name] = _entry(row.server, tool, row.status, tenants)
                by_server.setdefault(row.server_id, []).append(tool)
    for row in rows:
        server = row.server
        if server.unfold and server.pk in by_server:
            facade = _facade(server, by_server.pop(server.pk))
            for tool in (facade.facade, facade.context_tool):
                if tool.name in entries:  # a remote tool of that name keeps it; the facade is left out
                    logger.warning("Remote MCP server %s: %s is a tool's name; no facade.", server.name, tool.name)
                    continue
                entries[tool.name] = _entry(server, tool, "active", tenants)
    record_usability(rows, unusable)  # the admin shows why an accepted tool is not offered
    return entries


def record_remote_usability() -> None:
    """Build the remote tools now, recording why any accepted one is not offered (an acceptance shows it at once).

    The registry would record it when next built (in whichever process reads it first): an operator accepting a
    tool must not learn it is left out only when a call of it finds no such tool.
    """
    _load()


def _entry(server: Any, tool: Tool, status: str, tenants: dict[int, set[str]]) -> _Entry:
    return _Entry(
        tool=tool,
        server=server.name,
        status=status,
        enabled=server.enabled,
        credential_required=server.credential_required,
        tenants=frozenset(tenants.get(server.pk, ())),
    )


def facade_name(server_name: str) -> str:
    """The name of a server's facade, when its tools are shown folded (``unfold``)."""
    return f"{server_name}__tools"


def _facade(server: Any, tools: list[Tool]) -> Any:
    """One ``UnfoldingTool`` over a server's accepted tools: the model sees it, calling it reveals them."""
    from toolhub.disclosure.unfolding import UnfoldingTool

    description = server.description or f"Tools of the remote MCP server {server.name}. Call to see them."
    return UnfoldingTool.of(facade_name(server.name), description, tools, child_usage_notes=server.unfold_notes)


def _build(row: Any) -> Tool:
    """The ``Tool`` of an accepted definition: its schema and description as accepted, the server's risk and timeout."""
    definition = row.accepted_definition or {}
    annotations = definition.get("annotations") or {}
    tool_name = row.tool_name

    def handler(arguments: dict[str, Any], ctx: ToolContext) -> Any:
        return _call_remote(tool_name, arguments, ctx)

    return Tool.create(
        tool_name,
        str(definition.get("description") or f"Remote tool {row.remote_name} of {row.server.name}."),
        dict(definition.get("inputSchema") or {"type": "object", "properties": {}}),
        handler,
        group=row.server.name,
        risk=row.server.risk,
        timeout=row.server.capped_timeout,
        idempotent=bool(annotations.get("idempotentHint", False)),
        tags=("mcp", f"mcp:{row.server.name}"),
        allow_any=True,
    )


def _call_remote(tool_name: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
    """Runs on the worker: re-read the pin, authenticate as the call's tenant, check the definition, call."""
    from toolhub.mcp_client.models import RemoteMcpTool, RemoteToolStatus
    from toolhub.mcp_client.services import (
        credential_headers,
        credential_scrubber,
        quarantine_message,
        remote_tool_quarantine,
    )

    row = RemoteMcpTool.objects.select_related("server").filter(tool_name=tool_name).first()
    if row is None or not row.accepted_hash or row.status == RemoteToolStatus.REMOVED:
        raise ToolError(f"Remote tool {tool_name!r} is no longer configured; nothing was sent.")
    server = row.server
    if row.status == RemoteToolStatus.QUARANTINED:
        raise ToolError(quarantine_message(row))
    headers = credential_headers(server, _tenant_of(ctx))
    # A server echoing the token back (in a result or an error) must not store it: scrubbed as a Secret preset is,
    # before anything is cut to length.
    secrets = credential_scrubber(headers, server.url)
    try:
        outcome = _remote_call(row, server, headers, arguments, ctx, kept=secrets.value)
    except ToolError as exc:
        raise ToolError(secrets.text(str(exc))[:_ERROR_CHARS]) from None
    if outcome.listed is None:
        RemoteMcpTool.objects.filter(pk=row.pk).update(status=RemoteToolStatus.REMOVED)
        raise ToolError(f"Remote MCP server {server.name!r} no longer offers {row.remote_name!r}; nothing was sent.")
    from toolhub.mcp_client.definitions import definition_hash

    # The definition came back kept, hashed and compared without the credential (never stored).
    if definition_hash(outcome.listed) != row.accepted_hash:
        raise ToolError(remote_tool_quarantine(row=row, listed=outcome.listed, actor=f"mcp:{server.name}"))
    if outcome.is_error:
        answered = secrets.text(outcome.text)[:_ERROR_CHARS]
        raise ToolError(f"Remote tool {row.remote_name!r} answered with an error: {answered}")
    result = secrets.value(outcome.structured if outcome.structured is not None else outcome.text)
    _refuse_oversized(row.remote_name, result)
    return result


#: Characters of a remote error kept (after the credential is replaced).
_ERROR_CHARS = 1000


def _refuse_oversized(remote_name: str, result: Any) -> None:
    """A remote answer is data from outside: bounded as an external result is (``MAX_EXTERNAL_RESULT_BYTES``)."""
    limit = toolhub_settings().MAX_EXTERNAL_RESULT_BYTES
    size = len(canonical_json(result).encode("utf-8"))  # measured as the external-result endpoint measures
    if size > limit:
        raise ToolError(
            f"Remote tool {remote_name!r} answered {size:,} bytes, more than the {limit:,} a result may hold "
            "(TOOLHUB['MAX_EXTERNAL_RESULT_BYTES']); nothing of it was kept. Ask for less at a time."
        )


def _remote_call(
    row: Any, server: Any, headers: dict[str, str], arguments: dict[str, Any], ctx: ToolContext, *, kept: Any
) -> Any:
    from toolhub.mcp_client.meta import meta_for_server
    from toolhub.mcp_client.remote import remote_call

    return remote_call(
        server.url,
        name=server.name,
        headers=headers,
        timeout=server.capped_timeout,
        remote_name=row.remote_name,
        arguments=arguments,
        meta=meta_for_server(ctx, mode=server.meta_mode, keys=server.meta_keys or []),
        accepted_hash=row.accepted_hash,
        kept=kept,
    )


def _tenant_of(ctx: ToolContext) -> str | None:
    """The call's tenant as its row records it (set at the boundary), not a context value."""
    from toolhub.models import ToolCall

    if ctx.call_id:
        tenant = ToolCall.objects.filter(pk=ctx.call_id).values_list("tenant", flat=True).first()
        if tenant is not None:
            return tenant
    return ctx.tenant


remote_tool_provider = RemoteToolProvider()
