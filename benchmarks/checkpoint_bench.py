"""Audit checkpoints with many tenants: the size of a full checkpoint and of a delta, and checking one.

``python -m benchmarks.checkpoint_bench [--tenants 1000] [--moved 400]`` (about half a minute) creates a
database of its own (``benchmarks.harness.configure``), writes one event to each of ``AUDIT_CHAINS``
chains of every tenant (8,000 chains at the defaults), stores a full checkpoint, writes one more event to
``--moved`` of those chains and stores the next checkpoint, a delta. For each, it measures the stored
body's size and the time and queries of checking the newest stored checkpoint against the database
(``audit_stored_checkpoint_problems``), beside the baseline measured in the same run: the same heads
looked up one query per chain, as they were before the lookups were batched. Writes
``benchmarks/results/checkpoints.md`` with the date and the load average.
"""

import argparse
import datetime as dt
import os
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks.harness import RESULTS, configure, load_average

PREFIX = "toolhub_bench_checkpoints"
ROUNDS = 5


def _keys_for(tenant: str, chains: int) -> list[uuid.UUID]:
    """Call ids that land in ``chains`` different chains of ``tenant``."""
    from toolhub.audit_hash import chain_for

    by_chain: dict[int, uuid.UUID] = {}
    while len(by_chain) < chains:
        key = uuid.uuid4()
        by_chain.setdefault(chain_for(key, tenant), key)
    return list(by_chain.values())


def _append(keys: list[tuple[str, uuid.UUID]]) -> None:
    from django.db import transaction

    from toolhub.audit import audit_append

    for start in range(0, len(keys), 200):
        with transaction.atomic():
            for tenant, key in keys[start : start + 200]:
                audit_append(
                    event_type="bench.step",
                    actor="bench",
                    data={},
                    call_id=key,
                    tool_name="record_effect",
                    status="queued",
                    tenant=tenant,
                )


def _per_chain_lookups() -> int:
    """The baseline: the newest stored checkpoint's heads, each looked up with a query of its own."""
    import json

    from toolhub.models import AuditCheckpoint, AuditEvent

    heads = json.loads(AuditCheckpoint.objects.order_by("-seq").first().body)["heads"]
    found = 0
    for chain, head in heads.items():
        found += (
            AuditEvent.objects.filter(chain=int(chain), seq=head["seq"]).values_list("id", "hash").first() is not None
        )
    return found


def _timed(work: Callable[[], Any]) -> tuple[float, int]:
    """Median seconds of ``ROUNDS`` runs of ``work`` and the queries one run makes."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        work()
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times), len(queries.captured_queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--moved", type=int, default=400, help="Chains with a new event before the delta.")
    args = parser.parse_args()
    load_at_start = load_average()
    started = dt.datetime.now(dt.UTC)
    os.environ.setdefault("BENCH_REDIS_URL", "redis://127.0.0.1:6379")  # the broker is configured, never used
    services = configure(prefix=PREFIX)
    os.environ.setdefault("TOOLHUB_AUDIT_KEY", "benchmarks-only-audit-key")
    try:
        from toolhub.checkpoints import audit_checkpoint_create, audit_stored_checkpoint_problems
        from toolhub.conf import toolhub_settings
        from toolhub.models import AuditCheckpoint

        per_tenant = toolhub_settings().AUDIT_CHAINS
        keys = [
            (f"tenant-{index}", key)
            for index in range(args.tenants)
            for key in _keys_for(f"tenant-{index}", per_tenant)
        ]
        _append(keys)
        rows = []
        for label, moved in (("full", 0), ("delta", args.moved)):
            _append(keys[:moved])
            document = audit_checkpoint_create()
            assert ("base" in document) == (label == "delta"), document.get("base")
            size = len(AuditCheckpoint.objects.get(seq=document["seq"]).body.encode())

            def check() -> None:
                _, problems = audit_stored_checkpoint_problems()
                assert not problems, problems[:3]

            check_seconds, check_queries = _timed(check)
            baseline_seconds, baseline_queries = _timed(_per_chain_lookups)
            rows.append(
                {
                    "checkpoint": f"{label} #{document['seq']}",
                    "heads": len(document["heads"]),
                    "bytes": size,
                    "check_s": check_seconds,
                    "check_queries": check_queries,
                    "baseline_s": baseline_seconds,
                    "baseline_queries": baseline_queries,
                }
            )
    finally:
        services.close()
    chains = len(keys)
    lines = [
        "# Audit checkpoints with many tenants",
        "",
        f"`python -m benchmarks.checkpoint_bench` of {started.isoformat(timespec='seconds')}, 2 cores; load average "
        f"(1/5/15 min) {'/'.join(map(str, load_at_start))} at the start, {'/'.join(map(str, load_average()))} at "
        f"the end. {args.tenants:,} tenants × {per_tenant} chains = {chains:,} chains, one event each; then one "
        f"more event in {args.moved:,} of them before the delta. Times are medians of {ROUNDS} runs.",
        "",
        "| checkpoint | heads named | stored body | check against the database | queries | baseline: "
        "the newest checkpoint's heads, a query per chain | queries | check vs baseline |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row['checkpoint']} | {row['heads']:,} | {row['bytes'] / 1000:,.0f} KB | {row['check_s']:.3f} s "
            f"| {row['check_queries']} | {row['baseline_s']:.3f} s | {row['baseline_queries']:,} "
            f"| {row['check_s'] / row['baseline_s']:.2f}x |"
        )
    lines += [
        "",
        f"The delta is {rows[1]['bytes'] / rows[0]['bytes']:.3f} of the full checkpoint's size. Checking the delta "
        "covers every chain, through the full checkpoint it builds on; the baseline on that row looks up only "
        "the delta's own heads.",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "checkpoints.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
