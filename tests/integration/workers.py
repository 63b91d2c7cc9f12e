"""Real Celery worker processes for integration tests, pointed at the test database."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from django.db import connection

from toolhub.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[2]
LOG_DIR = ROOT / "test-artifacts"


def test_database_url() -> str:
    """The URL of the database pytest-django created, for processes outside this one."""
    settings = connection.settings_dict
    user = settings.get("USER") or "postgres"
    password = f":{settings['PASSWORD']}" if settings.get("PASSWORD") else ""
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{settings['NAME']}"


# The URL workers connect with when the session set up the application role (see conftest.py); the
# pytest process itself stays the owner that created and migrated the test database.
_worker_database_url: str | None = None


def app_database_url(role: str, password: str) -> str:
    """The test database's URL for the application role instead of the owner."""
    settings = connection.settings_dict
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or 5432
    return f"postgres://{role}:{quote(password, safe='')}@{host}:{port}/{settings['NAME']}"


def use_worker_database_url(url: str | None) -> None:
    """Make every worker started from now on connect with ``url`` (None: as the owner, like this process)."""
    global _worker_database_url
    _worker_database_url = url


def worker_environment(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": _worker_database_url or test_database_url(),
            "CELERY_BROKER_URL": os.environ["CELERY_BROKER_URL"],
            "CELERY_TASK_ALWAYS_EAGER": "false",
            # the queue this test process sends to; a worker must not invent its own
            "CELERY_TASK_DEFAULT_QUEUE": celery_app.conf.task_default_queue,
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


class Worker:
    """One ``celery -A toolhub worker`` process (prefork), started and stopped by tests."""

    def __init__(self, name: str, concurrency: int = 2, **env: str) -> None:
        # Unique per test process: workers of concurrent runs never answer each other's pings.
        self.name = f"{name}-{os.getpid()}"
        self.concurrency = concurrency
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> "Worker":
        LOG_DIR.mkdir(exist_ok=True)
        log = open(LOG_DIR / f"worker-{self.name}.log", "ab")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "toolhub",
                "worker",
                "--pool=prefork",
                f"--concurrency={self.concurrency}",
                f"--hostname={self.name}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel=INFO",
            ],
            cwd=ROOT,
            env=worker_environment(**self.env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited at start; see {LOG_DIR}/worker-{self.name}.log")
            replies = celery_app.control.ping(destination=[f"{self.name}@{os.uname().nodename}"], timeout=0.5)
            if replies:
                return self
        raise RuntimeError(f"worker {self.name} did not answer a ping within {timeout}s")

    def child_pids(self) -> list[int]:
        """The pool processes that execute tasks (children of the main worker process)."""
        assert self.process is not None
        out = subprocess.run(["pgrep", "-P", str(self.process.pid)], capture_output=True, text=True)
        return [int(pid) for pid in out.stdout.split()]

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Wait until the queue is empty and this worker runs and holds no task.

        A test's leftovers (a sweep it queued, a retry) must not run during the next test, nor while the
        test database is flushed: a transaction of the worker and the flush's TRUNCATE can deadlock.
        """
        destination = [f"{self.name}@{os.uname().nodename}"]
        queue = celery_app.conf.task_default_queue

        def idle() -> bool:
            with celery_app.connection_for_write() as conn:
                waiting = conn.default_channel.client.llen(queue)
            if waiting:
                return False
            inspect = celery_app.control.inspect(destination=destination, timeout=1.0)
            active, reserved = inspect.active(), inspect.reserved()
            if active is None or reserved is None:  # no reply: not known to be idle
                return False
            return not any(active.values()) and not any(reserved.values())

        wait_for(idle, timeout=timeout, interval=0.2, what=f"worker {self.name} idle with an empty queue")

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool) with no chance to clean up."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for(
    predicate: Callable[[], object], *, timeout: float = 30.0, interval: float = 0.1, what: str = ""
) -> object:
    """Poll until ``predicate()`` is truthy; fail with ``what`` if it never is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")


def purge_queue() -> None:
    """Drop messages left in the broker by an earlier run, so tests start from an empty queue."""
    celery_app.control.purge()
