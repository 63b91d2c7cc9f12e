"""The run-time side of tool search: one index per principal, over the tools it is granted and nothing else."""

from collections.abc import Iterable, Mapping
from typing import Any

from toolhub.authorization import CallPrincipal
from toolhub.conf import toolhub_settings
from toolhub.disclosure.unfolding import usable_tools
from toolhub.governance import governance_cached, governance_scope
from toolhub.search import SearchDocument, SearchIndex, get_provider
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

__all__ = ["search_document", "searchable_names", "principal_index"]


def search_document(tool: Tool) -> SearchDocument:
    """What a provider may know of a tool: name, description, category, tags and parameter descriptions."""
    parameters = {p.name: (p.description or "") for p in tool.parameters}
    if not parameters:
        properties = tool.json_schema.get("properties", {}) if isinstance(tool.json_schema, dict) else {}
        parameters = {k: str(v.get("description", "")) for k, v in properties.items() if isinstance(v, dict)}
    return SearchDocument(
        name=tool.name,
        description=tool.description,
        category=tool.category,
        tags=tuple(sorted(tool.tags)),
        parameters=parameters,
    )


def searchable_names(principal: CallPrincipal, context: Mapping[str, Any] | None = None) -> list[str]:
    """The tools ``principal`` may find: granted, not resident (always visible), not a navigation tool.

    In a run (``context`` given, even empty), a tool in tool groups is found only when one of them is eligible for
    it (its roles, tenant and agent, the run's context): a group bound to another tenant or role hides its tools
    from search too. Without a run (MCP's ``toolhub_find_tools``) groups' run-time rules do not apply, as they do
    not to what ``tools/list`` shows and a client may call: search finds exactly what would be listed.
    """
    from toolhub.disclosure.visibility import is_navigation

    candidates: Iterable[str] = registry.names() if principal.agent_tools is None else principal.agent_tools
    names = []
    for name in candidates:
        tool = registry.get(name)
        if tool is None or tool.always_visible or is_navigation(name):
            continue
        names.append(name)
    return sorted(usable_tools(names, principal, context=context))


def principal_index(principal: CallPrincipal, context: Mapping[str, Any] | None = None) -> SearchIndex:
    """The principal's index, built by the configured provider and cached per governance version and principal.

    Any grant, group or catalogue change stamps a new governance version, so a revoked tool leaves
    the index before the next search.
    """
    with governance_scope():
        names = searchable_names(principal, context)
        provider_name = str(toolhub_settings().TOOL_SEARCH_PROVIDER)
        key = (
            "disclosure.search",
            provider_name,
            principal.tenant,
            principal.user_id,
            principal.agent_name,
            tuple(names),
        )

        def build() -> SearchIndex:
            documents = [search_document(tool) for name in names if (tool := registry.get(name)) is not None]
            return get_provider().build(documents)

        return governance_cached(key, build)
