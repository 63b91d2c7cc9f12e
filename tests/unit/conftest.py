"""Helpers for unit tests: requesting governed calls, reading their audit trail, scripted agents."""

import uuid
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent, AgentRun
from agents_app.services import agent_create, run_start
from tests.unit.helpers import principal_for
from toolhub.models import ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

RequestCall = Callable[..., ToolCall]


@pytest.fixture
def request_call(db: None, django_capture_on_commit_callbacks: Any) -> RequestCall:
    """Request a governed call and run what its commit triggers (Celery is eager); return the fresh row."""

    def request(
        tool_name: str,
        arguments: str | Mapping[str, Any] | None,
        *,
        user: User | None = None,
        tenant: str = "",
        agent_name: str = "",
        agent_tools: frozenset[str] | None = None,
        context: Mapping[str, Any] | None = None,
        run_id: uuid.UUID | None = None,
    ) -> ToolCall:
        with django_capture_on_commit_callbacks(execute=True):
            call = tool_call_request(
                request=CallRequest(
                    tool_name=tool_name,
                    arguments=arguments,
                    principal=principal_for(user, tenant=tenant, agent_name=agent_name, agent_tools=agent_tools),
                    context=ToolContext(context or {}),
                    run_id=run_id,
                )
            )
        call.refresh_from_db()
        return call

    return request


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


@pytest.fixture
def settle(django_capture_on_commit_callbacks: Any) -> Callable[..., Any]:
    """Run ``fn`` and everything its commit triggers, the way a committed request would."""

    def run(fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return fn(**kwargs)

    return run
