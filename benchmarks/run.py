"""``make bench``: every benchmark in one run, each figure a ratio against a baseline measured beside it.

Production-like (see ``benchmarks.harness``): DEBUG off, database connections reused by the driver and
by the workers for both the governed and the baseline tasks, a database and a Redis of this run's own
(two runs at once never meet), the load average recorded at the start and the end. DBOS Transact (the
optional ``bench`` extra) runs as a peer in the same run: a one-step workflow doing the baseline's work.
Writes benchmarks/results/results.json and results.md and prints the table. On these noisy 2-core
machines absolute times drift from run to run; the ratios are what to compare across changes.
"""

import argparse
import datetime as dt
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks.floor import raw_sql_atomic_floor, raw_sql_floor
from benchmarks.harness import RESULTS, Services, configure, interleaved, load_average, median, percentile
from benchmarks.report import header, history_table, remember, table

PREFIX = "toolhub_bench"
#: WORKER_CLAIM_BATCH of the group-commit throughput row.
CLAIM_BATCH = 8
#: Approvals (and floor and bare round trips) run before approval_latency's samples and not counted.
WARM_UP_SAMPLES = 5


def governance_overhead(rounds: int, services: Services) -> dict[str, Any]:
    """One low-risk call through the whole pipeline, in process, against the bare function plus one insert.

    DBOS Transact, when installed, runs beside them in the same rounds: a workflow whose one step does
    exactly what the baseline does (the function, then the same insert). So does the same call of an
    atomic tool (its effect in toolhub's database, committed with the outcome), with its own raw-SQL floor.
    """
    from celery import current_app

    from tests.testapp.models import PlainRecord
    from tests.testapp.tools import atomic_effect, record_effect
    from toolhub.authorization import CallPrincipal
    from toolhub.pipeline import CallRequest, tool_call_request
    from toolhub.tools.context import ToolContext

    current_app.conf.task_always_eager = True
    principal = CallPrincipal(user_id=None, username="bench", tenant="acme")
    context = ToolContext(tenant="acme", user="bench")

    def governed() -> None:
        tool_call_request(
            request=CallRequest(
                tool_name="record_effect", arguments='{"note": "benchmark"}', principal=principal, context=context
            )
        )

    def governed_atomic() -> None:
        tool_call_request(
            request=CallRequest(
                tool_name="atomic_effect", arguments='{"note": "benchmark"}', principal=principal, context=context
            )
        )

    def bare() -> None:
        arguments = {"note": "benchmark"}
        result = record_effect(note=arguments["note"], ctx=context.with_values(call_id=str(uuid.uuid4())))
        PlainRecord.objects.create(name="record_effect", payload={"arguments": arguments, "result": result})

    floor = raw_sql_floor(record_effect, "record_effect", "acme")
    atomic_floor = raw_sql_atomic_floor(atomic_effect, "atomic_effect", "acme")
    peer, peer_note, peer_close = _dbos_peer(services, bare)
    operations = [governed, bare, floor, governed_atomic, atomic_floor, *([peer] if peer is not None else [])]
    try:
        for _ in range(20):  # warm caches, connections, schema builds
            for operation in operations:
                operation()
        # Each round in a new order: DBOS pushes a workflow's notifications from a thread after the
        # workflow returns, which ran on the clock of the operation after it (toolhub's call, ~20% slower).
        times = interleaved(*operations, rounds=rounds, shuffled=True)
    finally:
        peer_close()
        current_app.conf.task_always_eager = False
    governed_times, bare_times, floor_times, atomic_times, atomic_floor_times = times[:5]
    figures: dict[str, Any] = {
        "rounds": rounds,
        "governed_ms_p50": median(governed_times) * 1000,
        "baseline_ms_p50": median(bare_times) * 1000,
        "ratio": median(governed_times) / median(bare_times),
        "goal": "<= 2.5x",
        # the fewest statements a governed call needs, raw SQL on the same tables (benchmarks.floor)
        "floor_ms_p50": median(floor_times) * 1000,
        "floor_vs_baseline": median(floor_times) / median(bare_times),
        "governed_vs_floor": median(governed_times) / median(floor_times),
        # the same call of an atomic tool: intent, effect and outcome in one transaction
        "atomic_ms_p50": median(atomic_times) * 1000,
        "atomic_ratio": median(atomic_times) / median(bare_times),
        "atomic_goal": "<= 2x",
        "atomic_floor_ms_p50": median(atomic_floor_times) * 1000,
        "atomic_floor_vs_baseline": median(atomic_floor_times) / median(bare_times),
        "atomic_vs_floor": median(atomic_times) / median(atomic_floor_times),
        "dbos": {"note": peer_note},
    }
    if peer is not None:
        dbos_times = times[5]
        figures["dbos"].update(
            {
                "dbos_ms_p50": median(dbos_times) * 1000,
                "dbos_vs_baseline": median(dbos_times) / median(bare_times),
                # how many times faster toolhub's governed call is than the DBOS workflow (goal: >= 3)
                "toolhub_speedup_vs_dbos": median(dbos_times) / median(governed_times),
                "atomic_speedup_vs_dbos": median(dbos_times) / median(atomic_times),
                "goal": ">= 3x faster than DBOS",
            }
        )
    return figures


