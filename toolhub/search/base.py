"""The interface every tool-search provider implements, and how the configured one is found."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from django.utils.module_loading import import_string

from toolhub.conf import toolhub_settings

if TYPE_CHECKING:
    from toolhub.tools.definition import Tool

__all__ = ["PROVIDERS", "SearchDocument", "SearchIndex", "SearchProvider", "document_from_tool", "get_provider"]


@dataclass(frozen=True)
class SearchDocument:
    """What a provider may know of one tool: its name and the words that describe it."""

    name: str
    description: str = ""
    category: str = ""
    tags: tuple[str, ...] = ()
    parameters: Mapping[str, str] = field(default_factory=dict)


class SearchIndex(Protocol):
    """An index built over a fixed set of documents."""

    def search(self, query: str, *, k: int = 5, category: str | None = None) -> list[str]:
        """The names of the best ``k`` documents for ``query``, best first (only ``category``'s when given)."""
        ...


class SearchProvider(Protocol):
    """Builds indexes; one provider object may build many (one per principal's catalogue)."""

    name: str

    def build(self, documents: Iterable[SearchDocument]) -> SearchIndex:
        """An index over exactly ``documents``."""
        ...


# Provider names to dotted paths of a zero-argument factory; TOOL_SEARCH_PROVIDER may also be a dotted path.
PROVIDERS: dict[str, str] = {
    "lexical": "toolhub.search.lexical.LexicalProvider",
    "bm25-naive": "toolhub.search.lexical.NaiveBM25Provider",
    "postgres": "toolhub.search.postgres.PostgresProvider",
    "embedding": "toolhub.search.embedding.EmbeddingProvider",
    "lexical-expanded": "toolhub.search.expansion.ExpandedLexicalProvider",
    "hybrid": "toolhub.search.hybrid.HybridProvider",
}


def document_from_tool(tool: "Tool") -> SearchDocument:
    """What a provider indexes of a registered tool: the words the model would read in its definition."""
    schema = tool.known_json_schema  # ``None`` when it cannot be built: indexed by its words, never failing the index
    properties: dict[str, Any] = schema.get("properties", {}) if schema else {}
    parameters = {
        name: str(spec.get("description", "")) if isinstance(spec, Mapping) else "" for name, spec in properties.items()
    }
    return SearchDocument(
        name=tool.name,
        description=tool.description,
        category=tool.category,
        tags=tuple(sorted(tool.tags)),
        parameters=parameters,
    )


def get_provider(name: str | None = None) -> SearchProvider:
    """The provider called ``name`` (default: ``TOOLHUB["TOOL_SEARCH_PROVIDER"]``)."""
    chosen = name or toolhub_settings().TOOL_SEARCH_PROVIDER
    path = PROVIDERS.get(chosen, chosen)
    if "." not in path:
        known = ", ".join(sorted(PROVIDERS)) or "none registered"
        raise LookupError(f"Unknown tool search provider {chosen!r}; known: {known}.")
    return import_string(path)()
