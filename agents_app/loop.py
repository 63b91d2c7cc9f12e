"""The agent loop: one step at a time, persisted between steps, resumable on any worker.

A step is: (A) under the run's row lock, check that every call of the last turn settled, append
their results in order; (B) ask the model; (C) under the lock, record the model's turn and send its
tool calls through the governed pipeline. Settled calls wake the run again (``receivers``: in the
tool worker that settled the call, right after it, when the step fits that task's time limit), so a
turn with mixed fates resumes the run once, when the last of its calls settles.

A model that answers in process (the scripted one: no I/O, no wait) is asked under the lock, so the
whole step is one transaction and one write of the run. Any other model is asked outside a
transaction: (A) ends by taking a short lease with a fresh step token, and (C) records the answer
only if the run still holds the same token. The lease outlasts the provider's deadline; an answer
that arrives after the lease was given up (or taken over) is dropped, so one run never has two model
calls that both count. A lease that lapsed without its answer is a lost step (its worker stopped): the run
is stepped again, up to ``RUN_MAX_LOST_STEPS`` lost in a row, then it fails instead (``_step_lost``).
"""

import enum
import functools
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents_app.blackboard import blackboard_capture_calls
from agents_app.budgets import Spending, budget_of, calls_used, spending_below, tokens_added
from agents_app.cancelling import GOVERNANCE_ACTOR, run_cancel_locked
from agents_app.disclosure import (
    agent_tool_names,
    messages_with_additions,
    run_disclosure,
    run_gate,
    run_state_after_calls,
)
from agents_app.ending import STEP_FIELDS, run_end_with_error, run_finish
from agents_app.model_answers import Failed, failure, model_answer, partial_writer
from agents_app.models import AgentRun, RunStatus, StopReason, agent_call_limit
from agents_app.models_adapters import ModelAdapter, ModelTurn, adapter_for
from agents_app.steprows import locked_run, turn_calls
from agents_app.transitions import run_transition
from toolhub.audit import redacted_arguments_text
from toolhub.authorization import CallPrincipal, standing_refusal
from toolhub.conf import toolhub_settings
from toolhub.feedback import unknown_tool_message
from toolhub.models import CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request, visible_tool_names
from toolhub.sagas.services import saga_rollback_notes, saga_rollback_on_failure
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import ReturnBehavior, Tool
from toolhub.tools.export import buildable, openai_tool
from toolhub.tools.registry import registry

__all__ = ["Advance", "run_advance", "visible_tool_definitions", "run_principal", "run_tool_context"]

logger = logging.getLogger(__name__)

#: How much longer than the provider's deadline a step's lease lasts (recording the turn, clock skew).
STEP_LEASE_MARGIN_SECONDS = 30


@dataclass(frozen=True)
class _Step:
    """A step ready to ask the model: the adapter and what it is sent."""

    adapter: ModelAdapter
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    stream: bool


class Advance(enum.Enum):
    """What ``run_advance`` did."""

    IDLE = "idle"  #: nothing to do now (calls still open, another step holds the run, the run ended)
    STEPPED = "stepped"  #: one step was taken (or ended the run)
    NO_TIME = "no_time"  #: the run is ready, but its model's deadline does not fit the caller's time: nothing done


def run_advance(*, run_id: uuid.UUID, seconds_left: float | None = None) -> Advance:
    """Take the run one model turn further, if it is ready for one.

    ``seconds_left``: how long the caller may still run (a tool worker advancing the run after the
    turn's last call settled, within its own task's soft time limit). A step whose model deadline
    and bookkeeping margin do not fit is not begun (``NO_TIME``): the caller hands it to the agent task.
    """
    with transaction.atomic():
        run = locked_run(run_id)
        if run is None:
            return Advance.IDLE
        now = timezone.now()
        step = _begin_step(run, now, seconds_left)
        if not isinstance(step, _Step):
            return step
        if getattr(step.adapter, "answers_in_process", False) is True:
            # Nothing to wait for: the step ends in this transaction, with one write of the run.
            _end_step(run, model_answer(run_id, step.adapter, step.messages, step.tools, on_partial=None), now=now)
            return Advance.STEPPED
        token = _take_lease(run, now)
    answer = model_answer(
        run_id,
        step.adapter,
        step.messages,
        step.tools,
        on_partial=partial_writer(run_id, token) if step.stream else None,
    )
    with transaction.atomic():
        run = locked_run(run_id)
        if run is not None and _holds_step(run, token):
            _end_step(run, answer, now=timezone.now())
    return Advance.STEPPED


