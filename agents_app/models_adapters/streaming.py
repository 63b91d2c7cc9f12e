"""Assembling a streamed chat completion: text and tool-call deltas in, one ``ModelTurn`` out.

Fed chunk by chunk on the thread that reads the stream while another thread reads the text so far,
hence the lock. A stream that ends without a ``finish_reason`` broke mid-answer, and one whose finish reason
says the model did not finish (``length``, ``content_filter``) was cut off: ``turn()`` refuses both, so no
half-assembled tool call is ever recorded, let alone executed. An answer past ``max_bytes`` is refused as its
chunks arrive, so an endless stream is given up at the bound, not read into memory until the deadline.
"""

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents_app.models_adapters.base import (
    ModelToolCall,
    ModelTurn,
    RefusedTurn,
    answer_characters,
    finished_turn,
    reasoning_texts,
    refusal_text,
    reported_or_estimated,
)

__all__ = ["StreamedTurn"]


@dataclass
class _CallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamedTurn:
    """The turn a stream of ``ChatCompletionChunk``s describes, built as the chunks arrive."""

    def __init__(self, *, max_bytes: int | None = None, prompt_characters: int | Callable[[], int] = 0) -> None:
        self._lock = threading.Lock()
        self._max_bytes = max_bytes
        self._bytes = 0
        self._text: list[str] = []
        self._reasoning = 0  # characters of reasoning read: not kept, but written and billed (``reasoning_texts``)
        self._calls: dict[int, _CallParts] = {}
        self._finish_reason: str | None = None
        self._prompt_characters = prompt_characters
        self._usage: Any = None

    def add(self, chunk: Any) -> None:
        """Take one chunk: content appended, tool-call deltas merged by their index, usage and finish noted."""
        with self._lock:
            usage = getattr(chunk, "usage", None)
            if usage is not None:
                self._usage = usage
            for choice in getattr(chunk, "choices", None) or ():
                if getattr(choice, "index", 0) not in (0, None):
                    continue  # one answer is asked for; others are ignored
                delta = getattr(choice, "delta", None)
                if delta is not None:
                    for thought in reasoning_texts(delta):
                        self._reasoning += len(thought)
                        self._count(thought)
                    for text in (self._text_of(delta.content, "content"), refusal_text(delta)):
                        if text:
                            self._text.append(text)
                            self._count(text)
                    for call in delta.tool_calls or ():
                        self._add_call_delta(call)
                if choice.finish_reason:
                    self._finish_reason = choice.finish_reason

    def _add_call_delta(self, delta: Any) -> None:
        index = delta.index
        if index is None:  # some servers leave it out: a new id starts a new call, else the latest goes on
            known = next((i for i, parts in self._calls.items() if delta.id and parts.id == delta.id), None)
            index = (
                known if known is not None else (len(self._calls) if delta.id or not self._calls else max(self._calls))
            )
        parts = self._calls.setdefault(int(index), _CallParts())
        call_id = self._text_of(delta.id, "tool call's id")
        if call_id and not parts.id:
            parts.id = call_id
            self._count(call_id)
        function = getattr(delta, "function", None)
        if function is not None:
            name = self._text_of(function.name, "tool call's name")
            if name and not parts.name:
                parts.name = name  # sent once; some servers repeat it in every delta
                self._count(name)
            arguments = self._text_of(function.arguments, "tool call's arguments")
            if arguments:
                parts.arguments.append(arguments)
                self._count(arguments)

    def _text_of(self, value: Any, what: str) -> str:
        """A delta's text field: text or nothing; anything else (a list of parts, a number) is refused as it arrives.

        As a whole answer's is (``ModelTurn``): kept, it would fail the join of the text later, as the adapter's bug
        (``TypeError``), with nothing charged of what was read and the reader left running behind the failed step.
        """
        if value is None or isinstance(value, str):
            return value or ""
        raise self._refused(
            f"Model endpoint answered something that is not a chat completion: a streamed {what} is not text; "
            "nothing of it was used."
        )

    def _count(self, piece: Any) -> None:
        """Add a piece's size to the answer's; past ``max_bytes`` the answer is refused (the reader stops)."""
        self._bytes += len(str(piece).encode("utf-8", "surrogatepass"))
        if self._max_bytes is not None and self._bytes > self._max_bytes:
            raise self._refused(
                f"The model's streamed answer passed {self._max_bytes:,} bytes, above "
                "TOOLHUB['MAX_EXTERNAL_RESULT_BYTES']; it was given up and nothing of it was kept."
            )

    def _calls_so_far(self) -> tuple[ModelToolCall, ...]:
        return tuple(
            ModelToolCall(id=parts.id or f"call_{index}", name=parts.name, arguments="".join(parts.arguments))
            for index, parts in sorted(self._calls.items())
        )

    def _refused(self, message: str) -> RefusedTurn:
        """The answer given up (too big, broken off): what the endpoint produced of it still costs the run.

        The endpoint billed the prompt and every token it streamed; its usage chunk comes last, so it is
        estimated from what was read (``reported_or_estimated``) unless it came.
        """
        written = answer_characters("".join(self._text), self._calls_so_far()) + self._reasoning
        return RefusedTurn(
            message,
            prompt_tokens=reported_or_estimated(self._usage, "prompt_tokens", self._prompt_characters),
            completion_tokens=reported_or_estimated(self._usage, "completion_tokens", written),
        )

    def refused(self, message: str) -> RefusedTurn:
        """``_refused`` for a reader that gives the stream up from outside (the provider's deadline)."""
        with self._lock:
            return self._refused(message)

    def text(self) -> str:
        """The answer's text so far."""
        with self._lock:
            return "".join(self._text)

    def turn(self) -> ModelTurn:
        """The complete turn; ``RefusedTurn`` (charged what was read) when it ended before the model finished."""
        with self._lock:
            if self._finish_reason is None:
                raise self._refused(
                    "The model's streamed answer broke off before it was complete; nothing of it was used. "
                    "Retry the run."
                )
            calls = self._calls_so_far()
            content = "".join(self._text)
            turn = ModelTurn(
                content=content,
                tool_calls=calls,
                prompt_tokens=reported_or_estimated(self._usage, "prompt_tokens", self._prompt_characters),
                completion_tokens=reported_or_estimated(
                    self._usage, "completion_tokens", answer_characters(content, calls) + self._reasoning
                ),
            )
            return finished_turn(self._finish_reason, turn)
