"""Review of 2026-12-05 (o): model endpoints, streaming and usage/budget accounting (``agents_app.models_adapters``).

Each test fails on the reviewed code and states what was found ("Found: ...") and what is expected ("Expect: ...").

Findings:

1. A streamed answer that ended with an error event after some content (``data: {"error": ...}``, which the SDK
   raises as ``openai.APIError``), or broke off on the transport (the SDK wraps a reset or a read error mid-stream in
   ``openai.APIConnectionError``), was re-raised as it came: the run was charged nothing for what was read, unlike a
   stream given up at its size bound, ended early, with a bad event or at the deadline (``RefusedTurn``).
2. A child run's ``max_tokens`` budget was checked only after a model turn: a run that had reached it (exactly, or
   through its subagents' spending while its calls ran) asked its model once more, a whole turn past the budget.
3. The model's reasoning ("thinking": ``reasoning_content`` / ``reasoning``, streamed or whole) was neither counted
   in the estimate of an answer whose endpoint reports no usage (300,000 characters of reasoning were charged as the
   one token of the answer ``ok``) nor against the streamed answer's size bound (an endless reasoning stream ran
   to the deadline).
4. A model's refusal (OpenAI's ``refusal`` field, content null; streamed as ``refusal`` deltas) was dropped: the run
   completed as answered with an empty output, its user never told that, or why, the model declined.
5. A model provider's base URL was taken with credentials in it (``https://user:sk-...@host/v1``, ``?api-key=sk-...``):
   stored, shown on the provider's page and written into the governance events of the tenant's audit chain (read by
   its auditors), the key kept everywhere ``credential_env`` exists to keep it out of.

Checked and holding (probed with the ``openai`` SDK against the local fake endpoint; no test here):

- usage: negative, ``Infinity``, non-numeric text refuse the turn (review an); ``"12"`` and ``3.7`` read as 12 and 3;
  ``10**30`` is kept at the column's bound (``MAX_TOKENS_KEPT``); ``total_tokens`` is never read, so a
  ``prompt_tokens`` above it changes nothing; usage in every chunk (cumulative) is taken from the last chunk that
  carries it, never summed (no double count); a usage chunk that never comes is estimated (4 characters a token).
- tool calls: a name the agent does not have is ``denied`` and reads as unknown, nothing run; argument deltas that
  never close make an ``invalid`` call the model is told about; a stream cut mid-call runs nothing; 3,000 calls in one
  turn stop the run at ``max_tool_calls`` before any is requested (one turn's calls are checked whole).
- ``n>1``: never asked for; a plain answer's ``choices[0]`` and a stream's index 0 are read, other choices ignored;
  the model name an endpoint answers with is not read.
- budgets: an agentic tool's inner model is refused once its run's budget is reached (``_ChargedToRun``); a child's
  budget is carved from what its parent has left; after finding 2 a run overshoots its budget by at most the one turn
  that crossed it, whose calls are then not run.
- secrets: an HTTP error's body (``Incorrect API key provided: sk-...``) is not repeated (the run reads ``HTTP 401``;
  neither the run row nor the audit trail holds it); an error event's text is not repeated either (finding 1); an
  agentic tool's model error is re-raised ``from None`` (no chained SDK exception kept in a traceback); the provider's
  key echoed in text, tool names, arguments and partial output is scrubbed (``SecretScrubber``); the SDK does not
  read ``OPENAI_*`` environment (``provider_client``); the root logger is at WARNING, so httpx's request lines (with
  the URL) are not logged by default.

Not fixed:

- A turn refused for garbage usage (negative, text) is charged nothing: the answer is not used, and what the endpoint
  billed is unknown; charging an estimate there would turn a refusal of garbage into a guess. Likewise a stream given
  up after a garbage usage chunk raises the garbage error, not a charged ``RefusedTurn`` (usage comes last).
- A stream's choices other than index 0 are skipped before they are counted, so an endpoint streaming an endless
  second choice is bounded by the provider's deadline, not by ``MAX_EXTERNAL_RESULT_BYTES`` (nothing of it is kept).
- The scrubber matches the provider's key in its simple encodings only: a model writing it with some characters
  JSON-escaped (``\u0073k-...``) in tool arguments passes it to the tool (documented limit of ``SecretScrubber``).
"""

