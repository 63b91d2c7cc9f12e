"""The default provider: an in-memory, field-weighted BM25 (BM25F) index.

A tool's name says most about it, its category and tags next, its description and parameters least;
BM25F folds the fields into one weighted, length-normalized term frequency before the saturation,
so a word repeated in a long description cannot outweigh the same word in the name. Every term's
contribution to every document is computed once at build time: a search only adds up the postings of
its few terms, which keeps a query at 10,000 tools around a millisecond.
"""

import heapq
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from toolhub.search.base import SearchDocument
from toolhub.search.text import analyze, expand

__all__ = ["FIELD_WEIGHTS", "LexicalIndex", "LexicalProvider", "NaiveBM25Provider"]

#: Field -> (weight, length normalization b).
FIELD_WEIGHTS: dict[str, tuple[float, float]] = {
    "name": (3.0, 0.3),
    "category": (2.0, 0.0),
    "tags": (2.0, 0.3),
    "description": (1.0, 0.75),
    "parameters": (0.5, 0.75),
}
_K1 = 1.2
_WORD = re.compile(r"\w+")

Analyzer = Callable[[str], tuple[str, ...]]


def _plain_words(text: str) -> tuple[str, ...]:
    """Lowercased runs of word characters: what a BM25 without any text analysis indexes."""
    return tuple(_WORD.findall(text.lower()))


def _fields(document: SearchDocument) -> dict[str, str]:
    parameters = " ".join(f"{name} {text}" for name, text in document.parameters.items())
    return {
        "name": document.name,
        "category": document.category,
        "tags": " ".join(document.tags),
        "description": document.description,
        "parameters": parameters,
    }


@dataclass(frozen=True)
class _Postings:
    names: tuple[str, ...]
    categories: tuple[str, ...]
    # term -> ((document index, score contribution), ...)
    postings: dict[str, tuple[tuple[int, float], ...]]


def _build_postings(
    documents: Iterable[SearchDocument], weights: dict[str, tuple[float, float]], *, analyzer: Analyzer, joined: bool
) -> _Postings:
    docs = list(documents)
    field_terms: list[dict[str, tuple[str, ...]]] = []
    for document in docs:
        fields = _fields(document)
        if joined:
            fields = {"all": " ".join(fields.values())}
        field_terms.append({field: analyzer(text) for field, text in fields.items()})
    count = len(docs) or 1
    average = {field: (sum(len(terms[field]) for terms in field_terms) / count) or 1.0 for field in weights}
    document_frequency: Counter[str] = Counter()
    per_document: list[dict[str, float]] = []
    for terms in field_terms:
        weighted: dict[str, float] = defaultdict(float)
        for field, (weight, b) in weights.items():
            field_terms_here = terms[field]
            norm = 1.0 - b + b * len(field_terms_here) / average[field]
            for term, tf in Counter(field_terms_here).items():
                weighted[term] += weight * tf / norm
        per_document.append(weighted)
        document_frequency.update(weighted.keys())
    postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for index, weighted in enumerate(per_document):
        for term, tf in weighted.items():
            df = document_frequency[term]
            idf = math.log(1.0 + (count - df + 0.5) / (df + 0.5))
            postings[term].append((index, idf * tf * (_K1 + 1.0) / (_K1 + tf)))
    return _Postings(
        names=tuple(document.name for document in docs),
        categories=tuple(document.category for document in docs),
        postings={term: tuple(entries) for term, entries in postings.items()},
    )


class LexicalIndex:
    """A built BM25F index; immutable, safe to share between threads."""

    def __init__(self, postings: _Postings, *, analyzer: Analyzer = analyze, synonyms: bool = True) -> None:
        self._data = postings
        self._analyzer = analyzer
        self._synonyms = synonyms

    def __len__(self) -> int:
        return len(self._data.names)

    def search(self, query: str, *, k: int = 5, category: str | None = None) -> list[str]:
        """The names of the best ``k`` tools for ``query``, best first; tools matching no term are left out."""
        terms = self._analyzer(query)
        weights = expand(terms) if self._synonyms else dict.fromkeys(terms, 1.0)
        scores: dict[int, float] = {}
        postings = self._data.postings
        for term, weight in weights.items():
            for index, contribution in postings.get(term, ()):
                scores[index] = scores.get(index, 0.0) + weight * contribution
        if category is not None:
            categories = self._data.categories
            scores = {index: score for index, score in scores.items() if categories[index] == category}
        # Ties break on the name, so the same catalogue always gives the same order.
        names = self._data.names
        best = heapq.nsmallest(max(k, 0), scores.items(), key=lambda item: (-item[1], names[item[0]]))
        return [names[index] for index, _ in best]


class LexicalProvider:
    """Weighted lexical search (``"lexical"``, the default provider)."""

    name = "lexical"

    def __init__(self, field_weights: dict[str, tuple[float, float]] | None = None) -> None:
        self.field_weights = dict(field_weights or FIELD_WEIGHTS)

    def build(self, documents: Iterable[SearchDocument]) -> LexicalIndex:
        """An index over exactly ``documents``."""
        return LexicalIndex(_build_postings(documents, self.field_weights, analyzer=analyze, joined=False))


class NaiveBM25Provider:
    """Plain BM25 over all the text joined, lowercased words only: the baseline the figures compare against."""

    name = "bm25-naive"

    def build(self, documents: Iterable[SearchDocument]) -> LexicalIndex:
        """An index over exactly ``documents``."""
        postings = _build_postings(documents, {"all": (1.0, 0.75)}, analyzer=_plain_words, joined=True)
        return LexicalIndex(postings, analyzer=_plain_words, synonyms=False)
