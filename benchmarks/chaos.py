"""Fault injection over real services (``make chaos``): calls keep coming while everything breaks.

    python -m benchmarks.chaos --seconds 120 --seed 1

A stream of governed calls (non-idempotent ``record_effect`` and ``slow_effect``, idempotent
``slow_idempotent``, atomic ``atomic_effect``, high-risk ``risky_effect`` decided by a scripted
operator) runs against real ``celery -A toolhub worker`` processes while, at random, a pool process
or a whole worker is SIGKILLed (and restarted), the broker's Redis DB is flushed or its connections
are cut, the broker's Redis server itself is SIGKILLed and started again (losing every message it
held), the workers' PostgreSQL connections are terminated (``pg_terminate_backend``) in the middle of
their calls, and calls are delivered again. The sweeper runs every second, as Celery beat would run
it. Then the driver drains (sweeps until nothing is open), delivers every call once more, and checks
what the pipeline guarantees: every call settled exactly once (terminal, or ``needs_attention``)
through legal transitions only, side effects at most once per call (an atomic call's exactly when it
succeeded), nothing queued or running, the audit chain intact. It prints a summary, writes it to
``benchmarks/results/chaos.json`` and exits 1, loudly, on any violation.

Everything is the driver's own (set up by ``benchmarks.harness``), so two runs at once never meet: a
PostgreSQL database named for this run (``toolhub_chaos_<pid>_<token>`` on ``BENCH_POSTGRES_URL``,
dropped at the end unless an invariant failed), a private ``redis-server`` on a free 127.0.0.1 port
as the broker (the shared Redis is never touched; with ``BENCH_REDIS_URL`` that Redis is used instead,
its DB refused if it holds other queues, and the Redis-restart fault is skipped), and a queue. Workers
run with the test settings (the test tools live there), short leases, and their database connections
reused and named (``application_name``) so that the PostgreSQL fault finds them.
"""

import argparse
import itertools
import json
import os
import random
import signal
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.harness import ROOT, Services, configure

RESULT_FILE = ROOT / "benchmarks" / "results" / "chaos.json"

PREFIX = "toolhub_chaos"
#: The run's queue; ``_prepare_services`` names it after the run's database.
QUEUE = "toolhub-chaos"
BROKER_DB = 0
#: ``application_name`` of the workers' PostgreSQL connections (the driver's own are never terminated).
WORKER_APPLICATION_NAME = "toolhub-chaos-worker"
TENANT = "chaos"

#: Worker settings: a claimed call's lease is CALL_LEASE_SECONDS plus the tool's time limit, so a
#: dead worker's call is reconciled ~9 s later; the slow tools sleep well within the time limit.
LEASE_SECONDS = 3.0
TOOL_TIMEOUT_SECONDS = 6.0

TOOL_MIX = {"record_effect": 30, "slow_effect": 20, "slow_idempotent": 20, "atomic_effect": 15, "risky_effect": 15}
FAULT_MIX = {
    "pool_kill": 25,
    "worker_kill": 12,
    "broker_flush": 8,
    "redis_disconnect": 8,
    "redis_restart": 8,
    "pg_terminate": 14,
    "duplicate_delivery": 25,
}
#: Tools whose side effect rows are counted (one row per execution; the idempotent one per call id).
EFFECT_TOOLS = frozenset(TOOL_MIX)


@dataclass
class Invariant:
    """One checked guarantee: whether it held, and the first offending calls when it did not."""

    name: str
    ok: bool
    detail: str = ""
    examples: list[str] = field(default_factory=list)


def main(argv: list[str] | None = None) -> int:
    """Run the fault injection; return the exit status (1 when an invariant was violated)."""
    options = _options(argv)
    started = time.monotonic()
    services = _prepare_services(options)
    chaos = Chaos(options, services)
    ok = False
    try:
        try:
            chaos.start()
            chaos.inject(options.seconds)
            chaos.drain(options.drain_seconds)
            chaos.deliver_everything_again()
        finally:
            chaos.stop()
        invariants = check_invariants(chaos)
        summary = chaos.summary(invariants, total_seconds=time.monotonic() - started)
        ok = summary["ok"]
    finally:
        services.close(drop_database=ok)
        if not ok:
            print(f"chaos: database {services.database} kept for inspection (drop it when done)", flush=True)
    RESULT_FILE.parent.mkdir(parents=True, exist_ok=True)
    RESULT_FILE.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    _print_summary(summary)
    return 0 if summary["ok"] else 1


