"""Slow and stalled model endpoints: the per-provider deadline, and the step token that keeps one model call per run.

The fake endpoint is a real HTTP server on 127.0.0.1, spoken to through the official ``openai`` SDK.
Tests with a model call in flight on another thread use committed rows (``transactional_db``).
"""

import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError, connection
from django.utils import timezone

from agents_app.models import Agent, AgentRun, ModelProvider, ProviderKind, RunStatus, StopReason
from agents_app.models_adapters.base import ModelTurn
from agents_app.services import agent_create, run_start
from agents_app.tasks import sweep_runs_task
from tests.unit.fake_openai import FakeModel, Reply, completion, serve
from toolhub.models import ToolCall

CALC = '{"a": 6, "op": "*", "b": 7}'


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    with serve(FakeModel()) as model:
        yield model


def _agent(base_url: str, *, deadline: float, request_timeout: float = 30.0) -> Agent:
    provider = ModelProvider.objects.create(
        name="slow-endpoint",
        kind=ProviderKind.OPENAI,
        base_url=base_url,
        model_name="test-model",
        request_timeout_seconds=request_timeout,
        deadline_seconds=deadline,
    )
    return agent_create(name="slow", provider=provider.name, tools=["calculate"])


def _in_background(target: Any) -> threading.Thread:
    def run() -> None:
        try:
            target()
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _wait_until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


