"""Review 2026-12-06 (bb): where a model's output enters toolhub (the agent loop, model answers, argument intake).

Findings (each fails on db3553a, passes after the fix):

1. ``approvals.selectors.conversation_before`` found the model's words for a call held for approval by its model
   call id alone, across the run's turns; ids are unique within a turn only, so a model reusing ``c1`` in a later
   turn showed the approver an earlier turn's harmless words beside the risky call. Now turn and id must match
   (an inner call, whose id is its inner model's, showed no words: now those of its outer call).
2. ``agents_app.model_answers._turn_size`` bounded a model's turn by its calls' texts alone: calls with a short id
   and nothing else cost a few bytes each, so ~300,000 of them passed ``MAX_EXTERNAL_RESULT_BYTES`` and were kept as
   ~20 MB of conversation (and ``_call_ids`` walked them quadratically). Each call now counts the JSON the run keeps
   around it; ``_call_ids`` uses sets.
3. ``AgentRun.deferred_calls`` (serial execution) kept a turn's unrequested calls as the model sent them, sensitive
   values included, after the run was cancelled or failed for good. ``ending.run_finish`` now drops them when the
   run cannot be retried (a retry resumes them, so a retryable run keeps them).

Checked and holds (driven through the loop with a stand-in model):
- a turn asking for more calls than the agent's ``max_tool_calls`` (default 10, API caps 1000) fails the run with
  ``max_tool_calls``, no call row, nothing executed, the turn kept in the conversation; turns are bounded by the
  calls (a turn without calls ends the run; invalid calls count), a child's tokens by ``max_tokens``;
- ``1e400`` and ``NaN`` arguments are refused as not finite; an integer past Python's 4300 digits is refused as
  JSON syntax (``ValueError``), smaller ones pass to the schema; duplicate keys: the last wins, in the stored
  arguments and the execution alike; ``[1]``, ``"s"``, ``null`` are refused as no object;
- ``ctx``/``tenant``/``context`` sent as arguments are refused as extra inputs (``extra="forbid"``); the context
  parameter is not in the schema; ``**kwargs`` tools are refused at registration;
- call ids repeated within a turn are made unique (``model_answers._call_ids``); results are matched per turn, so
  an id reused across turns never attaches a result to another call (the transcript matches by turn too);
- a streamed answer without ``finish_reason`` or cut (``length``) is refused whole, charged what was read;
- the audit chains verify after all of the above.
"""

import json
from collections.abc import Iterator
from typing import Annotated, Any
from unittest import mock

import pytest
from django.contrib.auth.models import User

from agents_app.cancelling import run_cancel
from agents_app.models import AgentRun, RunStatus
from agents_app.models_adapters import ModelToolCall, ModelTurn
from agents_app.services import agent_create, run_start
from approvals.selectors import conversation_before
from toolhub import Param, registry, tool
from toolhub.agentic import SimpleAgenticTool
from toolhub.audit_verify import verify_audit_chains
from toolhub.models import CallStatus, ToolCall

pytestmark = pytest.mark.django_db

#: A card number the model sends to a sensitive parameter.
_CARD = "4111111111111111"


@tool(risk="low", sensitive=("card",))
def review_bb_pay(card: Annotated[str, Param("The card to charge.")]) -> dict:
    """Charge a card (its number is sensitive)."""
    return {"charged": True}


@tool(risk="high")
def review_bb_wipe(target: Annotated[str, Param("What to wipe.")]) -> dict:
    """Wipe something (high risk: an operator approves it)."""
    return {"wiped": target}


_DESK = SimpleAgenticTool("review_bb_desk", "Tidy up.", tools=[review_bb_wipe], max_iterations=2, agent="bb-brain")


@pytest.fixture
def pay_tool() -> Iterator[None]:
    with registry.temporarily(review_bb_pay):
        yield


class _Plan:
    """A model that answers in process with the given turns, in order."""

    answers_in_process = True

    def __init__(self, turns: list[ModelTurn]) -> None:
        self.turns = list(turns)

    def complete(self, *, messages: Any, tools: Any, on_partial: Any = None) -> ModelTurn:
        return self.turns.pop(0)


def _run(alice: User, turns: list[ModelTurn], tools: list[str], capture: Any, **options: Any) -> AgentRun:
    agent = agent_create(name="bb", tenant="acme", provider="scripted", script=[], tools=tools, **options)
    with mock.patch("agents_app.loop.adapter_for", return_value=_Plan(turns)):
        with capture(execute=True):
            run = run_start(agent=agent, user=alice, input="go")
    run.refresh_from_db()
    return run