def _options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chaos", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="how long faults are injected (default 120)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the call stream and the fault schedule")
    parser.add_argument("--workers", type=int, default=3, help="Celery worker processes (default 3)")
    parser.add_argument("--concurrency", type=int, default=2, help="pool processes per worker (default 2)")
    parser.add_argument("--rate", type=float, default=5.0, help="calls requested per second (default 5)")
    parser.add_argument("--fault-every", type=float, default=2.0, help="mean seconds between faults (default 2)")
    parser.add_argument("--drain-seconds", type=float, default=180.0, help="longest wait for every call to settle")
    parser.add_argument(
        "--broker-db",
        type=int,
        default=int(os.environ.get("CHAOS_BROKER_DB", BROKER_DB)),
        help=f"broker Redis DB number, flushed again and again (default {BROKER_DB}, env CHAOS_BROKER_DB)",
    )
    return parser.parse_args(argv)


# --- services ----------------------------------------------------------------------------------------


def _prepare_services(options: argparse.Namespace) -> Services:
    """A database and a broker of this run's own (see ``benchmarks.harness``), with short leases; then Django."""
    global QUEUE
    os.environ.update(
        {
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "TOOLHUB_CALL_LEASE_SECONDS": str(LEASE_SECONDS),
            "TOOLHUB_DEFAULT_TOOL_TIMEOUT_SECONDS": str(TOOL_TIMEOUT_SECONDS),
        }
    )
    services = configure(prefix=PREFIX, broker_db=options.broker_db)
    QUEUE = os.environ["CELERY_TASK_DEFAULT_QUEUE"]
    _claim_broker_db(os.environ["CELERY_BROKER_URL"])
    return services


def _claim_broker_db(broker_url: str) -> None:
    """Flush the broker DB, unless it holds someone else's queues (it is flushed again and again)."""
    import redis

    client = redis.Redis.from_url(broker_url)
    foreign = sorted(
        key.decode(errors="replace")
        for key in client.scan_iter(count=1000)
        if b"toolhub" in key and QUEUE.encode() not in key
    )
    if foreign:
        sys.exit(
            f"chaos: Redis {broker_url} holds other queues ({', '.join(foreign[:5])}); it would flush them. "
            "Pick a free DB number with --broker-db or CHAOS_BROKER_DB."
        )
    client.flushdb()


# --- the run -----------------------------------------------------------------------------------------


