"""Fixtures of the tool-feature tests: governed calls and scripted runs, with Celery eager."""

import functools
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import AgentRun
from agents_app.services import agent_create, run_start
from tests.helpers import RequestCall

StartRun = Callable[..., AgentRun]


@pytest.fixture
def request_call(request_call: RequestCall) -> RequestCall:
    """Tool-feature calls act for tenant acme."""
    return functools.partial(request_call, tenant="acme")


@pytest.fixture
def start_run(db: None, django_capture_on_commit_callbacks: Any) -> StartRun:
    """Create a scripted agent with ``tools`` and run it to wherever it stops; return the fresh run."""

    def start(user: User, *, tools: list[str], script: list[dict[str, Any]], name: str = "") -> AgentRun:
        agent = agent_create(
            name=name or f"agent-{uuid.uuid4().hex[:8]}", provider="scripted", tools=tools, script=script
        )
        with django_capture_on_commit_callbacks(execute=True):
            run = run_start(agent=agent, user=user, input="go")
        run.refresh_from_db()
        return run

    return start
