"""What ``make bench`` writes: the table of one run, its header, and the last runs side by side."""

import json
from typing import Any

from benchmarks.harness import RESULTS

__all__ = ["table", "header", "remember", "history_table"]


def table(results: dict[str, Any]) -> str:
    rows = ["| benchmark | toolhub | baseline (same run) | ratio | goal |", "| --- | --- | --- | --- | --- |"]
    if "tool_layer" in results:
        for row in results["tool_layer"].get("rows", []):
            rows.append(row)
    g = results["governance_overhead"]
    rows.append(
        f"| one low-risk governed call, in process | {g['governed_ms_p50']:.2f} ms | bare function + one insert "
        f"{g['baseline_ms_p50']:.2f} ms | {g['ratio']:.1f}x | {g['goal']} |"
    )
    rows.append(
        f"| floor: the same call's minimum in raw SQL (intent committed, tool, outcome committed; same tables) "
        f"| toolhub {g['governed_ms_p50']:.2f} ms = {g['governed_vs_floor']:.2f}x the floor "
        f"| floor {g['floor_ms_p50']:.2f} ms, bare {g['baseline_ms_p50']:.2f} ms "
        f"| floor {g['floor_vs_baseline']:.1f}x the bare baseline | shows what is physically reachable |"
    )
    rows.append(
        f"| same call of an atomic tool (its effect in toolhub's database, committed with the outcome) "
        f"| {g['atomic_ms_p50']:.2f} ms | bare function + one insert {g['baseline_ms_p50']:.2f} ms "
        f"| {g['atomic_ratio']:.1f}x | {g['atomic_goal']} |"
    )
    rows.append(
        f"| floor: an atomic call's minimum in raw SQL (the tool, then the settled row with its events; one commit) "
        f"| toolhub {g['atomic_ms_p50']:.2f} ms = {g['atomic_vs_floor']:.2f}x the floor "
        f"| floor {g['atomic_floor_ms_p50']:.2f} ms | floor {g['atomic_floor_vs_baseline']:.1f}x the bare baseline "
        "| shows what is physically reachable |"
    )
    peer = g["dbos"]
    if "dbos_ms_p50" in peer:
        rows.append(
            f"| same call vs DBOS Transact one-step workflow doing the same insert "
            f"| {g['governed_ms_p50']:.2f} ms "
            f"| DBOS {peer['dbos_ms_p50']:.2f} ms ({peer['dbos_vs_baseline']:.1f}x the bare baseline) | "
            f"toolhub {peer['toolhub_speedup_vs_dbos']:.2f}x as fast | {peer['goal']} |"
        )
        rows.append(
            f"| atomic call vs the same DBOS workflow | {g['atomic_ms_p50']:.2f} ms "
            f"| DBOS {peer['dbos_ms_p50']:.2f} ms "
            f"| toolhub {peer['atomic_speedup_vs_dbos']:.2f}x as fast | {peer['goal']} |"
        )
    else:
        rows.append(f"| same call vs DBOS Transact | - | {peer['note']} | - | >= 3x faster than DBOS |")
    c = results["celery_throughput"]
    rows.append(
        f"| calls/s through Redis + 2 workers ({c['calls']} calls) | {c['governed_calls_per_s']:.0f}/s | bare insert "
        f"task {c['baseline_tasks_per_s']:.0f}/s | {c['ratio']:.2f}x | {c['goal']} |"
    )
    if "floor_calls_per_s" in c:
        rows.append(
            "| floor: the same calls' minimum in raw SQL (queued row committed before the message; claim, tool, "
            f"outcome each committed on the worker; same tables) | toolhub {c['governed_calls_per_s']:.0f}/s = "
            f"{c['governed_vs_floor']:.2f}x the floor | floor {c['floor_calls_per_s']:.0f}/s, bare "
            f"{c['baseline_tasks_per_s']:.0f}/s | floor {c['floor_vs_baseline']:.2f}x the bare baseline "
            "| shows what is physically reachable |"
        )
    b = results.get("celery_throughput_batched")
    if b:
        rows.append(
            f"| same, workers claiming up to {b['claim_batch']} queued calls at once (WORKER_CLAIM_BATCH, group "
            f"commit) | {b['governed_calls_per_s']:.0f}/s | bare insert task {b['baseline_tasks_per_s']:.0f}/s "
            f"| {b['ratio']:.2f}x | {b['goal']} |"
        )
    a = results["approval_latency"]
    rows.append(
        "| approve -> executed -> run completed (p50 / p99) | "
        f"{a['governed_ms_p50']:.0f} / {a['governed_ms_p99']:.0f} ms | bare task round trip "
        f"{a['baseline_ms_p50']:.0f} / {a['baseline_ms_p99']:.0f} ms | "
        f"{a['ratio_p50']:.1f}x / {a['ratio_p99']:.1f}x | {a['goal']} |"
    )
    if "floor_ms_p50" in a:
        rows.append(
            "| floor: the same path's minimum in raw SQL (decision, request and release in one statement; claim, "
            f"tool, outcome, run completed on the worker; same tables) | toolhub {a['governed_ms_p50']:.0f} ms = "
            f"{a['governed_vs_floor_p50']:.2f}x the floor (p50) | floor {a['floor_ms_p50']:.0f} / "
            f"{a['floor_ms_p99']:.0f} ms | floor {a['floor_vs_baseline_p50']:.1f}x the bare baseline (p50) "
            "| shows what is physically reachable |"
        )
    r = results["concurrent_runs"]
    rows.append(
        f"| {r['runs']} concurrent scripted runs, {r['held_for_approval']} held for approval | "
        f"{r['completed']} completed in {r['total_s']:.1f} s; run latency p50 {r['run_latency_s_p50']:.2f} s, "
        f"p90 {r['run_latency_s_p90']:.2f} s, p99 {r['run_latency_s_p99']:.2f} s | - | - | all complete, all audited "
        f"({r['calls_audited']}/{r['calls']} calls audited, {r['audit_chain_problems']} chain problems) |"
    )
    return "\n".join(rows)


