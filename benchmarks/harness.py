"""Shared set-up for benchmark and fault-injection drivers: a fresh database, a broker DB, workers.

Everything runs on the machine's real services: PostgreSQL (a database of the driver's own, dropped
and created anew) and Redis (a DB number and queue of the driver's own), with the test settings so
the test app's tools and baseline tasks exist in the driver and in the worker processes alike.
"""

import os
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def configure(*, database: str, broker_db: int, queue: str) -> None:
    """Point Django and Celery at a database and broker DB of this driver's own, then set Django up."""
    sys.path.insert(0, str(ROOT))
    server = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
    redis = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379")
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    # DEBUG is off here as in production, so a key is required; this one only ever signs benchmark data.
    os.environ.setdefault("DJANGO_SECRET_KEY", "benchmarks-only-secret-key-never-used-in-production-0123456789")
    os.environ["DATABASE_URL"] = f"{server}/{database}"
    os.environ["CELERY_BROKER_URL"] = f"{redis}/{broker_db}"
    os.environ["CELERY_TASK_DEFAULT_QUEUE"] = queue
    _recreate_database(server, database)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _recreate_database(server: str, database: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{database}"')


def percentile(values: Iterable[float], fraction: float) -> float:
    """The value below which ``fraction`` of the samples fall (nearest rank)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def interleaved(first: Callable[[], Any], second: Callable[[], Any], rounds: int) -> tuple[list[float], list[float]]:
    """Time two operations alternately, so drift on a noisy machine hits both alike."""
    import time

    times_first, times_second = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        first()
        times_first.append(time.perf_counter() - started)
        started = time.perf_counter()
        second()
        times_second.append(time.perf_counter() - started)
    return times_first, times_second