def _dbos_peer(
    services: Services, work: Callable[[], None]
) -> tuple[Callable[[], None] | None, str, Callable[[], None]]:
    """A DBOS workflow with one step doing ``work``, on a system database of this run's own (or why not)."""
    try:
        from dbos import DBOS
    except ImportError:
        return None, "DBOS Transact is not installed (pip install '.[bench]'): no peer row in this run", lambda: None

    system_database = f"{services.database}_dbos"
    url = f"{services.server}/{system_database}".replace("postgres://", "postgresql://", 1)
    from benchmarks.harness import _create_database, _drop_database

    _create_database(services.server, system_database)
    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(config={"name": "toolhub-bench", "system_database_url": url, "log_level": "WARNING"})

    @DBOS.step()
    def insert_step() -> None:
        work()

    @DBOS.workflow()
    def one_step_workflow() -> None:
        insert_step()

    DBOS.launch()

    def close() -> None:
        DBOS.destroy(destroy_registry=True)
        _drop_database(services.server, system_database)

    note = f"DBOS Transact {_version('dbos')}, its system database on the same PostgreSQL"
    return one_step_workflow, note, close


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def celery_throughput(calls: int, *, floor: bool = True) -> dict[str, Any]:
    """Calls per second through broker and 2 workers, against a bare task doing one insert.

    ``floor``: beside them, the same calls' floor: each call's minimum in raw SQL on toolhub's tables (the queued row
    with its events committed before the message, then on the worker the claim, the tool and the outcome,
    each committed with its event: ``benchmarks.floor``), to show how much of the gap durability itself takes.
    """
    from benchmarks.floor import raw_sql_queued_intent
    from tests.testapp.models import PlainRecord
    from tests.testapp.tasks import bare_insert_task, floor_call_task
    from toolhub.authorization import CallPrincipal
    from toolhub.models import CallStatus, ToolCall
    from toolhub.pipeline import CallRequest, tool_call_request
    from toolhub.tools.context import ToolContext

    principal = CallPrincipal(user_id=None, username="bench", tenant="acme")
    context = ToolContext(tenant="acme")

    def bare_batch() -> float:
        started = time.perf_counter()
        for index in range(calls):
            bare_insert_task.delay("bare", {"note": "benchmark", "index": index})
        _wait(lambda: PlainRecord.objects.filter(name="bare").count() >= calls)
        elapsed = time.perf_counter() - started
        PlainRecord.objects.filter(name="bare").delete()
        return elapsed

    def governed_batch() -> float:
        started = time.perf_counter()
        ids = [
            tool_call_request(
                request=CallRequest(
                    tool_name="record_effect", arguments={"note": "benchmark"}, principal=principal, context=context
                )
            ).pk
            for _ in range(calls)
        ]
        _wait(lambda: ToolCall.objects.filter(pk__in=ids, status=CallStatus.SUCCEEDED).count() >= calls)
        return time.perf_counter() - started

    queued_intent = raw_sql_queued_intent("record_effect", "acme")

    def floor_batch() -> float:
        started = time.perf_counter()
        ids = []
        for _ in range(calls):
            call_id = queued_intent()
            floor_call_task.delay(str(call_id))
            ids.append(call_id)
        _wait(lambda: ToolCall.objects.filter(pk__in=ids, status=CallStatus.SUCCEEDED).count() >= calls)
        return time.perf_counter() - started

    batches = [bare_batch, governed_batch, *([floor_batch] if floor else [])]
    for batch in batches:  # warm every path
        batch()
    times: list[list[float]] = [[] for _ in batches]
    for _ in range(2):
        for index, batch in enumerate(batches):
            times[index].append(batch())
    bare_rate, governed_rate = calls / min(times[0]), calls / min(times[1])
    figures = {
        "calls": calls,
        "governed_calls_per_s": governed_rate,
        "baseline_tasks_per_s": bare_rate,
        "ratio": governed_rate / bare_rate,
        "goal": ">= 0.5x",
    }
    if floor:
        floor_rate = calls / min(times[2])
        figures.update(
            floor_calls_per_s=floor_rate,
            floor_vs_baseline=floor_rate / bare_rate,
            governed_vs_floor=governed_rate / floor_rate,
        )
    return figures


