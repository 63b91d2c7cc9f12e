"""Review of 2026-12-05 (bp): the agent loop against a misbehaving OpenAI-compatible model endpoint.

Each test fails on the reviewed code (main at 2c54724) and states what was found ("Found: ...") and what is expected
("Expect: ..."). The endpoint is the tests' own (``tests/unit/fake_openai.py``), driven through the ``openai`` SDK.

Findings:

1. A turn the endpoint says it cut off (``finish_reason`` ``length``: the agent's ``max_tokens`` or the context
   ran out; ``content_filter``: the provider withheld it) was taken as a finished answer, plain and streamed alike:
   the complete calls of a cut-off turn were executed (the model's plan cut short), and a cut-off or withheld text
   completed the run as ``answered`` with half an answer (or none) as its output. README promises a streamed
   answer "before the model finished ... nothing of it is recorded or executed".
2. A refused turn's tokens were never counted: a turn the endpoint answered (and billed) but the loop refused
   (too big for ``MAX_EXTERNAL_RESULT_BYTES``, now a cut-off one too) failed the run with its token totals
   unchanged, so a retried run's totals, and a child's ``max_tokens`` budget, missed what its model really spent.
3. A streamed answer was read to its end whatever its size: ``MAX_EXTERNAL_RESULT_BYTES`` was checked only once
   the stream finished, so an endpoint streaming without end filled the worker's memory (and rewrote the whole
   text so far into ``partial_output`` at every flush) until the provider's deadline.

Checked and found holding (no test here): empty ``choices`` (plain: ``IndexError`` caught; streamed: no finish
reason) fail the turn retryably, nothing recorded; ``arguments`` that are invalid JSON, a JSON array, huge (over
``MAX_ARGUMENTS_BYTES``) each make an ``invalid`` call the model reads a bounded message about, nothing executed
(review aa); repeated ids within a turn (plain, or streamed deltas at different indexes) are made unique by
``_call_ids`` and results are appended in position order, never matched by id (reviews d, an); streamed deltas with
no index and a repeated id merge into one call whose concatenated arguments are invalid (nothing executed); usage
missing, ``null``, negative, huge, ``Infinity`` or text (review an); 429/500 answers are retried once by the SDK
(``max_retries=1``) before any byte of an answer is read, so no tool call is recorded twice, and a turn answered
after its lease lapsed is dropped by its step token (counted once); the deadline bounds retries and dripping
bodies; errors told to the run name only the provider and an HTTP status (never the URL, key or body); a model
calling tools forever stops at ``max_tool_calls`` (every turn with calls counts them, invalid ones too, across
retries: ``calls_used`` reads the run's call rows); a tool not offered this turn but granted runs (README:
visibility is not a permission), a denied one reads as unknown.
"""

import json
import time
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent, AgentRun, ModelProvider, ProviderKind, RunStatus, StopReason
from agents_app.services import agent_create, run_start
from tests.unit.fake_openai import FakeModel, Reply, completion
from toolhub.models import ToolCall

pytestmark = pytest.mark.django_db


def _agent(model: FakeModel, *, stream: bool = False, deadline: float = 120.0) -> Agent:
    provider = ModelProvider.objects.create(
        name="fake",
        kind=ProviderKind.OPENAI,
        base_url=model.base_url,
        model_name="test-model",
        deadline_seconds=deadline,
    )
    return agent_create(name="gpt", provider=provider.name, tools=["calculate"], stream=stream)


def _started(agent: Agent, user: User, capture: Any) -> AgentRun:
    with capture(execute=True):
        run = run_start(agent=agent, user=user, input="go")
    run.refresh_from_db()
    return run


_SUM = '{"a": 1, "op": "+", "b": 2}'
_CUT = '{"a": 5, "op": "*", "b'
_USAGE = {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}


def _plain(finish: str, *, calls: bool, text: str = "The refund was appr") -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": None if calls else text}
    if calls:
        message["tool_calls"] = [
            {"id": "c1", "type": "function", "function": {"name": "calculate", "arguments": _SUM}},
            {"id": "c2", "type": "function", "function": {"name": "calculate", "arguments": _CUT}},
        ]
    body = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": _USAGE,
    }
    return Reply(200, json.dumps(body).encode())


def _sse(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> bytes:
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": choices,
    }
    if usage:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


