"""Review of 2026-12-05 (an): what a run's user and its model can put into the agent loop's conversation and state.

Each test fails on the reviewed code (main at adef95c) and states who reaches what, where ("Found: ...") and what
is expected ("Expect: ..."). The models are the scripted one and an OpenAI-compatible endpoint served by the test
(``tests/unit/fake_openai.py``), answering as a hostile or non-conforming server would.

Findings:

1. A model endpoint answering a chat completion whose fields are not what the format says (a tool call's
   ``arguments`` as a JSON object, its ``id`` a number, its ``name`` or the ``content`` a list, a negative or
   huge token count) was taken as it came: the loop's ``_storable_turn`` (outside the adapter's ``try``) raised
   ``AttributeError`` on it, and a negative or overflowing count broke the run's write (``CHECK constraint``,
   ``OverflowError``). The step's task crashed with a traceback, the run stayed ``running`` under its lease, and
   after each lease the sweep asked the model again, forever. The model's turn is now checked where adapters
   build it (``ModelTurn``/``ModelToolCall``: text, and token counts that are non-negative integers) and refused
   as a ``ModelError`` (the run fails retryably with a clear reason); a run's token totals stop at what their
   columns hold (``budgets.tokens_added``), also where an agentic tool's inner model charges its turns to the run
   (``agentic._ChargedToRun``: its unbounded ``F() + n`` failed the UPDATE, and with it the agentic call).
2. The run's transcript (its admin page, read by the tenant's operators and auditors) matched each call the
   model asked for to a call row by the model's call id alone, across the whole run and every kind of call. Ids
   are unique only within a turn: a model (or a provider that numbers ids per answer, ``call_0``) reusing an id
   in a later turn, or an agentic tool's inner model whose ids repeat the run's own (the scripted model's
   ``call_1_1`` in both), made the transcript show under the first turn's request another call, its tool,
   status and result (a ``calculate`` that succeeded where a ``create_order`` waits for approval), and moved the
   real call to "other calls". Now a request is matched among the run's own calls of its turn.

Checked and found holding (no test here): no endpoint adds messages to a run (``POST /runs/`` takes ``input``, a
string, and ``context``; retry and cancel take no messages), so a user sends no ``assistant``, ``tool`` or
``system`` message, tool call id or approval; the agent's system prompt, tools, ``tool_choice``, provider and
limits come from the agent row (developers, checked by ``agents_app.services._apply``), never from the run's
request; ``context`` refuses the reserved keys and typed context keys, and the boundary's values are laid over
it (``run_tool_context``); the admin's run page is read-only; the disclosure state is read-only (API and admin).
The model: its text is stored as an ``assistant`` message and never as a note (notes are ``system`` messages
the loop writes from ``rollback_note``); call ids are made unique within a turn (``_call_ids``) and results are
appended from the turn's call rows in position order, never matched by the model's id; a name with whitespace or
in another case is an unknown tool (``registry.get`` is exact) answered with suggestions among usable tools;
arguments go through the pipeline as text (the scripted model's objects are written out as JSON first); the
scripted model's ids are its own (``call_<turn>_<position>``) whatever its script says. What the model reads
after a refusal: denials of hidden tools read as unknown tools, a rejection says "Rejected by operator" with the
comment and no name, execution errors are ``default_error_handler``'s summary (type name only) and the
traceback stays in ``error_detail``; rollback notes quote only those sanitized errors.
"""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent, AgentRun, ModelProvider, ProviderKind, RunStatus, StopReason
from agents_app.services import agent_create, run_start
from agents_app.transcript import run_transcript
from approvals.models import ApprovalRequest
from approvals.services import approval_reject
from tests.agentic import sample_tools
from tests.unit.fake_openai import FakeModel, Reply, completion
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db


def _openai_agent(model: FakeModel, tools: list[str]) -> Agent:
    provider = ModelProvider.objects.create(
        name="fake", kind=ProviderKind.OPENAI, base_url=model.base_url, model_name="test-model"
    )
    return agent_create(name="gpt", provider=provider.name, tools=tools)


def _started(agent: Agent, user: User, capture: Any) -> AgentRun:
    with capture(execute=True):
        run = run_start(agent=agent, user=user, input="go")
    run.refresh_from_db()
    return run


