"""A remote tool's definition as pinned: what is hashed, how it is named here, which tools a server offers us."""

import difflib
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from django.utils.module_loading import import_string

from toolhub.exceptions import ToolDefinitionError
from toolhub.visible import visible_text

__all__ = [
    "changed_fields",
    "definition_diff",
    "definition_hash",
    "definition_of",
    "visible_text",
    "local_name",
    "server_name_problem",
    "selected",
    "selection_problems",
]

#: The parts of a listed tool an administrator accepts; any change to one of them quarantines the tool.
#: ``outputSchema`` too: it decides which results reach the model (a server widening it after acceptance could
#: hand the model what the administrator never agreed to), and it is checked with every result.
PINNED_FIELDS = ("name", "description", "inputSchema", "outputSchema", "annotations")

_UNSAFE = re.compile(r"[^a-zA-Z0-9_\-]")


def definition_of(listed: Mapping[str, Any]) -> dict[str, Any]:
    """The pinned fields of a ``tools/list`` entry (by its wire names), missing ones as ``None``."""
    return {field: listed.get(field) for field in PINNED_FIELDS}


def definition_hash(definition: Mapping[str, Any]) -> str:
    """SHA-256 of the pinned fields in canonical JSON (key order and whitespace do not count)."""
    canonical = json.dumps(definition_of(definition), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def definition_diff(accepted: Mapping[str, Any] | None, current: Mapping[str, Any] | None) -> str:
    """A unified diff of two definitions (accepted first), for the admin."""

    def lines(value: Mapping[str, Any] | None) -> list[str]:
        if value is None:
            return []
        dumped = json.dumps(definition_of(value), sort_keys=True, indent=2, ensure_ascii=False)
        return visible_text(dumped).splitlines()

    return "\n".join(difflib.unified_diff(lines(accepted), lines(current), "accepted", "offered now", lineterm="", n=2))


def changed_fields(accepted: Mapping[str, Any] | None, current: Mapping[str, Any] | None) -> list[str]:
    """Which pinned fields differ (for the refusal message and the audit)."""
    old, new = definition_of(accepted or {}), definition_of(current or {})
    return [field for field in PINNED_FIELDS if old[field] != new[field]]


def local_name(server: str, remote_name: str) -> str:
    """``<server>__<remote tool>``, with characters the registry does not accept replaced by ``_``."""
    name = f"{server}__{_UNSAFE.sub('_', remote_name)}"
    if len(name) > 64 or not name[0].isalpha():
        raise ToolDefinitionError(
            f"Remote tool {remote_name!r} of server {server!r} gives the name {name!r}, which is not a valid tool "
            "name (a letter first, at most 64 characters); shorten the server's name or select other tools."
        )
    return name


def server_name_problem(name: str, *, provider: str) -> str | None:
    """Why a remote server may not be named ``name`` (``None``: it may): its tools would join another's group.

    The server's tools form the tool group ``name``; were it a code group's or an operator's, every grant,
    approver restriction and capability of that group would cover the server's tools, granted by nobody.
    ``provider``: the server's own (``mcp:<name>``), which marks the group its first fetch made.
    """
    from toolhub.models import ToolGroup
    from toolhub.tools.registry import registry

    held = ToolGroup.objects.filter(name=name).exclude(provider=provider).exists()
    if held or any(tool.group == name for tool in registry.code_tools()):
        return f"A tool group named {name!r} exists already; a remote server's tools would join it. Choose another."
    return None


def selection_problems(*, regex: str, predicate: str) -> dict[str, str]:
    """Field -> why the server's selection cannot work (a regex that does not compile, a path that does not import)."""
    problems: dict[str, str] = {}
    if regex:
        try:
            re.compile(regex)
        except re.error as exc:
            problems["select_regex"] = f"Not a valid regular expression: {exc}."
    if predicate:
        try:
            function = import_string(predicate)
        except ImportError as exc:
            problems["select_predicate"] = f"Cannot import {predicate!r}: {exc}."
        else:
            if not callable(function):
                problems["select_predicate"] = f"{predicate!r} is not a function."
    return problems


def selected(listed: Mapping[str, Any], *, names: list[str], regex: str, predicate: str) -> bool:
    """Whether the server's selection takes this tool: every configured criterion must agree (none: all)."""
    name = str(listed.get("name", ""))
    if names and name not in names:
        return False
    if regex and re.fullmatch(regex, name) is None:
        return False
    if predicate:
        return bool(import_string(predicate)(dict(listed)))
    return True