class Chaos:
    """The driver: workers, the call stream, the scripted operator, the sweeper, and the faults."""

    def __init__(self, options: argparse.Namespace, services: Services) -> None:
        import redis

        self.options = options
        self.services = services
        self.call_rng = random.Random(options.seed)
        self.fault_rng = random.Random(options.seed + 1_000_003)
        # the duplicates' claim hints draw apart, so that a seed schedules the same faults with or without them
        self.hint_rng = random.Random(options.seed + 2_000_003)
        self.broker_url = os.environ["CELERY_BROKER_URL"]
        self.redis = redis.Redis.from_url(self.broker_url)
        self.broker_db = options.broker_db
        self.workers: list[Any] = []
        self.restarts: dict[int, threading.Thread] = {}
        self.lock = threading.Lock()
        self.worker_numbers = itertools.count(1)
        self.calls: dict[uuid.UUID, str] = {}
        self.faults: Counter[str] = Counter()
        self.fault_log: list[dict[str, Any]] = []
        self.duplicate_messages = 0
        self.sweeps: Counter[str] = Counter()
        self.decisions: Counter[str] = Counter()
        self.driver_errors: list[str] = []
        #: Trouble of the harness itself (a restarted worker that did not answer at once), not of toolhub.
        self.harness_notes: list[str] = []
        #: Workers that died by themselves during the faults and were restarted, as a supervisor would.
        self.supervisor_restarts: list[str] = []
        self.late_duplicates: dict[str, Any] = {}
        self.timings: dict[str, float] = {}
        self.drained = False
        self._t0 = time.monotonic()

    # set-up and tear-down

    def start(self) -> None:
        from django.contrib.auth.models import Permission, User

        from toolhub.authorization import CallPrincipal
        from toolhub.models import Tenant, TenantMembership

        tenant, _ = Tenant.objects.get_or_create(slug=TENANT, defaults={"name": "Chaos"})
        requester = User.objects.create_user("chaos-requester")
        TenantMembership.objects.create(user=requester, tenant=tenant)
        operator = User.objects.create_user("chaos-operator", is_staff=True)
        operator.user_permissions.add(Permission.objects.get(codename="decide_approvalrequest"))
        TenantMembership.objects.create(user=operator, tenant=tenant)  # operators decide in their own tenants only
        self.operator = User.objects.get(pk=operator.pk)  # a fresh instance: permissions are cached
        self.principal = CallPrincipal(user_id=requester.pk, username=requester.username, tenant=TENANT)
        started = time.monotonic()
        self.workers = [self._new_worker(slot).start(timeout=90) for slot in range(self.options.workers)]
        self.timings["workers_start_seconds"] = round(time.monotonic() - started, 2)
        print(
            f"chaos: {self.options.workers} workers x {self.options.concurrency} processes on queue {QUEUE}, "
            f"database {os.environ['DATABASE_URL']}, broker {self.broker_url}; seed {self.options.seed}",
            flush=True,
        )

    def _new_worker(self, slot: int) -> Any:
        from tests.integration.workers import Worker

        # Named connections (the PostgreSQL fault finds them), kept between tasks as in production.
        database_url = f"{self.services.database_url}?application_name={WORKER_APPLICATION_NAME}"
        return Worker(
            f"chaos{slot}x{next(self.worker_numbers)}", concurrency=self.options.concurrency, DATABASE_URL=database_url
        )

    def stop(self) -> None:
        """Stop every worker (and any still starting); never leave processes behind."""
        for thread in list(self.restarts.values()):
            thread.join(timeout=120)
        for worker in self.workers:
            try:
                worker.stop()
            except Exception:  # noqa: BLE001 - a worker that will not stop is killed
                worker.kill()

    # the fault window

    def inject(self, seconds: float) -> None:
        """Stream calls, decide approvals, sweep, and inject faults until ``seconds`` have passed."""
        print(f"chaos: injecting faults for {seconds:g} s", flush=True)
        started = self._t0 = time.monotonic()
        end = started + seconds
        now = started
        next_call = next_operator = next_sweep = now
        next_fault = now + self.fault_rng.expovariate(1.0 / self.options.fault_every)
        next_report = now + 10
        while now < end:
            if now >= next_call:
                self.request_call()
                next_call = now + self.call_rng.expovariate(self.options.rate)
            if now >= next_operator:
                self.decide_approvals(min_age_seconds=0.5)
                next_operator = now + 0.5
            if now >= next_sweep:
                self.sweep(redispatch_after=10.0)
                self.supervise()
                next_sweep = now + 1.0
            if now >= next_fault:
                self.inject_fault()
                next_fault = now + self.fault_rng.expovariate(1.0 / self.options.fault_every)
            if now >= next_report:
                print(f"  {now - started:5.0f} s: {len(self.calls)} calls, faults {dict(self.faults)}", flush=True)
                next_report = now + 10
            now = time.monotonic()
            time.sleep(max(0.0, min(next_call, next_operator, next_sweep, next_fault, end) - now))
            now = time.monotonic()
        self.timings["fault_seconds"] = round(time.monotonic() - started, 2)

    def request_call(self, tool_name: str | None = None) -> uuid.UUID | None:
        """Ask for one governed call, as the API would; the pipeline dispatches it after the commit."""
        from toolhub.pipeline import CallRequest, tool_call_request
        from toolhub.tools.context import ToolContext

        rng = self.call_rng
        tool_name = tool_name or rng.choices(list(TOOL_MIX), weights=list(TOOL_MIX.values()))[0]
        if tool_name in ("slow_effect", "slow_idempotent"):
            arguments: dict[str, Any] = {"seconds": round(rng.uniform(0.2, 1.5), 2)}
        elif tool_name == "atomic_effect":
            # writes its effect, then works on within its 1 s limit: a kill lands after the write, before the commit
            arguments = {"note": f"chaos {len(self.calls)}", "work_seconds": round(rng.uniform(0.1, 0.7), 2)}
        else:
            arguments = {"note": f"chaos {len(self.calls)}"}
        request = CallRequest(
            tool_name=tool_name, arguments=arguments, principal=self.principal, context=ToolContext(tenant=TENANT)
        )
        try:
            call = tool_call_request(request=request)
        except Exception as exc:  # noqa: BLE001 - a request that raises is a finding, not a crash of the driver
            self.driver_errors.append(f"tool_call_request({tool_name}) raised {type(exc).__name__}: {exc}")
            return None
        self.calls[call.id] = tool_name
        return call.id

    def decide_approvals(self, *, min_age_seconds: float) -> None:
        """The scripted operator: approve held-back calls after a moment, reject about one in ten."""
        from datetime import timedelta

        from django.utils import timezone

        from approvals.models import ApprovalRequest, ApprovalStatus
        from approvals.services import approval_approve, approval_reject
        from toolhub.exceptions import AlreadyDecidedError

        cutoff = timezone.now() - timedelta(seconds=min_age_seconds)
        pending = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING, created_at__lte=cutoff)
        for request_id in list(pending.order_by("pk").values_list("pk", flat=True)[:100]):
            reject = self.call_rng.random() < 0.1
            try:
                if reject:
                    approval_reject(request_id=request_id, user=self.operator, comment="chaos: rejected")
                else:
                    approval_approve(request_id=request_id, user=self.operator, comment="chaos: approved")
                self.decisions["rejected" if reject else "approved"] += 1
            except AlreadyDecidedError:
                self.decisions["already decided"] += 1
            except Exception as exc:  # noqa: BLE001
                self.driver_errors.append(f"deciding approval {request_id} raised {type(exc).__name__}: {exc}")

    def sweep(self, *, redispatch_after: float) -> None:
        """What Celery beat runs: re-dispatch queued calls whose message was lost, reconcile expired leases."""
        from toolhub.sweeper import calls_reconcile_expired_leases, calls_redispatch_stale

        try:
            self.sweeps["redispatched"] += calls_redispatch_stale(older_than_seconds=redispatch_after)
            self.sweeps.update(calls_reconcile_expired_leases())
        except Exception as exc:  # noqa: BLE001
            self.driver_errors.append(f"the sweeper raised {type(exc).__name__}: {exc}")

    # faults

    def inject_fault(self) -> None:
        kind = self.fault_rng.choices(list(FAULT_MIX), weights=list(FAULT_MIX.values()))[0]
        detail = getattr(self, f"_fault_{kind}")()
        if detail is None:
            return  # nothing to act on right now (e.g. every worker is restarting)
        self.faults[kind] += 1
        self.fault_log.append({"at": round(time.monotonic() - self._t0, 2), "kind": kind, "detail": detail})

    def supervise(self) -> None:
        """Restart a worker that exited by itself, as a process supervisor (systemd, Kubernetes) would.

        Celery 5.7 / kombu can die on a broker restart ("Unrecoverable error" while restoring unacknowledged
        messages to a server that is gone); production runs workers under a supervisor that restarts them.
        """
        with self.lock:
            exited = [
                (slot, worker)
                for slot, worker in enumerate(self.workers)
                if slot not in self.restarts and worker.process is not None and worker.process.poll() is not None
            ]
        for slot, worker in exited:
            self.supervisor_restarts.append(
                f"{worker.name} exited by itself (status {worker.process.returncode}); restarting slot {slot}"
            )
            self._restart(slot)

    def _live_slots(self) -> list[int]:
        with self.lock:
            return [
                slot
                for slot, worker in enumerate(self.workers)
                if slot not in self.restarts and worker.process is not None and worker.process.poll() is None
            ]

    def _fault_pool_kill(self) -> str | None:
        """SIGKILL one pool process, preferably one running a call: its message is redelivered, not rerun."""
        slots = self._live_slots()
        if not slots:
            return None
        busy = self._busy_pool_processes(slots)
        if busy and self.fault_rng.random() < 0.8:
            slot, pid, what = self.fault_rng.choice(busy)
        else:
            slot = self.fault_rng.choice(slots)
            children = self.workers[slot].child_pids()
            if not children:
                return None
            pid, what = self.fault_rng.choice(children), "idle or unknown"
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return None
        return f"{self.workers[slot].name}: pool process {pid} ({what})"

    def _busy_pool_processes(self, slots: list[int]) -> list[tuple[int, int, str]]:
        """(slot, pool pid, call) for each call the live workers run now, as their remote control says."""
        from toolhub.celery import app as celery_app

        by_host = {f"{self.workers[slot].name}@{os.uname().nodename}": slot for slot in slots}
        try:
            active = celery_app.control.inspect(destination=list(by_host), timeout=0.5).active() or {}
        except Exception:  # noqa: BLE001 - a broker just flushed or cut may not answer
            return []
        busy = []
        for host, tasks in sorted(active.items()):
            for task in tasks:
                if task.get("worker_pid") and host in by_host:
                    busy.append((by_host[host], int(task["worker_pid"]), f"running call {task.get('args')}"))
        return busy

    def _fault_worker_kill(self) -> str | None:
        """SIGKILL a whole worker (main process and pool) and start another in its place."""
        slots = self._live_slots()
        if len(slots) < 1:
            return None
        slot = self.fault_rng.choice(slots)
        worker = self.workers[slot]
        worker.kill()
        self._restart(slot)
        return f"{worker.name} killed; restarting slot {slot}"

    def _restart(self, slot: int) -> None:
        def start() -> None:
            for attempt in range(1, 6):
                replacement = self._new_worker(slot)
                try:
                    replacement.start(timeout=90)
                    break
                except Exception as exc:  # noqa: BLE001 - e.g. its ping was cut by a Redis fault
                    replacement.kill()
                    self.harness_notes.append(f"restarting worker slot {slot}, attempt {attempt}, failed: {exc}")
                    time.sleep(attempt)  # a restarting broker answers again within seconds
            with self.lock:
                self.workers[slot] = replacement
                self.restarts.pop(slot, None)

        thread = threading.Thread(target=start, name=f"restart-{slot}", daemon=True)
        with self.lock:
            self.restarts[slot] = thread
        thread.start()

    def _fault_broker_flush(self) -> str:
        """A burst of calls, then FLUSHDB on the broker's DB: the messages waiting in Redis are lost."""
        burst = self.fault_rng.randint(4, 10)
        for _ in range(burst):
            self.request_call(tool_name=self.fault_rng.choice(["slow_effect", "slow_idempotent", "record_effect"]))
        lost = self._queued()
        self.redis.flushdb()
        return f"flushed Redis DB {self.broker_db} after a burst of {burst} calls ({lost} queued messages lost)"

    def _fault_redis_disconnect(self) -> str:
        """Cut every connection to the broker DB (as a Redis restart does); clients must reconnect."""
        own = self.redis.client_id()
        clients = [c for c in self.redis.client_list() if str(c.get("db")) == str(self.broker_db)]
        cut = 0
        for client in clients:
            if str(client["id"]) != str(own):
                cut += self.redis.client_kill_filter(_id=client["id"])
        return f"cut {cut} connections to Redis DB {self.broker_db}"

    def _fault_redis_restart(self) -> str | None:
        """SIGKILL the broker's redis-server and start it again: every connection drops, every message is lost.

        Queued messages and the ones workers had taken but not acknowledged are gone with it; workers and
        the driver must reconnect, and the sweeper must find the calls whose messages were lost.
        """
        server = self.services.redis
        if server is None:
            return None  # a Redis of the operator's own (BENCH_REDIS_URL) is never killed
        burst = self.fault_rng.randint(3, 8)
        for _ in range(burst):
            self.request_call(tool_name=self.fault_rng.choice(["slow_effect", "slow_idempotent", "record_effect"]))
        lost = self._queued() + self._unacked()
        server.kill()
        down = round(self.fault_rng.uniform(0.2, 2.0), 2)
        time.sleep(down)
        server.start()
        return (
            f"redis-server on port {server.port} SIGKILLed after a burst of {burst} calls, down {down} s, started "
            f"again ({lost} queued or unacknowledged messages lost)"
        )

    def _fault_pg_terminate(self) -> str | None:
        """Terminate the workers' PostgreSQL connections, preferring those inside a statement or a transaction."""
        from django.db import connection

        from toolhub.models import CallStatus, ToolCall

        # Mid-call: wait (briefly) until a call is running, so its outcome is written on a dead connection.
        if not ToolCall.objects.filter(status=CallStatus.RUNNING).exists():
            self.request_call(tool_name=self.fault_rng.choice(["slow_effect", "slow_idempotent", "atomic_effect"]))
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline and not ToolCall.objects.filter(status=CallStatus.RUNNING).exists():
                time.sleep(0.05)
        running = ToolCall.objects.filter(status=CallStatus.RUNNING).count()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid, state FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
                [WORKER_APPLICATION_NAME],
            )
            backends = cursor.fetchall()
            if not backends:
                return None
            busy = [pid for pid, state in backends if state in ("active", "idle in transaction")]
            if busy and self.fault_rng.random() < 0.7:
                targets = busy
            else:
                targets = [pid for pid, _ in backends]
            terminated = 0
            for pid in targets:
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
                terminated += bool(cursor.fetchone()[0])
        return (
            f"terminated {terminated} of {len(backends)} worker connections ({len(busy)} inside a statement or "
            f"transaction) while {running} calls were running"
        )

    def _queued(self) -> int:
        """Messages waiting in the run's queue (0 when the broker does not answer, e.g. right after a restart)."""
        import redis

        try:
            return self.redis.llen(QUEUE)
        except redis.RedisError:
            return 0

    def _unacked(self) -> int:
        """Messages workers have taken but not acknowledged (kombu's Redis transport keeps them in a hash)."""
        import redis

        try:
            return self.redis.hlen("unacked")
        except redis.RedisError:
            return 0

    def _fault_duplicate_delivery(self) -> str | None:
        """Deliver calls again: some already settled or running, and a fresh one three times at once."""
        from toolhub.models import CallStatus, ToolCall
        from toolhub.tasks import execute_tool_call_task

        rng = self.fault_rng
        delivered = CallStatus.QUEUED, CallStatus.RUNNING, CallStatus.SUCCEEDED, CallStatus.FAILED
        recent = list(
            ToolCall.objects.filter(status__in=[*delivered, CallStatus.NEEDS_ATTENTION])
            .order_by("-created_at")
            .values_list("id", flat=True)[:200]
        )
        targets = rng.sample(recent, min(len(recent), rng.randint(1, 6)))
        fresh = self.request_call(tool_name=rng.choice(["record_effect", "slow_effect"]))
        if fresh is not None:
            targets += [fresh, fresh]
        for call_id in targets:
            execute_tool_call_task.delay(str(call_id), hint=self._some_hint(call_id))
        self.duplicate_messages += len(targets)
        return f"{len(targets)} extra deliveries" + (f" (2 of fresh call {fresh})" if fresh else "")

    def _some_hint(self, call_id: Any) -> list[Any] | None:
        """A duplicate's claim hint, as messages carry them: none, the call as it is now, or as first queued."""
        from toolhub.claims import ClaimHint
        from toolhub.models import ToolCall

        choice = self.hint_rng.randrange(3)
        call = ToolCall.objects.filter(pk=call_id).only("tool_name", "tenant", "run_id", "attempts").first()
        if choice == 0 or call is None:
            return None
        return ClaimHint(call.tool_name, call.tenant, call.run_id, call.attempts if choice == 1 else 0).message()

    # the end

    def drain(self, timeout: float) -> None:
        """Restore the workers, then decide and sweep until no call is open (or ``timeout`` passes)."""
        from toolhub.models import SETTLED_STATUSES, ToolCall

        started = time.monotonic()
        for thread in list(self.restarts.values()):
            thread.join(timeout=120)
        for slot, worker in enumerate(self.workers):
            if worker.process is None or worker.process.poll() is not None:
                self.workers[slot] = self._new_worker(slot).start(timeout=90)
        print(f"chaos: draining ({ToolCall.objects.exclude(status__in=SETTLED_STATUSES).count()} calls open)")
        deadline = started + timeout
        while True:
            self.decide_approvals(min_age_seconds=0)
            self.sweep(redispatch_after=2.0)
            if not ToolCall.objects.exclude(status__in=SETTLED_STATUSES).exists():
                self.drained = True
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.timings["drain_seconds"] = round(time.monotonic() - started, 2)

    def deliver_everything_again(self) -> None:
        """Send every call's message once more, late: nothing may change (no run, no event, no effect)."""
        from tests.testapp.models import SideEffect
        from toolhub.models import AuditEvent, ToolCall
        from toolhub.tasks import execute_tool_call_task

        statuses = dict(ToolCall.objects.values_list("id", "status"))
        effects = SideEffect.objects.count()
        events = AuditEvent.objects.count()
        for call_id in statuses:
            execute_tool_call_task.delay(str(call_id), hint=self._some_hint(call_id))
        deadline = time.monotonic() + 120
        while self._queued() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3.0)  # the last messages taken from the queue finish
        changed = [
            f"{call_id}: {before} -> {after}"
            for call_id, after in ToolCall.objects.values_list("id", "status")
            if (before := statuses.get(call_id)) != after
        ]
        self.late_duplicates = {
            "messages": len(statuses),
            "left_in_queue": self._queued(),
            "status_changes": changed,
            "new_side_effects": SideEffect.objects.count() - effects,
            "new_audit_events": AuditEvent.objects.count() - events,
        }
        self.duplicate_messages += len(statuses)

    def summary(self, invariants: list[Invariant], *, total_seconds: float) -> dict[str, Any]:
        from tests.testapp.models import SideEffect
        from toolhub.models import AuditEvent, ToolCall

        by_status = Counter(ToolCall.objects.values_list("status", flat=True))
        late = self.late_duplicates
        return {
            "ok": all(invariant.ok for invariant in invariants),
            "seed": self.options.seed,
            "fault_seconds_requested": self.options.seconds,
            "workers": self.options.workers,
            "concurrency": self.options.concurrency,
            "rate_per_second": self.options.rate,
            "lease_seconds": LEASE_SECONDS + TOOL_TIMEOUT_SECONDS,
            "calls": len(self.calls),
            "calls_by_tool": dict(Counter(self.calls.values())),
            "calls_by_status": dict(sorted(by_status.items())),
            "side_effects": SideEffect.objects.count(),
            "audit_events": AuditEvent.objects.count(),
            "faults": dict(sorted(self.faults.items())),
            "duplicate_messages": self.duplicate_messages,
            "sweeper": dict(self.sweeps),
            "operator_decisions": dict(self.decisions),
            "drained": self.drained,
            "late_duplicates": {**late, "status_changes": late.get("status_changes", [])[:10]},
            "worker_log_errors": _worker_log_errors(),
            "harness_notes": self.harness_notes,
            "supervisor_restarts": self.supervisor_restarts,
            "timings": {**self.timings, "total_seconds": round(total_seconds, 2)},
            "invariants": [asdict(invariant) for invariant in invariants],
            "fault_log": self.fault_log,
        }


