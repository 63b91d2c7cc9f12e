"""A deterministic model for demos and tests: a JSON list of turns, played in order.

Each turn is ``{"content": "...", "tool_calls": [{"name": ..., "arguments": {...} or "raw text"}]}``.
``{last_tool_result}`` in ``content`` is replaced by the text of the newest tool result.
"""

import json
from typing import Any

from agents_app.models_adapters.base import ModelToolCall, ModelTurn, PartialSink
from toolhub.conf import toolhub_settings
from toolhub.exceptions import ModelError

_LAST_RESULT = "{last_tool_result}"


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


class ScriptedAdapter:
    """Plays the turn whose index is the number of assistant messages so far."""

    #: The script is in memory: asking it under the run's lock costs nothing (see ``ModelAdapter``).
    answers_in_process = True

    def __init__(self, *, script: Any) -> None:
        if not isinstance(script, list):
            raise ModelError("The scripted model's script must be a JSON list of turns.")
        self._script = script

    def complete(
        self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_partial: PartialSink | None = None
    ) -> ModelTurn:
        index = sum(1 for message in messages if message.get("role") == "assistant")
        if index >= len(self._script):
            raise ModelError(f"The scripted model has no turn {index + 1} (the script has {len(self._script)}).")
        turn = self._script[index]
        if not isinstance(turn, dict):
            raise ModelError(f"Turn {index + 1} of the script is not an object.")
        last_result = str(next((m.get("content", "") for m in reversed(messages) if m.get("role") == "tool"), ""))
        content = str(turn.get("content", ""))
        # Bounded before it is built: a turn quoting a large result many times would not fit in memory.
        quoted = content.count(_LAST_RESULT) * (_utf8_size(last_result) - len(_LAST_RESULT))
        size = _utf8_size(content) + quoted
        if size > toolhub_settings().MAX_EXTERNAL_RESULT_BYTES:
            raise ModelError(
                f"Turn {index + 1} of the script would be {size:,} bytes with the tool result in it, above "
                "TOOLHUB['MAX_EXTERNAL_RESULT_BYTES']; quote the result fewer times."
            )
        content = content.replace(_LAST_RESULT, last_result)
        calls = []
        for position, raw in enumerate(turn.get("tool_calls") or ()):
            if not isinstance(raw, dict):
                raise ModelError(f"Tool call {position + 1} of turn {index + 1} is not an object.")
            arguments = raw.get("arguments", {})
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            calls.append(
                ModelToolCall(id=f"call_{index + 1}_{position + 1}", name=str(raw.get("name", "")), arguments=text)
            )
        if on_partial is not None and content:
            on_partial(content)  # a script "streams" its whole text at once
        words = sum(len(str(m.get("content") or "").split()) for m in messages)
        return ModelTurn(
            content=content,
            tool_calls=tuple(calls),
            prompt_tokens=words,
            completion_tokens=len(content.split()),
        )
