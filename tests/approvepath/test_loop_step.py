"""A loop step writes the run once per transaction: once to take the step, once to record the model's turn."""

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents_app.loop import Advance, run_advance
from agents_app.models import Agent, AgentRun, RunStatus
from toolhub.models import CallStatus, ToolCall

pytestmark = pytest.mark.django_db

TURN = [
    {"name": "record_effect", "arguments": {"note": "runs"}},
    {"name": "risky_effect", "arguments": {"note": "held"}},
]


def _run_updates(statements: list[str]) -> int:
    return sum(1 for sql in statements if sql.startswith('UPDATE "agents_app_agentrun"'))


def test_a_turn_that_holds_a_call_writes_the_run_once_when_recorded(alice: User) -> None:
    # given a run whose model asks for a low-risk call and one that waits for approval
    agent = Agent.objects.create(
        name="step",
        script=[{"content": "", "tool_calls": TURN}, {"content": "done"}],
        tools=["record_effect", "risky_effect"],
    )
    run = AgentRun.objects.create(
        agent=agent, user=alice, tenant="acme", input="hi", messages=[{"role": "user", "content": "hi"}]
    )

    # when the run takes its step
    with CaptureQueriesContext(connection) as captured:
        assert run_advance(run_id=run.pk) is Advance.STEPPED
    statements = [query["sql"] for query in captured.captured_queries]

    # then the run was written twice: the lease before the model call, the turn (already waiting) after it
    assert _run_updates(statements) == 2, "\n".join(statements)
    run.refresh_from_db()
    assert (run.status, run.turn, run.step_token, run.step_lease_until) == (RunStatus.WAITING, 1, None, None)
    assert run.messages[-1]["role"] == "assistant" and len(run.messages[-1]["tool_calls"]) == 2
    calls = ToolCall.objects.filter(run_id=run.pk).order_by("position")
    # the low-risk call is written already claimed: this (eager) process runs it after the commit
    assert [call.status for call in calls] == [CallStatus.RUNNING, CallStatus.PENDING_APPROVAL]
    # the run's user came with the run: no query of its own for it
    assert sum(1 for sql in statements if sql.startswith('SELECT "auth_user"."id", "auth_user"."password"')) == 0
