"""A small search provider for tests (the real ones live in toolhub.search); workers import it by dotted path."""

from collections.abc import Iterable

from toolhub.search import SearchDocument


class WordIndex:
    """A test index: documents sharing a word with the query, most shared words first."""

    def __init__(self, documents: Iterable[SearchDocument]) -> None:
        self.documents = list(documents)

    def search(self, query: str, *, k: int = 5, category: str | None = None) -> list[str]:
        words = set(query.lower().split())
        scored = []
        for doc in self.documents:
            if category and doc.category != category:
                continue
            text = f"{doc.name.replace('_', ' ')} {doc.description} {' '.join(doc.tags)}".lower()
            score = len(words & set(text.replace(",", " ").replace(".", " ").split()))
            if score:
                scored.append((-score, doc.name))
        return [name for _, name in sorted(scored)[:k]]


class WordProvider:
    """Registered by dotted path with TOOL_SEARCH_PROVIDER; remembers what it indexed."""

    name = "words"
    built: list[list[str]] = []

    def build(self, documents: Iterable[SearchDocument]) -> WordIndex:
        index = WordIndex(documents)
        WordProvider.built.append([doc.name for doc in index.documents])
        return index