import json
from typing import Any

import httpx
import openai
import pytest
from django.contrib.auth.models import User

from agents_app.models_adapters.base import CHARS_PER_TOKEN, RefusedTurn
from tests.profiles.conftest import MakeAgent, fake_model, openai_agent  # noqa: F401 - fixtures
from tests.unit.fake_openai import FakeModel, Reply, completion, streamed

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "sk-upstream-9f8e7d6c5b4a39281706"


def test_a_stream_ending_with_an_error_event_is_charged_what_was_read(
    fake_model: FakeModel,  # noqa: F811 - the fixture imported above
    openai_agent: MakeAgent,  # noqa: F811
    alice: User,
) -> None:
    """Found: a stream that streamed 4,000 characters and then an error event (``data: {"error": ...}``) failed the
    turn as the SDK's ``APIError``, re-raised by ``_consume``: the run was charged nothing, so a run's or a child's
    ``max_tokens`` budget never saw it. Expect: charged what was read (``RefusedTurn``), the run failing retryably,
    and the endpoint's error text (here naming an upstream key) neither in the run's error nor anywhere on it."""
    from agents_app.models import AgentRun, RunStatus, StopReason
    from agents_app.services import run_start

    reply = streamed(content=["x" * 400] * 10)
    error = f'data: {{"error": {{"message": "upstream failed for key {SECRET}", "type": "server_error"}}}}\n\n'
    reply.chunks = [*(reply.chunks or [])[:11], error.encode()]
    fake_model.queue(reply)
    run = run_start(agent=openai_agent(stream=True), user=alice, input="write a long answer")
    run.refresh_from_db()
    assert (run.status, run.stop_reason, run.retryable) == (RunStatus.FAILED, StopReason.MODEL_ERROR, True)
    assert "broke off" in run.error, run.error
    assert run.prompt_tokens > 0
    assert run.completion_tokens >= 4_000 // CHARS_PER_TOKEN
    assert SECRET not in str(AgentRun.objects.filter(pk=run.pk).values().get())


