"""A loop step reads the governance stamp with its run (one statement), and still sees a change made between steps."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from agents_app.loop import Advance, run_advance
from agents_app.models import Agent, AgentRun
from agents_app.steprows import locked_run
from toolhub.models import CallStatus, Grant, Tenant, ToolCall

pytestmark = pytest.mark.django_db

STAMP_READ = "SELECT stamp FROM toolhub_governanceversion"


def _stamp() -> int:
    with connection.cursor() as cursor:
        cursor.execute(STAMP_READ)
        return cursor.fetchone()[0]


def _run(alice: User, script: list[dict[str, Any]]) -> AgentRun:
    agent = Agent.objects.create(name="stamped", script=script, tools=["record_effect", "always_fails"])
    return AgentRun.objects.create(
        agent=agent, user=alice, tenant="acme", input="hi", messages=[{"role": "user", "content": "hi"}]
    )


def test_the_locked_read_carries_the_current_governance_stamp(alice: User, tenant: Tenant) -> None:
    run = _run(alice, [{"content": "hi"}])
    with transaction.atomic():
        before = locked_run(run.pk)
    assert before is not None and before.governance_stamp == _stamp()

    # a governance change (any write to a watched table) moves the stamp; the next read carries the new one
    Grant.objects.create(tool_name="record_effect", tenant=tenant)
    with transaction.atomic():
        after = locked_run(run.pk)
    assert after is not None and after.governance_stamp == _stamp() != before.governance_stamp


def test_a_step_reads_no_stamp_of_its_own(alice: User) -> None:
    # given a run whose model asks for a low-risk call (so the step decides visibility and a call)
    run = _run(alice, [{"tool_calls": [{"name": "record_effect", "arguments": {"note": "x"}}]}, {"content": "ok"}])

    # when it takes its step
    with CaptureQueriesContext(connection) as captured:
        assert run_advance(run_id=run.pk) is Advance.STEPPED

    # then the stamp came with the run: no statement of the step reads it alone
    statements = [query["sql"] for query in captured.captured_queries]
    assert not [sql for sql in statements if sql.startswith(STAMP_READ)], "\n".join(statements)
    assert ToolCall.objects.get(run_id=run.pk).status in (CallStatus.RUNNING, CallStatus.SUCCEEDED)


def test_a_grant_revoked_between_two_steps_hides_the_tool_on_the_next_turn(
    alice: User, tenant: Tenant, settings: Any
) -> None:
    # given the production default (a user needs a grant) and grants for both of the agent's tools
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    grant = Grant.objects.create(tool_name="record_effect", tenant=tenant)
    Grant.objects.create(tool_name="always_fails", tenant=tenant)
    run = _run(alice, [{"tool_calls": [{"name": "record_effect", "arguments": {"note": "x"}}]}, {"content": "ok"}])
    assert run_advance(run_id=run.pk) is Advance.STEPPED
    run.refresh_from_db()
    assert set(run.disclosure["visible"]) == {"record_effect", "always_fails"}

    # when the grant is revoked before the run's next step
    grant.delete()
    ToolCall.objects.filter(run_id=run.pk).update(status=CallStatus.SUCCEEDED, result={"effect_id": 1})
    assert run_advance(run_id=run.pk) is Advance.STEPPED

    # then that step, deciding under the stamp read with its run, no longer shows the revoked tool
    run.refresh_from_db()
    assert run.disclosure["visible"] == ["always_fails"]
