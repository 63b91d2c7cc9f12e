"""Tool-search figures: latency and build time at 10,000 tools, recall on the labeled set, per provider.

    python -m benchmarks.search_bench

One command, under three minutes on a loaded 2-core machine. A synthetic catalogue of 10,000 tools is
generated deterministically (fixed seed: same tools and queries every run) and searched in memory by the
lexical provider and by the naive BM25 baseline, and in PostgreSQL by the postgres provider (a database
of this run's own, dropped at the end); recall@1/3/5 and MRR are measured on tests/data (the main query
set, the held-out set written before any tuning, three blind sets written after it by people who saw only the
catalogue, and all together, with the Chinese and the English queries apart: all-MiniLM-L6-v2 reads English
only).
The providers that need the model (embedding, lexical-expanded, hybrid) are measured on the labeled set
only (embedding 10,000 tools on 2 shared cores takes minutes); without the ``search-embedding`` extra
their rows say so. Writes
benchmarks/results/search.md with the date and the load average.
"""

import datetime
import json
import os
import random
import statistics
import sys
import time
from typing import Any

from benchmarks.harness import RESULTS, ROOT, configure, load_average, percentile

DATA = ROOT / "tests" / "data"
SEED = 13
TOOLS = 10_000
QUERIES = 400

_VERBS = "get list create update delete send cancel refund export import sync archive approve schedule search".split()
_NOUNS = (
    "invoice order customer ticket shipment payment report user account file image message event contract "
    "lead deal product price subscription backup service deployment alert metric log certificate domain "
    "employee payslip leave expense candidate interview room flight hotel weather stock dashboard query"
).split()
_QUALIFIERS = "draft pending overdue daily monthly archived shared internal external primary legacy regional".split()
_FILLER = (
    "for the given from a an with by using into one or more when it is records items details history status "
    "workspace team region account customer period quickly safely owner tenant"
).split()
_CJK = "查询 订单 发票 快递 审批 请假 报销 天气 会议 工资 客户 合同 库存 退款 通知".split()


def _chinese(query: str) -> bool:
    """Whether ``query`` has a Han character (the labeled set's queries are English or Chinese)."""
    return any("\u4e00" <= char <= "\u9fff" for char in query)


def synthetic_catalogue(count: int = TOOLS, seed: int = SEED) -> list[Any]:
    """``count`` distinct, plausible tools; about one in twenty described in Chinese."""
    from toolhub.search import SearchDocument

    rng = random.Random(seed)
    documents = []
    for number in range(count):
        verb, noun, qualifier = rng.choice(_VERBS), rng.choice(_NOUNS), rng.choice(_QUALIFIERS)
        name = (
            f"{verb}_{qualifier}_{noun}_{number}" if number % 3 else f"{verb}{qualifier.title()}{noun.title()}{number}"
        )
        if number % 20 == 0:
            description = "".join(rng.sample(_CJK, 4)) + "，" + "".join(rng.sample(_CJK, 3)) + "。"
        else:
            words = rng.sample(_FILLER, 8) + rng.sample(_NOUNS, 3) + [noun, verb]
            rng.shuffle(words)
            description = f"{verb.title()} {qualifier} {noun}s " + " ".join(words) + "."
        parameters = {
            f"{rng.choice(_NOUNS)}_id": f"The {rng.choice(_NOUNS)} to {verb}" for _ in range(rng.randint(1, 4))
        }
        documents.append(
            SearchDocument(
                name=name,
                description=description,
                category=f"{noun}s",
                tags=tuple(rng.sample(_QUALIFIERS, 2)),
                parameters=parameters,
            )
        )
    return documents


def synthetic_queries(count: int = QUERIES, seed: int = SEED + 1) -> list[str]:
    rng = random.Random(seed)
    queries = []
    for number in range(count):
        if number % 20 == 0:
            queries.append("帮我" + "".join(rng.sample(_CJK, 2)))
        else:
            words = [rng.choice(_VERBS), rng.choice(_NOUNS)] + rng.sample(_FILLER, rng.randint(1, 4))
            rng.shuffle(words)
            queries.append("please " + " ".join(words))
    return queries


def scale(provider: Any, documents: list[Any], queries: list[str], *, builds: int) -> dict[str, Any]:
    """Build times (median of ``builds``) and per-query latency (one pass after a warm-up pass) in ms."""
    build_times = []
    index = None
    for _ in range(builds):
        started = time.perf_counter()
        index = provider.build(documents)
        build_times.append(time.perf_counter() - started)
    for query in queries[:50]:
        index.search(query, k=5)
    latencies = []
    for query in queries:
        started = time.perf_counter()
        index.search(query, k=5)
        latencies.append((time.perf_counter() - started) * 1000.0)
    return {
        "build_s": round(statistics.median(build_times), 3),
        "p50_ms": round(statistics.median(latencies), 3),
        "p95_ms": round(percentile(latencies, 0.95), 3),
    }


def recall(provider: Any, documents: list[Any], sets: dict[str, list[Any]]) -> dict[str, Any]:
    from toolhub.search.evaluation import evaluate

    figures: dict[str, Any] = {}
    for label, queries in sets.items():
        report = evaluate(provider, documents, queries)
        figures[label] = {key: report[key] for key in ("recall@1", "recall@3", "recall@5", "mrr")}
        figures[label]["p50_ms"] = report["latency_ms_p50"]
    return figures


