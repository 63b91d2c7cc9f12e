"""Streaming the model's answer with the official ``openai`` SDK: stored as it arrives, assembled, or failed whole."""

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from rest_framework.test import APIClient

from agents_app.models import AgentRun, RunStatus, StopReason
from agents_app.services import run_start
from tests.profiles.conftest import MakeAgent
from tests.sagas.sample_tools import LOG, TOOLS
from tests.unit.fake_openai import FakeModel, completion, streamed
from toolhub.models import ToolCall
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _tools(settings: Any) -> Iterator[None]:
    settings.TOOLHUB = {**settings.TOOLHUB, "STREAM_FLUSH_SECONDS": 0.05}
    LOG.clear()
    with registry.temporarily(*TOOLS):
        yield


def _start_in_background(agent: Any, user: User) -> tuple[threading.Thread, dict[str, Any]]:
    """Start a run on another thread (the eager step streams there) so this one can watch the run meanwhile."""
    started: dict[str, Any] = {}

    def start() -> None:
        try:
            started["run"] = run_start(agent=agent, user=user, input="tell me")
        finally:
            connection.close()

    thread = threading.Thread(target=start)
    thread.start()
    return thread, started


def _partial_outputs_while_running(thread: threading.Thread, agent: Any, client: APIClient) -> list[str]:
    """Each new ``partial_output`` the run's API answer shows while ``thread`` runs it, in the order seen.

    Reading while another thread writes needs PostgreSQL: SQLite's in-memory test database (shared cache)
    refuses either side at once with "database table is locked", so the tests that watch are ``postgres``.
    """
    seen: list[str] = []
    while thread.is_alive():
        run = AgentRun.objects.filter(agent=agent).first()
        partial = client.get(f"/api/v1/runs/{run.pk}/").json()["partial_output"] if run is not None else ""
        if partial and partial not in seen:
            seen.append(partial)
        thread.join(timeout=0.05)
    return seen


@pytest.mark.postgres  # another thread reads the run while the stream writes it
def test_a_streamed_answer_is_readable_on_the_run_while_it_arrives(
    fake_model: FakeModel, openai_agent: MakeAgent, alice: User, alice_client: APIClient
) -> None:
    # given an agent that streams, and a model that sends its answer in five pieces 0.3 s apart
    pieces = ["The ", "answer ", "is ", "forty-", "two."]
    fake_model.queue(streamed(content=pieces, chunk_delay=0.3, prompt=20, done=5))
    agent = openai_agent(stream=True)

    # when the run starts and someone reads it through the API while the model is still answering
    thread, started = _start_in_background(agent, alice)
    seen = _partial_outputs_while_running(thread, agent, alice_client)

    # then they saw the answer grow, piece by piece, never past what had arrived
    assert len(seen) >= 2, seen
    assert all("The answer is forty-two.".startswith(text) for text in seen)
    assert seen == sorted(seen, key=len)
    # and the finished run has the whole answer as its output, the partial text cleared, the usage counted
    run = AgentRun.objects.get(pk=started["run"].pk)
    assert (run.status, run.output, run.partial_output) == (RunStatus.COMPLETED, "The answer is forty-two.", "")
    assert (run.prompt_tokens, run.completion_tokens) == (20, 5)
    # and the SDK asked for a stream with usage
    body = fake_model.requests[0]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_tool_call_deltas_are_assembled_by_index(fake_model: FakeModel, openai_agent: MakeAgent, alice: User) -> None:
    # given a streamed turn with two tool calls whose argument text arrives in pieces, interleaved
    fake_model.queue(
        streamed(
            content=["Booking both."],
            tool_calls=[
                {"index": 0, "id": "call_a", "name": "book", "arguments": ""},
                {"index": 1, "id": "call_b", "name": "reserve", "arguments": '{"it'},
                {"index": 0, "arguments": '{"item": "fli'},
                {"index": 1, "arguments": 'em": "car"}'},
                {"index": 0, "arguments": 'ght"}'},
            ],
        ),
        streamed(content=["Done: ", "both booked."]),
    )
    agent = openai_agent(stream=True, tools=["book", "reserve"])

    # when the run goes through both turns
    run = run_start(agent=agent, user=alice, input="book a flight and a car")
    run.refresh_from_db()

    # then each call got its own whole arguments, ran once, in the model's order, and the run completed
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "Done: both booked."
    calls = list(ToolCall.objects.filter(run_id=run.pk).order_by("position"))
    assert [(c.model_call_id, c.tool_name, c.arguments, c.status) for c in calls] == [
        ("call_a", "book", {"item": "flight"}, "succeeded"),
        ("call_b", "reserve", {"item": "car"}, "succeeded"),
    ]
    assert sorted(LOG) == [("book", "flight"), ("reserve", "car")]
    assert run.messages[1]["content"] == "Booking both."


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(
            streamed(
                content=["Let me book "],
                tool_calls=[{"index": 0, "id": "call_a", "name": "book", "arguments": '{"item": "fl'}],
                finish=False,
            ),
            id="cut-mid-tool-call",
        ),
        pytest.param(streamed(content=["Half an ans"], finish=False), id="cut-mid-text"),
    ],
)
def test_a_stream_that_breaks_mid_answer_fails_the_turn_and_runs_nothing(
    broken: Any, fake_model: FakeModel, openai_agent: MakeAgent, alice: User
) -> None:
    # given a model whose stream ends before it finished its answer
    fake_model.queue(broken)
    agent = openai_agent(stream=True, tools=["book"])

    # when the run asks it
    run = run_start(agent=agent, user=alice, input="book a flight")
    run.refresh_from_db()

    # then the turn failed cleanly: retryable, nothing recorded, nothing executed, no partial text left
    assert (run.status, run.stop_reason, run.retryable) == (RunStatus.FAILED, StopReason.MODEL_ERROR, True)
    assert "broke off before it was complete" in run.error
    assert run.turn == 0 and [m["role"] for m in run.messages] == ["user"]
    assert run.partial_output == ""
    assert not ToolCall.objects.filter(run_id=run.pk).exists() and LOG == []
    # and what the endpoint produced of it (its usage chunk, last, never came) is charged as read
    assert run.prompt_tokens > 0 and run.completion_tokens > 0


