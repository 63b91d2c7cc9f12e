"""Fixtures of the subagent and blackboard tests: scripted runs with Celery eager."""

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent, AgentRun
from agents_app.services import agent_create, run_start

MakeAgent = Callable[..., Agent]
StartRun = Callable[..., AgentRun]


@pytest.fixture
def make_agent(db: None) -> MakeAgent:
    """A scripted agent (global unless ``tenant`` is given) with ``tools`` and ``script``."""

    def make(*, tools: list[str], script: list[dict[str, Any]], name: str = "", **fields: Any) -> Agent:
        return agent_create(
            name=name or f"agent-{uuid.uuid4().hex[:8]}", provider="scripted", tools=tools, script=script, **fields
        )

    return make


@pytest.fixture
def start(db: None, django_capture_on_commit_callbacks: Any) -> StartRun:
    """Start a run of ``agent`` for ``user`` and run it to wherever it stops (commit callbacks executed)."""

    def run(agent: Agent, user: User, **kwargs: Any) -> AgentRun:
        with django_capture_on_commit_callbacks(execute=True):
            started = run_start(agent=agent, user=user, input=kwargs.pop("input", "go"), **kwargs)
        started.refresh_from_db()
        return started

    return run
