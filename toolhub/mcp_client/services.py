"""Writes for remote MCP servers: fetch their tools, accept a definition, quarantine a changed one (all audited)."""

import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from toolhub.credential_env import credential_from_env
from toolhub.exceptions import ToolDefinitionError, ToolError
from toolhub.mcp_client.definitions import (
    changed_fields,
    definition_diff,
    definition_hash,
    local_name,
    selected,
    selection_problems,
    server_name_problem,
)
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool, RemoteToolStatus
from toolhub.mcp_client.remote import remote_tools
from toolhub.storable import storable_text
from toolhub.tools.definition_rules import confusable_key
from toolhub.tools.registry import registry
from toolhub.tools.secrets import SecretScrubber
from toolhub.url_secrets import url_secret_parts

logger = logging.getLogger(__name__)

__all__ = [
    "CredentialHeaders",
    "credential_headers",
    "credential_refusal",
    "quarantine_message",
    "remote_server_sync",
    "remote_tool_accept",
    "remote_tool_quarantine",
]


def credential_refusal(server: RemoteMcpServer, tenant: str | None, credentials: Mapping[str, str]) -> str | None:
    """Why a call for ``tenant`` may not use ``server`` (no credential reference), or ``None``."""
    if not server.credential_required or (tenant or "") in credentials:
        return None
    return (
        f"Remote MCP server {server.name!r} has no credential for tenant {tenant or '(none)'!r}; nothing was sent. "
        "An administrator must add a remote MCP credential for this tenant before its tools can be used."
    )


class CredentialHeaders(dict[str, str]):
    """Headers that authenticate a tenant's calls, with the credential values they were built from.

    ``credential_scrubber`` replaces those values themselves: the header's text is the scheme's choice
    (tenant staff set it), so splitting it is no way to find the secret in it.
    """

    def __init__(self, headers: Mapping[str, str] | None = None, *, secrets: tuple[str, ...] = ()) -> None:
        super().__init__(headers or {})
        self.secrets = secrets


def credential_headers(server: RemoteMcpServer, tenant: str | None) -> CredentialHeaders:
    """The HTTP headers that authenticate ``tenant``'s calls, read from the referenced environment variable."""
    credential = RemoteMcpCredential.objects.filter(server=server, tenant=tenant or "").first()
    if credential is None:
        refusal = credential_refusal(server, tenant, {})
        if refusal:
            raise ToolError(refusal)
        return CredentialHeaders()
    value = credential_from_env(credential.credential_env)
    if not value:
        # The variable's name is for the operators (the log, the credential's admin page), never the model or
        # the MCP caller: it tells them what the platform's environment holds.
        logger.error(
            "remote MCP server %s: the environment variable %s holding tenant %r's credential is unset or refused",
            server.name,
            credential.credential_env,
            credential.tenant,
        )
        raise ToolError(
            f"The credential for remote MCP server {server.name!r} is not configured where tools run "
            "(its environment variable is unset or refused; the server log names it); the operators must set it. "
            "Do not retry."
        )
    return CredentialHeaders(
        {credential.header: f"{credential.scheme} {value}".strip()}, secrets=(value, value.strip())
    )


def credential_scrubber(headers: Mapping[str, str], url: str = "", *, whole_url: bool = True) -> SecretScrubber:
    """Replaces the credential in ``headers`` (and its encodings) wherever a server echoes it back.

    The credential is the value the headers were built from (``CredentialHeaders.secrets``), whatever scheme
    precedes it; headers of another origin (a plain mapping) are secret whole, each value as it is sent.

    And the secret parts of the server's ``url`` (platform configuration; hosted servers often carry a key
    in it): the URL itself, its user name and password, and every query value but those of a few names
    that never carry one (``?format=json``), and every path segment that looks like a key (``/k/<key>/mcp``).
    ``whole_url=False`` keeps the URL itself, its secret parts replaced: the server log names it on purpose.
    Apply it before any cut: a credential cut in the middle is no longer recognisable.
    """
    values = list(headers.secrets if isinstance(headers, CredentialHeaders) else headers.values())
    if url:
        values += [*([url] if whole_url else []), *url_secret_parts(url)]
    return SecretScrubber([value for value in values if value])


def quarantine_message(row: RemoteMcpTool, fields: list[str] | None = None) -> str:
    """What a refused call says: which tool changed, what changed, and what has to happen."""
    changed = ", ".join(fields or changed_fields(row.accepted_definition, row.current_definition)) or "definition"
    return (
        f"Tool {row.tool_name!r} is quarantined: remote MCP server {row.server.name!r} changed its {changed} "
        "since an administrator accepted it, so it is not called. An administrator must review the change and "
        "accept the new version (admin: Remote MCP tools) before it can be used again."
    )


