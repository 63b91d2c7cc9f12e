"""How an agentic tool reaches a model without the core importing the agents app: a resolver it registers."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolhub.exceptions import ToolError
from toolhub.tools.context import ToolContext

__all__ = ["InnerModel", "register_model_resolver", "inner_model"]


@dataclass(frozen=True)
class InnerModel:
    """A model adapter (``complete(messages=, tools=)``) and the schema profile of its provider."""

    adapter: Any
    profile: str


#: ``resolver(ctx, *, agent, provider)`` -> ``InnerModel``; raises ``ToolError`` with a message for the model.
ModelResolver = Callable[..., InnerModel]

_resolver: ModelResolver | None = None


def register_model_resolver(resolver: ModelResolver) -> None:
    """Let the agents app build the model of an agentic tool (by agent, by provider, or the run's agent's)."""
    global _resolver
    _resolver = resolver


def inner_model(ctx: ToolContext, *, agent: str = "", provider: str = "") -> InnerModel:
    if _resolver is None:
        raise ToolError("No model is available to this agentic tool here.")
    return _resolver(ctx, agent=agent, provider=provider)
