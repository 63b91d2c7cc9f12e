"""What a run and the runs below it have spent or hold: the budgets subagents share (``agents_app.subagents``).

A child run is given a budget (``AgentRun.limits``) carved out of its parent's when it starts. While it is
going, its whole budget counts as spent by its parent, whatever it has used yet: children started together
cannot each spend the same remainder, and a child's own children spend from the child's budget, never
beside it. Once it ended, what its subtree actually used counts.
"""

import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import Count

from agents_app.models import AgentRun, RunStatus
from toolhub.models import CallKind, ToolCall

__all__ = ["Spending", "budget_of", "spending_below", "spending_of"]

#: Budget keys of ``AgentRun.limits``, by ``Spending`` field.
_KEYS = {"calls": "max_tool_calls", "tokens": "max_tokens"}
_GOING = frozenset({RunStatus.RUNNING, RunStatus.WAITING})
#: Nesting is refused past ``SubagentLimits.max_depth``; this only bounds the walk over a corrupt tree.
_MAX_LEVELS = 32


@dataclass(frozen=True)
class Spending:
    """Tool calls (kind ``call``) and model tokens."""

    calls: int = 0
    tokens: int = 0

    def __add__(self, other: "Spending") -> "Spending":
        return Spending(self.calls + other.calls, self.tokens + other.tokens)


def budget_of(run: AgentRun | dict[str, Any], what: str) -> int | None:
    """A budget the parent gave the run (``max_tool_calls`` or ``max_tokens``); ``None``: none was given."""
    limits = run.get("limits") if isinstance(run, dict) else run.limits
    value = limits.get(what) if isinstance(limits, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def spending_of(run: AgentRun) -> Spending:
    """The run's own calls and tokens, plus what its children hold or used (``spending_below``)."""
    own_calls = ToolCall.objects.filter(run_id=run.id, kind=CallKind.CALL).count()
    return Spending(own_calls, run.prompt_tokens + run.completion_tokens) + spending_below(run.id)


def spending_below(run_id: uuid.UUID) -> Spending:
    """What the runs below ``run_id`` hold: a going child its budget (or more, if it used more), an ended one its use.

    One query per level of the tree and one for the calls.
    """
    nodes: dict[uuid.UUID, dict[str, Any]] = {}
    children: defaultdict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
    frontier = [run_id]
    for _ in range(_MAX_LEVELS):
        rows = list(
            AgentRun.objects.filter(parent_run_id__in=frontier).values(
                "id", "parent_run_id", "status", "limits", "prompt_tokens", "completion_tokens"
            )
        )
        if not rows:
            break
        for row in rows:
            nodes[row["id"]] = row
            children[row["parent_run_id"]].append(row["id"])
        frontier = [row["id"] for row in rows]
    if not nodes:
        return Spending()
    calls = dict(
        ToolCall.objects.filter(run_id__in=list(nodes), kind=CallKind.CALL)
        .values("run_id")
        .annotate(n=Count("id"))
        .values_list("run_id", "n")
    )

    def used(node_id: uuid.UUID) -> Spending:
        row = nodes[node_id]
        own = Spending(calls.get(node_id, 0), row["prompt_tokens"] + row["completion_tokens"])
        return own + held_below(node_id)

    def held_below(node_id: uuid.UUID) -> Spending:
        total = Spending()
        for child_id in children.get(node_id, ()):
            spent = used(child_id)
            row = nodes[child_id]
            if row["status"] in _GOING:
                spent = Spending(
                    *(max(getattr(spent, field), budget_of(row, key) or 0) for field, key in _KEYS.items())
                )
            total += spent
        return total

    return held_below(run_id)
