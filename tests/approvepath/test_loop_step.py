"""A loop step is one transaction with one write of the run when its model answers in process (the scripted one);
a model asked outside a transaction takes a lease first, then its turn is recorded: two writes."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents_app.loop import Advance, run_advance
from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.models_adapters.scripted import ScriptedAdapter
from toolhub.models import CallStatus, ToolCall

pytestmark = pytest.mark.django_db

TURN = [
    {"name": "record_effect", "arguments": {"note": "runs"}},
    {"name": "risky_effect", "arguments": {"note": "held"}},
]


def _run_updates(statements: list[str]) -> int:
    return sum(1 for sql in statements if sql.startswith('UPDATE "agents_app_agentrun"'))


def _run_reads(statements: list[str]) -> int:
    # each under the run's row lock (FOR UPDATE where the database has row locks)
    return sum(1 for sql in statements if sql.startswith("SELECT") and 'FROM "agents_app_agentrun"' in sql)


def _transactions(statements: list[str]) -> int:
    # the test's own transaction makes each of the step's a savepoint
    return sum(1 for sql in statements if sql.startswith("SAVEPOINT"))


def _run(alice: User, script: list[dict[str, Any]]) -> AgentRun:
    agent = Agent.objects.create(name="step", script=script, tools=["record_effect", "risky_effect"])
    return AgentRun.objects.create(
        agent=agent, user=alice, tenant="acme", input="hi", messages=[{"role": "user", "content": "hi"}]
    )


def _step(run: AgentRun) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        assert run_advance(run_id=run.pk) is Advance.STEPPED
    return [query["sql"] for query in captured.captured_queries]


def test_a_turn_that_holds_a_call_is_one_transaction_and_one_write_of_the_run(alice: User) -> None:
    # given a run whose (scripted) model asks for a low-risk call and one that waits for approval
    run = _run(alice, [{"content": "", "tool_calls": TURN}, {"content": "done"}])

    # when the run takes its step
    statements = _step(run)

    # then the step read (locked) and wrote the run once, in one transaction (the pipeline's own savepoints aside)
    assert _run_updates(statements) == 1 and _run_reads(statements) == 1, "\n".join(statements)
    run.refresh_from_db()
    assert (run.status, run.turn, run.step_token, run.step_lease_until) == (RunStatus.WAITING, 1, None, None)
    assert run.messages[-1]["role"] == "assistant" and len(run.messages[-1]["tool_calls"]) == 2
    calls = ToolCall.objects.filter(run_id=run.pk).order_by("position")
    # the low-risk call is written already claimed: this (eager) process runs it after the commit
    assert [call.status for call in calls] == [CallStatus.RUNNING, CallStatus.PENDING_APPROVAL]
    # the run's user came with the run: no query of its own for it
    assert sum(1 for sql in statements if sql.startswith('SELECT "auth_user"."id", "auth_user"."password"')) == 0


def test_the_final_answer_after_the_results_is_one_transaction_and_one_write_of_the_run(alice: User) -> None:
    # given a run whose only call settled (its results not yet appended)
    run = _run(alice, [{"tool_calls": [TURN[0]]}, {"content": "done: {last_tool_result}"}])
    assert run_advance(run_id=run.pk) is Advance.STEPPED
    ToolCall.objects.filter(run_id=run.pk).update(status=CallStatus.SUCCEEDED, result={"effect_id": 7})

    # when the run takes its next step
    statements = _step(run)

    # then one transaction appended the result, asked the model and completed the run, writing it once
    assert (_transactions(statements), _run_reads(statements), _run_updates(statements)) == (1, 1, 1)
    # and the run has no saga (the lock's statement says so) and its call no artifact: neither is read
    assert not [
        sql for sql in statements if sql.startswith(('SELECT "sagas_saga"', 'SELECT "toolhub_toolcallartifact"'))
    ]
    run.refresh_from_db()
    assert (run.status, run.turn, run.step_token, run.step_lease_until) == (RunStatus.COMPLETED, 2, None, None)
    assert [message["role"] for message in run.messages] == ["user", "assistant", "tool", "assistant"]
    assert run.output == 'done: {"effect_id": 7}'


def test_a_model_asked_outside_a_transaction_takes_a_lease_then_records_its_turn(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a run whose model does not answer in process (a network model, here the script behind one)
    class Remote:
        def __init__(self, agent: Agent) -> None:
            self.inner = ScriptedAdapter(script=agent.script)

        def complete(self, **options: Any) -> Any:
            # asked outside the step's transactions: the lease is committed, the run held by this step
            held = AgentRun.objects.get(pk=run.pk)
            assert held.step_token is not None and held.step_lease_until is not None
            return self.inner.complete(**options)

    monkeypatch.setattr("agents_app.loop.adapter_for", Remote)
    run = _run(alice, [{"content": "done"}])

    # when the run takes its step
    statements = _step(run)

    # then the run was read (locked) and written twice: the lease before the model call, the turn after it
    # (the third read is this test's adapter looking at the lease)
    assert (_transactions(statements), _run_reads(statements), _run_updates(statements)) == (2, 3, 2)
    run.refresh_from_db()
    assert (run.status, run.output, run.step_token, run.step_lease_until) == (RunStatus.COMPLETED, "done", None, None)
