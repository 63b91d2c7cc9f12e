"""The input schemas the MCP SDK checks ``Mcp-Param-*`` headers against: only of tools the caller may call.

The SDK compares a ``tools/call``'s ``Mcp-Param-*`` headers with its arguments before toolhub sees the call,
from the schema ``get_tool_input_schema(name)`` returns. Its answer for a tool whose schema declares such a
header (``x-mcp-header``) differs from a missing tool's and names an argument, so a schema given for a tool the
caller may not call tells them the tool exists. The authentication wrapper works out, per request, which of
the (few) tools declaring headers the caller may call; the lookup gives only those.
"""

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from typing import Any

from toolhub.authorization import authorize_tools
from toolhub.direct import DirectCallError, caller_principal
from toolhub.disclosure.visibility import is_navigation
from toolhub.tools.registry import registry

__all__ = ["header_declaring_tools", "header_tools_for", "header_tools_allowed", "header_schema"]

_allowed: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "toolhub_mcp_header_tools", default=frozenset()
)
_declaring: tuple[int, frozenset[str]] | None = None


def header_declaring_tools() -> frozenset[str]:
    """The code tools whose input schema declares an ``Mcp-Param-*`` header (no database; per registry size)."""
    global _declaring
    if _declaring is None or _declaring[0] != len(registry):
        names = frozenset(tool.name for tool in registry.code_tools() if _declares_header(tool.json_schema))
        _declaring = (len(registry), names)
    return _declaring[1]


def header_tools_for(user: Any, tenant: str | None) -> frozenset[str]:
    """Which tools declaring a header ``user`` (in ``tenant``) may call now; reads the database."""
    try:
        principal = caller_principal(user, tenant=tenant)
    except DirectCallError:
        return frozenset()
    names = [name for name in header_declaring_tools() if not is_navigation(name)]
    return frozenset(name for name, denial in authorize_tools(names, principal).items() if denial is None)


@contextlib.contextmanager
def header_tools_allowed(names: frozenset[str]) -> Iterator[None]:
    """While the request is served, ``header_schema`` answers for ``names`` only."""
    token = _allowed.set(names)
    try:
        yield
    finally:
        _allowed.reset(token)


def header_schema(name: str) -> Mapping[str, Any] | None:
    """The schema the SDK checks headers against: a tool's that declares some and the caller may call, else none.

    A tool declaring no header has nothing to check, so ``None`` changes nothing for it, whoever asks.
    """
    if name not in _allowed.get():
        return None
    tool = registry.get(name)
    return tool.json_schema if tool is not None else None


def _declares_header(node: Any) -> bool:
    if isinstance(node, Mapping):
        return "x-mcp-header" in node or any(_declares_header(value) for value in node.values())
    if isinstance(node, list):
        return any(_declares_header(value) for value in node)
    return False