def approval_latency(samples: int) -> dict[str, Any]:
    """Approve -> executed -> run resumed and completed, against a bare task round trip.

    Beside them, the same path's floor in raw SQL on the same tables (``benchmarks.floor``): the decision,
    the request's move and the call's release with their events in one statement, then on a worker the
    claim, the tool and the outcome each committed with its event, and the run completed.
    """

    from agents_app.models import Agent, AgentRun, RunStatus
    from agents_app.services import run_start
    from approvals.models import ApprovalRequest
    from approvals.services import approval_approve
    from benchmarks.floor import raw_sql_approval
    from tests.testapp.models import PlainRecord
    from tests.testapp.tasks import bare_insert_task, floor_approved_call_task

    requester, operator = _users()
    agent, _ = Agent.objects.get_or_create(
        name="bench-approval",
        defaults={
            "script": [
                {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]},
                {"content": "done: {last_tool_result}"},
            ],
            "tools": ["risky_effect"],
        },
    )

    def held() -> tuple[Any, Any]:
        run = run_start(agent=agent, user=requester, input="go")
        _wait(lambda: AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING)
        return run, ApprovalRequest.objects.get(call__run_id=run.pk)

    def completed(run: Any) -> None:
        # Observed as the baseline's row is: an EXISTS query every 2 ms (not a read of the whole run).
        _wait(lambda: AgentRun.objects.filter(pk=run.pk, status=RunStatus.COMPLETED).exists(), interval=0.002)

    def governed_once() -> float:
        run, request = held()
        started = time.perf_counter()
        approval_approve(request_id=request.pk, user=operator, comment="bench")
        completed(run)
        return time.perf_counter() - started

    def floor_once() -> float:
        run, request = held()
        started = time.perf_counter()
        raw_sql_approval(
            request.pk,
            request.call_id,
            request.arguments_hash,
            operator.pk,
            operator.get_username(),
            tool_name="risky_effect",
            tenant=request.tenant,
        )
        floor_approved_call_task.delay(str(request.call_id), str(run.pk))
        completed(run)
        return time.perf_counter() - started

    def bare_once(name: str) -> float:
        started = time.perf_counter()
        bare_insert_task.delay(name, {})
        _wait(lambda: PlainRecord.objects.filter(name=name).exists(), interval=0.002)
        return time.perf_counter() - started

    # Warm every path first, as the other benchmarks do: the first approvals pay for this process's and
    # the workers' first use of each statement and code path (one of them alone was 3-4x a warm one).
    for index in range(WARM_UP_SAMPLES):
        governed_once()
        floor_once()
        bare_once(f"warm-{index}")
    governed, bare, floor = [], [], []
    for index in range(samples):
        governed.append(governed_once())
        floor.append(floor_once())
        bare.append(bare_once(f"rt-{index}"))
    return {
        "samples": samples,
        "warm_up_samples": WARM_UP_SAMPLES,
        "governed_ms_p50": percentile(governed, 0.5) * 1000,
        "governed_ms_p99": percentile(governed, 0.99) * 1000,
        "baseline_ms_p50": percentile(bare, 0.5) * 1000,
        "baseline_ms_p99": percentile(bare, 0.99) * 1000,
        "ratio_p50": percentile(governed, 0.5) / percentile(bare, 0.5),
        "ratio_p99": percentile(governed, 0.99) / percentile(bare, 0.99),
        "goal": "<= 3x",
        "floor_ms_p50": percentile(floor, 0.5) * 1000,
        "floor_ms_p99": percentile(floor, 0.99) * 1000,
        "floor_vs_baseline_p50": percentile(floor, 0.5) / percentile(bare, 0.5),
        "governed_vs_floor_p50": percentile(governed, 0.5) / percentile(floor, 0.5),
    }


