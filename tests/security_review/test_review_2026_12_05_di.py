"""Review of 2026-12-05 (di): a regression review of a677711..5656b9d (reviews dc, dd, df).

Each test fails on the reviewed code (main at 5656b9d) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. The bound on a model endpoint's answer (``models_adapters.wire``) counted the bytes as they came off the
   socket, before ``Content-Encoding`` was undone: a gzip-compressed answer (which the SDK's client asks for with
   ``Accept-Encoding``) of a few kilobytes was decompressed whole into memory, whatever it held (2 MB from 2 KB
   here; a gzip bomb gives a thousand to one). The body is now decoded inside the bounded stream and the bound
   counts both the bytes read and the bytes decoded.
"""

import gzip
import json
from collections.abc import Iterator
from typing import Any

import pytest

from agents_app.models_adapters.base import RefusedTurn
from agents_app.models_adapters.openai_chat import OpenAIChatAdapter
from tests.unit.fake_openai import FakeModel, Reply, serve
from toolhub.exceptions import ModelError

MESSAGES = [{"role": "user", "content": "hello there"}]
GZIP = {"Content-Encoding": "gzip"}


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    with serve(FakeModel()) as model:
        yield model


def _adapter(model: FakeModel, *, stream: bool) -> OpenAIChatAdapter:
    return OpenAIChatAdapter(
        provider_name="fake", base_url=model.base_url, model="m", api_key="sk-review-di", stream=stream, deadline=20
    )


def test_a_gzip_whole_answer_is_bounded_by_the_bytes_it_decodes_to(settings: Any, fake_model: FakeModel) -> None:
    """Found: the wire bound counted compressed bytes: 2 MB of JSON sent as 2 KB of gzip was decoded whole into
    memory and accepted (a gzip bomb is a thousand to one).

    Expect: the turn fails at the bound, counted on the decoded bytes, with the message naming the setting.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_EXTERNAL_RESULT_BYTES": 1_000}
    message = {"role": "assistant", "content": "hi"}
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "x_junk": "j" * 2_000_000}
    body["choices"] = [{"index": 0, "finish_reason": "stop", "message": message}]
    compressed = gzip.compress(json.dumps(body).encode())
    assert len(compressed) < 64_000
    fake_model.queue(Reply(200, compressed, headers=GZIP))

    with pytest.raises(ModelError) as failed:
        _adapter(fake_model, stream=False).complete(messages=MESSAGES, tools=[])

    assert "MAX_EXTERNAL_RESULT_BYTES" in str(failed.value)
    assert len(fake_model.requests) == 1  # refused, not retried


def test_a_gzip_stream_is_bounded_by_the_bytes_it_decodes_to(settings: Any, fake_model: FakeModel) -> None:
    """Found: one ``data:`` line without end, sent gzip-compressed, was decoded and kept whole by the SDK's line
    decoder past the bound (5 MB from 5 KB here), the bound never reached.

    Expect: the stream is refused at the bound on decoded bytes, charged as read.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_EXTERNAL_RESULT_BYTES": 1_000}
    line = gzip.compress(b'data: {"x_junk": "' + b"j" * 5_000_000)
    fake_model.queue(Reply(200, b"", content_type="text/event-stream", chunks=[line], headers=GZIP))

    with pytest.raises(RefusedTurn) as refused:
        _adapter(fake_model, stream=True).complete(messages=MESSAGES, tools=[])

    assert "sent more than 64,000 bytes" in str(refused.value)


def test_a_gzip_answer_within_the_bound_is_read_as_sent(fake_model: FakeModel) -> None:
    """Found: nothing (the decoding moved into the bounded stream). Expect: a compressed answer is still read."""
    message = {"role": "assistant", "content": "hello back"}
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m"}
    body["choices"] = [{"index": 0, "finish_reason": "stop", "message": message}]
    body["usage"] = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    fake_model.queue(Reply(200, gzip.compress(json.dumps(body).encode()), headers=GZIP))

    turn = _adapter(fake_model, stream=False).complete(messages=MESSAGES, tools=[])

    assert turn.content == "hello back" and turn.completion_tokens == 2
