"""The input schemas the MCP SDK checks ``Mcp-Param-*`` headers against: only of tools the caller may call.

The SDK compares a ``tools/call``'s ``Mcp-Param-*`` headers with its arguments before toolhub sees the call,
from the schema ``get_tool_input_schema(name)`` returns. Its answer for a tool whose schema declares such a
header (``x-mcp-header``) differs from a missing tool's and names an argument, so a schema given for a tool the
caller may not call tells them the tool exists; a schema withheld from a tool they may call lets a header say
one thing and the arguments another (what a gateway routing on the header saw is not what runs). The SDK asks
on the event loop, where the database (and so every remote tool) is out of reach: the authentication wrapper
works out, per request, the schemas of the (few) tools declaring headers that the caller may call, code and
remote alike, and the lookup gives only those.
"""

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from toolhub.authorization import authorize_tools
from toolhub.direct import DirectCallError, caller_principal
from toolhub.disclosure.visibility import is_navigation
from toolhub.governance import governance_cached, governance_scope
from toolhub.tools.export import listed_schema
from toolhub.tools.registry import registry

__all__ = ["header_declaring_tools", "header_schemas_for", "header_schemas_allowed", "header_schema"]

_allowed: contextvars.ContextVar[Mapping[str, Mapping[str, Any]]] = contextvars.ContextVar(
    "toolhub_mcp_header_schemas", default=MappingProxyType({})
)
_declaring: tuple[int, frozenset[str]] | None = None


def header_declaring_tools() -> frozenset[str]:
    """The tools whose input schema declares an ``Mcp-Param-*`` header: code tools and accepted remote ones.

    Reads the database (remote tools, cached behind the governance stamp); code tools are cached per registry size.
    """
    global _declaring
    if _declaring is None or _declaring[0] != len(registry):
        names = frozenset(tool.name for tool in registry.code_tools() if _declares_header(tool.known_json_schema))
        _declaring = (len(registry), names)
    return _declaring[1] | governance_cached(("mcp_header_tools",), _provided_declaring)


def _provided_declaring() -> frozenset[str]:
    code = {tool.name for tool in registry.code_tools()}
    provided = (registry.get(name) for name in registry.names() if name not in code)
    return frozenset(tool.name for tool in provided if tool is not None and _declares_header(tool.known_json_schema))


def header_schemas_for(user: Any, tenant: str | None) -> dict[str, Mapping[str, Any]]:
    """The schemas of the tools declaring a header that ``user`` (in ``tenant``) may call now; reads the database."""
    with governance_scope():  # one read of the stamp for the remote tools and the grants
        names = [name for name in header_declaring_tools() if not is_navigation(name)]
        if not names:
            return {}
        try:
            principal = caller_principal(user, tenant=tenant)
        except DirectCallError:
            return {}
        schemas: dict[str, Mapping[str, Any]] = {}
        for name, denial in authorize_tools(names, principal).items():
            tool = registry.get(name) if denial is None else None
            schema = listed_schema(tool) if tool is not None else None  # one that cannot be built: nothing to check
            if schema is not None:
                schemas[name] = schema
        return schemas


@contextlib.contextmanager
def header_schemas_allowed(schemas: Mapping[str, Mapping[str, Any]]) -> Iterator[None]:
    """While the request is served, ``header_schema`` answers from ``schemas`` only."""
    token = _allowed.set(schemas)
    try:
        yield
    finally:
        _allowed.reset(token)


def header_schema(name: str) -> Mapping[str, Any] | None:
    """The schema the SDK checks headers against: a tool's that declares some and the caller may call, else none.

    A tool declaring no header has nothing to check, so ``None`` changes nothing for it, whoever asks.
    No database: the event loop asks.
    """
    return _allowed.get().get(name)


def _declares_header(node: Any) -> bool:
    if isinstance(node, Mapping):
        return "x-mcp-header" in node or any(_declares_header(value) for value in node.values())
    if isinstance(node, list):
        return any(_declares_header(value) for value in node)
    return False
