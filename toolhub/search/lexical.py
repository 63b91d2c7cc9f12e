"""The default provider: an in-memory, field-weighted BM25 (BM25F) index.

A tool's name says most about it, its category and tags next, its description and parameters least;
BM25F folds the fields into one weighted, length-normalized term frequency before the saturation,
so a word repeated in a long description cannot outweigh the same word in the name. Every term's
contribution to every document is computed once at build time and kept as two numpy arrays (documents,
contributions): a search adds up its few terms' arrays into one score vector, in C rather than in a
Python loop, which keeps a query at 10,000 tools within a couple of milliseconds.
"""

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from toolhub.search.base import SearchDocument
from toolhub.search.text import analyze, expand

__all__ = ["FIELD_WEIGHTS", "LexicalIndex", "LexicalProvider", "NaiveBM25Provider", "document_fields"]

#: Field -> (weight, length normalization b). The name weighs most; a category is shared by many tools, so
#: it tells them apart less than their tags; parameter descriptions say what a tool acts on (an order id,
#: a city), which users name as often as the action, so they weigh as much as the description nearly does.
FIELD_WEIGHTS: dict[str, tuple[float, float]] = {
    "name": (3.0, 0.3),
    "category": (1.0, 0.0),
    "tags": (2.0, 0.3),
    "description": (1.5, 0.75),
    "parameters": (1.0, 0.75),
}
_K1 = 1.2
_WORD = re.compile(r"\w+")

Analyzer = Callable[[str], tuple[str, ...]]


def _plain_words(text: str) -> tuple[str, ...]:
    """Lowercased runs of word characters: what a BM25 without any text analysis indexes."""
    return tuple(_WORD.findall(text.lower()))


def document_fields(document: SearchDocument) -> dict[str, str]:
    """The text of each field a lexical index weighs (parameters as their names and descriptions)."""
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
    # term -> (document indexes, their score contributions)
    postings: dict[str, tuple[np.ndarray, np.ndarray]]


def _build_postings(
    documents: Iterable[SearchDocument], weights: dict[str, tuple[float, float]], *, analyzer: Analyzer, joined: bool
) -> _Postings:
    docs = list(documents)
    field_terms: list[dict[str, tuple[str, ...]]] = []
    for document in docs:
        fields = document_fields(document)
        if joined:
            fields = {"all": " ".join(fields.values())}
        field_terms.append({field: analyzer(text) for field, text in fields.items()})
    count = len(docs) or 1
    average = {field: (sum(len(terms[field]) for terms in field_terms) / count) or 1.0 for field in weights}
    # One (term, document, weighted frequency) triple per distinct term of a document; the BM25 arithmetic
    # then runs on all of them at once.
    term_ids: dict[str, int] = {}
    flat_terms: list[int] = []
    flat_documents: list[int] = []
    flat_frequencies: list[float] = []
    for index, terms in enumerate(field_terms):
        weighted: dict[str, float] = {}
        for field, (weight, b) in weights.items():
            here = terms[field]
            if not here:
                continue
            factor = weight / (1.0 - b + b * len(here) / average[field])
            for term in here:
                weighted[term] = weighted.get(term, 0.0) + factor
        for term, frequency in weighted.items():
            flat_terms.append(term_ids.setdefault(term, len(term_ids)))
            flat_documents.append(index)
            flat_frequencies.append(frequency)
    term_of = np.array(flat_terms, dtype=np.int64)
    frequency = np.array(flat_frequencies, dtype=np.float64)
    document_frequency = np.bincount(term_of, minlength=len(term_ids))
    idf = np.log1p((count - document_frequency + 0.5) / (document_frequency + 0.5))
    contribution = idf[term_of] * frequency * (_K1 + 1.0) / (_K1 + frequency)
    order = np.argsort(term_of, kind="stable")
    documents_sorted = np.array(flat_documents, dtype=np.int32)[order]
    contribution = contribution[order]
    ends = np.cumsum(document_frequency)
    starts = ends - document_frequency
    return _Postings(
        names=tuple(document.name for document in docs),
        categories=tuple(document.category for document in docs),
        postings={
            term: (documents_sorted[starts[tid] : ends[tid]], contribution[starts[tid] : ends[tid]])
            for term, tid in term_ids.items()
        },
    )


