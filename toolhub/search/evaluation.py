"""Measuring a provider on a labeled set: recall@1/3/5, MRR and per-query latency.

The files are what ``manage.py search_eval`` and ``benchmarks/search_bench.py`` read: a catalogue (a JSON
list of ``{name, description, category, tags, parameters: {param: description}}``) and queries (a JSON
list of ``{query, expected: [names]}``). A query counts as found at ``n`` when any of its expected names is
among the first ``n`` results: several names mean several acceptable tools, not all required.
"""

import json
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolhub.search.base import SearchDocument, SearchProvider

__all__ = ["EvaluationInputError", "LabeledQuery", "evaluate", "load_catalogue", "load_queries"]


class EvaluationInputError(ValueError):
    """A catalogue or query file that cannot be evaluated; the message names the file and the problem."""


@dataclass(frozen=True)
class LabeledQuery:
    """A query as a user would ask it and the tools that answer it."""

    query: str
    expected: tuple[str, ...]


def _read_json_list(path: Path | str, what: str) -> list[Any]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EvaluationInputError(f"{what} file {path} does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise EvaluationInputError(f"{what} file {path} cannot be read: {exc}.") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvaluationInputError(
            f"{what} file {path} is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})."
        ) from None
    if not isinstance(data, list) or not data:
        raise EvaluationInputError(f"{what} file {path} must hold a non-empty JSON list, not {type(data).__name__}.")
    return data


def _string(entry: Mapping[str, Any], key: str, where: str, *, required: bool) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        kind = "a non-empty string" if required else "a string"
        raise EvaluationInputError(f"{where}: {key!r} must be {kind}.")
    return value


def load_catalogue(path: Path | str) -> list[SearchDocument]:
    """The documents of a catalogue file; every entry is checked, and names must be unique."""
    documents: list[SearchDocument] = []
    seen: set[str] = set()
    for position, entry in enumerate(_read_json_list(path, "Catalogue")):
        where = f"Catalogue {path}, entry {position}"
        if not isinstance(entry, dict):
            raise EvaluationInputError(
                f"{where}: must be an object with name, description, category, tags, parameters."
            )
        name = _string(entry, "name", where, required=True)
        if name in seen:
            raise EvaluationInputError(f"{where}: the name {name!r} appears twice.")
        seen.add(name)
        tags = entry.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            raise EvaluationInputError(f"{where} ({name}): 'tags' must be a list of strings.")
        parameters = entry.get("parameters", {})
        if not isinstance(parameters, dict) or not all(isinstance(text, str) for text in parameters.values()):
            raise EvaluationInputError(f"{where} ({name}): 'parameters' must map parameter names to descriptions.")
        documents.append(
            SearchDocument(
                name=name,
                description=_string(entry, "description", where, required=False),
                category=_string(entry, "category", where, required=False),
                tags=tuple(tags),
                parameters=dict(parameters),
            )
        )
    return documents


def load_queries(path: Path | str, names: Sequence[str] | set[str]) -> list[LabeledQuery]:
    """The labeled queries of a file; every expected name must be in the catalogue (``names``)."""
    known = set(names)
    queries: list[LabeledQuery] = []
    for position, entry in enumerate(_read_json_list(path, "Queries")):
        where = f"Queries {path}, entry {position}"
        if not isinstance(entry, dict):
            raise EvaluationInputError(f"{where}: must be an object with 'query' and 'expected'.")
        query = _string(entry, "query", where, required=True)
        expected = entry.get("expected")
        if not isinstance(expected, list) or not expected or not all(isinstance(name, str) for name in expected):
            raise EvaluationInputError(f"{where} ({query!r}): 'expected' must be a non-empty list of tool names.")
        missing = [name for name in expected if name not in known]
        if missing:
            raise EvaluationInputError(
                f"{where} ({query!r}): expected tools not in the catalogue: {', '.join(missing)}."
            )
        queries.append(LabeledQuery(query=query, expected=tuple(expected)))
    return queries


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def evaluate(
    provider: SearchProvider,
    documents: Sequence[SearchDocument],
    queries: Sequence[LabeledQuery],
    *,
    k: int = 5,
    misses: bool = False,
) -> dict[str, Any]:
    """Build ``provider``'s index over ``documents``, run ``queries`` and return the figures (a JSON-able dict).

    ``recall@n`` is the share of queries with an expected tool among the first ``n`` results, ``mrr`` the mean
    reciprocal rank of the first expected tool within ``max(k, 5)`` results (0 when absent); latencies are
    per ``search`` call, in milliseconds. ``misses`` adds the queries not found within ``k``.
    """
    started = time.perf_counter()
    index = provider.build(documents)
    build_seconds = time.perf_counter() - started
    depth = max(k, 5)
    cutoffs = sorted({1, 3, 5, k})
    found = dict.fromkeys(cutoffs, 0)
    reciprocal = 0.0
    latencies: list[float] = []
    missed: list[dict[str, Any]] = []
    for labeled in queries:
        started = time.perf_counter()
        results = index.search(labeled.query, k=depth)
        latencies.append((time.perf_counter() - started) * 1000.0)
        ranks = [position for position, name in enumerate(results, start=1) if name in labeled.expected]
        first = ranks[0] if ranks else None
        for cutoff in cutoffs:
            found[cutoff] += first is not None and first <= cutoff
        reciprocal += 1.0 / first if first is not None else 0.0
        if misses and (first is None or first > k):
            missed.append({"query": labeled.query, "expected": list(labeled.expected), "got": results[:k]})
    count = len(queries)
    report: dict[str, Any] = {
        "provider": getattr(provider, "name", type(provider).__name__),
        "tools": len(documents),
        "queries": count,
        **{f"recall@{cutoff}": round(found[cutoff] / count, 4) for cutoff in cutoffs},
        "mrr": round(reciprocal / count, 4),
        "latency_ms_p50": round(statistics.median(latencies), 3),
        "latency_ms_p95": round(_percentile(latencies, 0.95), 3),
        "build_seconds": round(build_seconds, 3),
    }
    if misses:
        report["misses"] = missed
    return report
