"""The run-time side of tool search: one index per principal, over the tools it is granted and nothing else.

Whatever the configured provider's index answers, a search answers only names that index was built over
(``OwnNamesIndex``): a provider is code of anyone's (a dotted path), and one kept over a shared store would
otherwise name tools of other principals and tenants in ``tool_search`` and ``toolhub_find_tools`` hits.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from toolhub.authorization import CallPrincipal
from toolhub.conf import toolhub_settings
from toolhub.disclosure.unfolding import usable_tools
from toolhub.governance import governance_cached, governance_scope
from toolhub.search import SearchDocument, SearchIndex, get_provider
from toolhub.tools.definition import Tool
from toolhub.tools.export import listable_names
from toolhub.tools.registry import registry

__all__ = ["DEEPEST_SEARCH", "OwnNamesIndex", "search_document", "searchable_names", "principal_index"]


def search_document(tool: Tool) -> SearchDocument:
    """What a provider may know of a tool: name, description, category, tags and parameter descriptions."""
    parameters = {p.name: (p.description or "") for p in tool.parameters}
    if not parameters:
        schema = tool.known_json_schema  # ``None`` when it cannot be built: the tool is then found by its words
        properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
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
    not to what ``tools/list`` shows and a client may call: search finds exactly what would be listed, so never a
    tool whose schema cannot be built (``export.listable_names``; every listing leaves it out).
    """
    from toolhub.disclosure.visibility import is_navigation

    candidates: Iterable[str] = registry.names() if principal.agent_tools is None else principal.agent_tools
    names = []
    for name in candidates:
        tool = registry.get(name)
        if tool is None or tool.always_visible or is_navigation(name):
            continue
        names.append(name)
    return sorted(listable_names(usable_tools(names, principal, context=context)))


#: Deepest a provider is asked when its answers hold duplicates or other names (the most a run holds, ``MAX_NAMES``).
DEEPEST_SEARCH = 500


class OwnNamesIndex:
    """A provider's index that answers only the names it was built over, in the provider's order."""

    def __init__(self, index: SearchIndex, names: Iterable[str]) -> None:
        self._index = index
        self._names = frozenset(names)

    def search(self, query: str, *, k: int = 5, category: str | None = None) -> list[str]:
        """The first ``k`` distinct names of ours in the provider's ranking.

        A provider answering distinct names of ours is asked once, with ``k``. One whose answer holds duplicates or
        other names is asked again, twice as deep (up to ``DEEPEST_SEARCH``), until it gives ``k`` of ours or fewer
        than asked: dropping them must not leave a search short while our names rank just below.
        """
        depth = k
        while depth > 0:
            hits = [str(name) for name in self._index.search(query, k=depth, category=category)]
            own = [name for name in dict.fromkeys(hits) if name in self._names]
            if len(own) >= min(k, len(self._names)) or len(hits) < depth or depth >= DEEPEST_SEARCH:
                return own[:k]
            depth = min(depth * 2, DEEPEST_SEARCH)
        return []


def principal_index(principal: CallPrincipal, context: Mapping[str, Any] | None = None) -> SearchIndex:
    """The principal's index, built by the configured provider and cached per governance version and principal.

    Any grant, group or catalogue change stamps a new governance version, so a revoked tool leaves
    the index before the next search; and the index answers only ``names`` (``OwnNamesIndex``).
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
            return OwnNamesIndex(get_provider().build(documents), [document.name for document in documents])

        return governance_cached(key, build)