class LexicalIndex:
    """A built BM25F index; immutable, safe to share between threads."""

    def __init__(
        self, postings: _Postings, *, analyzer: Analyzer = analyze, synonyms: bool = True, thesaurus: bool = True
    ) -> None:
        self._data = postings
        self._analyzer = analyzer
        self._synonyms = synonyms
        self._thesaurus = thesaurus
        self._category_code: dict[str, int] = {}
        codes = [self._category_code.setdefault(category, len(self._category_code)) for category in postings.categories]
        self._category_codes = np.array(codes, dtype=np.int32)

    def __len__(self) -> int:
        return len(self._data.names)

    def search(self, query: str, *, k: int = 5, category: str | None = None) -> list[str]:
        """The names of the best ``k`` tools for ``query``, best first; tools matching no term are left out."""
        if k <= 0 or not self._data.names:
            return []
        return self.search_terms(self.query_terms(query), k=k, category=category)

    def query_terms(self, query: str) -> dict[str, float]:
        """The weighted index terms a search for ``query`` looks up: its own terms 1.0, synonyms less."""
        terms = self._analyzer(query)
        return expand(terms, query=query, thesaurus=self._thesaurus) if self._synonyms else dict.fromkeys(terms, 1.0)

    def search_terms(self, weights: Mapping[str, float], *, k: int = 5, category: str | None = None) -> list[str]:
        """Like ``search``, for index terms already weighted (a caller that expands queries its own way)."""
        names = self._data.names
        if k <= 0 or not names:
            return []
        scores = np.zeros(len(names))
        postings = self._data.postings
        for term, weight in weights.items():
            found = postings.get(term)
            if found is not None:
                # A term lists each document once, so the fancy-indexed add never repeats an index.
                scores[found[0]] += weight * found[1]
        if category is not None:
            scores[self._category_codes != self._category_code.get(category, -1)] = 0.0
        hits = np.flatnonzero(scores > 0.0)
        if len(hits) > k:
            kth = np.partition(scores[hits], len(hits) - k)[len(hits) - k]
            hits = hits[scores[hits] >= kth]
        # Ties break on the name, so the same catalogue always gives the same order.
        ranked = sorted(hits.tolist(), key=lambda index: (-scores[index], names[index]))
        return [names[index] for index in ranked[:k]]


class LexicalProvider:
    """Weighted lexical search (``"lexical"``, the default provider)."""

    name = "lexical"

    def __init__(self, field_weights: dict[str, tuple[float, float]] | None = None, *, thesaurus: bool = True) -> None:
        self.field_weights = dict(field_weights or FIELD_WEIGHTS)
        # WordNet's relations (toolhub.search.thesaurus) stand in for the world knowledge that a model
        # brings to the providers that have one, and those leave them out (measured on the main set).
        self.thesaurus = thesaurus

    def build(self, documents: Iterable[SearchDocument]) -> LexicalIndex:
        """An index over exactly ``documents``."""
        postings = _build_postings(documents, self.field_weights, analyzer=analyze, joined=False)
        return LexicalIndex(postings, thesaurus=self.thesaurus)


class NaiveBM25Provider:
    """Plain BM25 over all the text joined, lowercased words only: the baseline the figures compare against."""

    name = "bm25-naive"

    def build(self, documents: Iterable[SearchDocument]) -> LexicalIndex:
        """An index over exactly ``documents``."""
        postings = _build_postings(documents, {"all": (1.0, 0.75)}, analyzer=_plain_words, joined=True)
        return LexicalIndex(postings, analyzer=_plain_words, synonyms=False)
