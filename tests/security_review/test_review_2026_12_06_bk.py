"""Review 2026-12-06 (bk): gaps review bb left at the model-output boundary (loop, model answers, ending).

Each test fails on the reviewed code (main at b458c24) and states what was found and what is expected.

Findings:

1. ``Agent.max_tool_calls`` had no upper bound outside the API (which capped it at 1000): the admin, a fixture or a
   shell could store 1,000,000 and one model turn then pushed thousands of calls through the pipeline in one
   transaction. Now ``agents_app.models.MAX_TOOL_CALLS_LIMIT`` bounds the field (validator: the admin), the API
   serializer and ``agent_update``, and the loop never allows more per run whatever a row says.
2. A run's conversation (``AgentRun.messages``) had no size bound: each turn (1 MB) and each result was appended
   and the whole list rewritten on every step. ``TOOLHUB["RUN_MAX_CONVERSATION_BYTES"]`` (16 MB) now bounds it
   where a turn or the turn's results are recorded: the run fails (``conversation_size``, a ``run.failed`` event),
   what would pass the bound is not kept, nothing more is requested.
3. An integer of more than 4,300 digits in a model's arguments was refused with Python's own message, hint to call
   ``sys.set_int_max_str_digits()`` included; the model now reads "an integer with more than 4300 digits".
4. A serial turn's calls not yet requested (``AgentRun.deferred_calls``) were dropped silently when the run was
   cancelled or failed for good: the ``run.cancelled`` / ``run.failed`` event now names them (tool names, never
   arguments, bounded).

Checked and holds:
- the API already refused ``max_tool_calls`` above 1000; a child's budget (``limits``) is checked beside the agent's;
- a model's turn is bounded by ``MAX_EXTERNAL_RESULT_BYTES`` as kept; a call's result by the same bound;
- a retryable failure keeps its deferred calls (a retry resumes them), so its event names none as dropped.
"""

import json
from typing import Annotated, Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from agents_app.cancelling import run_cancel
from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.models_adapters import ModelToolCall, ModelTurn
from agents_app.services import agent_create, run_start
from toolhub import Param, registry, tool
from toolhub.audit_verify import verify_audit_chains
from toolhub.models import AuditEvent, ToolCall

pytestmark = pytest.mark.django_db


@tool(risk="low")
def review_bk_echo(text: Annotated[str, Param("Text to echo.")], times: Annotated[int, Param("Copies.")] = 1) -> dict:
    """Echo text, repeated (a result as large as asked)."""
    return {"echo": text * times}


class _Plan:
    """A model that answers in process with the given turns, in order."""

    answers_in_process = True

    def __init__(self, turns: list[ModelTurn]) -> None:
        self.turns = list(turns)

    def complete(self, *, messages: Any, tools: Any, on_partial: Any = None) -> ModelTurn:
        return self.turns.pop(0)


def _run(alice: User, turns: list[ModelTurn], tools: list[str], capture: Any, agent: Agent | None = None) -> AgentRun:
    agent = agent or agent_create(name="bk", tenant="acme", provider="scripted", script=[], tools=tools)
    with mock.patch("agents_app.loop.adapter_for", return_value=_Plan(turns)):
        with capture(execute=True):
            run = run_start(agent=agent, user=alice, input="go")
    run.refresh_from_db()
    return run


def test_an_agent_row_cannot_allow_more_tool_calls_than_the_api_does(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: ``max_tool_calls`` had no bound outside the API serializer (1000): the admin form saved 1,000,000, and a
    row holding 5,000 let a turn of 1,001 calls through the pipeline.

    Expect: the model field refuses more than the API's bound (the admin's validation), and the loop stops a turn
    beyond it whatever the row says, nothing requested.
    """
    agent = agent_create(name="bk", tenant="acme", provider="scripted", script=[], tools=["record_effect"])
    agent.max_tool_calls = 1_000_000
    with pytest.raises(ValidationError) as refused:
        agent.full_clean()
    assert "max_tool_calls" in refused.value.message_dict

    Agent.objects.filter(pk=agent.pk).update(max_tool_calls=5000)  # a row stored before the bound
    agent.refresh_from_db()
    calls = tuple(ModelToolCall(f"c{i}", "no_such_tool", "{}") for i in range(1001))
    run = _run(alice, [ModelTurn(tool_calls=calls)], [], django_capture_on_commit_callbacks, agent=agent)

    assert (run.status, run.stop_reason) == (RunStatus.FAILED, "max_tool_calls")
    assert "limit of 1000" in run.error
    assert not ToolCall.objects.filter(run_id=run.id).exists()


def test_a_turn_that_grows_the_conversation_past_its_bound_fails_the_run(
    alice: User, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    """Found: nothing bounded a run's whole conversation: every turn (up to 1 MB) was appended and rewritten on
    every step, up to ``max_tool_calls`` turns.

    Expect: the turn that would pass ``RUN_MAX_CONVERSATION_BYTES`` is not kept; the run fails with a clear reason
    (audited), its calls are never requested.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "RUN_MAX_CONVERSATION_BYTES": 6000}
    note = "n" * 2900
    turns = [
        ModelTurn(tool_calls=(ModelToolCall("c1", "review_bk_echo", json.dumps({"text": note, "times": 0})),)),
        ModelTurn(tool_calls=(ModelToolCall("c2", "review_bk_echo", json.dumps({"text": note, "times": 0})),)),
        ModelTurn(content="done"),
    ]
    with registry.temporarily(review_bk_echo):
        run = _run(alice, turns, ["review_bk_echo"], django_capture_on_commit_callbacks)

    assert (run.status, run.stop_reason) == (RunStatus.FAILED, "conversation_size")
    assert "RUN_MAX_CONVERSATION_BYTES" in run.error and "Nothing more was executed" in run.error
    assert len(json.dumps(run.messages)) <= 6000
    assert [call.model_call_id for call in ToolCall.objects.filter(run_id=run.id)] == ["c1"]
    event = AuditEvent.objects.get(run_id=run.id, event_type="run.failed")
    assert event.payload["stop_reason"] == "conversation_size"
    assert verify_audit_chains()[1] == []