def visible_tool_definitions(run: AgentRun) -> list[dict[str, Any]]:
    """The OpenAI-style definitions of the tools this run's model sees now, in its provider's schema profile.

    Progressive disclosure (``agents_app.disclosure``) decides which, after permissions; one whose schema cannot be
    built is left out (``buildable``).
    """
    return _definitions(run_disclosure(run).tools, run.agent.provider.effective_schema_profile)


def _definitions(tools: Sequence[Tool], profile: str) -> list[dict[str, Any]]:
    """The definitions the model is sent, in ``profile``, each tool's whose schema can be built.

    One that cannot is left out and named to operators (``buildable``): it does not cost a run all its others.
    """
    return buildable(tools, lambda tool: openai_tool(tool, profile))


def run_principal(run: AgentRun) -> CallPrincipal:
    """Who the run's calls are made for: its user, tenant and agent (never the model's say)."""
    return CallPrincipal(
        user_id=run.user_id,
        username=run.user.get_username() if run.user else "",
        tenant=run.tenant,
        agent_name=run.agent.name,
        agent_tools=agent_tool_names(run.agent),
        delegated_by=tuple(run.delegated_by or ()),
    )


def run_tool_context(run: AgentRun, interaction: dict[str, Any] | None = None) -> ToolContext:
    """Run-level context from the request, then ``interaction``'s (it wins), with the boundary's values on top."""
    boundary = {
        "tenant": run.tenant,
        "user": run.user.get_username() if run.user else "",
        "user_id": run.user_id,
        "run_id": str(run.id),
        "loop_id": str(run.id),
        "agent": run.agent.name,
    }
    return ToolContext.layered(run.context, interaction, boundary=boundary)


def _begin_step(run: AgentRun, now: Any, seconds_left: float | None) -> _Step | Advance:
    """On the locked run: its last turn's results appended and the model's input made ready, or why not.

    Writes the run only when the step ends here (the run waits or ended); otherwise the caller writes
    it once, with the lease (``_take_lease``) or with the model's answer (``_end_step``).
    """
    if run.status not in (RunStatus.RUNNING, RunStatus.WAITING):
        if _append_rollback_notes(run):  # a rollback asked for after the run ended
            run.save(update_fields=["messages", "updated_at"])
        return Advance.IDLE
    if run.step_lease_until and run.step_lease_until > now:
        return Advance.IDLE
    refusal = standing_refusal(
        CallPrincipal(user_id=run.user_id, username="", tenant=run.tenant), stamp=run.governance_stamp
    )
    if refusal:
        # Its user may no longer act here (deactivated, removed from the tenant): no further call or model
        # turn in their name; what they left waiting is withdrawn.
        run_cancel_locked(run, actor=GOVERNANCE_ACTOR, reason=refusal)
        return Advance.STEPPED
    if _step_lost(run, now):
        return Advance.STEPPED
    calls = turn_calls(run)
    if any(not call.is_settled for call in calls):
        waiting = any(call.status in _SUSPENDING for call in calls)
        status = RunStatus.WAITING if waiting else RunStatus.RUNNING
        if run.status != status:
            run_transition(run, status, update_fields=[])
        return Advance.IDLE
    if run.deferred_calls:
        # Serial execution: the previous call settled, the next one of the turn is requested now.
        waiting = _request_calls(run)
        run_transition(run, RunStatus.WAITING if waiting else RunStatus.RUNNING, update_fields=["deferred_calls"])
        return Advance.STEPPED
    if _awaits_results(run.messages):
        if run.agent.compensate_on_error and saga_rollback_on_failure(
            run_id=run.id, tenant=run.tenant, calls=calls, actor=f"agent:{run.agent.name}"
        ):
            return Advance.IDLE  # the completed steps are being compensated; their calls wake the run again
        texts = _texts_for_model(run, calls)
        results = [
            {"role": "tool", "tool_call_id": c.model_call_id, "content": text}
            for c, text in zip(calls, texts, strict=True)
        ]
        if _conversation_too_big(run, [*run.messages, *results], "the results of its tool calls", now=now):
            return Advance.STEPPED
        run.messages = [*run.messages, *results]
        run_state_after_calls(run, calls, governance_stamp=run.governance_stamp)
        blackboard_capture_calls(run, [call for call in calls if call.has_artifacts])
        if _returns_immediately(calls):
            run.output = "\n".join(texts)
            run.step_lease_until = None
            run.step_token = None
            run_finish(run, status=RunStatus.COMPLETED, stop_reason=StopReason.IMMEDIATE_RETURN, now=now)
            return Advance.STEPPED
    if seconds_left is not None and _lease_seconds(run) > seconds_left:
        # Rolled back: the agent task (whose limits follow the longest deadline) takes the step.
        transaction.set_rollback(True)
        return Advance.NO_TIME
    _append_rollback_notes(run)
    if run.limits and _stopped_on_tokens(run, spending_below(run.id), now=now, before_asking=True):
        return Advance.STEPPED
    disclosure = run_disclosure(run, governance_stamp=run.governance_stamp)
    run.disclosure = disclosure.state.to_json()
    try:
        adapter = adapter_for(run.agent)
    except Exception as exc:  # noqa: BLE001 - a provider that cannot be used fails the step like its model
        _fail_step(run, failure(run.id, exc), now=now)
        return Advance.STEPPED
    return _Step(
        adapter=adapter,
        messages=messages_with_additions(list(run.messages), disclosure.prompt_additions),
        tools=_definitions(disclosure.tools, run.agent.provider.effective_schema_profile),
        stream=run.agent.stream,
    )