# --- invariants --------------------------------------------------------------------------------------


def _legal_transitions() -> dict[str | None, set[str]]:
    """Every move a call's status may make (``None``: the first status, when the call is recorded)."""
    from toolhub.models import CallStatus as S

    return {
        None: {S.INVALID, S.DENIED, S.PENDING_APPROVAL, S.QUEUED, S.AWAITING_RESULT, S.SUCCEEDED},
        S.PENDING_APPROVAL: {S.QUEUED, S.AWAITING_RESULT, S.REJECTED, S.EXPIRED, S.CANCELLED},
        S.QUEUED: {S.RUNNING},
        # finished; refused at execution; reconciled (unknown outcome, or an idempotent retry); tool changed
        S.RUNNING: {S.SUCCEEDED, S.FAILED, S.DENIED, S.NEEDS_ATTENTION, S.QUEUED, S.PENDING_APPROVAL},
        S.AWAITING_RESULT: {S.SUCCEEDED, S.FAILED},
    }


def check_invariants(chaos: Chaos) -> list[Invariant]:
    """Check what the pipeline guarantees, from the database's own rows and the audit trail."""
    from django.utils import timezone

    from tests.testapp.models import SideEffect
    from toolhub.audit_verify import verify_audit_chains
    from toolhub.models import SETTLED_STATUSES, AuditEvent, CallStatus, ToolCall

    calls = {row[0]: row[1:] for row in ToolCall.objects.values_list("id", "tool_name", "status", "lease_expires_at")}
    events: dict[uuid.UUID, list[tuple[str, str]]] = defaultdict(list)
    trails = AuditEvent.objects.filter(call_id__isnull=False).order_by("chain", "seq")
    for call_id, event_type, status in trails.values_list("call_id", "event_type", "status"):
        events[call_id].append((event_type, status))
    legal = _legal_transitions()

    unsettled, not_once, illegal, ever_ran = [], [], [], set()
    for call_id, (tool_name, status, _lease) in calls.items():
        if status not in SETTLED_STATUSES:
            unsettled.append(f"{call_id} {tool_name}: {status}")
        trail = events.get(call_id, [])
        requested = [i for i, (event_type, _) in enumerate(trail) if event_type == "call.requested"]
        moves = [(kind, to) for kind, to in trail if kind.startswith("call.") and kind != "call.requested"]
        settled_moves = [to for _, to in moves if to in SETTLED_STATUSES]
        if requested != [0] or len(settled_moves) != 1 or not moves or moves[-1][1] != status:
            not_once.append(
                f"{call_id} {tool_name} [{status}]: requested at {requested}, settled {len(settled_moves)} times "
                f"({', '.join(settled_moves)}), last move {moves[-1][1] if moves else None}"
            )
        previous: str | None = None
        for event_type, to in moves:
            if event_type != f"call.{to}" or to not in legal.get(previous, set()):
                illegal.append(f"{call_id} {tool_name}: {previous} -> {to} ({event_type})")
            if to == CallStatus.RUNNING:
                ever_ran.add(call_id)
            previous = to

    effects = Counter(SideEffect.objects.values_list("call_id", "tool"))
    per_call: Counter[str] = Counter()
    effect_problems = []
    for (call_id, tool_name), count in effects.items():
        per_call[call_id] += count
        known = calls.get(_uuid(call_id))
        if known is None:
            effect_problems.append(f"{count} side effect(s) of {tool_name} for unknown call {call_id!r}")
        elif known[0] != tool_name:
            effect_problems.append(f"{call_id}: a side effect of {tool_name} for a call of {known[0]}")
        elif _uuid(call_id) not in ever_ran:
            effect_problems.append(f"{call_id} {tool_name}: a side effect, but the call never ran ({known[1]})")
    twice = [f"{call_id}: {count} side effects" for call_id, count in per_call.items() if count > 1]
    lost = [
        f"{call_id} {tool_name}: succeeded without its side effect"
        for call_id, (tool_name, status, _lease) in calls.items()
        if status == CallStatus.SUCCEEDED and tool_name in EFFECT_TOOLS and per_call[str(call_id)] == 0
    ]

    # An atomic tool's effect commits with its outcome: one exactly when it succeeded, none otherwise.
    atomic = [
        f"{call_id}: atomic call {status} with {per_call[str(call_id)]} side effect(s)"
        for call_id, (tool_name, status, _lease) in calls.items()
        if tool_name == "atomic_effect" and per_call[str(call_id)] != (1 if status == CallStatus.SUCCEEDED else 0)
    ]

    now = timezone.now()
    open_ = [
        f"{call_id} {tool_name}: {status}"
        + (f", lease expired {(now - lease).total_seconds():.0f} s ago" if lease and lease < now else "")
        for call_id, (tool_name, status, lease) in calls.items()
        if status in (CallStatus.QUEUED, CallStatus.RUNNING)
    ]
    checked, problems = verify_audit_chains()
    late = chaos.late_duplicates
    late_changes = late.get("status_changes", []) + [
        f"{late.get(key)} {key.replace('_', ' ')}" for key in ("new_side_effects", "new_audit_events") if late.get(key)
    ]
    never_recorded = [f"{call_id} {tool_name}" for call_id, tool_name in chaos.calls.items() if call_id not in calls]

    return [
        _invariant("every call requested was recorded", never_recorded, f"{len(chaos.calls)} calls requested"),
        _invariant("every call settled (a terminal status or needs_attention)", unsettled, f"{len(calls)} calls"),
        _invariant("every call settled exactly once, and its row agrees with its trail", not_once),
        _invariant("every status transition is a legal one", illegal, f"{sum(len(m) for m in events.values())} events"),
        _invariant("side effects at most once per call", twice + effect_problems, f"{sum(per_call.values())} effects"),
        _invariant("no succeeded call lost its side effect", lost),
        _invariant("an atomic call has its side effect exactly when it succeeded", atomic),
        _invariant("nothing left queued or running (past its lease or not)", open_),
        _invariant("the audit chains verify", [str(problem) for problem in problems], f"{checked} events checked"),
        _invariant("late duplicate deliveries change nothing", late_changes, f"{late.get('messages', 0)} messages"),
        _invariant("no request, decision or sweep raised", chaos.driver_errors),
    ]