def concurrent_runs(runs: int, approval_share: float) -> dict[str, Any]:
    """Many scripted runs at once, a share of them held for approval and approved by a scripted operator."""
    from agents_app.models import Agent, AgentRun, RunStatus
    from agents_app.services import run_start
    from approvals.models import ApprovalRequest, ApprovalStatus
    from approvals.services import approval_approve
    from toolhub.audit_verify import verify_audit_chains
    from toolhub.models import AuditEvent, ToolCall

    requester, operator = _users()
    scripts = {
        "bench-plain": ("record_effect", "plain"),
        "bench-held": ("risky_effect", "held"),
    }
    agents = {}
    for name, (tool, note) in scripts.items():
        agents[name], _ = Agent.objects.get_or_create(
            name=name,
            defaults={
                "script": [
                    {"tool_calls": [{"name": tool, "arguments": {"note": note}}]},
                    {"content": "done: {last_tool_result}"},
                ],
                "tools": [tool],
            },
        )
    held_every = round(1 / approval_share)
    stop = threading.Event()

    def scripted_operator() -> None:
        from django.db import connection

        while not stop.is_set():
            for request_id in ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).values_list(
                "pk", flat=True
            ):
                approval_approve(request_id=request_id, user=operator, comment="scripted operator")
            time.sleep(0.05)
        connection.close()

    approver = threading.Thread(target=scripted_operator, daemon=True)
    approver.start()
    started = time.perf_counter()
    run_ids = []
    for index in range(runs):
        agent = agents["bench-held" if index % held_every == 0 else "bench-plain"]
        run_ids.append(run_start(agent=agent, user=requester, input=f"run {index}").pk)
    _wait(lambda: AgentRun.objects.filter(pk__in=run_ids, status=RunStatus.COMPLETED).count() == runs, timeout=600)
    total = time.perf_counter() - started
    stop.set()
    approver.join(timeout=10)
    latencies = [(run.finished_at - run.created_at).total_seconds() for run in AgentRun.objects.filter(pk__in=run_ids)]
    calls = ToolCall.objects.filter(run_id__in=run_ids)
    audited = AuditEvent.objects.filter(call_id__in=calls.values("id")).values("call_id").distinct().count()
    _, problems = verify_audit_chains()
    return {
        "runs": runs,
        "held_for_approval": sum(1 for index in range(runs) if index % held_every == 0),
        "completed": AgentRun.objects.filter(pk__in=run_ids, status=RunStatus.COMPLETED).count(),
        "calls": calls.count(),
        "calls_audited": audited,
        "audit_chain_problems": len(problems),
        "total_s": total,
        "run_latency_s_p50": percentile(latencies, 0.5),
        "run_latency_s_p90": percentile(latencies, 0.9),
        "run_latency_s_p99": percentile(latencies, 0.99),
        "run_latency_s_max": max(latencies),
    }