def _texts_for_model(run: AgentRun, calls: list[ToolCall]) -> list[str]:
    """What the model reads of each call: a call denied a tool the run may not see reads as an unknown tool.

    As the REST API and MCP answer it (``toolhub.direct.call_hidden_from``): a denial would confirm that the
    tool exists. The call's row and its audit trail keep the denial.
    """
    if not any(call.status == CallStatus.DENIED for call in calls):
        return [call.model_text() for call in calls]
    visible = visible_tool_names(run_principal(run), dict(run_tool_context(run)))
    return [
        unknown_tool_message(call.tool_name, visible)
        if call.status == CallStatus.DENIED and call.tool_name not in visible
        else call.model_text()
        for call in calls
    ]


def statuses_for_model(run: AgentRun, rows: list[tuple[str, str]]) -> list[str]:
    """The statuses of ``(tool name, status)`` rows as the run's model may read them (``_texts_for_model``).

    A denied call of a tool the run may not see reads ``invalid``, as a call of a tool that exists nowhere.
    """
    if not any(status == CallStatus.DENIED for _, status in rows):
        return [status for _, status in rows]
    visible = visible_tool_names(run_principal(run), dict(run_tool_context(run)))
    return [
        CallStatus.INVALID.value if status == CallStatus.DENIED and name not in visible else status
        for name, status in rows
    ]


def _step_lost(run: AgentRun, now: Any) -> bool:
    """Count a lost step (its lease lapsed without its answer); at ``RUN_MAX_LOST_STEPS`` in a row the run fails.

    Called once the lease is known not to be in force: a lease still set is one whose worker stopped while
    the model answered (out of memory, a crash in native code). As the sweeper bounds a lost tool call's
    attempts (``CALL_MAX_ATTEMPTS``), a step that takes its worker down each time is not paid for on every
    sweep forever. The count is written with the step (``_take_lease``, ``STEP_FIELDS``); a recorded answer
    (``_end_step``) and a retry (``run_retry``) set it back to 0. Returns whether the run failed.
    """
    if run.step_lease_until is None:
        return False
    run.lost_steps += 1
    limit = toolhub_settings().RUN_MAX_LOST_STEPS
    if run.lost_steps < limit:
        logger.warning(
            "run %s: its step's worker stopped before the model's answer (%d of %d)", run.id, run.lost_steps, limit
        )
        return False
    logger.error("run %s: its step's worker stopped %d times in a row; the run failed", run.id, run.lost_steps)
    run_end_with_error(
        run,
        f"Run stopped: its worker stopped {run.lost_steps} times in a row while the model was answering "
        "(TOOLHUB['RUN_MAX_LOST_STEPS']), so the model was not asked again. Retry the run once the cause is fixed.",
        status=RunStatus.FAILED,
        stop_reason=StopReason.WORKER_LOST,
        now=now,
        retryable=True,
    )
    return True


def _lease_seconds(run: AgentRun) -> float:
    """How long a step holds the run: its provider's deadline and the bookkeeping margin."""
    return run.agent.provider.deadline_seconds + STEP_LEASE_MARGIN_SECONDS


def _take_lease(run: AgentRun, now: Any) -> uuid.UUID:
    """Write the begun step (results, disclosure) with a lease and a fresh token; the model is asked after commit."""
    run.step_lease_until = now + timedelta(seconds=_lease_seconds(run))
    run.step_token = uuid.uuid4()
    fields = ["messages", "disclosure", "step_lease_until", "step_token", "lost_steps"]
    run_transition(run, RunStatus.RUNNING, update_fields=fields)
    return run.step_token


