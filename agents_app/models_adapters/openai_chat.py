"""OpenAI-compatible Chat Completions through the official SDK (OpenAI, Ollama, vLLM, LM Studio...)."""

import threading
from typing import Any

import openai

from agents_app.models_adapters.base import ModelToolCall, ModelTurn
from toolhub.exceptions import ModelError


class OpenAIChatAdapter:
    """Calls ``chat.completions.create`` with the tools as functions, cut off at the provider's deadline.

    The SDK's timeout bounds each wait for bytes, not the whole call: an endpoint that drips its
    answer a byte at a time never trips it. So the call runs on a helper thread and the step gives
    up on it at ``deadline`` seconds, closing its connection (the step token makes sure a late answer
    could not be recorded anyway).
    """

    def __init__(
        self,
        *,
        provider_name: str,
        base_url: str | None,
        model: str,
        api_key: str,
        parallel_tool_calls: bool = True,
        request_timeout: float = 30.0,
        deadline: float = 120.0,
    ) -> None:
        self._provider_name = provider_name
        self._deadline = deadline
        # Local servers (Ollama, vLLM, LM Studio) accept any key; the SDK insists on one.
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=min(request_timeout, deadline), max_retries=1
        )
        self._model = model
        self._parallel_tool_calls = parallel_tool_calls

    def complete(self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelTurn:
        options: dict[str, Any] = {"model": self._model, "messages": messages}
        if tools:
            options["tools"] = tools
            if not self._parallel_tool_calls:
                options["parallel_tool_calls"] = False
        response = self._create_within_deadline(options)
        return _turn_from(response)

    def _create_within_deadline(self, options: dict[str, Any]) -> Any:
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def call() -> None:
            try:
                outcome["response"] = self._client.chat.completions.create(**options)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                outcome["error"] = exc
            finally:
                done.set()

        threading.Thread(target=call, name=f"model-call-{self._provider_name}", daemon=True).start()
        if not done.wait(self._deadline):
            self._client.close()
            raise ModelError(
                f"Model provider {self._provider_name!r} did not answer within its deadline of {self._deadline:g} s; "
                "retry the run later."
            )
        error = outcome.get("error")
        if error is None:
            return outcome["response"]
        if isinstance(error, openai.APIConnectionError):
            raise ModelError(f"Model endpoint unreachable: {error.__class__.__name__}") from error
        if isinstance(error, openai.APIStatusError):
            raise ModelError(f"Model endpoint answered HTTP {error.status_code}") from error
        if isinstance(error, openai.APIError):
            raise ModelError(
                f"Model endpoint answered something that is not a chat completion ({error.__class__.__name__})"
            ) from error
        raise error


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