def _answer(message: dict[str, Any], usage: dict[str, Any] | None = None) -> Reply:
    """A chat completion with ``message`` as the server wrote it (no field checked)."""
    body = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", **message}}],
        "usage": usage or {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    return Reply(200, json.dumps(body).encode())


def _called(function: dict[str, Any], call_id: Any = "c1") -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"id": call_id, "type": "function", "function": function}]}


_SUM = '{"a": 1, "op": "+", "b": 2}'


@pytest.mark.parametrize(
    "reply",
    [
        _answer(_called({"name": "calculate", "arguments": {"a": 1, "op": "+", "b": 2}})),
        _answer(_called({"name": "calculate", "arguments": _SUM}, call_id=7)),
        _answer(_called({"name": ["calculate"], "arguments": _SUM})),
        _answer({"content": [{"type": "text", "text": "hello"}]}),
        _answer({"content": "hello"}, usage={"prompt_tokens": -1000, "completion_tokens": 1, "total_tokens": 1}),
        _answer({"content": "hello"}, usage={"prompt_tokens": 10**20, "completion_tokens": 1, "total_tokens": 1}),
        # (review aq's note) an endpoint's Infinity reached the adapter as an OverflowError, told as an adapter bug
        _answer({"content": "hello"}, usage={"prompt_tokens": float("inf"), "completion_tokens": 1, "total_tokens": 1}),
        _answer({"content": "hello"}, usage={"prompt_tokens": "many", "completion_tokens": 1, "total_tokens": 1}),
    ],
    ids=[
        "arguments-object",
        "id-number",
        "name-list",
        "content-parts",
        "negative-usage",
        "huge-usage",
        "infinite-usage",
        "text-usage",
    ],
)
def test_a_model_answer_of_the_wrong_shape_fails_the_run_instead_of_leaving_it_running(
    fake_model: FakeModel, alice: User, django_capture_on_commit_callbacks: Any, reply: Reply
) -> None:
    """Found: the OpenAI SDK builds its answer without checking field types, and the adapter passed a tool call's
    ``arguments`` object, a numeric ``id``, a list ``name`` or ``content`` and any ``usage`` on to the loop, whose
    ``_storable_turn`` (``storable_text``) raised ``AttributeError`` outside the adapter's ``try``, and a negative or
    overflowing token count broke the run's write: the step's task crashed, the run stayed ``running`` with its
    lease and the model was asked again after every lease.

    Expect: the turn either completes the run (a huge count kept at the column's bound) or fails it retryably with
    a reason naming the endpoint's answer, no lease left, nothing executed.
    """
    fake_model.queue(reply, completion(content="done"))

    run = _started(_openai_agent(fake_model, ["calculate"]), alice, django_capture_on_commit_callbacks)

    assert run.status in (RunStatus.COMPLETED, RunStatus.FAILED), (run.status, run.error)
    assert run.step_lease_until is None and run.step_token is None
    if run.status == RunStatus.FAILED:
        assert (run.stop_reason, run.retryable) == (StopReason.MODEL_ERROR, True)
        assert "Model endpoint answered" in run.error and "Traceback" not in run.error
    assert not ToolCall.objects.exclude(status=CallStatus.INVALID).exists()