def _append_rollback_notes(run: AgentRun) -> bool:
    """Record which step failed and which steps were rolled back, after the tool results.

    Stored as system messages where they happened; the adapter places them for the model per its
    provider's ``note_placement`` (``models_adapters.notes``).
    """
    if not run.has_saga and not run.agent.compensate_on_error:  # no saga, and this step cannot open one
        return False
    notes = saga_rollback_notes(run_id=run.id)
    run.messages = [*run.messages, *({"role": "system", "content": note} for note in notes)]
    return bool(notes)


#: Call statuses that suspend the run until someone outside acts (an operator, an external executor).
_SUSPENDING = frozenset({CallStatus.PENDING_APPROVAL, CallStatus.AWAITING_RESULT})


def _returns_immediately(calls: list[ToolCall]) -> bool:
    """Whether the run ends with this turn's tool results, without asking the model again.

    LangChain4j's rule: no call failed, and every call is IMMEDIATE, except that the last one may be
    IMMEDIATE_IF_LAST instead.
    """
    if not calls or any(call.status != CallStatus.SUCCEEDED for call in calls):
        return False
    behaviors = []
    for call in calls:
        tool = registry.get(call.tool_name)
        behaviors.append(tool.return_behavior if tool is not None else ReturnBehavior.TO_LLM)
    *earlier, last = behaviors
    return all(b == ReturnBehavior.IMMEDIATE for b in earlier) and last in (
        ReturnBehavior.IMMEDIATE,
        ReturnBehavior.IMMEDIATE_IF_LAST,
    )


def _awaits_results(messages: list[dict[str, Any]]) -> bool:
    return bool(messages) and messages[-1].get("role") == "assistant" and bool(messages[-1].get("tool_calls"))


def _holds_step(run: AgentRun, token: uuid.UUID) -> bool:
    """Whether the step that asked the model still owns the run; if not, its answer is dropped."""
    if run.step_token == token:
        return True
    logger.warning("run %s: a model answer arrived for a step that no longer holds the run; it was dropped", run.id)
    return False


def _end_step(run: AgentRun, answer: ModelTurn | Failed, *, now: Any) -> None:
    """Record the model's answer (or its failure) on the locked run: one write of the run for the whole step."""
    run.step_lease_until = None
    run.step_token = None
    run.partial_output = ""  # the whole answer is in the messages (and the output) from now on
    run.lost_steps = 0  # this step's answer came: its worker did not stop
    if run.status not in (RunStatus.RUNNING, RunStatus.WAITING):  # it ended (was cancelled) meanwhile
        run.save(update_fields=["step_lease_until", "step_token", "partial_output", "lost_steps", "updated_at"])
        return
    if isinstance(answer, Failed):
        _fail_step(run, answer, now=now)
        return
    _record_turn(run, answer, now=now)


def _record_turn(run: AgentRun, turn: ModelTurn, *, now: Any) -> None:
    run.turn += 1
    run.prompt_tokens = tokens_added(run.prompt_tokens, turn.prompt_tokens)
    run.completion_tokens = tokens_added(run.completion_tokens, turn.completion_tokens)
    message: dict[str, Any] = {"role": "assistant", "content": turn.content or None}
    if turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                # Kept for the conversation with sensitive values replaced; the call itself gets them.
                "function": {"name": call.name, "arguments": _kept_arguments(call.name, call.arguments)},
            }
            for call in turn.tool_calls
        ]
    if _conversation_too_big(run, [*run.messages, message], "the model's turn", now=now):
        return
    run.messages = [*run.messages, message]
    if not turn.tool_calls:
        run.output = turn.content
        run_finish(run, status=RunStatus.COMPLETED, stop_reason=StopReason.ANSWERED, now=now)
        return
    # A child run's budget covers its own turns and what its children hold or used (``budgets``).
    held = spending_below(run.id) if run.limits else Spending()
    if _stopped_on_tokens(run, held, now=now, before_asking=False):
        return
    used, budgeted = calls_used(run)
    given = budget_of(run, "max_tool_calls")
    for whose, limit, before in (
        ("its parent run's", given, budgeted + held.calls),
        ("this agent's", agent_call_limit(run.agent), used),
    ):
        if limit is not None and before + len(turn.tool_calls) > limit:
            run.error = (
                f"Run stopped: the model asked for {len(turn.tool_calls)} more tool call(s) after {before}, "
                f"beyond {whose} limit of {limit} per run. Nothing more was executed."
            )
            run_finish(run, status=RunStatus.FAILED, stop_reason=StopReason.MAX_TOOL_CALLS, now=now)
            return
    run.deferred_calls = [
        {"position": position, "id": call.id, "name": call.name, "arguments": call.arguments}
        for position, call in enumerate(turn.tool_calls)
    ]
    waiting = _request_calls(run)
    # One write of the run for the whole turn, in the transaction that recorded its calls.
    run_transition(run, RunStatus.WAITING if waiting else RunStatus.RUNNING, update_fields=STEP_FIELDS)