def _users() -> tuple[Any, Any]:
    from django.contrib.auth.models import Permission, User

    from toolhub.models import Tenant, TenantMembership

    requester, _ = User.objects.get_or_create(username="bench-requester")
    operator, created = User.objects.get_or_create(username="bench-operator", defaults={"is_staff": True})
    if created:
        operator.user_permissions.add(Permission.objects.get(codename="decide_approvalrequest"))
        operator = User.objects.get(pk=operator.pk)
    # The benchmark's calls and runs are acme's: its operator decides there, and only there.
    acme, _ = Tenant.objects.get_or_create(slug="acme", defaults={"name": "ACME Corp"})
    for user in (requester, operator):
        TenantMembership.objects.get_or_create(user=user, tenant=acme)
    return requester, operator


def _wait(predicate: Any, *, timeout: float = 300.0, interval: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step did not finish in time")
        time.sleep(interval)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="Fewer rounds, for a smoke run.")
    parser.add_argument(
        "--runs",
        type=int,
        default=1000,
        help="Concurrent scripted runs (a fifth held for approval); the committed results use 1000.",
    )
    args = parser.parse_args()
    load_at_start = load_average()
    started = dt.datetime.now(dt.UTC)
    services = configure(prefix=PREFIX)
    from django.conf import settings
    from django.db import connection

    from tests.integration.workers import Worker, purge_queue

    scale = 0.2 if args.quick else 1.0
    results: dict[str, Any] = {
        "machine": {"cores": os.cpu_count(), "load_average_at_start": load_at_start},
        "started_at": started.isoformat(timespec="seconds"),
        "quick": args.quick,
        "settings": {
            "DEBUG": settings.DEBUG,
            "CONN_MAX_AGE": settings.DATABASES["default"]["CONN_MAX_AGE"],
            "CONN_HEALTH_CHECKS": settings.DATABASES["default"]["CONN_HEALTH_CHECKS"],
            "CELERY_DB_REUSE_MAX": settings.CELERY_DB_REUSE_MAX,
            "database": services.database,
            "broker": services.broker_url,
        },
    }
    try:
        try:
            from benchmarks.bench_tool_layer import run as tool_layer

            results["tool_layer"] = tool_layer()
        except ImportError:
            pass
        results["governance_overhead"] = governance_overhead(rounds=int(300 * scale), services=services)
        purge_queue()
        workers = [Worker(f"bench{index}", concurrency=1).start() for index in range(2)]
        try:
            results["celery_throughput"] = celery_throughput(calls=int(500 * scale))
            results["approval_latency"] = approval_latency(samples=int(100 * scale))
            results["concurrent_runs"] = concurrent_runs(runs=max(10, int(args.runs * scale)), approval_share=0.2)
        finally:
            for worker in workers:
                worker.stop()
        # The same throughput with group commit: each delivery claims up to CLAIM_BATCH queued calls at once.
        purge_queue()
        batched = {"TOOLHUB_WORKER_CLAIM_BATCH": str(CLAIM_BATCH)}
        workers = [Worker(f"bench{index}b", concurrency=1, **batched).start() for index in range(2)]
        try:
            results["celery_throughput_batched"] = {
                # no floor here: a batch claim would take the floor's queued rows as its own
                **celery_throughput(calls=int(500 * scale), floor=False),
                "claim_batch": CLAIM_BATCH,
            }
        finally:
            for worker in workers:
                worker.stop()
            connection.close()
    finally:
        services.close()
    results["machine"]["load_average_at_end"] = load_average()
    results["seconds"] = round((dt.datetime.now(dt.UTC) - started).total_seconds(), 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    history = remember(results)
    text = header(results) + "\n\n" + table(results) + "\n\n" + history_table(history)
    (RESULTS / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    (RESULTS / "results.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
