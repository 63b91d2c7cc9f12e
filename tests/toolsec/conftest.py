"""Fixtures of the tool-security tests: governed calls for tenant acme and scripted runs, Celery eager."""

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import AgentRun
from agents_app.services import agent_create, run_start

StartRun = Callable[..., AgentRun]


@pytest.fixture
def start_run(db: None, django_capture_on_commit_callbacks: Any) -> StartRun:
    """Create a scripted agent with ``tools`` and run it to wherever it stops; return the fresh run."""

    def start(user: User, *, tools: list[str], script: list[dict[str, Any]]) -> AgentRun:
        agent = agent_create(name=f"agent-{uuid.uuid4().hex[:8]}", provider="scripted", tools=tools, script=script)
        with django_capture_on_commit_callbacks(execute=True):
            run = run_start(agent=agent, user=user, input="go")
        run.refresh_from_db()
        return run

    return start