def _streamed(finish: str, *, calls: bool) -> Reply:
    pieces = [_sse([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
    if calls:
        for index, (call_id, arguments) in enumerate((("c1", _SUM), ("c2", _CUT))):
            delta = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": "calculate", "arguments": arguments},
            }
            pieces.append(_sse([{"index": 0, "delta": {"tool_calls": [delta]}, "finish_reason": None}]))
    else:
        pieces.append(_sse([{"index": 0, "delta": {"content": "The refund was appr"}, "finish_reason": None}]))
    pieces.append(_sse([{"index": 0, "delta": {}, "finish_reason": finish}]))
    pieces += [_sse([], usage=_USAGE), b"data: [DONE]\n\n"]
    return Reply(200, b"", content_type="text/event-stream", chunks=pieces)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("finish", ["length", "content_filter"])
@pytest.mark.parametrize("calls", [True, False], ids=["tool-calls", "text"])
def test_a_turn_the_endpoint_cut_off_is_not_taken_as_the_models_answer(
    fake_model: FakeModel,
    alice: User,
    django_capture_on_commit_callbacks: Any,
    stream: bool,
    finish: str,
    calls: bool,
) -> None:
    """Found: ``_turn_from`` and ``StreamedTurn.turn`` ignored ``finish_reason`` (the stream only needed one):
    a turn cut off at ``max_tokens`` had its complete call executed (``calculate`` succeeded, the cut one was
    ``invalid``) and the run went on; a cut-off or filtered text completed the run ``answered`` with it as output.

    Expect: the turn fails the run retryably, saying the model's answer was cut off (or withheld) and that
    nothing of it was used; no call row, no assistant message of it, no output.
    """
    fake_model.queue((_streamed if stream else _plain)(finish, calls=calls), completion(content="done"))

    run = _started(_agent(fake_model, stream=stream), alice, django_capture_on_commit_callbacks)

    assert run.status == RunStatus.FAILED, (run.status, run.output, run.error)
    assert (run.stop_reason, run.retryable) == (StopReason.MODEL_ERROR, True)
    assert finish in run.error and "nothing of it was used" in run.error, run.error
    assert not ToolCall.objects.filter(run_id=run.id).exists()
    assert run.output == "" and not any(m.get("role") == "assistant" for m in run.messages)
    assert run.step_lease_until is None and run.step_token is None


@pytest.mark.parametrize(
    "reply",
    [
        _plain("length", calls=False),
        _streamed("length", calls=False),
        _plain("stop", calls=False, text="x" * 30_000),
    ],
    ids=["cut-off-plain", "cut-off-streamed", "too-big"],
)
def test_a_refused_turn_still_counts_the_tokens_the_endpoint_reported(
    fake_model: FakeModel, alice: User, django_capture_on_commit_callbacks: Any, settings: Any, reply: Reply
) -> None:
    """Found: a turn the loop refuses after the endpoint answered it (too big for ``MAX_EXTERNAL_RESULT_BYTES``,
    and now a cut-off one) failed the run through ``_fail_step``, which adds nothing to ``prompt_tokens`` and
    ``completion_tokens``: the tokens the provider billed for it were on no run, and a child's ``max_tokens``
    budget never saw them.

    Expect: the run fails and its totals hold the refused turn's usage.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_EXTERNAL_RESULT_BYTES": 20_000}
    fake_model.queue(reply)

    run = _started(_agent(fake_model, stream=reply.chunks is not None), alice, django_capture_on_commit_callbacks)

    assert run.status == RunStatus.FAILED, (run.status, run.output)
    assert (run.prompt_tokens, run.completion_tokens) == (40, 9), run.error


def test_a_streamed_answer_past_the_bound_is_given_up_as_soon_as_it_passes_it(
    fake_model: FakeModel, alice: User, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    """Found: ``StreamedTurn`` kept every piece a stream sent and ``model_answer`` measured the turn only once
    it was complete, so an endpoint streaming text without end (here 3 MB in 100-byte pieces, past a 20 kB
    ``MAX_EXTERNAL_RESULT_BYTES``) was read, held in memory and rewritten into ``partial_output`` at every flush
    until the provider's deadline, which ended the run as a slow endpoint ("did not answer within its deadline").

    Expect: the stream is given up as soon as the answer passes the bound, well before the deadline, and the run
    fails retryably saying so; ``partial_output`` is cleared.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_EXTERNAL_RESULT_BYTES": 20_000, "STREAM_FLUSH_SECONDS": 0.05}
    piece = _sse([{"index": 0, "delta": {"content": "x" * 100}, "finish_reason": None}])
    fake_model.queue(Reply(200, b"", content_type="text/event-stream", chunks=[piece] * 30_000, chunk_delay=0.0002))
    agent = _agent(fake_model, stream=True, deadline=4.0)

    began = time.monotonic()
    run = _started(agent, alice, django_capture_on_commit_callbacks)
    took = time.monotonic() - began

    assert run.status == RunStatus.FAILED and run.retryable, run.error
    assert "MAX_EXTERNAL_RESULT_BYTES" in run.error, run.error
    assert took < 3.0, took
    assert run.partial_output == ""
