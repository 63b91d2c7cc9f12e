"""An A/B of the in-process governed call between two checkouts: did a change slow it down?

``python -m benchmarks.ab OLD NEW`` (two checkouts, e.g. ``git worktree add /tmp/old <commit>``) runs processes
alternately on each side, each with its own ``PYTHONPATH`` and its own freshly migrated database
(``benchmarks.harness.configure``): each runs that checkout's own ``benchmarks.run.governance_overhead`` (its
operations, its raw-SQL floors, shuffled rounds) without the DBOS peer, whose notifier threads only add noise here,
then captures the SQL of one governed and one atomic call. On a loaded machine absolute times move from one process
to the next; the ratios against the bare call and the floors measured in the same rounds are what to compare, each
side's range across its processes the noise to compare them with. The statements must be as few (and, after a change
that meant no new query, the same text). Prints a table and writes every process's figures as JSON lines (``--out``).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: The ratios compared, each the median of one process's rounds.
RATIOS = ("governed_vs_bare", "governed_vs_floor", "atomic_vs_floor")
#: Literals that differ from one call to the next (ids, times), masked before comparing statements' text.
_LITERALS = re.compile(r"'[0-9a-f-]{36}'|'\d{4}-\d\d-\d\d [^']*'")


def side(rounds: int, broker_db: int) -> dict[str, Any]:
    """One process of one side: the checkout on ``PYTHONPATH`` measured, in a database of its own."""
    load_at_start = os.getloadavg()
    import benchmarks.run as run
    from benchmarks.harness import configure

    run._dbos_peer = lambda services, work: (None, "not in an A/B", lambda: None)
    services = configure(prefix="toolhub_ab", broker_db=broker_db)
    try:
        figures = run.governance_overhead(rounds=rounds, services=services)
        statements = _statements()
    finally:
        services.close()
    import toolhub

    return {
        "tree": str(Path(toolhub.__file__).resolve().parent.parent),
        "rounds": rounds,
        "load_average": [round(value, 2) for value in (*load_at_start, *os.getloadavg())],
        **{key: figures[key] for key in ("governed_ms_p50", "baseline_ms_p50", "floor_ms_p50", "atomic_ms_p50")},
        "governed_vs_bare": figures["ratio"],
        "governed_vs_floor": figures["governed_vs_floor"],
        "atomic_vs_floor": figures["atomic_vs_floor"],
        "sql": statements,
    }


def _statements() -> dict[str, list[str]]:
    """The SQL of one governed call of each benchmarked tool, as ``governance_overhead`` makes it."""
    from celery import current_app
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from toolhub.authorization import CallPrincipal
    from toolhub.pipeline import CallRequest, tool_call_request
    from toolhub.tools.context import ToolContext

    principal = CallPrincipal(user_id=None, username="bench", tenant="acme")
    context = ToolContext(tenant="acme", user="bench")
    current_app.conf.task_always_eager = True
    statements = {}
    try:
        for tool in ("record_effect", "atomic_effect"):
            request = CallRequest(
                tool_name=tool, arguments='{"note": "benchmark"}', principal=principal, context=context
            )
            with CaptureQueriesContext(connection) as queries:
                tool_call_request(request=request)
            statements[tool] = [_LITERALS.sub("?", query["sql"]) for query in queries.captured_queries]
    finally:
        current_app.conf.task_always_eager = False
    return statements


def alternate(trees: list[Path], *, processes: int, rounds: int, broker_db: int, out: Path) -> list[dict[str, Any]]:
    """``processes`` runs of each tree, in turn, each a fresh interpreter with that tree first on its path."""
    runs = []
    with out.open("w") as sink:
        for _ in range(processes):
            for tree in trees:
                command = [sys.executable, __file__, "--side", "--rounds", str(rounds), "--broker-db", str(broker_db)]
                environment = {**os.environ, "PYTHONPATH": str(tree)}
                done = subprocess.run(command, cwd=tree, env=environment, capture_output=True, text=True, check=True)
                figures = json.loads(done.stdout.splitlines()[-1])
                assert figures["tree"] == str(tree), f"measured {figures['tree']}, not {tree}"
                sink.write(json.dumps(figures) + "\n")
                sink.flush()
                runs.append(figures)
    return runs


def summary(trees: list[Path], runs: list[dict[str, Any]]) -> str:
    """Each side's median ratio with its range over its processes, its statements per call and their text."""
    lines = ["| side | processes | load (1 min) | " + " | ".join(RATIOS) + " | statements (governed, atomic) |"]
    lines.append("|" + " --- |" * (len(RATIOS) + 4))
    sql = {}
    for tree in trees:
        mine = [run for run in runs if run["tree"] == str(tree)]
        load = [run["load_average"][0] for run in mine] + [run["load_average"][3] for run in mine]
        ratios = [
            f"{statistics.median(r[key] for r in mine):.2f}x ({min(r[key] for r in mine):.2f}-"
            f"{max(r[key] for r in mine):.2f})"
            for key in RATIOS
        ]
        counts = sorted({tuple(len(r["sql"][tool]) for tool in sorted(r["sql"], reverse=True)) for r in mine})
        sql[tree] = mine[-1]["sql"]
        lines.append(f"| {tree} | {len(mine)} | {min(load):.1f}-{max(load):.1f} | {' | '.join(ratios)} | {counts} |")
    same = len({json.dumps(statements, sort_keys=True) for statements in sql.values()}) == 1
    lines.append("")
    lines.append("Statements' text (literals masked): " + ("the same on both sides." if same else "DIFFERENT."))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="*", type=Path, help="The checkouts to compare, the reference first.")
    parser.add_argument("--processes", type=int, default=5, help="Processes per side.")
    parser.add_argument("--rounds", type=int, default=350, help="Shuffled rounds per process.")
    parser.add_argument("--broker-db", type=int, default=0, help="Redis database number (with BENCH_REDIS_URL).")
    parser.add_argument("--out", type=Path, default=Path("ab-runs.jsonl"), help="Every process's figures.")
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
            sys.path.pop(0)  # run as a script: the benchmarks to measure are the checkout's on PYTHONPATH, not these
        print(json.dumps(side(args.rounds, args.broker_db)))
        return
    if len(args.trees) != 2:
        parser.error("name two checkouts: the reference, then the one to compare with it")
    trees = [tree.resolve() for tree in args.trees]
    started = time.monotonic()
    runs = alternate(trees, processes=args.processes, rounds=args.rounds, broker_db=args.broker_db, out=args.out)
    print(summary(trees, runs))
    print(f"\n{len(runs)} processes in {time.monotonic() - started:.0f} s; every figure in {args.out}")


if __name__ == "__main__":
    main()
