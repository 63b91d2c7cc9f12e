"""What the model answered, as a run can keep it: bounded, storable, its call ids fit and unique, or why not.

The step asks the model outside any transaction (``agents_app.loop``); what comes back is data from
outside, bounded as a tool's external result is, with NUL characters and lone surrogates escaped and the
provider's call ids made ones the call rows hold. A failure is what the run is told, never a traceback.
"""

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass, replace
from typing import Any

from agents_app.models import AgentRun
from agents_app.models_adapters import ModelAdapter, ModelToolCall, ModelTurn, PartialSink, RefusedTurn
from toolhub.conf import toolhub_settings
from toolhub.exceptions import ModelError
from toolhub.storable import storable_text

__all__ = ["Failed", "billed_tokens", "failure", "model_answer", "partial_writer", "storable_turn"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Failed:
    """The model (or its adapter) failed; what the run is told, and the tokens of an answer it did not use.

    An answer refused after the endpoint gave it (cut off, too big) was billed all the same: its usage counts on
    the run (and so against a child's ``max_tokens`` budget) as a recorded turn's does.
    """

    error: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


def model_answer(
    run_id: uuid.UUID,
    adapter: ModelAdapter,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    on_partial: PartialSink | None,
) -> ModelTurn | Failed:
    """The model's turn as the database can store it, or why there is none."""
    try:
        turn = adapter.complete(messages=messages, tools=tools, on_partial=on_partial)
    except Exception as exc:  # noqa: BLE001 - an adapter bug must not leave the run leased forever
        return failure(run_id, exc)
    size = _turn_size(turn)
    if size > toolhub_settings().MAX_EXTERNAL_RESULT_BYTES:
        # A model's turn is data from outside, bounded as a tool's external result is; nothing of it is kept.
        return Failed(
            f"The model's turn was {size:,} bytes, above TOOLHUB['MAX_EXTERNAL_RESULT_BYTES']; nothing of it was kept.",
            prompt_tokens=turn.prompt_tokens,
            completion_tokens=turn.completion_tokens,
        )
    return storable_turn(turn)


def _turn_size(turn: ModelTurn) -> int:
    """The bytes of a turn's text and tool calls, as UTF-8, each call with the JSON the run keeps around it.

    Counted as kept (``loop._record_turn``): by their texts alone, calls with a short id and nothing else cost a few
    bytes each, and a turn of hundreds of thousands of them passed the bound, ~70 bytes of JSON each in the run.
    """
    texts = [turn.content, *(part for call in turn.tool_calls for part in (call.id, call.name, call.arguments))]
    framing = _KEPT_CALL_FRAMING * len(turn.tool_calls)
    return framing + sum(len(str(text).encode("utf-8", "surrogatepass")) for text in texts)


#: The JSON around each call's texts in the assistant message the run keeps (``loop._record_turn``).
_KEPT_CALL_FRAMING = len(json.dumps({"id": "", "type": "function", "function": {"name": "", "arguments": ""}}))


def billed_tokens(exc: BaseException) -> tuple[int, int]:
    """``(prompt, completion)`` tokens the endpoint billed for an answer that failed: a ``RefusedTurn``'s, else none.

    Charged on the run whoever asked the model (its loop's step, an agentic tool's inner model), so a child's
    ``max_tokens`` budget sees every answer paid for.
    """
    if isinstance(exc, RefusedTurn):
        return exc.prompt_tokens, exc.completion_tokens
    return 0, 0


def failure(run_id: uuid.UUID, exc: Exception) -> Failed:
    """What the run is told of a model error; an adapter's own bug is logged and named by its type only."""
    if isinstance(exc, RefusedTurn):
        prompt, completion = billed_tokens(exc)
        return Failed(str(exc), prompt_tokens=prompt, completion_tokens=completion)
    if isinstance(exc, ModelError):
        return Failed(str(exc))
    logger.error("model adapter failed for run %s", run_id, exc_info=exc)
    return Failed(f"Model adapter error ({type(exc).__name__})")


def partial_writer(run_id: uuid.UUID, token: uuid.UUID) -> PartialSink:
    """Store a streaming answer's text so far on the run, while this step still holds it (one UPDATE, no lock).

    The adapter calls it at a bounded rate (``STREAM_FLUSH_SECONDS``); the turn's record clears it.
    """

    def write(text: str) -> None:
        AgentRun.objects.filter(id=run_id, step_token=token).update(partial_output=storable_text(text))

    return write


def storable_turn(turn: ModelTurn) -> ModelTurn:
    """The model's text as the database can store it: NUL characters and lone surrogates escaped."""
    ids = _call_ids([storable_text(c.id) for c in turn.tool_calls])
    calls = tuple(
        ModelToolCall(id=call_id, name=storable_text(c.name), arguments=storable_text(c.arguments))
        for call_id, c in zip(ids, turn.tool_calls, strict=True)
    )
    return replace(turn, content=storable_text(turn.content), tool_calls=calls)


def _call_ids(ids: list[str]) -> list[str]:
    """The turn's call ids as the run keeps them: each fits the call row (100 characters) and is unique in the turn.

    The conversation and the call rows hold the same id, so each result is matched to its call when the
    model is asked again; a provider whose ids are longer, or a model repeating one, gets ids derived from its own.
    """
    kept: list[str] = []
    taken: set[str] = set()
    given_ids = set(ids)  # sets: a turn may hold thousands of calls
    for position, given in enumerate(ids):
        call_id, attempt = given, 0
        # A derived id is new to the turn too: neither kept already nor one the model gave a later call.
        while len(call_id) > _MAX_CALL_ID or call_id in taken or (attempt and call_id in given_ids):
            digest = hashlib.sha256(f"{position}:{attempt}:{given}".encode()).hexdigest()[:24]
            call_id, attempt = f"call_{position}_{digest}", attempt + 1
        kept.append(call_id)
        taken.add(call_id)
    return kept


#: ``ToolCall.model_call_id``'s length.
_MAX_CALL_ID = 100
