"""``StateMachineTool`` (Embabel): tools per enum state, transitions, global tools, a start state.

::

    class Order(enum.Enum):
        DRAFT = "draft"; CONFIRMED = "confirmed"; SHIPPED = "shipped"

    ORDERS = StateMachineTool(
        "order_processor", "Process an order from draft to shipped.", Order, start=Order.DRAFT,
        states={
            Order.DRAFT: [add_item.tool, Transition(confirm.tool, to=Order.CONFIRMED)],
            Order.CONFIRMED: [Transition(ship.tool, to=Order.SHIPPED)],
        },
        global_tools=[order_status.tool],
    )

The run's model sees the current state's tools and the global ones; a successful call of a
``Transition`` tool moves the state. A call of a tool of another state is answered with the tools
available now and is not run. The calls of one model turn are checked against the state it started in;
once one of them holds a transition, the machine's later calls in that turn (in the model's order) are
not run (``held_refusal``). The state is kept in the run's stored state, so a resumed run (on any
worker, after a restart) continues where it was.
"""

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolhub.agentic.base import AgenticFacts, GatedTools, Granted, as_tool, unique_members
from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Risk, Tool

__all__ = ["StateMachineTool", "Transition"]


@dataclass(frozen=True)
class Transition:
    """A state's tool whose successful call moves the machine to ``to``."""

    tool: Any
    to: enum.Enum


@dataclass(frozen=True, eq=False)
class StateMachineTool(GatedTools):
    """Tools available per state of ``states_enum``; ``global_tools`` in every state."""

    name: str
    description: str
    states_enum: type[enum.Enum]
    start: enum.Enum
    states: Mapping[enum.Enum, Sequence[Any]] = field(default_factory=dict)
    global_tools: Sequence[Any] = ()
    facade: Tool = field(init=False, repr=False)
    members: tuple[Tool, ...] = field(init=False, repr=False)
    #: state value -> names of its tools; (state value, tool name) -> the next state's value.
    by_state: Mapping[str, tuple[str, ...]] = field(init=False, repr=False)
    moves: Mapping[tuple[str, str], str] = field(init=False, repr=False)
    globals: tuple[str, ...] = field(init=False, repr=False)
    held_by_turn = True

    def __post_init__(self) -> None:
        if not (isinstance(self.states_enum, type) and issubclass(self.states_enum, enum.Enum)):
            raise ToolDefinitionError(f"State machine {self.name!r}: states_enum must be an Enum class.")
        if not isinstance(self.start, self.states_enum):
            raise ToolDefinitionError(f"State machine {self.name!r}: start must be a {self.states_enum.__name__}.")
        members: dict[str, Tool] = {}
        by_state: dict[str, tuple[str, ...]] = {}
        moves: dict[tuple[str, str], str] = {}
        for state, items in self.states.items():
            if not isinstance(state, self.states_enum):
                raise ToolDefinitionError(
                    f"State machine {self.name!r}: {state!r} is not a {self.states_enum.__name__}."
                )
            names = []
            for item in items:
                target = item.to if isinstance(item, Transition) else None
                tool = as_tool(item.tool if isinstance(item, Transition) else item, self.name)
                if target is not None:
                    if not isinstance(target, self.states_enum):
                        raise ToolDefinitionError(
                            f"State machine {self.name!r}: {tool.name!r} moves to {target!r}, not a state of it."
                        )
                    moves[(_key(state), tool.name)] = _key(target)
                if members.get(tool.name, tool) is not tool:
                    raise ToolDefinitionError(f"State machine {self.name!r}: two different tools named {tool.name!r}.")
                members[tool.name] = tool
                names.append(tool.name)
            by_state[_key(state)] = tuple(names)
        global_tools = [as_tool(item, self.name) for item in self.global_tools]
        for tool in global_tools:
            if members.get(tool.name, tool) is not tool:
                raise ToolDefinitionError(f"State machine {self.name!r}: two different tools named {tool.name!r}.")
            members[tool.name] = tool
        if not members:
            raise ToolDefinitionError(f"State machine {self.name!r} has no tools.")
        facade = Tool.create(self.name, self.description, None, self._guide, risk=Risk.LOW, idempotent=True)
        object.__setattr__(self, "members", unique_members(self.name, members.values()))
        object.__setattr__(self, "by_state", by_state)
        object.__setattr__(self, "moves", moves)
        object.__setattr__(self, "globals", tuple(tool.name for tool in global_tools))
        object.__setattr__(self, "facade", facade)

    def current(self, entry: Mapping[str, Any]) -> str:
        """The machine's state value in a run (the start state until a transition)."""
        value = entry.get("state")
        known = {_key(state) for state in self.states_enum}
        return str(value) if value in known else _key(self.start)

    def available(self, state: str) -> list[str]:
        return list(dict.fromkeys([*self.by_state.get(state, ()), *self.globals]))

    def shown(self, entry: Mapping[str, Any], facts: AgenticFacts) -> list[str]:
        return self.available(self.current(entry))

    def refusal(self, tool_name: str, entry: Mapping[str, Any], facts: AgenticFacts, granted: Granted) -> str | None:
        state = self.current(entry)
        available = self.available(state)
        if tool_name in available:
            return None
        choices = ", ".join(granted(available)) or "none you may use"
        return (
            f"Tool {tool_name!r} is not available in state {state!r} of {self.name!r}; it was not run. "
            f"Tools available now: {choices}."
        )

    def held_refusal(self, tool_name: str, entry: Mapping[str, Any], earlier: Sequence[str]) -> str | None:
        """After a transition in the turn, the machine's state is not the one its calls are checked against.

        So its later calls (a second transition, a step the new state forbids) wait for the next turn; a
        global tool that moves nothing is available in every state and still runs.
        """
        state = self.current(entry)
        moving = next((name for name in earlier if self._moves(state, name)), None)
        if moving is None or (tool_name in self.globals and not self._moves(state, tool_name)):
            return None
        return (
            f"Tool {tool_name!r} of {self.name!r} was not run: an earlier call ({moving!r}) moves {self.name!r} out "
            f"of state {state!r} and is not applied yet; its tools are checked again in the state that call leaves "
            "(from your next turn). Call it again then if it is still needed."
        )

    def _moves(self, state: str, tool_name: str) -> bool:
        return self.moves.get((state, tool_name), state) != state

    def after_call(self, tool_name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
        state = self.current(entry)
        return {"state": self.moves.get((state, tool_name), state)}

    def status(self, entry: Mapping[str, Any], facts: AgenticFacts) -> str:
        return f"Current state: {self.current(entry)}."

    def _guide(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        from toolhub.agentic.runstate import granted_for

        allowed = set(granted_for(ctx, [tool.name for tool in self.members]))
        states = {}
        for state in self.states_enum:
            key = _key(state)
            states[key] = [
                {"name": name, **({"moves_to": self.moves[(key, name)]} if (key, name) in self.moves else {})}
                for name in self.by_state.get(key, ())
                if name in allowed
            ]
        return {
            "state_machine": self.name,
            "description": self.description,
            "start": _key(self.start),
            "states": states,
            "global_tools": [name for name in self.globals if name in allowed],
            "note": "Your current state is in this tool's description; call the tools of that state.",
        }


def _key(state: enum.Enum) -> str:
    return str(state.value) if isinstance(state.value, str | int) else state.name