#: The latest runs' summaries (the README reports three), oldest first.
HISTORY = RESULTS / "runs.json"
KEEP_RUNS = 3


def remember(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Add this run's ratios to the history of full runs (a --quick run is not kept); return the history."""
    history = json.loads(HISTORY.read_text()) if HISTORY.exists() else []
    if results.get("quick"):
        return history
    g, a, r = results["governance_overhead"], results["approval_latency"], results["concurrent_runs"]
    batched = results.get("celery_throughput_batched") or {}
    history.append(
        {
            "started_at": results["started_at"],
            "seconds": results["seconds"],
            "load_average_at_start": results["machine"]["load_average_at_start"],
            "load_average_at_end": results["machine"]["load_average_at_end"],
            "in_process_ratio": g["ratio"],
            "atomic_ratio": g.get("atomic_ratio"),
            "atomic_speedup_vs_dbos": g["dbos"].get("atomic_speedup_vs_dbos"),
            "governed_vs_floor": g["governed_vs_floor"],
            "floor_vs_baseline": g["floor_vs_baseline"],
            "toolhub_speedup_vs_dbos": g["dbos"].get("toolhub_speedup_vs_dbos"),
            "celery_ratio": results["celery_throughput"]["ratio"],
            "celery_floor_vs_baseline": results["celery_throughput"].get("floor_vs_baseline"),
            "celery_ratio_batched": batched.get("ratio"),
            "approval_ratio_p50": a["ratio_p50"],
            "approval_ratio_p99": a["ratio_p99"],
            "approval_floor_vs_baseline_p50": a.get("floor_vs_baseline_p50"),
            "runs": r["runs"],
            "runs_completed": r["completed"],
            "runs_total_s": r["total_s"],
            "run_latency_s_p99": r["run_latency_s_p99"],
            "audit_chain_problems": r["audit_chain_problems"],
        }
    )
    history = history[-KEEP_RUNS:]
    HISTORY.write_text(json.dumps(history, indent=2) + "\n")
    return history


def history_table(history: list[dict[str, Any]]) -> str:
    """The last runs side by side: each goal's ratio per run, with the load the machine was under."""

    def ratio(value: float | None, digits: int = 2) -> str:
        return "-" if value is None else f"{value:.{digits}f}x"

    rows = [
        f"The last {len(history)} full runs (goals: in process <= 2.5x, <= 2x for an atomic tool, >= 3x faster than "
        "DBOS, Celery path >= 0.5x, approve -> completed <= 3x, 1,000 runs all complete with 0 chain problems):",
        "",
        "| run | load (1 min) start / end | in process | vs floor (floor vs bare) | atomic tool in process "
        "| vs DBOS (atomic) | Celery path (batch 8; raw-SQL floor) | approve -> completed p50 / p99 (floor p50) "
        "| concurrent runs: completed, p99, chain problems |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in history:
        rows.append(
            f"| {run['started_at']} ({run['seconds']:.0f} s) | {run['load_average_at_start'][0]} / "
            f"{run['load_average_at_end'][0]} | {ratio(run['in_process_ratio'], 1)} | "
            f"{ratio(run['governed_vs_floor'])} ({ratio(run['floor_vs_baseline'], 1)}) | "
            f"{ratio(run.get('atomic_ratio'), 1)} | {ratio(run['toolhub_speedup_vs_dbos'])} "
            f"({ratio(run.get('atomic_speedup_vs_dbos'))}) faster | {ratio(run['celery_ratio'])} "
            f"({ratio(run['celery_ratio_batched'])}; {ratio(run.get('celery_floor_vs_baseline'))}) | "
            f"{ratio(run['approval_ratio_p50'], 1)} / "
            f"{ratio(run['approval_ratio_p99'], 1)} ({ratio(run.get('approval_floor_vs_baseline_p50'), 1)}) | "
            f"{run['runs_completed']}/{run['runs']} in "
            f"{run['runs_total_s']:.0f} s, p99 {run['run_latency_s_p99']:.1f} s, {run['audit_chain_problems']} |"
        )
    return "\n".join(rows)


def header(results: dict[str, Any]) -> str:
    machine, used = results["machine"], results["settings"]
    return (
        f"`make bench` of {results['started_at']} ({results['seconds']:.0f} s), {machine['cores']} cores; load average "
        f"(1/5/15 min) {'/'.join(map(str, machine['load_average_at_start']))} at the start, "
        f"{'/'.join(map(str, machine['load_average_at_end']))} at the end. DEBUG {used['DEBUG']}, "
        f"CONN_MAX_AGE {used['CONN_MAX_AGE']} s with health checks, CELERY_DB_REUSE_MAX {used['CELERY_DB_REUSE_MAX']} "
        "(driver and workers reuse their connections, for the governed and the baseline tasks alike)."
    )
