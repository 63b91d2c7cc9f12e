"""``SimpleAgenticTool`` (Embabel): one tool whose call lets a model orchestrate sub-tools, each call governed.

::

    MATH = SimpleAgenticTool(
        "math_orchestrator", "Work out an arithmetic expression.",
        tools=[add.tool, multiply.tool], prompt="Use the tools; answer with the number only.",
        max_iterations=5, agent="math-brain",      # or provider="gpt", or neither: the run's agent's model
    )

Calling it runs an inner loop on the worker that executes the call: the model (the named agent's,
the named provider's with the run's agent's settings, or else the run's agent's) sees the sub-tools
the principal is granted; each of its tool calls goes through the governed pipeline with the same
principal (validation, grants, approval rules, audit) as a call of kind ``inner`` in the same run,
linked to the outer call by ``parent_call_id`` in its context, and runs right there. A call that
needs approval is not waited for: the model is told it waits for an operator (it runs once approved).
A ``PlaybookTool`` or ``StateMachineTool`` among ``tools`` governs what the inner model is offered
and may call, as it does for a run's model; its state is replayed from the run's earlier inner calls
of this tool (so a later call, or a resumed run, continues in it) and returned in the result.
The loop stops at ``max_iterations`` model turns, or before a turn that would pass ``max_calls`` inner
calls; the outer call then fails, saying so (the inner calls made stay recorded).
An agentic tool does not run as another's inner call (``inner.refuse_nested``): its loop would multiply
the outer's limits.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolhub.agentic.base import GatedTools, as_tool, unique_members
from toolhub.exceptions import ModelError, ToolDefinitionError, ToolError
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Risk, Tool

__all__ = ["SimpleAgenticTool", "DEFAULT_PROMPT", "MAX_ITERATIONS"]

DEFAULT_PROMPT = (
    "You are an intelligent agent that can use tools to help you complete tasks. "
    "Use the provided tools to perform the following task: {description}"
)
#: Highest ``max_iterations`` an agentic tool may declare.
MAX_ITERATIONS = 50
#: Highest ``max_calls`` an agentic tool may declare.
MAX_CALLS = 200

_TASK = {"task": str}


@dataclass(frozen=True, eq=False)
class SimpleAgenticTool:
    """A tool that runs a model over ``tools`` for at most ``max_iterations`` turns and returns its answer."""

    name: str
    description: str
    tools: Sequence[Any]
    prompt: str = ""
    max_iterations: int = 10
    #: Most inner calls one call of it may make (a model turn asking for more is refused whole).
    max_calls: int = 20
    agent: str = ""
    provider: str = ""
    parameters: Mapping[str, Any] | None = None
    risk: Risk = Risk.MEDIUM
    tool: Tool = field(init=False, repr=False)
    members: tuple[Tool, ...] = field(init=False, repr=False)
    #: Playbooks and state machines among ``tools``: their members are offered as their state allows.
    gated: tuple[GatedTools, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        gated = tuple(item for item in self.tools if isinstance(item, GatedTools))
        plain = [as_tool(item, self.name) for item in self.tools if not isinstance(item, GatedTools)]
        members = unique_members(self.name, [*plain, *(t for owner in gated for t in owner.__toolhub_tools__())])
        if not members:
            raise ToolDefinitionError(f"Agentic tool {self.name!r} has no tools.")
        if not 1 <= int(self.max_iterations) <= MAX_ITERATIONS:
            raise ToolDefinitionError(f"Agentic tool {self.name!r}: max_iterations must be 1 to {MAX_ITERATIONS}.")
        if not 1 <= int(self.max_calls) <= MAX_CALLS:
            raise ToolDefinitionError(f"Agentic tool {self.name!r}: max_calls must be 1 to {MAX_CALLS}.")
        if self.agent and self.provider:
            raise ToolDefinitionError(f"Agentic tool {self.name!r}: name an agent or a provider, not both.")
        tool = Tool.create(self.name, self.description, self.parameters or _TASK, self._orchestrate, risk=self.risk)
        object.__setattr__(self, "members", members)
        object.__setattr__(self, "gated", gated)
        object.__setattr__(self, "tool", tool)

    def __toolhub_tools__(self) -> list[Tool]:
        return [self.tool, *self.members]

    def member_names(self) -> set[str]:
        return {tool.name for tool in self.members}

    def _orchestrate(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        from toolhub.agentic.inner import InnerState, inner_definitions, inner_tool_call, outer_turn, refuse_nested
        from toolhub.agentic.models import inner_model

        refuse_nested(ctx, self.name)
        model = inner_model(ctx, agent=self.agent, provider=self.provider)
        state = InnerState.load(ctx, owner=self)
        system = (self.prompt or DEFAULT_PROMPT).replace("{description}", self.description)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": json.dumps(arguments, default=str)},
        ]
        calls: list[dict[str, Any]] = []
        turn_of_run = outer_turn(ctx)
        for iteration in range(int(self.max_iterations)):
            definitions = inner_definitions(ctx, state.offered(), model.profile)
            if not definitions:
                raise ToolError(f"{self.name} has no tools you may use.")
            try:
                turn = model.adapter.complete(messages=messages, tools=definitions)
            except ModelError as exc:
                raise ToolError(f"{self.name}: {exc}") from None
            if not turn.tool_calls:
                return {"answer": turn.content, "iterations": iteration + 1, "calls": calls, **state.result()}
            if len(calls) + len(turn.tool_calls) > self.max_calls:
                raise ToolError(
                    f"{self.name} stopped: its model asked for {len(turn.tool_calls)} more tool call(s) after "
                    f"{len(calls)}, beyond its limit of {self.max_calls}; nothing more was run."
                )
            messages.append(
                {
                    "role": "assistant",
                    "content": turn.content or None,
                    "tool_calls": [
                        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                        for c in turn.tool_calls
                    ],
                }
            )
            for inner in turn.tool_calls:
                call = inner_tool_call(
                    ctx,
                    name=inner.name,
                    arguments=inner.arguments,
                    model_call_id=inner.id,
                    position=len(calls),
                    turn=turn_of_run,
                    gate=state.gate(iteration),
                    owner=self.name,
                )
                state.after(call)
                calls.append({"id": str(call.id), "tool": call.tool_name, "status": call.status})
                messages.append({"role": "tool", "tool_call_id": inner.id, "content": call.model_text()})
        raise ToolError(
            f"{self.name} stopped after {self.max_iterations} model turns without an answer "
            f"({len(calls)} inner call(s) were made and are recorded)."
        )
