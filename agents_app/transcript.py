"""A run's transcript for people: the conversation in order, each tool call inline with its fate.

Reads only. The model's messages hold the calls it asked for (by the model's call id, unique within a
turn); each is matched with its governed ``ToolCall`` of that turn (status, timings, the approval and its
decisions, the text the model read back), so the page shows what happened rather than the raw JSON the
model exchanged. Arguments are shown as anyone may see them (sensitive values redacted), never from the
messages.
"""

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agents_app.models import AgentRun
from toolhub.admin_tables import duration
from toolhub.models import CallKind, ToolCall
from toolhub.sagas.models import Saga
from toolhub.sagas.selectors import saga_compensations, saga_for_run
from toolhub.selectors import displayed_arguments

__all__ = ["Transcript", "TranscriptEntry", "TranscriptCall", "run_transcript"]

#: The longest tool result shown inline; the call's own page has the rest.
RESULT_PREVIEW_CHARS = 2000


@dataclass(frozen=True)
class TranscriptCall:
    """One tool call as the transcript shows it."""

    call: ToolCall
    arguments: str
    result: str
    waited: str
    ran: str
    approval: Any | None
    decisions: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class TranscriptEntry:
    """One message: who spoke (system, user, assistant, tool) and what, with the calls an assistant asked for."""

    role: str
    text: str
    calls: list[TranscriptCall] = field(default_factory=list)


@dataclass(frozen=True)
class Transcript:
    """The whole run: its messages, calls not found in them (e.g. compensations), and its saga."""

    entries: list[TranscriptEntry]
    other_calls: list[TranscriptCall]
    saga: Saga | None
    compensations: list[Any]
    took: str


def _between(start: datetime | None, end: datetime | None) -> timedelta | None:
    # Clocks of web and worker processes differ by a few milliseconds: never show a negative wait.
    return max(end - start, timedelta(0)) if start and end else None


def _shown(call: ToolCall) -> TranscriptCall:
    approval = getattr(call, "approval_request", None)  # the approvals app's request, when installed and held
    text = call.model_text() if call.finished_at or call.status != "queued" else ""
    if len(text) > RESULT_PREVIEW_CHARS:
        text = text[:RESULT_PREVIEW_CHARS] + " …"
    return TranscriptCall(
        call=call,
        arguments=json.dumps(displayed_arguments(call), indent=2, sort_keys=True, ensure_ascii=False, default=str),
        result=text,
        waited=duration(_between(call.created_at, call.started_at)) if call.started_at else "",
        ran=duration(_between(call.started_at, call.finished_at)) if call.finished_at else "",
        approval=approval,
        decisions=list(approval.decisions.all()) if approval is not None else [],
    )


def run_transcript(run: AgentRun) -> Transcript:
    """The transcript of ``run``: messages in order, tool results folded into the calls that produced them."""
    calls_of_run = ToolCall.objects.filter(run_id=run.id).order_by("turn", "position", "created_at")
    if hasattr(ToolCall, "approval_request"):  # the approvals app is installed
        calls_of_run = calls_of_run.select_related("approval_request").prefetch_related("approval_request__decisions")
    calls = list(calls_of_run)
    # A model's call ids are unique within its turn only (a later turn, an agentic tool's inner model, may repeat
    # one): each assistant message is the next turn (``loop._record_turn``), matched among the run's own calls.
    by_model_id = {
        (call.turn, call.model_call_id): call for call in calls if call.kind == CallKind.CALL and call.model_call_id
    }
    placed: set[Any] = set()
    entries: list[TranscriptEntry] = []
    turn = 0
    for message in run.messages or []:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", ""))
        if role == "assistant":
            turn += 1
        if role == "tool" and (turn, message.get("tool_call_id")) in by_model_id:
            continue  # shown with its call
        shown_calls = []
        for asked in message.get("tool_calls") or []:
            call = by_model_id.get((turn, asked.get("id")))
            if call is not None:
                placed.add(call.pk)
                shown_calls.append(_shown(call))
        entries.append(TranscriptEntry(role=role, text=str(message.get("content") or ""), calls=shown_calls))
    saga = saga_for_run(run.id)
    return Transcript(
        entries=entries,
        other_calls=[_shown(call) for call in calls if call.pk not in placed],
        saga=saga,
        compensations=list(saga_compensations(saga)) if saga is not None else [],
        took=duration(_between(run.created_at, run.finished_at)) if run.finished_at else "",
    )