def main() -> None:
    os.environ.setdefault("BENCH_REDIS_URL", "redis://127.0.0.1:6379")  # the broker is configured, never used
    services = configure(prefix="search_bench")
    try:
        from toolhub.exceptions import ToolhubError
        from toolhub.search import get_provider
        from toolhub.search.evaluation import load_catalogue, load_queries

        load_before = load_average()
        catalogue = load_catalogue(DATA / "tool_search_catalogue.json")
        names = [document.name for document in catalogue]
        main_set = load_queries(DATA / "tool_search_queries.json", names)
        heldout = load_queries(DATA / "tool_search_queries_heldout.json", names)
        blind = load_queries(DATA / "tool_search_queries_blind.json", names)
        blind2 = load_queries(DATA / "tool_search_queries_blind2.json", names)
        blind3 = load_queries(DATA / "tool_search_queries_blind3.json", names)
        every = main_set + heldout + blind + blind2 + blind3
        sets = {
            "main": main_set,
            "held-out": heldout,
            "blind 1": blind,
            "blind 2": blind2,
            "blind 3": blind3,
            "all": every,
            "all, Chinese only": [q for q in every if _chinese(q.query)],
            "all, English only": [q for q in every if not _chinese(q.query)],
        }
        documents, queries = synthetic_catalogue(), synthetic_queries()
        at_scale: dict[str, Any] = {}
        quality: dict[str, Any] = {}
        providers = (
            ("bm25-naive", 3),
            ("lexical", 3),
            ("postgres", 1),
            ("embedding", 0),
            ("lexical-expanded", 0),
            ("hybrid", 0),
        )
        for name, builds in providers:
            try:
                provider = get_provider(name)
            except (ImportError, ToolhubError) as exc:
                quality[name] = {"unavailable": str(exc)}
                continue
            if builds:
                at_scale[name] = scale(provider, documents, queries, builds=builds)
                print(name, "at 10,000 tools:", at_scale[name], file=sys.stderr)
            quality[name] = recall(provider, catalogue, sets)
            print(name, "recall:", quality[name]["all"], file=sys.stderr)
        result = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "load_average_before": load_before,
            "load_average_after": load_average(),
            "tools_labeled": len(catalogue),
            "queries": {label: len(queries) for label, queries in sets.items()},
            "scale": at_scale,
            "recall": quality,
        }
    finally:
        services.close()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "search.md").write_text(render(result))
    print(json.dumps(result, ensure_ascii=False, indent=2))


def render(result: dict[str, Any]) -> str:
    lines = [
        "# Tool search figures",
        "",
        f"Run {result['date']} with `python -m benchmarks.search_bench`; load average before "
        f"{result['load_average_before']}, after {result['load_average_after']} (2 shared cores).",
        "",
        f"## Search at {TOOLS:,} tools (synthetic, seed {SEED}; {QUERIES} queries, k=5)",
        "",
        "| provider | index build (s) | median per query (ms) | p95 per query (ms) | median vs naive BM25 |",
        "|---|---|---|---|---|",
    ]
    naive = result["scale"].get("bm25-naive", {}).get("p50_ms")
    for name, figures in result["scale"].items():
        ratio = f"{figures['p50_ms'] / naive:.2f}x" if naive else "-"
        lines.append(f"| {name} | {figures['build_s']} | {figures['p50_ms']} | {figures['p95_ms']} | {ratio} |")
    counts = ", ".join(f"{label} {count}" for label, count in result["queries"].items())
    lines += [
        "",
        "Goals (in memory): median ≤ 2 ms, p95 ≤ 5 ms, build ≤ 2 s. The postgres row includes a round trip to the "
        "local server per query; its build inserts the rows once (a rebuild of the same catalogue reuses them).",
        "",
        f"## Recall on the labeled set (tests/data: {result['tools_labeled']} tools; queries: {counts})",
        "",
        "A query is found at n when an expected tool is among the first n results. The main set was seen while "
        "the providers were adjusted; the held-out set was written after the first measurement and before any "
        "change to them. The three blind sets were each written by a writer who saw only the catalogue "
        "(never the providers, the other sets or their misses): blind 1 on 2026-12-03 after every setting was "
        "fixed, and its misses were studied later that day (one change came of them: the embedding provider "
        "answers mostly-CJK queries from a lexical index); blind 2 on 2026-12-03 before that change, measured "
        "once before it and once after, its misses read on 2026-12-04 with no change coming of them; blind 3 "
        "on 2026-12-04 against the providers as they are, never studied. Goals: lexical recall@5 ≥ 0.88, "
        "embedding or hybrid ≥ 0.95.",
        "",
        "| provider | queries | recall@1 | recall@3 | recall@5 | MRR | median per query (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, figures in result["recall"].items():
        if "unavailable" in figures:
            lines.append(f"| {name} | - | not measured: {figures['unavailable']} | | | | |")
            continue
        for label, row in figures.items():
            lines.append(
                f"| {name} | {label} | {row['recall@1']} | {row['recall@3']} | {row['recall@5']} | {row['mrr']} "
                f"| {row['p50_ms']} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
