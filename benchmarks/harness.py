"""Shared set-up for benchmark and fault-injection drivers: a database and a broker of their own, workers.

Everything runs on real services: PostgreSQL (a database named uniquely for this run, created at the
start and dropped at the end) and Redis (a private ``redis-server`` this run starts on a free
127.0.0.1 port and stops at the end, or ``BENCH_REDIS_URL`` when given), so two runs at once never
share a database, a broker or a queue. Settings are production-like: the test settings (the test
app's tools and baseline tasks exist in the driver and in the worker processes alike) with DEBUG
off and database connections reused by the driver and the workers (``DATABASE_CONN_MAX_AGE``, see
toolhub/celery.py).
"""

import os
import random
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

#: Seconds a process keeps its database connection: the value README "Production" recommends.
CONN_MAX_AGE = "60"


class PrivateRedis:
    """A ``redis-server`` of this run's own on a free 127.0.0.1 port: no persistence, killable at will."""

    def __init__(self) -> None:
        self.port = free_port()
        self.directory = tempfile.mkdtemp(prefix="toolhub-redis-")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> "PrivateRedis":
        server = shutil.which("redis-server")
        if server is None:
            sys.exit(
                "harness: redis-server is not installed; install it, or set BENCH_REDIS_URL to a Redis of your own."
            )
        self.process = subprocess.Popen(
            [server, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=self.directory,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"harness: redis-server on port {self.port} did not answer within {timeout} s")

    def kill(self) -> None:
        """SIGKILL the server: every connection drops and every message it held is gone."""
        if self.process and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


class Services:
    """This run's database and broker; ``close()`` stops the broker and drops the database."""

    def __init__(self, *, server: str, database: str, redis: PrivateRedis | None, broker_url: str) -> None:
        self.server, self.database, self.redis, self.broker_url = server, database, redis, broker_url

    @property
    def database_url(self) -> str:
        return f"{self.server}/{self.database}"

    def close(self, *, drop_database: bool = True) -> None:
        from django.db import connections

        connections.close_all()
        if self.redis is not None:
            self.redis.stop()
        if drop_database:
            _drop_database(self.server, self.database)


def unique_name(prefix: str) -> str:
    """``prefix`` plus this process and a random token: no two runs on one machine share it."""
    return f"{prefix}_{os.getpid()}_{secrets.token_hex(3)}"


def configure(*, prefix: str, broker_db: int = 0) -> Services:
    """Create this run's database and broker, point Django and Celery at them, set Django up and migrate."""
    sys.path.insert(0, str(ROOT))
    server = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
    database = unique_name(prefix)
    redis = None
    if os.environ.get("BENCH_REDIS_URL"):
        broker_url = f"{os.environ['BENCH_REDIS_URL']}/{broker_db}"
    else:
        redis = PrivateRedis().start()
        broker_url = f"{redis.url}/{broker_db}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    # DEBUG off as in production (so a key is required; this one only ever signs benchmark data).
    os.environ.pop("DJANGO_DEBUG", None)
    os.environ.setdefault("DJANGO_SECRET_KEY", "benchmarks-only-secret-key-never-used-in-production-0123456789")
    os.environ["DATABASE_URL"] = f"{server}/{database}"
    os.environ["DATABASE_CONN_MAX_AGE"] = CONN_MAX_AGE  # the driver and its workers (they inherit it)
    os.environ["CELERY_BROKER_URL"] = broker_url
    os.environ["CELERY_TASK_DEFAULT_QUEUE"] = database.replace("_", "-")
    _create_database(server, database)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    assert not settings.DEBUG, "benchmarks run with DEBUG off, as production does"
    call_command("migrate", verbosity=0)
    return Services(server=server, database=database, redis=redis, broker_url=broker_url)


def _create_database(server: str, database: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{database}"')


def _drop_database(server: str, database: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (other work on the machine skews absolute times)."""
    return [round(value, 2) for value in os.getloadavg()]


def percentile(values: Iterable[float], fraction: float) -> float:
    """The value below which ``fraction`` of the samples fall (nearest rank)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def interleaved(*operations: Callable[[], Any], rounds: int, shuffled: bool = False) -> list[list[float]]:
    """Time operations in turn, round after round, so drift on a noisy machine hits them all alike.

    ``shuffled``: each round in a new order (seeded, so runs repeat), so that work an operation leaves
    to background threads lands on each of the others alike instead of always on the one after it.
    """
    times: list[list[float]] = [[] for _ in operations]
    order = list(range(len(operations)))
    shuffle = random.Random(len(operations) * rounds).shuffle
    for _ in range(rounds):
        if shuffled:
            shuffle(order)
        for index in order:
            started = time.perf_counter()
            operations[index]()
            times[index].append(time.perf_counter() - started)
    return times