def test_a_call_id_reused_in_a_later_turn_shows_the_approver_that_turns_words(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: the approval page's "model's message" was the first assistant message carrying the call's id; a model
    reusing ``c1`` in turn 2 made the approver read turn 1's "harmless words" beside the risky call of turn 2.

    Expect: the words the model wrote with the call under approval; the earlier call still ran once.
    """
    turns = [
        ModelTurn(content="harmless words", tool_calls=(ModelToolCall("c1", "record_effect", '{"note": "a"}'),)),
        ModelTurn(content="now delete everything", tool_calls=(ModelToolCall("c1", "risky_effect", '{"note": "b"}'),)),
    ]
    run = _run(alice, turns, ["record_effect", "risky_effect"], django_capture_on_commit_callbacks)

    first, risky = ToolCall.objects.filter(run_id=run.id).order_by("turn")
    assert run.status == RunStatus.WAITING
    assert (first.status, risky.status) == (CallStatus.SUCCEEDED, CallStatus.PENDING_APPROVAL)
    assert first.model_call_id == risky.model_call_id == "c1"  # the premise
    shown = conversation_before(risky.approval_request)
    assert shown.model_message == "now delete everything"
    assert shown.user_input == "go"
    assert verify_audit_chains()[1] == []


def test_a_turn_of_thousands_of_tiny_calls_is_bounded_as_the_run_keeps_it(
    alice: User, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    """Found: a model's turn was bounded (``MAX_EXTERNAL_RESULT_BYTES``) by its calls' texts alone, so calls with
    a short id and empty name and arguments counted a few bytes each while the run kept ~70 bytes of JSON for
    each: 2,000 of them (8 KB counted) were stored as ~150 KB in the run's conversation (at the default bound,
    ~300,000 calls, 20 MB, and a quadratic walk over their ids under way).

    Expect: a turn is counted as the run would keep it; this one is refused whole, nothing stored, nothing run.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_EXTERNAL_RESULT_BYTES": 20_000}
    calls = tuple(ModelToolCall(f"{i:x}", "", "") for i in range(2000))
    run = _run(alice, [ModelTurn(tool_calls=calls)], ["record_effect"], django_capture_on_commit_callbacks)

    assert run.status == RunStatus.FAILED
    assert run.error.startswith("The model's turn was ") and "nothing of it was kept" in run.error
    assert [m for m in run.messages if m["role"] == "assistant"] == []
    assert len(json.dumps(run.messages)) < 20_000
    assert not ToolCall.objects.filter(run_id=run.id).exists()


def test_a_cancelled_serial_run_keeps_no_sensitive_value_of_the_calls_it_never_requested(
    alice: User, django_capture_on_commit_callbacks: Any, pay_tool: None
) -> None:
    """Found: an agent with ``serial_tool_execution`` keeps a turn's later calls in ``AgentRun.deferred_calls`` as the
    model sent them, sensitive values included, until the earlier call settles; a run cancelled meanwhile (or
    failed for good) kept them so forever, a card number at rest in a row nothing would ever read again.

    Expect: a run that ended and cannot be retried holds no deferred call; the call held for approval is
    withdrawn, the card never ran, is in no call row and nowhere in the run's row.
    """
    turn = ModelTurn(
        tool_calls=(
            ModelToolCall("c1", "risky_effect", '{"note": "first"}'),
            ModelToolCall("c2", "review_bb_pay", json.dumps({"card": _CARD})),
        )
    )
    run = _run(
        alice,
        [turn],
        ["risky_effect", "review_bb_pay"],
        django_capture_on_commit_callbacks,
        serial_tool_execution=True,
    )
    assert run.status == RunStatus.WAITING
    assert len(run.deferred_calls) == 1  # the premise: the card waits for the first call

    with django_capture_on_commit_callbacks(execute=True):
        assert run_cancel(run_id=run.id, actor="operator:bob", reason="not today")
    run.refresh_from_db()

    assert run.status == RunStatus.CANCELLED
    assert run.deferred_calls == []
    stored = json.dumps([run.messages, run.deferred_calls, run.output, run.error, run.partial_output])
    assert _CARD not in stored
    [held] = ToolCall.objects.filter(run_id=run.id)
    assert held.status == CallStatus.CANCELLED
    assert verify_audit_chains()[1] == []


def test_an_inner_call_held_for_approval_shows_the_words_of_its_outer_call(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found (with finding 1): an inner call's id is its inner model's, never in the run's conversation, so the
    approval page showed no words at all for it (or, by chance of a matching id, another turn's).

    Expect: the words the run's model wrote with the agentic call that led to it, and the user's input.
    """
    with registry.temporarily(*_DESK.__toolhub_tools__()):
        agent_create(
            name="bb-brain",
            tenant="acme",
            provider="scripted",
            tools=[],
            script=[
                {"content": "inner words", "tool_calls": [{"name": "review_bb_wipe", "arguments": {"target": "x"}}]}
            ],
        )
        turns = [
            ModelTurn(content="first, a look", tool_calls=(ModelToolCall("d1", "record_effect", '{"note": "a"}'),)),
            ModelTurn(content="tidy up now", tool_calls=(ModelToolCall("d2", "review_bb_desk", '{"task": "t"}'),)),
        ]
        run = _run(alice, turns, ["record_effect", "review_bb_desk"], django_capture_on_commit_callbacks)

        inner = ToolCall.objects.get(run_id=run.id, tool_name="review_bb_wipe")
    assert inner.status == CallStatus.PENDING_APPROVAL, (inner.status, run.status, run.error)
    shown = conversation_before(inner.approval_request)
    assert (shown.model_message, shown.user_input) == ("tidy up now", "go")
