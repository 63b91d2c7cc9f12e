"""PostgreSQL full-text search over a catalogue, for catalogues too large to hold in every process.

A catalogue's documents go into ``toolhub_search_document`` (migration 0012) under a key that is the
SHA-256 of their content, with one ``tsvector`` per tool weighted A (name), B (category, tags), C
(description) and D (parameters) and a GIN index over it. Two principals granted the same tools share
rows; a principal can only search under the key of the documents it was built from, so a tool outside
them never surfaces. Text is split like the lexical provider's (identifiers into words, CJK runs into
bigrams) before PostgreSQL's text search configuration stems it; the query is the OR of its words
(``websearch_to_tsquery``, which never fails on user input), ranked by ``ts_rank`` with those weights.
"""

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import timedelta

from django.db import connections, transaction

from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolhubError
from toolhub.search.base import SearchDocument
from toolhub.search.text import plain_words

__all__ = ["PostgresIndex", "PostgresProvider", "PostgresSearchUnavailable"]

_TABLE = "toolhub_search_document"
# ts_rank's weights for D, C, B, A.
_RANK_WEIGHTS = "{0.1, 0.2, 0.4, 1.0}"
_INSERT = f"""
INSERT INTO {_TABLE} (catalogue, name, category, document)
VALUES (%s, %s, %s,
    setweight(to_tsvector(%s::regconfig, %s), 'A') || setweight(to_tsvector(%s::regconfig, %s), 'B')
    || setweight(to_tsvector(%s::regconfig, %s), 'C') || setweight(to_tsvector(%s::regconfig, %s), 'D'))
ON CONFLICT (catalogue, name) DO NOTHING
"""
_SEARCH = f"""
SELECT name FROM (
    SELECT name, ts_rank(%s::float4[], document, query, 1) AS rank
    FROM {_TABLE}, websearch_to_tsquery(%s::regconfig, %s) AS query
    WHERE catalogue = %s AND document @@ query AND (%s::text IS NULL OR category = %s)
) AS hits
ORDER BY rank DESC, name
LIMIT %s
"""


class PostgresSearchUnavailable(ToolhubError):
    """The "postgres" provider was asked for on a database that is not PostgreSQL."""


def catalogue_key(documents: Sequence[SearchDocument]) -> str:
    """The SHA-256 of the documents' content, independent of their order."""
    canonical = sorted(
        [d.name, d.description, d.category, sorted(d.tags), sorted(d.parameters.items())] for d in documents
    )
    return hashlib.sha256(json.dumps(canonical, ensure_ascii=False).encode()).hexdigest()


class PostgresIndex:
    """One catalogue's rows in ``toolhub_search_document``."""

    def __init__(self, key: str, *, config: str, using: str, size: int) -> None:
        self.key = key
        self._config = config
        self._using = using
        self._size = size

    def __len__(self) -> int:
        return self._size

    def search(self, query: str, *, k: int = 5, category: str | None = None) -> list[str]:
        """The names of the best ``k`` tools for ``query``, best first."""
        words = plain_words(query).split()
        if not words or k <= 0:
            return []
        text = " or ".join(words)
        with connections[self._using].cursor() as cursor:
            cursor.execute(_SEARCH, [_RANK_WEIGHTS, self._config, text, self.key, category, category, k])
            return [row[0] for row in cursor.fetchall()]


class PostgresProvider:
    """Full-text search in PostgreSQL (``"postgres"``); the config is ``TOOL_SEARCH_POSTGRES_CONFIG``."""

    name = "postgres"

    def __init__(self, *, using: str = "default", config: str | None = None) -> None:
        if connections[using].vendor != "postgresql":
            raise PostgresSearchUnavailable(
                f"The postgres tool-search provider needs PostgreSQL; database {using!r} is "
                f"{connections[using].vendor}. Choose the lexical provider (TOOL_SEARCH_PROVIDER) instead."
            )
        self._using = using
        self._config = config or toolhub_settings().TOOL_SEARCH_POSTGRES_CONFIG

    def build(self, documents: Iterable[SearchDocument]) -> PostgresIndex:
        """Store the catalogue's rows unless the same catalogue is stored already; mark it as used."""
        docs = list(documents)
        key = catalogue_key(docs)
        config = self._config
        with transaction.atomic(using=self._using), connections[self._using].cursor() as cursor:
            cursor.execute(f"UPDATE {_TABLE} SET built_at = now() WHERE catalogue = %s", [key])
            if cursor.rowcount != len(docs):
                cursor.execute(f"DELETE FROM {_TABLE} WHERE catalogue = %s", [key])
                cursor.executemany(
                    _INSERT,
                    [
                        [
                            key,
                            d.name,
                            d.category,
                            config,
                            plain_words(d.name),
                            config,
                            plain_words(" ".join([d.category, *d.tags])),
                            config,
                            plain_words(d.description),
                            config,
                            plain_words(" ".join(f"{name} {text}" for name, text in d.parameters.items())),
                        ]
                        for d in docs
                    ],
                )
        return PostgresIndex(key, config=config, using=self._using, size=len(docs))

    def prune(self, *, unused_for: timedelta) -> int:
        """Delete the catalogues no build has used for ``unused_for`` (e.g. from a periodic task); returns rows."""
        with connections[self._using].cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {_TABLE} WHERE catalogue IN "
                f"(SELECT catalogue FROM {_TABLE} GROUP BY catalogue HAVING max(built_at) < now() - %s)",
                [unused_for],
            )
            return cursor.rowcount