def _invariant(name: str, violations: list[str], detail: str = "") -> Invariant:
    if violations:
        detail = f"{len(violations)} violation(s)" + (f" among {detail}" if detail else "")
    return Invariant(name=name, ok=not violations, detail=detail, examples=violations[:10])


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def _worker_log_errors() -> dict[str, Any]:
    """Tasks that raised in the workers (expected: WorkerLostError from killed pool processes only)."""
    from tests.integration.workers import LOG_DIR

    counts: Counter[str] = Counter()
    samples: list[str] = []
    for log in sorted(LOG_DIR.glob(f"worker-chaos*-{os.getpid()}.log")):
        for line in log.read_text(errors="replace").splitlines():
            if "raised unexpected" not in line and "Unrecoverable error" not in line:
                continue
            kind = "WorkerLostError" if "WorkerLostError" in line else "other"
            counts[kind] += 1
            if kind == "other" and len(samples) < 5:
                samples.append(f"{log.name}: {line[:300]}")
    return {"counts": dict(counts), "samples": samples}


def _print_summary(summary: dict[str, Any]) -> None:
    timings = summary["timings"]
    print()
    print(
        f"chaos summary (seed {summary['seed']}, {timings.get('fault_seconds', 0):g} s of faults, "
        f"drain {timings.get('drain_seconds', 0):g} s, total {timings['total_seconds']:g} s)"
    )
    print(f"  calls      {summary['calls']}  by tool {summary['calls_by_tool']}")
    print(f"  statuses   {summary['calls_by_status']}")
    print(f"  faults     {summary['faults']}  (+{summary['duplicate_messages']} duplicate messages in all)")
    print(f"  sweeper    {summary['sweeper']}")
    print(f"  operator   {summary['operator_decisions']}")
    print(f"  effects    {summary['side_effects']} side effects, {summary['audit_events']} audit events")
    print(f"  worker log {summary['worker_log_errors']['counts']}  {summary['worker_log_errors']['samples']}")
    for note in summary["supervisor_restarts"]:
        print(f"  supervisor {note}")
    for note in summary["harness_notes"]:
        print(f"  harness    {note}")
    print("  invariants")
    for invariant in summary["invariants"]:
        mark = "PASS" if invariant["ok"] else "FAIL"
        print(f"    {mark}  {invariant['name']}" + (f"  ({invariant['detail']})" if invariant["detail"] else ""))
        for example in invariant["examples"]:
            print(f"            {example}")
    print(f"  written to {RESULT_FILE.relative_to(ROOT)}")
    if not summary["ok"]:
        failed = [invariant["name"] for invariant in summary["invariants"] if not invariant["ok"]]
        banner = "!" * 100
        print(f"\n{banner}\nCHAOS FAILED: {len(failed)} invariant(s) violated: {'; '.join(failed)}\n{banner}")


if __name__ == "__main__":
    sys.exit(main())