def _conversation_too_big(run: AgentRun, messages: list[dict[str, Any]], what: str, *, now: Any) -> bool:
    """Fail the locked run when ``messages`` (its conversation with ``what`` added) pass ``RUN_MAX_CONVERSATION_BYTES``.

    Measured as the row stores it (JSON, ASCII-escaped). ``what`` is not kept and nothing more is requested: every
    step rewrites the whole conversation and sends it to the model, so a run must not grow it without end.
    """
    limit = toolhub_settings().RUN_MAX_CONVERSATION_BYTES
    size = len(json.dumps(messages))
    if size <= limit:
        return False
    run_end_with_error(
        run,
        f"Run stopped: {what} would have made its conversation {size:,} bytes, above "
        f"TOOLHUB['RUN_MAX_CONVERSATION_BYTES'] ({limit:,}); they were not kept. Nothing more was executed.",
        status=RunStatus.FAILED,
        stop_reason=StopReason.CONVERSATION_SIZE,
        now=now,
    )
    return True


def _stopped_on_tokens(run: AgentRun, held: Spending, *, now: Any, before_asking: bool) -> bool:
    """Stop the locked run on its parent's ``max_tokens`` budget: gone past, or (``before_asking``) reached.

    Checked after a turn (its calls are not run when it went past the budget) and before the model is asked again
    (a run that reached its budget, or whose subagents spent the rest of it while its calls ran, does not pay for
    one more turn with the whole conversation as its prompt), as an agentic tool's inner model is refused.
    """
    limit = budget_of(run, "max_tokens")
    tokens = run.prompt_tokens + run.completion_tokens + held.tokens
    if limit is None or tokens < limit or (tokens == limit and not before_asking):
        return False
    run.error = (
        f"Run stopped: it used {tokens} tokens, {'all of' if tokens == limit else 'beyond'} the {limit} its parent "
        "run gave it. Nothing more was executed."
    )
    run.step_lease_until = None
    run.step_token = None
    run_finish(run, status=RunStatus.FAILED, stop_reason=StopReason.MAX_TOKENS, now=now)
    return True


def _request_calls(run: AgentRun) -> bool:
    """Send the turn's calls not yet requested (``run.deferred_calls``) through the governed pipeline.

    All at once, or, for an agent with ``serial_tool_execution``, one after another in the model's
    order: requesting stops at the first call that has not settled here (queued, running, held for
    approval, awaiting a result), and the rest wait in ``deferred_calls`` until it settles and the
    run is woken (``_begin_step``). The caller holds the run's lock and saves it; returns whether a
    requested call suspends the run (held for approval or awaiting a result).
    """
    principal, context, gate = run_principal(run), run_tool_context(run), run_gate(run)
    pending = list(run.deferred_calls)
    requested = []
    while pending:
        call = pending.pop(0)
        requested.append(
            tool_call_request(
                request=CallRequest(
                    tool_name=str(call["name"]),
                    arguments=call["arguments"],
                    principal=principal,
                    context=context,
                    run_id=run.id,
                    turn=run.turn,
                    position=int(call["position"]),
                    model_call_id=str(call["id"]),
                    gate=functools.partial(gate, position=int(call["position"])),
                )
            )
        )
        if run.agent.serial_tool_execution and not requested[-1].is_settled:
            break
    run.deferred_calls = pending
    return any(call.status in _SUSPENDING for call in requested)


def _fail_step(run: AgentRun, failed: Failed, *, now: Any) -> None:
    """The model could not answer: the run fails, and may be retried (``run_retry``); an answer refused still counts."""
    run.prompt_tokens = tokens_added(run.prompt_tokens, failed.prompt_tokens)
    run.completion_tokens = tokens_added(run.completion_tokens, failed.completion_tokens)
    run_end_with_error(
        run, failed.error, status=RunStatus.FAILED, stop_reason=StopReason.MODEL_ERROR, now=now, retryable=True
    )


def _kept_arguments(tool_name: str, raw: str) -> str:
    return redacted_arguments_text(registry.get(tool_name), raw)