@pytest.mark.parametrize(
    "reply",
    [
        Reply(200, completion(content="too late").body, delay=8.0),
        # headers at once, then a byte every 0.2 s: each read is quick, so only an overall deadline cuts it
        Reply(200, completion(content="dripping " * 20).body, drip=0.2),
    ],
    ids=["answers-after-the-deadline", "drips-its-answer"],
)
def test_a_model_call_is_cut_at_its_providers_deadline(
    fake_model: FakeModel, start_run: Any, alice: User, reply: Reply
) -> None:
    # given an endpoint slower than the provider's deadline of 1 s (its per-read timeout is 30 s)
    fake_model.queue(reply)
    agent = _agent(fake_model.base_url, deadline=1.0)

    # when a run asks it
    started = time.monotonic()
    run = start_run(agent, alice, "hello")
    elapsed = time.monotonic() - started

    # then the run failed, retryably, with a clear message, at the deadline: well before the answer would
    # have come (a bound with room for a loaded 2-core machine)
    assert elapsed < 6.0
    assert run.status == RunStatus.FAILED
    assert run.stop_reason == StopReason.MODEL_ERROR
    assert run.retryable is True
    assert run.error == "Model provider 'slow-endpoint' did not answer within its deadline of 1 s; retry the run later."
    assert (run.step_lease_until, run.step_token) == (None, None)
    assert [m["role"] for m in run.messages] == ["user"]
    assert len(fake_model.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_a_sweep_during_a_slow_model_call_does_not_start_a_second_one(
    fake_model: FakeModel, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given an endpoint that takes 7 s, a provider deadline of 1 s and a step lease shorter than the endpoint
    # (deadline + 3 s: room for a loaded 2-core machine to record the failure before the lease runs out)
    monkeypatch.setattr("agents_app.loop.STEP_LEASE_MARGIN_SECONDS", 3.0)
    fake_model.queue(Reply(200, completion(content="too late").body, delay=7.0))
    agent = _agent(fake_model.base_url, deadline=1.0)
    worker = _in_background(lambda: run_start(agent=agent, user=alice, input="hello"))
    _wait_until(lambda: len(fake_model.requests) == 1)

    # when the sweeper wakes the run every 0.1 s for as long as the endpoint takes
    until = time.monotonic() + 7.5
    while time.monotonic() < until:
        try:
            AgentRun.objects.update(updated_at=timezone.now() - timedelta(minutes=5))
            sweep_runs_task(idle_seconds=0)
        except OperationalError:
            # SQLite's shared in-memory database locks the table while the step records its failure (PostgreSQL
            # does not): this tick is skipped, as a beat whose sweep failed is followed by the next one.
            pass
        time.sleep(0.1)

    # then the endpoint saw one call only: the step gave up at its deadline, before its lease ran out
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert len(fake_model.requests) == 1
    run = AgentRun.objects.get()
    assert run.status == RunStatus.FAILED
    assert run.error.startswith("Model provider 'slow-endpoint' did not answer within its deadline of 1 s")


@pytest.mark.django_db(transaction=True)
def test_a_sweep_while_a_model_call_is_in_flight_leaves_it_alone(fake_model: FakeModel, alice: User) -> None:
    # given a run whose model call is in flight on an endpoint that takes 2 s (deadline 20 s)
    fake_model.queue(Reply(200, completion(content="Slow but fine.").body, delay=2.0))
    agent = _agent(fake_model.base_url, deadline=20.0)
    worker = _in_background(lambda: run_start(agent=agent, user=alice, input="hello"))
    _wait_until(lambda: len(fake_model.requests) == 1)

    # when the sweeper finds the run idle and wakes it
    AgentRun.objects.update(updated_at=timezone.now() - timedelta(minutes=5))
    sweep_runs_task(idle_seconds=0)

    # then no second model call was made, and the first one completes the run
    worker.join(timeout=15)
    assert not worker.is_alive()
    run = AgentRun.objects.get()
    assert (run.status, run.output) == (RunStatus.COMPLETED, "Slow but fine.")
    assert len(fake_model.requests) == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "late",
    [
        Reply(200, completion(tool_calls=[{"id": "call_1", "name": "calculate", "arguments": CALC}]).body, delay=1.5),
        Reply(500, b'{"error": {"message": "internal"}}', delay=1.5),
    ],
    ids=["late-tool-call", "late-error"],
)
def test_an_answer_for_a_step_that_lost_the_run_is_discarded(fake_model: FakeModel, alice: User, late: Reply) -> None:
    # given a run whose model call is in flight
    fake_model.queue(late)
    agent = _agent(fake_model.base_url, deadline=20.0)
    worker = _in_background(lambda: run_start(agent=agent, user=alice, input="hello"))
    _wait_until(lambda: len(fake_model.requests) == 1)
    first = AgentRun.objects.get()
    assert first.step_token is not None

    # when its lease is taken over by another step (as after an expired lease) before the answer arrives
    other_token = uuid.uuid4()
    AgentRun.objects.filter(pk=first.pk).update(step_token=other_token)
    worker.join(timeout=15)
    assert not worker.is_alive()

    # then the late answer changed nothing: no message, no tool call, no failure; the new step still holds the run
    run = AgentRun.objects.get()
    assert run.status == RunStatus.RUNNING
    assert [m["role"] for m in run.messages] == ["user"]
    assert (run.turn, run.error, run.step_token) == (0, "", other_token)
    assert not ToolCall.objects.exists()


class _Oversized:
    """A model endpoint that answers one turn of 1.5 MB of text (a runaway or hostile endpoint)."""

    answers_in_process = True

    def complete(self, **kwargs: Any) -> ModelTurn:
        return ModelTurn(content="x" * 1_500_000, tool_calls=(), prompt_tokens=1, completion_tokens=1)


def test_a_model_turn_larger_than_the_bound_on_data_from_outside_fails_the_run_and_nothing_of_it_is_kept(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """A turn is data from outside: bounded like an external result (MAX_EXTERNAL_RESULT_BYTES), by any adapter."""
    agent = agent_create(name="runaway", provider="scripted", script=[], tools=[])
    with mock.patch("agents_app.loop.adapter_for", return_value=_Oversized()):
        with django_capture_on_commit_callbacks(execute=True):
            run = run_start(agent=agent, user=alice, input="go")
    run.refresh_from_db()

    assert run.status == RunStatus.FAILED
    assert "1,500,000 bytes, above TOOLHUB['MAX_EXTERNAL_RESULT_BYTES']" in run.error
    assert max(len(json.dumps(message)) for message in run.messages) < 10_000
