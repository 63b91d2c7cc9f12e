"""An endpoint that reports no token usage still costs tokens: they are estimated from the texts' lengths.

Otherwise every turn of such an endpoint (some self-hosted servers; a stream without its usage chunk) would be
free, and a run's or a subagent's ``max_tokens`` budget would bound nothing. Spoken to through the official
``openai`` SDK against the local fake endpoint.
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agents_app.models_adapters.base import CHARS_PER_TOKEN, RefusedTurn, estimated_tokens
from agents_app.models_adapters.openai_chat import OpenAIChatAdapter
from tests.unit.fake_openai import FakeModel, Reply, completion, serve, streamed

MESSAGES = [{"role": "user", "content": "Please add six and seven. " * 40}]
CALL = {"id": "call_1", "name": "calculate", "arguments": '{"a": 6, "op": "+", "b": 7}'}


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    with serve(FakeModel()) as model:
        yield model


def _adapter(fake_model: FakeModel, *, stream: bool = False) -> OpenAIChatAdapter:
    return OpenAIChatAdapter(
        provider_name="quiet", base_url=fake_model.base_url, model="m", api_key="k", stream=stream, deadline=10.0
    )


def _without_usage(reply: Reply, *, keep: dict[str, int] | None = None) -> Reply:
    """The reply with its usage removed (or replaced by ``keep``), streamed or not."""
    if reply.chunks is not None:
        chunks = [c for c in reply.chunks if b'"usage"' not in c]
        return Reply(reply.status, b"", content_type=reply.content_type, chunks=chunks)
    body = json.loads(reply.body)
    if keep is None:
        body.pop("usage")
    else:
        body["usage"] = keep
    return Reply(reply.status, json.dumps(body).encode())


def test_an_answer_without_usage_is_charged_by_its_length(fake_model: FakeModel) -> None:
    # given an endpoint that answers a tool call and says nothing of usage
    fake_model.queue(_without_usage(completion(tool_calls=[CALL])))

    # when the adapter asks it
    turn = _adapter(fake_model).complete(messages=MESSAGES, tools=[])

    # then the prompt costs at least its text's tokens, and the answer its call's
    assert turn.prompt_tokens >= len(MESSAGES[0]["content"]) // CHARS_PER_TOKEN
    assert turn.completion_tokens == estimated_tokens(len(CALL["id"]) + len(CALL["name"]) + len(CALL["arguments"]))
    assert [c.name for c in turn.tool_calls] == ["calculate"]


def test_a_stream_without_its_usage_chunk_is_charged_by_its_length(fake_model: FakeModel) -> None:
    # given a streamed answer whose usage chunk never comes
    fake_model.queue(_without_usage(streamed(content=["Thirteen", ", as asked."])))

    # when the adapter reads it
    turn = _adapter(fake_model, stream=True).complete(messages=MESSAGES, tools=[])

    # then both sides are estimated, the answer from the text it streamed
    assert turn.content == "Thirteen, as asked."
    assert turn.prompt_tokens >= len(MESSAGES[0]["content"]) // CHARS_PER_TOKEN
    assert turn.completion_tokens == estimated_tokens(len("Thirteen, as asked."))


def test_a_field_left_out_is_estimated_and_a_reported_one_is_kept(fake_model: FakeModel) -> None:
    # given usage that reports only the answer's tokens (the prompt's left out)
    fake_model.queue(_without_usage(completion(content="13"), keep={"completion_tokens": 3}))

    # when the adapter asks
    turn = _adapter(fake_model).complete(messages=MESSAGES, tools=[])

    # then the reported count stands and only the missing one is estimated
    assert turn.completion_tokens == 3
    assert turn.prompt_tokens >= len(MESSAGES[0]["content"]) // CHARS_PER_TOKEN


def test_reported_usage_is_taken_as_reported(fake_model: FakeModel) -> None:
    # given an endpoint that reports its usage
    fake_model.queue(completion(content="13", prompt=7, done=1))

    # when the adapter asks
    turn = _adapter(fake_model).complete(messages=MESSAGES, tools=[])

    # then its figures are the turn's, estimated nothing
    assert (turn.prompt_tokens, turn.completion_tokens) == (7, 1)


def test_a_stream_given_up_past_its_size_bound_is_charged_what_was_read(settings: Any, fake_model: FakeModel) -> None:
    # given streamed answers are bounded at 1,000 bytes, and an endpoint that streams 3,000
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_EXTERNAL_RESULT_BYTES": 1_000}
    fake_model.queue(streamed(content=["x" * 500] * 6))

    # when the adapter reads it
    with pytest.raises(RefusedTurn) as refused:
        _adapter(fake_model, stream=True).complete(messages=MESSAGES, tools=[])

    # then it is given up at the bound, and the prompt and the answer read so far cost the run
    assert "given up" in str(refused.value)
    assert refused.value.prompt_tokens >= len(MESSAGES[0]["content"]) // CHARS_PER_TOKEN
    assert refused.value.completion_tokens >= 1_000 // CHARS_PER_TOKEN
