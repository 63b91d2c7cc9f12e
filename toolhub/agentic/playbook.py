"""``PlaybookTool`` (Embabel): tools unlocked by prerequisites, called by the run's model directly.

::

    RESEARCH = PlaybookTool(
        "researcher", "Research a topic: search, then analyze, then summarize.",
        tools=[search.tool, fetch.tool],
        locked={
            analyze.tool: Unlock(after_all=["search"]),
            summarize.tool: Unlock(after_all=["analyze"]),
            publish.tool: Unlock(artifacts=["report.md"], when=lambda f: f.turn >= 3, hint="after three turns"),
        },
    )

A locked tool is shown, but calling it is answered with guidance naming what unlocks it, and it is
not run (an audited ``invalid`` call). What was called successfully is kept in the run's stored state.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolhub.agentic.base import AgenticFacts, GatedTools, Granted, as_tool, unique_members
from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Risk, Tool

__all__ = ["PlaybookTool", "Unlock"]


@dataclass(frozen=True)
class Unlock:
    """When a locked tool unlocks: every condition given must hold.

    ``after_all``: tools that each succeeded in this run; ``after_any``: at least one of these did;
    ``artifacts``: artifact names stored by this run's calls; ``when``: a predicate on ``AgenticFacts``
    (``hint`` says in words what it waits for).
    """

    after_all: Sequence[str] = ()
    after_any: Sequence[str] = ()
    artifacts: Sequence[str] = ()
    when: Callable[[AgenticFacts], bool] | None = None
    hint: str = ""

    def missing(self, facts: AgenticFacts, granted: Granted) -> list[str] | None:
        """What still has to happen, in words (empty: unlocked; ``None``: it cannot happen for this principal)."""
        missing: list[str] = []
        todo = [name for name in self.after_all if name not in facts.done]
        if todo:
            allowed = granted(todo)
            if len(allowed) < len(todo):
                return None
            missing.append("call " + " and ".join(repr(name) for name in allowed) + " successfully first")
        if self.after_any and not any(name in facts.done for name in self.after_any):
            allowed = granted(self.after_any)
            if not allowed:
                return None
            missing.append("call one of " + ", ".join(repr(name) for name in allowed) + " successfully first")
        absent = [name for name in self.artifacts if name not in facts.artifacts]
        if absent:
            missing.append("produce the artifact(s) " + ", ".join(repr(name) for name in absent))
        if self.when is not None and not _holds(self.when, facts):
            missing.append(self.hint or "wait until its condition is met")
        return missing


def _refuse_cycles(playbook: str, unlocks: Mapping[str, Unlock]) -> None:
    """Refuse a locked tool that needs itself first: it would never unlock, and a model would be refused forever.

    Through ``after_all``, or an ``after_any`` naming a single tool.
    """
    needs = {
        name: {*unlock.after_all, *(unlock.after_any if len(unlock.after_any) == 1 else ())}
        for name, unlock in unlocks.items()
    }
    for name in sorted(needs):
        seen: set[str] = set()
        pending = list(needs[name])
        while pending:
            step = pending.pop()
            if step == name:
                raise ToolDefinitionError(
                    f"Playbook {playbook!r}: {name!r} can never unlock, it needs itself first (a cycle of Unlock "
                    "prerequisites); make one of the tools of the cycle open or unlock it otherwise."
                )
            if step not in seen:
                seen.add(step)
                pending.extend(needs.get(step, ()))


def _holds(predicate: Callable[[AgenticFacts], bool], facts: AgenticFacts) -> bool:
    try:
        return bool(predicate(facts))
    except Exception:  # noqa: BLE001 - a failing predicate keeps the tool locked, it does not stop the run
        return False


@dataclass(frozen=True, eq=False)
class PlaybookTool(GatedTools):
    """Tools that unlock step by step; ``tools`` are open from the start, ``locked`` maps tools to their ``Unlock``."""

    name: str
    description: str
    tools: Sequence[Any] = ()
    locked: Mapping[Any, Unlock] = field(default_factory=dict)
    facade: Tool = field(init=False, repr=False)
    members: tuple[Tool, ...] = field(init=False, repr=False)
    unlocks: Mapping[str, Unlock] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        open_tools = [as_tool(item, self.name) for item in self.tools]
        locked = {as_tool(item, self.name): unlock for item, unlock in self.locked.items()}
        members = unique_members(self.name, [*open_tools, *locked])
        if not members:
            raise ToolDefinitionError(f"Playbook {self.name!r} has no tools.")
        names = {tool.name for tool in members}
        for tool, unlock in locked.items():
            if not isinstance(unlock, Unlock):
                raise ToolDefinitionError(f"Playbook {self.name!r}: {tool.name!r} needs an Unlock, not {unlock!r}.")
            unknown = sorted({*unlock.after_all, *unlock.after_any} - names)
            if unknown:
                raise ToolDefinitionError(
                    f"Playbook {self.name!r}: {tool.name!r} unlocks after {unknown}, which are not tools of it."
                )
        _refuse_cycles(self.name, {tool.name: unlock for tool, unlock in locked.items()})
        facade = Tool.create(self.name, self.description, None, self._guide, risk=Risk.LOW, idempotent=True)
        object.__setattr__(self, "members", members)
        object.__setattr__(self, "unlocks", {tool.name: unlock for tool, unlock in locked.items()})
        object.__setattr__(self, "facade", facade)

    def shown(self, entry: Mapping[str, Any], facts: AgenticFacts) -> list[str]:
        # Locked tools are shown too: a call of one is answered with what unlocks it.
        return [tool.name for tool in self.members]

    def refusal(self, tool_name: str, entry: Mapping[str, Any], facts: AgenticFacts, granted: Granted) -> str | None:
        unlock = self.unlocks.get(tool_name)
        if unlock is None:
            return None
        missing = unlock.missing(facts, granted)
        if missing == []:
            return None
        if missing is None:
            return f"Tool {tool_name!r} of {self.name!r} is locked and cannot be unlocked for you in this run."
        return f"Tool {tool_name!r} of {self.name!r} is locked; it was not run. To unlock it: {'; '.join(missing)}."

    def after_call(self, tool_name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
        done = [name for name in entry.get("done", []) if isinstance(name, str)]
        return {"done": done if tool_name in done else [*done, tool_name]}

    def status(self, entry: Mapping[str, Any], facts: AgenticFacts) -> str:
        done = [name for name in entry.get("done", []) if isinstance(name, str)]
        return f"Done so far: {', '.join(done) if done else 'nothing'}."

    def _guide(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        from toolhub.agentic.runstate import granted_for

        allowed = set(granted_for(ctx, [tool.name for tool in self.members]))
        steps = []
        for tool in self.members:
            if tool.name not in allowed:
                continue
            unlock = self.unlocks.get(tool.name)
            needs = {}
            if unlock is not None:
                needs = {
                    "after_all": [n for n in unlock.after_all if n in allowed],
                    "after_any": [n for n in unlock.after_any if n in allowed],
                    "artifacts": list(unlock.artifacts),
                    "condition": unlock.hint if unlock.when is not None else "",
                }
            steps.append({"name": tool.name, "description": tool.description[:200], "unlocked_by": needs})
        return {"playbook": self.name, "description": self.description, "tools": steps}
