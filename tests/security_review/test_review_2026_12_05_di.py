"""Review of 2026-12-05 (di): a regression review of a677711..5656b9d (reviews dc, dd, df).

Each test fails on the reviewed code (main at 5656b9d) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. The bound on a model endpoint's answer (``models_adapters.wire``) counted the bytes as they came off the
   socket, before ``Content-Encoding`` was undone: a gzip-compressed answer (which the SDK's client asks for with
   ``Accept-Encoding``) of a few kilobytes was decompressed whole into memory, whatever it held (2 MB from 2 KB
   here; a gzip bomb gives a thousand to one). The body is now decoded inside the bounded stream and the bound
   counts both the bytes read and the bytes decoded.
2. The remote MCP client (``toolhub.mcp_client.remote``) had no bound on bytes read: a server's answer was read
   whole into memory and only then held against ``MAX_EXTERNAL_RESULT_BYTES``. The mechanism moved to
   ``toolhub.wire`` (the project package: ``toolhub`` must not import ``agents_app``), with an async hook the MCP
   client's ``httpx2.AsyncClient`` takes; both clients now cut an answer at 64 x the setting.

Checked and holds (no test here):

- wire: the hook runs on every send, so on the SDK's retry too; ``WireBoundExceeded`` is no ``httpx2`` error, so
  the SDK neither retries nor wraps it; a whole answer is read in ``Client.send`` (closed on the error, the
  connection released), a stream inside ``with stream`` (closed); an error status's body (4xx/5xx) is read
  through the same stream. ``provider_client`` is the only place an OpenAI client is made (no other
  ``openai.OpenAI`` / ``DefaultHttpxClient``).
- usage counts: a boolean, NaN, ``Infinity``, text, a list or a negative count is ``None`` (estimated, warned);
  a float is its whole part; a huge int is kept and bounded by the loop (``budgets.tokens_added``).
- cascade ``SET_NULL`` (``_append_cascade_updates``): Django 5.2 keeps lazy querysets in ``field_updates``;
  they are read on a collector of the recorder's own, before the deletion, so the values before are the stored
  ones and the real deletion's collector is untouched. A ``delete_selected`` of six users whose agents are in
  two tenants, and of six groups named as escalation groups, gives one ``governance.changed`` per row in its own
  tenant's chain after the deletions, and ``verify_audit_chains`` finds no problem on PostgreSQL (104 and 68
  queries for the two actions, linear in the rows).
- browsable API: no view but the catalogue sets ``renderer_classes`` (it now lists the visible renderer); the
  schema and Swagger views keep drf-spectacular's own renderers; exports are Django responses, not DRF.
  ``visible_text`` returns a plain ``str`` (not ``SafeData``), so the template's ``{{ content|urlize }}`` still
  escapes it. ``manage.py spectacular --validate --fail-on-warn`` passes with the 413s.
- 413: a JSON body (DRF reads ``request.body``) and a multipart or urlencoded form whose fields pass the limit
  (the middleware) answer 413 under ``/api/``; a multipart file goes to Django's upload handlers (not bounded by
  ``DATA_UPLOAD_MAX_MEMORY_SIZE``, by design); the admin keeps Django's 400 page.
"""

import gzip
import json
from typing import Any

import pytest

from agents_app.models_adapters.base import RefusedTurn
from agents_app.models_adapters.openai_chat import OpenAIChatAdapter
from tests.mcpclient.fake_server import FakeCrm, serving
from tests.unit.fake_openai import FakeModel, Reply
from toolhub.exceptions import ModelError
from toolhub.mcp_client.remote import RemoteServerError, remote_tools

MESSAGES = [{"role": "user", "content": "hello there"}]
GZIP = {"Content-Encoding": "gzip"}


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


def test_a_remote_mcp_answer_is_bounded_by_the_bytes_read(settings: Any) -> None:
    """Found: a remote MCP server's answer was read whole into memory whatever its size (a listing of 5 MB here,
    any size until the timeout) and only then checked against ``MAX_EXTERNAL_RESULT_BYTES``: the model endpoints'
    bound on bytes read (``wire``) was not on the MCP client.

    Expect: the fetch fails at 64 x ``MAX_EXTERNAL_RESULT_BYTES`` read, naming the setting, nothing listed.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_EXTERNAL_RESULT_BYTES": 1_000}
    fake = FakeCrm()
    fake.extra_tools = [{"name": "padded", "description": "p" * 5_000_000, "inputSchema": {"type": "object"}}]
    with serving(fake) as url, pytest.raises(RemoteServerError) as failed:
        remote_tools(url, name="crm", headers={}, timeout=30)

    assert "MAX_EXTERNAL_RESULT_BYTES" in str(failed.value) and url not in str(failed.value)