def test_an_event_that_is_not_json_fails_the_turn(fake_model: FakeModel, openai_agent: MakeAgent, alice: User) -> None:
    reply = streamed(content=["ok"])
    reply.chunks = [reply.chunks[0], b"data: {not json\n\n"]
    fake_model.queue(reply)
    agent = openai_agent(stream=True)

    run = run_start(agent=agent, user=alice, input="hi")
    run.refresh_from_db()

    assert (run.status, run.stop_reason, run.retryable) == (RunStatus.FAILED, StopReason.MODEL_ERROR, True)
    assert "broke off" in run.error


def test_an_agent_without_stream_asks_for_a_whole_answer(
    fake_model: FakeModel, openai_agent: MakeAgent, alice: User
) -> None:
    fake_model.queue(completion(content="whole"))
    agent = openai_agent()

    run = run_start(agent=agent, user=alice, input="hi")
    run.refresh_from_db()

    assert run.output == "whole" and "stream" not in fake_model.requests[0]["body"]


def test_a_stream_that_outlasts_the_providers_deadline_is_cut_off_there(
    fake_model: FakeModel, openai_agent: MakeAgent, alice: User
) -> None:
    # given a model that streams one piece every 0.4 s, on a provider with a 1.5 s deadline
    fake_model.queue(streamed(content=["slow "] * 20, chunk_delay=0.4))
    agent = openai_agent(stream=True, provider={"deadline_seconds": 1.5})

    # when the run asks it
    run = run_start(agent=agent, user=alice, input="take your time")
    run.refresh_from_db()

    # then the turn was given up at the deadline, retryably, with nothing recorded
    assert (run.status, run.stop_reason, run.retryable) == (RunStatus.FAILED, StopReason.MODEL_ERROR, True)
    assert "did not answer within its deadline of 1.5 s" in run.error
    assert run.turn == 0 and run.partial_output == ""


@pytest.mark.postgres  # another thread reads the run while the stream writes it
def test_an_endpoint_repeating_its_key_in_a_stream_has_it_replaced_while_it_arrives_and_after(
    fake_model: FakeModel, openai_agent: MakeAgent, alice: User, alice_client: APIClient, monkeypatch: Any
) -> None:
    """A debugging proxy that echoes the ``Authorization`` header: neither the run's text as it streams nor its
    output keeps the provider's key (README: model API keys are never stored)."""
    key = "sk-stream-echo-0123456789abcdef"
    monkeypatch.setenv("STREAM_ECHO_KEY", key)
    pieces = ["I was called with ", f"Bearer {key[:10]}", f"{key[10:]} ", "as key."]
    fake_model.queue(streamed(content=pieces, chunk_delay=0.3, prompt=20, done=5))
    agent = openai_agent(stream=True, provider={"credential_env": "STREAM_ECHO_KEY"})

    thread, started = _start_in_background(agent, alice)
    seen = _partial_outputs_while_running(thread, agent, alice_client)

    run = AgentRun.objects.get(pk=started["run"].pk)
    assert run.output == "I was called with Bearer [secret] as key."
    assert fake_model.requests[0]["authorization"] == f"Bearer {key}"  # the endpoint did get it
    assert seen and not any(key in text for text in seen)
    assert key not in str(AgentRun.objects.filter(pk=run.pk).values().get())
