"""Review of 2026-12-05 (dd): the model adapters and agentic sagas of dae59cf..0738e9a, hunted through the official
``openai`` SDK against the local fake endpoint (``tests.unit.fake_openai``).

Each test fails on the reviewed code (main at a677711) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. Garbage usage (a negative count, text, ``Infinity``, a list) failed the turn as "not a chat completion" with
   nothing charged, although the endpoint answered and billed: an endpoint could make every turn free, and a
   child's ``max_tokens`` bound nothing. Garbage is now "not counted", estimated from the texts' lengths as an
   absent count is (``base.reported_or_estimated``); the answer is used.
2. The stream's size bound counted the text it interprets, not the bytes read: chunks carrying little text and
   any amount of JSON it does not read (an unknown field) were read until the deadline, and a whole (not
   streamed) answer of any size was read into memory before it was parsed. Every response body is now cut at
   ``WIRE_BYTES_PER_ANSWER_BYTE`` times ``MAX_EXTERNAL_RESULT_BYTES`` read (``toolhub.wire`` since review di, an
   event hook on the SDK's HTTP client): a stream is refused charged as read, a whole answer fails the turn.

Checked and holding (through the SDK and the fake endpoint):

- A stream without ``[DONE]`` but with a finish reason is complete; one without a finish reason is refused,
  charged as read. Usage only in the last chunk is used; usage in several chunks is not added up (the last wins).
  A huge count is kept at the column's bound by the loop (``budgets.tokens_added``).
- Tool-call deltas: index gaps (kept in index order), the id only in the first delta, arguments across many
  deltas, two calls interleaved, deltas without an index (a new id starts a call) all assemble as sent. A list
  index, a non-list ``tool_calls``, a string delta or ``function`` are refused charged as read.
- Reasoning (``reasoning_content`` / ``reasoning``) counts in the estimate; a refusal beside tool calls keeps both;
  ``content`` as an empty list is refused as not text; an error event's text (URL, key) is not repeated, and the
  provider's key is scrubbed from what is kept.
"""

import json
from typing import Any

import pytest

from agents_app.models_adapters.base import RefusedTurn
from agents_app.models_adapters.openai_chat import OpenAIChatAdapter
from tests.unit.fake_openai import FakeModel, Reply
from toolhub.exceptions import ModelError

MESSAGES = [{"role": "user", "content": "hello there"}]


def _adapter(model: FakeModel, *, stream: bool) -> OpenAIChatAdapter:
    return OpenAIChatAdapter(
        provider_name="fake", base_url=model.base_url, model="m", api_key="sk-review-dd", stream=stream, deadline=20
    )


def _event(body: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(body)}\n\n".encode()


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return _event(
        {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice], **extra}
    )


def _stream(*pieces: bytes) -> Reply:
    return Reply(200, b"", content_type="text/event-stream", chunks=list(pieces))


_GARBAGE = {"negative": -1000, "text": "many", "infinity": "Infinity", "list": [3]}


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("garbage", list(_GARBAGE), ids=list(_GARBAGE))
def test_garbage_usage_is_charged_by_estimate_not_nothing(fake_model: FakeModel, stream: bool, garbage: str) -> None:
    """Found: a usage count that is no count failed the turn as "not a chat completion", charged nothing for an
    answer the endpoint gave and billed.

    Expect: the answer is used, its tokens estimated from the texts' lengths (as an absent count is).
    """
    value = _GARBAGE[garbage]
    raw = json.dumps(value) if garbage != "infinity" else "Infinity"
    usage = f'{{"prompt_tokens": {raw}, "completion_tokens": {raw}, "total_tokens": 1}}'
    text = "an answer of forty characters, or so...."
    if stream:
        tail = 'data: {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [], '
        fake_model.queue(
            _stream(_chunk({"content": text}), _chunk({}, "stop"), f'{tail}"usage": {usage}}}\n\n'.encode())
        )
    else:
        message = {"role": "assistant", "content": text}
        body = json.dumps(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            }
        )
        fake_model.queue(Reply(200, f'{body[:-1]}, "usage": {usage}}}'.encode()))

    turn = _adapter(fake_model, stream=stream).complete(messages=MESSAGES, tools=[])

    assert turn.content == text
    assert turn.completion_tokens == 10 and turn.prompt_tokens >= 1


def test_a_stream_of_overhead_with_little_text_is_cut_by_the_bytes_read(settings: Any, fake_model: FakeModel) -> None:
    """Found: the stream's bound counted interpreted text only; chunks of one character and 4 KB of a field it does
    not read each were read to the end (here 2 MB for 500 characters; any size, until the deadline).

    Expect: refused once the bytes read pass the bound (64 x 1,000 here), charged as read; not read to the end.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_EXTERNAL_RESULT_BYTES": 1_000}
    junk = "j" * 4_000
    fake_model.queue(_stream(*[_chunk({"content": "x"}, x_junk=junk)] * 500, _chunk({}, "stop")))

    with pytest.raises(RefusedTurn) as refused:
        _adapter(fake_model, stream=True).complete(messages=MESSAGES, tools=[])

    assert "sent more than 64,000 bytes" in str(refused.value)
    assert refused.value.prompt_tokens >= 1 and refused.value.completion_tokens >= 1


def test_a_whole_answer_is_cut_by_the_bytes_read(settings: Any, fake_model: FakeModel) -> None:
    """Found: a whole (not streamed) answer was read into memory whatever its size before it was parsed: 2 MB of a
    field nobody reads beside a one-word answer was accepted.

    Expect: the turn fails at the bound on bytes read, with a message naming the setting, nothing kept.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_EXTERNAL_RESULT_BYTES": 1_000}
    message = {"role": "assistant", "content": "hi"}
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "x_junk": "j" * 2_000_000}
    body["choices"] = [{"index": 0, "finish_reason": "stop", "message": message}]
    fake_model.queue(Reply(200, json.dumps(body).encode()))

    with pytest.raises(ModelError) as failed:
        _adapter(fake_model, stream=False).complete(messages=MESSAGES, tools=[])

    assert "MAX_EXTERNAL_RESULT_BYTES" in str(failed.value) and "Traceback" not in str(failed.value)
    assert len(fake_model.requests) == 1  # refused, not retried