def test_a_stream_reset_on_the_transport_midway_is_charged_what_was_read() -> None:
    """Found: the SDK wraps a transport error while a stream is read (a reset, a read error) in
    ``openai.APIConnectionError``, an ``openai.APIError`` that ``_consume`` re-raised as it came: not charged.
    Expect: a ``RefusedTurn`` charged with the text read so far."""
    from agents_app.models_adapters.openai_chat import _consume
    from agents_app.models_adapters.streaming import StreamedTurn

    class Broken:
        def __enter__(self) -> "Broken":
            return self

        def __exit__(self, *exc: Any) -> None:
            return None

        def __iter__(self) -> Any:
            delta = type("Delta", (), {"content": "y" * 800, "tool_calls": None})()
            choice = type("Choice", (), {"index": 0, "delta": delta, "finish_reason": None})()
            yield type("Chunk", (), {"usage": None, "choices": [choice]})()
            raise openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1/v1/chat/completions"))

    turn = StreamedTurn(prompt_characters=40)
    with pytest.raises(RefusedTurn) as refused:
        _consume(Broken(), turn)
    assert (refused.value.prompt_tokens, refused.value.completion_tokens) == (10, 800 // CHARS_PER_TOKEN)


def test_a_child_run_whose_token_budget_is_spent_does_not_ask_its_model_again(alice: User) -> None:
    """Found: a child run's ``max_tokens`` budget was checked only after a turn (``_record_turn``: more than the
    budget stops the turn's calls), never before asking the model: a run that reached its budget exactly, or whose
    own subagents spent the rest of it while its calls ran, asked its model once more, a whole turn (the conversation
    as its prompt) past the budget, while an agentic tool's inner model of the same run is refused at the same point.
    Expect: the step refuses to ask the model of a run whose budget is spent, and the run stops on ``max_tokens``."""
    from agents_app.loop import run_advance
    from agents_app.models import AgentRun, RunStatus, StopReason
    from agents_app.services import agent_create

    agent = agent_create(name="review-o-budget", provider="scripted", tools=[], script=[{"content": "one more turn"}])
    run = AgentRun.objects.create(
        agent=agent,
        user_id=alice.id,
        tenant="",
        input="go",
        status=RunStatus.RUNNING,
        limits={"max_tokens": 10},
        prompt_tokens=8,
        completion_tokens=2,
        messages=[{"role": "user", "content": "go"}],
    )
    run_advance(run_id=run.id)
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == (RunStatus.FAILED, StopReason.MAX_TOKENS), (run.status, run.output)
    assert (run.turn, run.output, run.prompt_tokens + run.completion_tokens) == (0, "", 10)
    assert "10 tokens" in run.error


def _without_usage(reply: Reply, *, reasoning: str, field: str) -> Reply:
    """``reply`` (the answer ``ok``) with ``reasoning`` in ``field``, no usage; whole, or streamed in 1,000 pieces."""
    if reply.chunks is None:
        body = json.loads(reply.body)
        body["choices"][0]["message"][field] = reasoning
        del body["usage"]
        return Reply(200, json.dumps(body).encode())
    step = len(reasoning) // 1000
    thinking = streamed(content=[reasoning[i : i + step] for i in range(0, len(reasoning), step)]).chunks or []
    chunks = [piece.replace(b'"content"', f'"{field}"'.encode()) for piece in thinking[1:-3]]
    answer = reply.chunks or []
    reply.chunks = [answer[0], *chunks, *answer[1:-2], answer[-1]]  # its usage chunk left out
    return reply


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("whole", [True, False], ids=["whole", "streamed"])
def test_the_models_reasoning_is_charged_when_the_endpoint_reports_no_usage(
    whole: bool,
    field: str,
    fake_model: FakeModel,  # noqa: F811 - the fixture imported above
    openai_agent: MakeAgent,  # noqa: F811
    alice: User,
) -> None:
    """Found: an endpoint that reports no usage (a self-hosted server) had each answer charged by its length
    (``reported_or_estimated``), counting the answer's text and calls but not the reasoning the model wrote before
    it: 300,000 characters of thinking and the answer ``ok`` cost 1 completion token, so a child's ``max_tokens``
    budget bound nothing for a reasoning model. Expect: the reasoning is counted as written (75,000 tokens here)."""
    from agents_app.models import RunStatus
    from agents_app.services import run_start

    reasoning = "I think. " * 33_334
    reply = completion(content="ok") if whole else streamed(content=["ok"])
    fake_model.queue(_without_usage(reply, reasoning=reasoning, field=field))
    run = run_start(agent=openai_agent(stream=not whole), user=alice, input="think hard")
    run.refresh_from_db()
    assert (run.status, run.output) == (RunStatus.COMPLETED, "ok"), run.error
    assert run.completion_tokens >= len(reasoning) // CHARS_PER_TOKEN


def test_a_streamed_reasoning_past_the_size_bound_is_given_up_there(
    fake_model: FakeModel,  # noqa: F811 - the fixture imported above
    openai_agent: MakeAgent,  # noqa: F811
    alice: User,
    settings: Any,
) -> None:
    """Found: ``StreamedTurn`` counted text and tool-call deltas against ``MAX_EXTERNAL_RESULT_BYTES`` but not
    reasoning deltas, so an endpoint that reasons without end was read until the provider's deadline.
    Expect: given up at the bound, as a long answer is, and charged what was read."""
    from agents_app.models import RunStatus, StopReason
    from agents_app.services import run_start

    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_EXTERNAL_RESULT_BYTES": 100_000}
    fake_model.queue(_without_usage(streamed(content=["ok"]), reasoning="hmm. " * 60_000, field="reasoning_content"))
    run = run_start(agent=openai_agent(stream=True), user=alice, input="think hard")
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == (RunStatus.FAILED, StopReason.MODEL_ERROR)
    assert "passed 100,000 bytes" in run.error
    assert run.completion_tokens >= 100_000 // CHARS_PER_TOKEN


@pytest.mark.parametrize("whole", [True, False], ids=["whole", "streamed"])
def test_a_models_refusal_is_its_answer_not_an_empty_one(
    whole: bool,
    fake_model: FakeModel,  # noqa: F811 - the fixture imported above
    openai_agent: MakeAgent,  # noqa: F811
    alice: User,
) -> None:
    """Found: an answer whose text came in ``refusal`` (content null), as OpenAI sends a refusal, was read as no text:
    the run completed "answered" with an empty output. Expect: the refusal is the answer the run ends with."""
    from agents_app.models import RunStatus
    from agents_app.services import run_start

    said = "I'm sorry, I can't help with that."
    if whole:
        body = json.loads(completion(content=None).body)
        body["choices"][0]["message"]["refusal"] = said
        reply = Reply(200, json.dumps(body).encode())
    else:
        reply = streamed(content=[said[:10], said[10:]])
        chunks = reply.chunks or []  # the role's chunk, the two pieces, the finish, the usage, [DONE]
        reply.chunks = [chunks[0], *(piece.replace(b'"content"', b'"refusal"') for piece in chunks[1:3]), *chunks[3:]]
    fake_model.queue(reply)
    run = run_start(agent=openai_agent(stream=not whole), user=alice, input="do something bad")
    run.refresh_from_db()
    assert (run.status, run.output) == (RunStatus.COMPLETED, said), run.error


@pytest.mark.parametrize(
    "url",
    [f"https://gateway:{SECRET}@llm.example.com/v1", f"https://llm.example.com/v1?api-key={SECRET}"],
    ids=["userinfo", "query"],
)
def test_a_provider_url_carrying_a_credential_is_refused(url: str) -> None:
    """Found: ``ModelProviderForm`` (the one way a provider is made or changed) accepted a base URL holding a key,
    which the row, its page and its governance events (in the bound tenant's chain) then kept as given.
    Expect: refused, saying the key belongs in the environment variable ``credential_env`` names."""
    from agents_app.admin import ModelProviderForm

    data = {"name": "leaky", "kind": "openai", "model_name": "m", "credential_env": "LEAKY_KEY"}
    data |= {"deadline_seconds": 60, "request_timeout_seconds": 30, "note_placement": "tool_result"}
    assert ModelProviderForm(data={**data, "base_url": "https://llm.example.com/v1"}).is_valid()
    form = ModelProviderForm(data={**data, "base_url": url})
    assert not form.is_valid()
    assert "credential_env" in str(form.errors.get("base_url")), form.errors
    assert SECRET not in str(form.errors)


def test_reasoning_sent_in_both_fields_is_counted_once() -> None:
    """Found (review bn, after review o): an endpoint sending the same reasoning as ``reasoning_content`` and as
    ``reasoning`` had it counted twice, in the estimate and against the stream's bound. Expect: the first field
    holding text, once."""
    from types import SimpleNamespace

    from agents_app.models_adapters.base import reasoning_texts

    both = SimpleNamespace(reasoning_content="thinking hard", reasoning="thinking hard")
    assert reasoning_texts(both) == ["thinking hard"]
    assert reasoning_texts(SimpleNamespace(reasoning="only here")) == ["only here"]
    assert reasoning_texts(SimpleNamespace(reasoning_content=None, reasoning=3)) == []
    # Two different texts (review cs): the longer counts, whichever field holds it.
    assert reasoning_texts(SimpleNamespace(reasoning_content="short", reasoning="a much longer one")) == [
        "a much longer one"
    ]


def test_a_whole_answer_with_content_and_a_refusal_keeps_both_as_a_stream_does() -> None:
    """Found (review bn, after review o): with both ``content`` and ``refusal``, a whole answer kept only the
    content where a streamed one joined both. Expect: both, in that order, either way."""
    from types import SimpleNamespace

    from agents_app.models_adapters.openai_chat import _turn_from

    message = SimpleNamespace(content="Partly: ", refusal="I can't do the rest.", tool_calls=None)
    response = SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")], usage=None)
    turn = _turn_from(response, lambda: 40)
    assert turn.content == "Partly: I can't do the rest."