def test_a_huge_token_count_is_kept_within_what_the_run_can_store(
    fake_model: FakeModel, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a run's token totals add each turn's counts as the endpoint reports them; a count past the
    column's range (``PositiveIntegerField``) made the turn's write fail and the run stay ``running``.

    Expect: the run completes, its totals at most the column's bound (and past any budget).
    """
    fake_model.queue(
        _answer({"content": "hello"}, usage={"prompt_tokens": 2**31 + 5, "completion_tokens": 1, "total_tokens": 1})
    )

    run = _started(_openai_agent(fake_model, ["calculate"]), alice, django_capture_on_commit_callbacks)

    assert run.status == RunStatus.COMPLETED, run.error
    assert run.prompt_tokens == 2**31 - 1


def test_a_call_id_reused_in_a_later_turn_is_shown_under_its_own_turn(
    fake_model: FakeModel, alice: User, operator: User, committed: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: ``run_transcript`` matched the calls of every assistant message by the model's call id over the
    whole run (``by_model_id``), the last row of an id winning; ids are unique only within a turn, so a model
    that asks ``create_order`` as ``c1`` (rejected by an operator) and then ``calculate`` as ``c1`` is shown to
    the operators as having asked ``calculate`` (succeeded) twice, and the rejected order is moved to "other
    calls".

    Expect: each model message shows the call its own turn made under that id.
    """
    order = '{"product": "Laptop", "amount": "5000"}'
    fake_model.queue(
        completion(tool_calls=[{"id": "c1", "name": "create_order", "arguments": order}]),
        completion(tool_calls=[{"id": "c1", "name": "calculate", "arguments": _SUM}]),
        completion(content="done"),
    )
    run = _started(_openai_agent(fake_model, ["create_order", "calculate"]), alice, django_capture_on_commit_callbacks)
    held = ToolCall.objects.get(run_id=run.id, tool_name="create_order")
    committed(approval_reject, request_id=ApprovalRequest.objects.get(call=held).pk, user=operator, comment="no")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.error
    summed = ToolCall.objects.get(run_id=run.id, tool_name="calculate")

    transcript = run_transcript(run)

    asked = [[shown.call.pk for shown in entry.calls] for entry in transcript.entries if entry.role == "assistant"]
    assert asked == [[held.pk], [summed.pk], []]
    assert transcript.other_calls == []


def test_an_agentic_tools_inner_call_is_not_shown_as_the_runs_own_request(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: an agentic tool's inner calls carry the run's id and turn and the inner model's call ids; the
    scripted model numbers ids ``call_<turn>_<position>`` in both loops, so the run's request of
    ``math_orchestrator`` (``call_1_1``) was shown in the transcript as the inner ``add`` call (its tool, result
    and approval), and the orchestrator's own call under "other calls".

    Expect: the model's message shows the orchestrator's call; inner calls never stand in for the run's own.
    """
    with registry.temporarily(*sample_tools.ALL):
        agent_create(
            name="math-brain",
            provider="scripted",
            tools=[],
            script=[
                {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
                {"content": "5"},
            ],
        )
        agent = agent_create(
            name="runner",
            provider="scripted",
            tools=["math_orchestrator"],
            script=[
                {"tool_calls": [{"name": "math_orchestrator", "arguments": {"task": "2+3"}}]},
                {"content": "done"},
            ],
        )
        run = _started(agent, alice, django_capture_on_commit_callbacks)

        transcript = run_transcript(run)

    assert run.status == RunStatus.COMPLETED, run.error
    outer = ToolCall.objects.get(run_id=run.id, kind=CallKind.CALL)
    inner = ToolCall.objects.get(run_id=run.id, kind=CallKind.INNER)
    assert outer.model_call_id == inner.model_call_id  # the premise: both models said call_1_1
    [asked] = [entry for entry in transcript.entries if entry.calls]
    assert [shown.call.pk for shown in asked.calls] == [outer.pk]


def test_an_inner_models_huge_token_count_is_kept_within_what_the_run_can_store(
    fake_model: FakeModel, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: an agentic tool's inner model charges its turns to the run with ``F("prompt_tokens") + n``
    (``agents_app.agentic._ChargedToRun``), with no bound: a count past the column's range failed the UPDATE
    inside the tool (``OverflowError``; ``integer out of range`` on PostgreSQL), so the agentic call failed with
    an internal error although its model answered (and, inside a transaction, broke it for the outcome's write).

    Expect: the agentic call succeeds and the run's totals stop at the column's bound, as the loop's do.
    """
    fake_model.queue(
        _answer({"content": "5"}, usage={"prompt_tokens": 10**20, "completion_tokens": 1, "total_tokens": 1})
    )
    with registry.temporarily(*sample_tools.ALL):
        provider = ModelProvider.objects.create(
            name="fake", kind=ProviderKind.OPENAI, base_url=fake_model.base_url, model_name="test-model"
        )
        agent_create(name="math-brain", provider=provider.name, tools=[])
        agent = agent_create(
            name="runner",
            provider="scripted",
            tools=["math_orchestrator"],
            script=[{"tool_calls": [{"name": "math_orchestrator", "arguments": {"task": "2+3"}}]}, {"content": "ok"}],
        )
        run = _started(agent, alice, django_capture_on_commit_callbacks)

    outer = ToolCall.objects.get(run_id=run.id, kind=CallKind.CALL)
    assert outer.status == CallStatus.SUCCEEDED, outer.error
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.prompt_tokens == 2**31 - 1
