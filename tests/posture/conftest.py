"""Fixtures of the production-posture tests: a superuser client, row counts, and clean subprocess environments."""

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from rest_framework.test import APIClient

from agents_app.models import Agent, AgentRun
from approvals.models import ApprovalDecision, ApprovalRequest
from toolhub.models import AuditEvent, ToolCall

ROOT = Path(__file__).resolve().parents[2]


def documented_production_env() -> dict[str, str]:
    """The environment the README's "Production" section tells operators to set, with a key filled in."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Production\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    env = {}
    for line in block.splitlines():
        name, _, value = line.split("#", 1)[0].strip().partition("=")
        if name:
            env[name] = value
    assert env.get("DJANGO_SECRET_KEY") == "...", "the README's key is a placeholder this test fills in"
    env["DJANGO_SECRET_KEY"] = "Q8v2nR5tW1yZ4bE7hK0mP3sU6xA9cF2jL5oT8wB1eH4kN7qS0vY3zC6gI9lM2pR5"
    assert env.get("TOOLHUB_AUDIT_KEY") == "...", "the README's audit key is a placeholder this test fills in"
    env["TOOLHUB_AUDIT_KEY"] = "u7Kx2Qp9Lm4Wz8Rt1Yb6Nc3Vd0Hg5Jf2Se9Aq4Xo7Ti1Ul"
    return env


#: What a production server is given (services are not reached by the checks the tests run).
PRODUCTION_ENV = documented_production_env()

RunDjango = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_django(tmp_path: Path) -> RunDjango:
    """Run ``python <args>`` in the project with ``toolhub.settings`` and only the environment given.

    The test process's own ``DJANGO_*`` variables (tests/settings.py sets a key) are left out, so the
    child sees what a freshly deployed server sees.
    """

    def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        clean = {name: value for name, value in os.environ.items() if not name.startswith(("DJANGO_", "TOOLHUB_"))}
        clean.update(
            {
                "DJANGO_SETTINGS_MODULE": "toolhub.settings",
                "DATABASE_URL": f"sqlite:///{tmp_path / 'posture.sqlite3'}",
                "CELERY_BROKER_URL": "",
                "PYTHONPATH": str(ROOT),
            }
        )
        clean.update(env)
        return subprocess.run([sys.executable, *args], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120)

    return run


@pytest.fixture
def superuser(db: None) -> User:
    return User.objects.create_superuser("root", "root@example.com", "Root-password-7c1e")


@pytest.fixture
def superuser_client(superuser: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(superuser)
    return client


@pytest.fixture
def row_counts(db: None) -> Callable[[], dict[str, int]]:
    """How many rows the tables a request could write hold now."""

    def counts() -> dict[str, int]:
        models = (ToolCall, AuditEvent, AgentRun, Agent, ApprovalRequest, ApprovalDecision)
        return {model.__name__: model.objects.count() for model in models}

    return counts


@pytest.fixture
def empty_throttle_cache() -> Iterator[None]:
    """Throttle counters live in the cache: start and end each throttling test without any."""
    cache.clear()
    yield
    cache.clear()
