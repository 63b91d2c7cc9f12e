"""Where one approved call's path spends its time, step by step, beside its raw-SQL floor doing the same work.

``python -m benchmarks.approval_profile [--samples N]``: on a database of its own (``benchmarks.harness``), with
the execute task run eagerly in this process (so no broker hop is counted; ``approval_bench`` measures those),
it approves ``N`` held calls of scripted runs and prints, per step of approve -> executed -> run completed, the
statements sent, their wall time, and the process's CPU time (``time.process_time``: Python and the driver's own
work, not time waiting for the database). Then the floor (``benchmarks.floor``) does the same work for as many
runs: the release, the claim, the tool, the outcome and the run's completion, each one autocommitted statement.

Each step's figures exclude the steps nested in it (the approval's commit runs the eager worker, which advances
the run). Statements are what the ORM or a prepared cursor executes; a transaction's BEGIN travels with its first
statement's time and its COMMIT shows in the step's wall time, not in its statements.
"""

import argparse
import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from benchmarks.harness import configure, load_average

PREFIX = "toolhub_bench_approval_profile"

#: (module, attribute, step) wrapped to attribute time and statements, outermost first.
STEPS = (
    ("approvals.services", "_decide_in_transaction", "approve: transaction (BEGIN .. COMMIT)"),
    ("approvals.services", "locked_request", "approve: request locked"),
    ("approvals.services", "request_decisions", "approve: decisions and stamp"),
    ("approvals.services", "_decided", "approve: checks and one write"),
    ("toolhub.tasks", "tool_call_execute", "worker: re-check and tool"),
    ("toolhub.execution", "tool_calls_claim", "worker: claim"),
    ("approvals.shortfall", "released_request", "worker: approvals it was released on"),
    ("toolhub.execution", "_record", "worker: outcome"),
    ("agents_app.loop", "run_advance", "step: transaction (BEGIN .. COMMIT)"),
    ("agents_app.loop", "locked_run", "step: run locked"),
    ("agents_app.loop", "turn_calls", "step: turn's calls"),
    ("agents_app.loop", "_end_step", "step: model answer and run written"),
)


@dataclass
class _Frame:
    step: str
    wall: float
    cpu: float
    nested_wall: float = 0.0
    nested_cpu: float = 0.0


