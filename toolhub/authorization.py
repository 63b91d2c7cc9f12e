"""Who may call what: checked when a call is requested and again when a worker executes it."""

from dataclasses import dataclass

from toolhub.models import ToolDefinition

__all__ = ["CallPrincipal", "authorization_denial"]


@dataclass(frozen=True)
class CallPrincipal:
    """Who a call is made for, as established at the boundary (never by the model)."""

    user_id: int | None
    username: str
    tenant: str
    agent_name: str = ""
    #: The tools the agent was given; ``None`` when the call does not come from an agent.
    agent_tools: frozenset[str] | None = None


def authorization_denial(tool_name: str, definition: ToolDefinition | None, principal: CallPrincipal) -> str | None:
    """Return why ``principal`` may not call the tool now, or ``None`` when it may."""
    if definition is not None and not definition.enabled:
        return f"Tool {tool_name!r} is disabled by an operator; do not call it."
    if principal.agent_tools is not None and tool_name not in principal.agent_tools:
        return f"Tool {tool_name!r} is not available to agent {principal.agent_name!r}; do not call it."
    return None
