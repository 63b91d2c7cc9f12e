"""Review l (2026-12-06): regression review of ``toolhub.deadlines.run_within`` (8153f98: the tool timeout, the model
call's deadline and the webhook attempt's deadline on one helper-thread wait) and of the MCP client's one byte count
per use (``toolhub.wire.bounded_async_responses``, f6602c6).

Findings:
- The model call's cut (``OpenAI.close()``) closed its sockets' descriptors only: a helper thread blocked reading the
  endpoint's answer was not woken and the connection stayed open (no end sent to the endpoint, which went on
  answering) until the endpoint's next byte or the read timeout, up to 30 s by default. The README says the
  connection is closed when the step stops waiting. The cut now shuts the client's sockets both ways, as the
  webhook's cut always did (``toolhub.deadlines.shut``, one way for both)
  (``test_a_model_call_given_up_between_two_bytes_ends_at_once``).

Checked and holds (old code read with ``git show 8153f98^:<path>``):
- Messages: ``ToolTimeoutError``'s text (the model's and the audit trail's) is built as before; it is raised
  ``from None``, so the audit detail (``traceback.format_exception``) shows no ``DeadlineExceeded``. The model's
  deadline message and its ``RefusedTurn`` charge, the webhook's "TimeoutError: ..." and the SDK error mapping
  (redirect, status, connection, wire bound) are unchanged; the mapping runs on the helper now, same causes kept.
- Timing: the wait is ``min(every, time left)`` as the model's copy had it (partial text at most every
  ``STREAM_FLUSH_SECONDS``, none after the answer, as before: the turn's record clears it); the tools' and the
  webhook's single wait of ``seconds`` is the same. ``seconds`` 0 or negative give up at once as before; NaN is
  refused for tools (``definition_rules``) and settings (``Seconds``), the webhook's is a fixed 10 s, and a
  provider's deadline (a form's float field refuses NaN) loops as the model's copy did; ``inf`` (a tool's timeout)
  fails with ``OverflowError`` as ``join`` did.
- A raising ``tick`` (the partial writer) or an exception on the waiting thread (Celery's soft time limit,
  ``SIGALRM`` of an outer tool) cuts, then propagates; ``cut`` (``close``, the webhook's ``shut``) does not raise.
  The helper's ``BaseException`` (``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``) is re-raised in the
  caller as all three copies did; ``run_outcome`` turns a tool's into a failed call as before.
- ``connections.close_all()`` on the helper closes only the helper's own: Django's connections are thread-critical
  (``threading.local`` in a sync thread), so a helper never sees the caller's, not under pytest-django, in eager
  mode, in a live server thread (``connections_override`` is per thread) or under ``ATOMIC_REQUESTS`` (not set);
  SQLite's in-memory test database is one shared cache with a connection per thread, whose ``close`` is a no-op.
- Context: the tools' helper ran in a copy of the caller's context before too; the model's and the webhook's ran in
  an empty one, and set no variable the caller read, nor do they now.
- Tool timeouts on a real prefork worker use ``SIGALRM`` on the main thread (not ``run_within``); the soft time
  limit stays above the tools' timeouts (``tasks.py``).
- wire: one count per MCP use: a long call's progress notifications were already one response's count; the GET
  stream's keepalive comments are bytes a minute, its two reconnects and the SDK's one POST resumption add little;
  a use lasts its server's timeout at most, so a legitimate use stays far below 64 x ``MAX_EXTERNAL_RESULT_BYTES``
  (64 MB). The README's setting table said "a remote MCP tool answer ... 64 times it read off the wire"; it now
  says that bound covers one use of an MCP server.
"""

import threading
import time

import pytest

from agents_app.models_adapters.openai_chat import OpenAIChatAdapter
from tests.unit.fake_openai import FakeModel, serve, streamed


def test_a_model_call_given_up_between_two_bytes_ends_at_once() -> None:
    """Found: the model's cut only closed the client: its helper, blocked reading the next chunk of an endpoint that
    paused, read on until that chunk came (3 s here; up to the read timeout), the connection open all along.

    Expect: once the step stops waiting (its partial-text writer failed), the helper ends within a second.
    """
    with serve(FakeModel()) as fake:
        fake.queue(streamed(content=["first ", "second"], chunk_delay=3.0))  # a 3 s pause after the first text
        adapter = OpenAIChatAdapter(
            provider_name="paused",
            base_url=fake.base_url,
            model="m",
            api_key="k",
            stream=True,
            flush_seconds=0.05,
            deadline=30.0,
        )

        def failing_writer(text: str) -> None:
            if text:
                raise RuntimeError("the database went away")

        with pytest.raises(RuntimeError, match="went away"):
            adapter.complete(messages=[{"role": "user", "content": "hi"}], tools=[], on_partial=failing_writer)
        given_up = time.monotonic()
        for thread in [thread for thread in threading.enumerate() if thread.name == "model-call-paused"]:
            thread.join(timeout=5)
        assert time.monotonic() - given_up < 1.0, "the helper read on after its caller had given it up"
