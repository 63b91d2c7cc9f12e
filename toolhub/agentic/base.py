"""What the agentic tools share: members, the run state they keep, and how a run finds them."""

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.definition import TOOL_ATTRIBUTE, Tool

__all__ = ["AgenticFacts", "GatedTools", "as_tool", "owner_of", "Granted"]

#: ``granted(names)``: the names the run's principal may call (the message to the model names only those).
Granted = Callable[[Iterable[str]], list[str]]


@dataclass(frozen=True)
class AgenticFacts:
    """What a playbook's predicates and artifact conditions may look at, for one run."""

    done: frozenset[str] = frozenset()
    artifacts: frozenset[str] = frozenset()
    turn: int = 0
    context: Mapping[str, Any] = field(default_factory=dict)


class GatedTools:
    """An agentic tool whose members the run's model calls directly, when its run state lets it.

    The run's state lives in ``DisclosureState.agentic[name]``; the agent loop shows the members
    available now (``shown``), refuses a call of one that is not (``refusal``, with guidance, nothing
    run) and applies each successful member call (``after_call``). The facade tool itself only guides.
    """

    name: str
    description: str
    facade: Tool
    members: tuple[Tool, ...]
    #: Whether a call of a member can hold the rest of its turn (``held_refusal``; the gate reads the turn for it).
    held_by_turn = False

    def __toolhub_tools__(self) -> list[Tool]:
        return [self.facade, *self.members]

    def member_names(self) -> set[str]:
        return {tool.name for tool in self.members}

    def shown(self, entry: Mapping[str, Any], facts: AgenticFacts) -> list[str]:
        raise NotImplementedError

    def refusal(self, tool_name: str, entry: Mapping[str, Any], facts: AgenticFacts, granted: Granted) -> str | None:
        raise NotImplementedError

    def after_call(self, tool_name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def held_refusal(self, tool_name: str, entry: Mapping[str, Any], earlier: Sequence[str]) -> str | None:
        """Why ``tool_name`` may not run after ``earlier`` calls of the same model turn (let through, in order).

        A turn's calls are checked against the state it started in; a member whose call changes that state
        for the rest of the turn refuses the calls after it here. ``None``: nothing of this kind holds it.
        """
        return None

    def status(self, entry: Mapping[str, Any], facts: AgenticFacts) -> str:
        """One line for the facade's description as the model sees it."""
        raise NotImplementedError


def as_tool(item: Any, owner: str) -> Tool:
    """A member given as a ``Tool`` or an ``@tool`` function."""
    if isinstance(item, Tool):
        return item
    built = getattr(item, TOOL_ATTRIBUTE, None)
    if isinstance(built, Tool):
        return built
    raise ToolDefinitionError(
        f"Agentic tool {owner!r}: {item!r} is not a tool; decorate it with @tool or build a Tool."
    )


def owner_of(tool: Tool | None) -> Any:
    """The agentic tool whose facade (or run handler) ``tool`` is, else ``None``."""
    from toolhub.agentic.simple import SimpleAgenticTool

    handler = getattr(tool, "handler", None)
    owner = getattr(handler, "__self__", None)
    name = getattr(handler, "__name__", "")
    if (isinstance(owner, GatedTools) and name == "_guide") or (
        isinstance(owner, SimpleAgenticTool) and name == "_orchestrate"
    ):
        return owner
    return None


def unique_members(owner: str, members: Iterable[Tool]) -> tuple[Tool, ...]:
    tools = tuple(members)
    names = [tool.name for tool in tools]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ToolDefinitionError(f"Agentic tool {owner!r}: tools named twice: {duplicates}.")
    if owner in names:
        raise ToolDefinitionError(f"Agentic tool {owner!r}: a member has the agentic tool's own name.")
    return tools