class Meter:
    """Exclusive wall time, CPU time and statements per step, for the steps currently on the stack."""

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])  # wall, cpu, stmts, stmt wall
        self.stack: list[_Frame] = []

    def wrap(self, function: Callable[..., Any], step: str) -> Callable[..., Any]:
        def measured(*args: Any, **kwargs: Any) -> Any:
            frame = _Frame(step, time.perf_counter(), time.process_time())
            self.stack.append(frame)
            try:
                return function(*args, **kwargs)
            finally:
                self.stack.pop()
                wall, cpu = time.perf_counter() - frame.wall, time.process_time() - frame.cpu
                totals = self.totals[step]
                totals[0] += wall - frame.nested_wall
                totals[1] += cpu - frame.nested_cpu
                if self.stack:
                    self.stack[-1].nested_wall += wall
                    self.stack[-1].nested_cpu += cpu

        return measured

    def statement(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            totals = self.totals[self.stack[-1].step if self.stack else "outside the steps"]
            totals[2] += 1
            totals[3] += time.perf_counter() - started


@contextmanager
def measured(meter: Meter) -> Iterator[None]:
    import importlib

    from django.db import connection

    originals = []
    for module_name, attribute, step in STEPS:
        module = importlib.import_module(module_name)
        original = getattr(module, attribute)
        originals.append((module, attribute, original))
        setattr(module, attribute, meter.wrap(original, step))
    try:
        with connection.execute_wrapper(meter.statement):
            yield
    finally:
        for module, attribute, original in originals:
            setattr(module, attribute, original)


def _row(name: str, totals: list[float], samples: int) -> dict[str, Any]:
    wall, cpu, statements, statement_wall = totals
    return {
        "step": name,
        "statements": round(statements / samples, 2),
        "wall_ms": round(wall * 1000 / samples, 3),
        "statement_wall_ms": round(statement_wall * 1000 / samples, 3),
        "cpu_ms": round(cpu * 1000 / samples, 3),
    }


def profile(samples: int) -> dict[str, Any]:
    from django.db import connection

    from agents_app.models import Agent, AgentRun, RunStatus
    from agents_app.services import run_start
    from approvals.models import ApprovalRequest
    from approvals.services import approval_approve
    from benchmarks.floor import raw_sql_approval, raw_sql_run_complete, raw_sql_worker_floor
    from benchmarks.run import _users
    from tests.testapp.tools import risky_effect

    requester, operator = _users()
    agent = Agent.objects.create(
        name="bench-approval-profile",
        script=[
            {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]},
            {"content": "done: {last_tool_result}"},
        ],
        tools=["risky_effect"],
    )

    def held(count: int) -> list[tuple[Any, Any]]:
        runs = [run_start(agent=agent, user=requester, input="go") for _ in range(count)]
        return [(run, ApprovalRequest.objects.get(call__run_id=run.pk)) for run in runs]

    for _, request in held(5):  # warm: the decider's caches, prepared statements, code paths
        approval_approve(request_id=request.pk, user=operator, comment="warm")
    governed, floor = held(samples), held(samples)
    meter = Meter()
    floor_steps = ("release", "claim", "tool", "outcome", "run completed")
    floor_statements: list[float] = [0.0] * len(floor_steps)
    position = [0]

    def timed(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            floor_statements[position[0] % len(floor_steps)] += time.perf_counter() - started
            position[0] += 1

    governed_wall = governed_cpu = floor_wall = floor_cpu = 0.0
    # Interleaved, one of each in turn, so that the machine's drift hits both alike.
    for (_, request), (floor_run, floor_request) in zip(governed, floor, strict=True):
        wall, cpu = time.perf_counter(), time.process_time()
        with measured(meter):
            approval_approve(request_id=request.pk, user=operator, comment="profile")
        governed_wall += time.perf_counter() - wall
        governed_cpu += time.process_time() - cpu
        wall, cpu = time.perf_counter(), time.process_time()
        with connection.execute_wrapper(timed):
            raw_sql_approval(
                floor_request.pk,
                floor_request.call_id,
                floor_request.arguments_hash,
                operator.pk,
                operator.get_username(),
                tool_name="risky_effect",
                tenant=floor_request.tenant,
            )
            if raw_sql_worker_floor(floor_request.call_id, risky_effect, "risky_effect", "acme"):
                raw_sql_run_complete(floor_run.pk, "done")
        floor_wall += time.perf_counter() - wall
        floor_cpu += time.process_time() - cpu
    completed = AgentRun.objects.filter(pk__in=[run.pk for run, _ in governed], status=RunStatus.COMPLETED).count()
    assert completed == samples, f"{completed} of {samples} runs completed"
    assert position[0] == samples * len(floor_steps), "the floor sent other statements than its five"
    order = [step for _, _, step in STEPS]
    return {
        "samples": samples,
        "governed": {
            "wall_ms": round(governed_wall * 1000 / samples, 3),
            "cpu_ms": round(governed_cpu * 1000 / samples, 3),
            "statements": round(sum(totals[2] for totals in meter.totals.values()) / samples, 2),
            "steps": [_row(name, meter.totals[name], samples) for name in order if name in meter.totals]
            + [_row(name, totals, samples) for name, totals in meter.totals.items() if name not in order],
        },
        "floor": {
            "wall_ms": round(floor_wall * 1000 / samples, 3),
            "cpu_ms": round(floor_cpu * 1000 / samples, 3),
            "statements": len(floor_steps),
            "steps": [
                {"step": name, "statements": 1, "statement_wall_ms": round(total * 1000 / samples, 3)}
                for name, total in zip(floor_steps, floor_statements, strict=True)
            ],
        },
        "governed_vs_floor_wall": round(governed_wall / floor_wall, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()
    import os

    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"  # the worker's part runs here, measured step by step
    load_at_start = load_average()
    services = configure(prefix=PREFIX)
    from django.db import connection

    try:
        result = profile(args.samples)
    finally:
        connection.close()
        services.close()
    result["load_average_at_start"] = load_at_start
    result["load_average_at_end"] = load_average()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