def test_results_that_grow_the_conversation_past_its_bound_fail_the_run(
    alice: User, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    """Found: a call's result (up to 1 MB each, ``max_tool_calls`` of them) was appended to the conversation unbounded.

    Expect: results that would pass ``RUN_MAX_CONVERSATION_BYTES`` are not appended, the model is not asked again,
    the run fails with a clear reason.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "RUN_MAX_CONVERSATION_BYTES": 6000}
    turns = [
        ModelTurn(tool_calls=(ModelToolCall("c1", "review_bk_echo", '{"text": "abcd", "times": 2000}'),)),
        ModelTurn(content="never asked"),
    ]
    with registry.temporarily(review_bk_echo):
        run = _run(alice, turns, ["review_bk_echo"], django_capture_on_commit_callbacks)

    assert (run.status, run.stop_reason) == (RunStatus.FAILED, "conversation_size")
    assert run.turn == 1 and run.output == ""
    assert len(json.dumps(run.messages)) <= 6000
    assert [m["role"] for m in run.messages][-1] == "assistant"


def test_an_over_long_integer_argument_reads_as_a_plain_message(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: an integer past 4300 digits in a model's arguments was refused with Python's text, "use
    sys.set_int_max_str_digits() to increase the limit": an interpreter detail and a hint the model cannot act on.

    Expect: "an integer with more than 4300 digits", nothing of Python's wording.
    """
    turns = [
        ModelTurn(tool_calls=(ModelToolCall("c1", "record_effect", '{"note": ' + "9" * 5000 + "}"),)),
        ModelTurn(content="ok"),
    ]
    run = _run(alice, turns, ["record_effect"], django_capture_on_commit_callbacks)

    [call] = ToolCall.objects.filter(run_id=run.id)
    text = call.model_text()
    assert "an integer with more than 4300 digits" in text
    assert "sys." not in text and "set_int_max_str_digits" not in text
    assert "sys." not in json.dumps(run.messages)


def test_a_cancelled_serial_run_names_the_calls_it_dropped_in_its_event(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a serial turn's calls waiting behind a held call vanished without a trace when the run was cancelled:
    the ``run.cancelled`` event named only the reason, so an auditor never learnt the model had asked for them.

    Expect: the event names the dropped calls by tool name (never their arguments).
    """
    agent = agent_create(
        name="bk",
        tenant="acme",
        provider="scripted",
        script=[],
        tools=["risky_effect", "record_effect"],
        serial_tool_execution=True,
    )
    turn = ModelTurn(
        tool_calls=(
            ModelToolCall("c1", "risky_effect", '{"note": "first"}'),
            ModelToolCall("c2", "record_effect", '{"note": "secret-ish words"}'),
            ModelToolCall("c3", "record_effect", '{"note": "more"}'),
        )
    )
    run = _run(alice, [turn], [], django_capture_on_commit_callbacks, agent=agent)
    assert len(run.deferred_calls) == 2  # the premise

    with django_capture_on_commit_callbacks(execute=True):
        assert run_cancel(run_id=run.id, actor="operator:bob", reason="not today")

    payload = AuditEvent.objects.get(run_id=run.id, event_type="run.cancelled").payload
    assert payload["reason"] == "not today"
    assert payload["dropped_calls"] == {"count": 2, "tools": ["record_effect", "record_effect"]}
    assert "secret-ish" not in json.dumps(payload)
    assert verify_audit_chains()[1] == []
