"""Fixtures of the tool-feature tests: governed calls and scripted runs, with Celery eager."""

import uuid
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import AgentRun
from agents_app.services import agent_create, run_start
from toolhub.authorization import CallPrincipal
from toolhub.models import AuditEvent, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

RequestCall = Callable[..., ToolCall]
StartRun = Callable[..., AgentRun]


def event_types(call: ToolCall) -> list[str]:
    """The call's audit event types, oldest first."""
    return list(AuditEvent.objects.filter(call_id=call.id).order_by("seq").values_list("event_type", flat=True))


def audit_text(call: ToolCall) -> str:
    """Everything the audit trail holds about a call, as one string (to look for leaks)."""
    return " ".join(AuditEvent.objects.filter(call_id=call.id).values_list("data", flat=True))


@pytest.fixture
def request_call(db: None, django_capture_on_commit_callbacks: Any) -> RequestCall:
    """Request a governed call as the model would and run what its commit triggers; return the fresh row."""

    def request(
        tool_name: str,
        arguments: str | Mapping[str, Any] | None,
        *,
        user: User | None = None,
        context: Mapping[str, Any] | None = None,
        interaction: Mapping[str, Any] | None = None,
        run_id: uuid.UUID | None = None,
    ) -> ToolCall:
        principal = CallPrincipal(
            user_id=user.pk if user else None, username=user.get_username() if user else "", tenant="acme"
        )
        with django_capture_on_commit_callbacks(execute=True):
            call = tool_call_request(
                request=CallRequest(
                    tool_name=tool_name,
                    arguments=arguments,
                    principal=principal,
                    context=ToolContext(context or {}),
                    interaction_context=interaction,
                    run_id=run_id,
                )
            )
        call.refresh_from_db()
        return call

    return request


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
