"""Helpers for unit tests: requesting governed calls, reading their audit trail, scripted agents."""

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent, AgentRun
from agents_app.services import agent_create, run_start
from tests.approvals.conftest import hold  # noqa: F401 - the fixture, shared with the approval suites


@pytest.fixture
def make_agent(db: None) -> Callable[..., Agent]:
    """Create a scripted agent (through the service, so its tools are checked)."""

    def make(name: str = "scripted", *, script: list[Any], tools: list[str], **options: Any) -> Agent:
        return agent_create(name=name, provider="scripted", script=script, tools=tools, **options)

    return make


@pytest.fixture
def start_run(db: None, django_capture_on_commit_callbacks: Any) -> Callable[..., AgentRun]:
    """Start a run and let it go as far as it can in-process; return the fresh row."""

    def start(agent: Agent, user: User, text: str = "go", context: Mapping[str, Any] | None = None) -> AgentRun:
        with django_capture_on_commit_callbacks(execute=True):
            run = run_start(agent=agent, user=user, input=text, context=context)
        run.refresh_from_db()
        return run

    return start