def remote_server_sync(*, server: RemoteMcpServer, actor: str) -> dict[str, int]:
    """Fetch the server's tools and record what it offers now: new ones wait, changed ones are quarantined.

    Authenticated with the credential of tenant '' when there is one, else the first tenant's.
    """
    problems = selection_problems(regex=server.select_regex, predicate=server.select_predicate)
    taken = server_name_problem(server.name, provider=server.provider)
    if taken:
        problems["name"] = taken
    if problems:
        raise ToolError(f"Remote MCP server {server.name!r}: {'; '.join(problems.values())}")
    credential = RemoteMcpCredential.objects.filter(server=server).order_by("tenant").first()
    headers = CredentialHeaders()
    try:
        headers = credential_headers(server, credential.tenant) if credential else CredentialHeaders()
        listed = remote_tools(server.url, name=server.name, headers=headers, timeout=server.capped_timeout)
    except ToolError as exc:
        message = storable_text(credential_scrubber(headers, server.url).text(str(exc)))[:2000]
        RemoteMcpServer.objects.filter(pk=server.pk).update(last_error=message)
        raise ToolError(message) from None
    # A server that echoes the credential in a definition: the definition is kept (and hashed) without it,
    # so it never reaches the database, the admin or the trail, and never matches what the server lists.
    listed = credential_scrubber(headers, server.url).value(listed)
    _refuse_names_listed_twice(server, listed, actor=actor)
    wanted = [
        tool
        for tool in listed
        if selected(
            tool, names=list(server.select_names or []), regex=server.select_regex, predicate=server.select_predicate
        )
    ]
    counts = {"listed": len(listed), "selected": len(wanted), "new": 0, "quarantined": 0, "removed": 0, "skipped": 0}
    with transaction.atomic():
        _ensure_group(server)
        seen: set[str] = set()
        for tool in wanted:
            name = str(tool["name"])
            seen.add(name)
            row = RemoteMcpTool.objects.select_for_update().filter(server=server, remote_name=name).first()
            if row is None:
                local = _free_local_name(server, name)
                if local is None:
                    counts["skipped"] += 1  # no usable name of its own: the server's other tools are still fetched
                    continue
                RemoteMcpTool.objects.create(
                    server=server,
                    remote_name=name,
                    tool_name=local,
                    current_definition=tool,
                    current_hash=definition_hash(tool),
                    seen_at=timezone.now(),
                )
                counts["new"] += 1
            elif _record_seen(row, tool, actor=actor):
                counts["quarantined"] += 1
        gone = RemoteMcpTool.objects.filter(server=server).exclude(remote_name__in=seen)
        counts["removed"] = gone.exclude(status=RemoteToolStatus.REMOVED).update(status=RemoteToolStatus.REMOVED)
        RemoteMcpServer.objects.filter(pk=server.pk).update(synced_at=timezone.now(), last_error="")
        from toolhub.audit import audit_append

        audit_append(event_type="remote_mcp.synced", actor=actor, data={"server": server.name, **counts})
    return counts


#: The names a refused listing's message and event quote, each cut: a server chooses their number and length.
_NAMES_QUOTED = 5
_NAME_QUOTED_CHARS = 80


def _refuse_names_listed_twice(server: RemoteMcpServer, listed: list[dict[str, Any]], *, actor: str) -> None:
    """Refuse a listing that names a tool more than once (``ToolError``), recording nothing of it (audited).

    Which entry is that tool? Recorded entry by entry, the last would be offered for acceptance while the
    pin and the SDK's output check may each read another (``remote_call`` refuses such a tool's calls): the
    server must list each tool once, and its tools stay as the last honest listing left them.
    """
    counted = Counter(str(tool.get("name", "")) for tool in listed)
    twice = [name for name, count in counted.items() if count > 1]
    if not twice:
        return
    quoted = [name[:_NAME_QUOTED_CHARS] for name in twice[:_NAMES_QUOTED]]
    more = f" and {len(twice) - len(quoted)} more" if len(twice) > len(quoted) else ""
    message = storable_text(
        f"Remote MCP server {server.name!r} lists the tool(s) {', '.join(repr(name) for name in quoted)}{more} "
        "more than once, so which definition is the tool's is unknown; nothing was recorded. The server must "
        "list each tool once; fetch its tools again once it does."
    )
    from toolhub.audit import audit_append

    with transaction.atomic():
        RemoteMcpServer.objects.filter(pk=server.pk).update(last_error=message)
        audit_append(
            event_type="remote_mcp.sync_refused",
            actor=actor,
            data={"server": server.name, "tools": quoted, "listed_twice": len(twice)},
        )
    raise ToolError(message)


