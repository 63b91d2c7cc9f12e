"""The interface every model adapter implements, and the choice of adapter for an agent."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agents_app.models import Agent


@dataclass(frozen=True)
class ModelToolCall:
    """A tool call as the model asked for it; ``arguments`` is the raw text it sent (maybe not JSON)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ModelTurn:
    """One answer of the model: text, tool calls, or both, plus token usage."""

    content: str = ""
    tool_calls: tuple[ModelToolCall, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class ModelAdapter(Protocol):
    """Takes the conversation and the visible tools' definitions, returns the model's next turn.

    Raises ``toolhub.exceptions.ModelError`` when the endpoint is unreachable or answers garbage.
    """

    def complete(self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelTurn: ...


def adapter_for(agent: "Agent") -> ModelAdapter:
    """Build the adapter an agent is configured for."""
    from agents_app.models import Provider

    if agent.provider == Provider.OPENAI:
        from agents_app.models_adapters.openai_chat import OpenAIChatAdapter

        return OpenAIChatAdapter(
            base_url=agent.base_url or None,
            model=agent.model_name,
            api_key_env=agent.api_key_env,
            parallel_tool_calls=agent.parallel_tool_calls,
        )
    from agents_app.models_adapters.scripted import ScriptedAdapter

    return ScriptedAdapter(script=agent.script)
