"""OpenAI-compatible Chat Completions through the official SDK (OpenAI, Ollama, vLLM, LM Studio...)."""

import os
from typing import Any

import openai

from agents_app.models_adapters.base import ModelToolCall, ModelTurn
from toolhub.exceptions import ModelError


class OpenAIChatAdapter:
    """Calls ``chat.completions.create`` with the tools as functions; the key comes from the environment."""

    def __init__(
        self,
        *,
        base_url: str | None,
        model: str,
        api_key_env: str,
        parallel_tool_calls: bool = True,
        timeout: float = 60.0,
    ) -> None:
        if not model:
            raise ModelError("The agent has no model name; set model.model on the agent.")
        api_key = os.environ.get(api_key_env, "") if api_key_env else ""
        if api_key_env and not api_key:
            raise ModelError(f"The environment variable {api_key_env} that should hold the API key is not set.")
        # Local servers (Ollama, vLLM, LM Studio) accept any key; the SDK insists on one.
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=1)
        self._model = model
        self._parallel_tool_calls = parallel_tool_calls

    def complete(self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelTurn:
        options: dict[str, Any] = {"model": self._model, "messages": messages}
        if tools:
            options["tools"] = tools
            if not self._parallel_tool_calls:
                options["parallel_tool_calls"] = False
        try:
            response = self._client.chat.completions.create(**options)
        except openai.APIConnectionError as exc:
            raise ModelError(f"Model endpoint unreachable: {exc.__class__.__name__}") from exc
        except openai.APIStatusError as exc:
            raise ModelError(f"Model endpoint answered HTTP {exc.status_code}") from exc
        except openai.APIError as exc:
            raise ModelError(
                f"Model endpoint answered something that is not a chat completion ({exc.__class__.__name__})"
            ) from exc
        return _turn_from(response)


def _turn_from(response: Any) -> ModelTurn:
    try:
        message = response.choices[0].message
        calls = tuple(
            ModelToolCall(
                id=call.id or f"call_{index}",
                name=call.function.name or "",
                arguments=call.function.arguments or "",
            )
            for index, call in enumerate(message.tool_calls or ())
        )
        usage = getattr(response, "usage", None)
        return ModelTurn(
            content=message.content or "",
            tool_calls=calls,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        )
    except (AttributeError, IndexError, TypeError, ValueError) as exc:
        raise ModelError("Model endpoint answered something that is not a chat completion") from exc