def _free_local_name(server: RemoteMcpServer, remote_name: str) -> str | None:
    """The tool's name in the registry, or ``None`` when it has none of its own.

    A name too long or not a name, or one another tool already holds in any spelling a model or an operator
    would take for it (``a.b`` and ``a_b`` both become ``a_b``; ``A_b`` and ``a-b`` are ``a_b`` too:
    ``confusable_key``, the startup check's rule for code tools): a server listing such a tool must not stop
    the fetch of its others.
    """
    try:
        local = local_name(server.name, remote_name)
    except ToolDefinitionError:
        return None
    key = confusable_key(local)
    taken = [*registry.names(), *RemoteMcpTool.objects.values_list("tool_name", flat=True)]
    return None if any(confusable_key(name) == key for name in taken) else local


def remote_tool_quarantine(*, row: RemoteMcpTool, listed: dict[str, Any], actor: str) -> str:
    """Record a definition that differs from the accepted one (a rug pull); return the refusal message."""
    with transaction.atomic():
        locked = RemoteMcpTool.objects.select_for_update().select_related("server").get(pk=row.pk)
        _record_seen(locked, listed, actor=actor)
    return quarantine_message(locked)


@transaction.atomic
def remote_tool_accept(
    *, row: RemoteMcpTool, actor: str, user: Any = None, reviewed_hash: str | None = None
) -> RemoteMcpTool:
    """An administrator accepts the definition offered now: it becomes the pinned one (audited with the diff).

    ``reviewed_hash``: the offered definition's hash as the administrator reviewed it; a definition fetched
    since (the server changed it again) is refused, not accepted unseen.
    """
    from toolhub.audit import audit_append

    locked = RemoteMcpTool.objects.select_for_update().select_related("server").get(pk=row.pk)
    if locked.current_definition is None:
        raise ToolError(f"Tool {locked.tool_name!r} has no fetched definition to accept; fetch its server's tools.")
    if reviewed_hash is not None and reviewed_hash != locked.current_hash:
        raise ToolError(
            f"Tool {locked.tool_name!r}: the definition offered changed since you reviewed it; nothing was "
            "accepted. Review it again."
        )
    previous = locked.accepted_hash
    audit_append(
        event_type="remote_mcp.tool_accepted",
        actor=actor,
        tool_name=locked.tool_name,
        data={
            "server": locked.server.name,
            "remote_name": locked.remote_name,
            "previous_hash": previous,
            "accepted_hash": locked.current_hash,
            "changed": changed_fields(locked.accepted_definition, locked.current_definition) if previous else [],
            "diff": definition_diff(locked.accepted_definition, locked.current_definition)[:20000],
        },
    )
    locked.accepted_definition = locked.current_definition
    locked.accepted_hash = locked.current_hash
    locked.accepted_at = timezone.now()
    locked.accepted_by = user if getattr(user, "pk", None) else None
    locked.status = RemoteToolStatus.ACTIVE
    locked.save()
    return locked


def _record_seen(row: RemoteMcpTool, listed: dict[str, Any], *, actor: str) -> bool:
    """Store what the server offers now; return whether this newly quarantined the tool (audited then)."""
    current = definition_hash(listed)
    if not row.accepted_hash:
        status = RemoteToolStatus.PENDING
    else:
        status = RemoteToolStatus.ACTIVE if current == row.accepted_hash else RemoteToolStatus.QUARANTINED
    newly = status == RemoteToolStatus.QUARANTINED and (
        row.status != RemoteToolStatus.QUARANTINED or row.current_hash != current
    )
    row.current_definition, row.current_hash, row.status, row.seen_at = listed, current, status, timezone.now()
    row.save(update_fields=["current_definition", "current_hash", "status", "seen_at"])
    if newly:
        from toolhub.audit import audit_append

        audit_append(
            event_type="remote_mcp.tool_quarantined",
            actor=actor,
            tool_name=row.tool_name,
            data={
                "server": row.server.name,
                "accepted_hash": row.accepted_hash,
                "offered_hash": current,
                "changed": changed_fields(row.accepted_definition, listed),
            },
        )
    return newly


def _ensure_group(server: RemoteMcpServer) -> None:
    """The server's tools form the tool group ``server.name`` (provider ``mcp:<name>``), grantable like any."""
    from toolhub.models import ToolGroup

    ToolGroup.objects.get_or_create(
        name=server.name, defaults={"provider": server.provider, "description": server.description[:2000]}
    )
