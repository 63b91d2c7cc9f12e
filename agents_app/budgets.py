"""What a run and the runs below it have spent or hold: the budgets subagents share (``agents_app.subagents``).

A child run is given a budget (``AgentRun.limits``) carved out of its parent's when it starts. While it is
going, its whole budget counts as spent by its parent, whatever it has used yet: children started together
cannot each spend the same remainder, and a child's own children spend from the child's budget, never
beside it. Once it ended, what its subtree actually used counts. A tool call is any the run executes: its
turns' calls and its agentic tools' inner calls alike. Inner calls count as charged when their inner model
asked for them (``AgentRun.inner_calls_charged``, by ``agents_app.agentic``) or as their rows, whichever is more.
"""

import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import Case, Count, F, Q, Value, When
from django.db.models.expressions import Combinable

from agents_app.models import AgentRun, RunStatus
from toolhub.models import CallKind, ToolCall, undoing

__all__ = [
    "BUDGETED_KINDS",
    "MAX_SUBAGENT_DEPTH",
    "MAX_TOKENS_KEPT",
    "Spending",
    "budget_of",
    "calls_used",
    "spending_below",
    "spending_of",
    "tokens_added",
    "tokens_added_sql",
]

#: Budget keys of ``AgentRun.limits``, by ``Spending`` field.
_KEYS = {"calls": "max_tool_calls", "tokens": "max_tokens"}
_GOING = frozenset({RunStatus.RUNNING, RunStatus.WAITING})
#: The deepest nesting any subagent tool may allow (``SubagentLimits.max_depth`` is refused past it at definition
#: time): the walks over a run's tree (its children's spending here, a board's ancestors) stop at that many levels,
#: so a deeper child's spending would go uncounted against its ancestors' budgets.
MAX_SUBAGENT_DEPTH = 32
#: The calls a budget counts: the run's turns' and its agentic tools' inner calls (each executes a tool).
BUDGETED_KINDS = (CallKind.CALL, CallKind.INNER)
#: ``BUDGETED_KINDS``, less the calls made on behalf of a compensation (an agentic compensation's inner calls carry
#: the run's id): undoing a step is the saga's work, never the run's spending.
_BUDGETED = Q(kind__in=BUDGETED_KINDS) & ~undoing()

#: The most tokens a run's totals keep (the bound of their ``PositiveIntegerField`` columns on every database):
#: an endpoint reporting more is past every budget anyway, and a write beyond the range would fail the step.
MAX_TOKENS_KEPT = 2**31 - 1


def tokens_added(total: int, more: int) -> int:
    """A run's token total after a model turn's ``more`` (never negative: ``ModelTurn`` checks it), kept in range."""
    return min(total + more, MAX_TOKENS_KEPT)


def tokens_added_sql(field: str, more: int) -> Combinable:
    """``tokens_added`` as one UPDATE's expression, for a turn charged to a run that is not locked.

    Compared before it is added, so the database never computes a sum past its integer's range.
    """
    more = min(more, MAX_TOKENS_KEPT)
    return Case(
        When(**{f"{field}__gt": MAX_TOKENS_KEPT - more}, then=Value(MAX_TOKENS_KEPT)),
        default=F(field) + more,
    )


@dataclass(frozen=True)
class Spending:
    """Tool calls (``BUDGETED_KINDS``) and model tokens."""

    calls: int = 0
    tokens: int = 0

    def __add__(self, other: "Spending") -> "Spending":
        return Spending(self.calls + other.calls, self.tokens + other.tokens)


def budget_of(run: AgentRun | dict[str, Any], what: str) -> int | None:
    """A budget the parent gave the run (``max_tool_calls`` or ``max_tokens``); ``None``: none was given."""
    limits = run.get("limits") if isinstance(run, dict) else run.limits
    value = limits.get(what) if isinstance(limits, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def calls_used(run: AgentRun) -> tuple[int, int]:
    """The run's own calls, in one query: its turns' (its agent's limit counts these), and all it budgets."""
    counted = ToolCall.objects.filter(_BUDGETED, run_id=run.id).aggregate(
        turns=Count("id", filter=Q(kind=CallKind.CALL)), inner=Count("id", filter=Q(kind=CallKind.INNER))
    )
    return counted["turns"], counted["turns"] + max(counted["inner"], run.inner_calls_charged)


def spending_of(run: AgentRun) -> Spending:
    """The run's own calls and tokens, plus what its children hold or used (``spending_below``)."""
    return Spending(calls_used(run)[1], run.prompt_tokens + run.completion_tokens) + spending_below(run.id)


def spending_below(run_id: uuid.UUID) -> Spending:
    """What the runs below ``run_id`` hold: a going child its budget (or more, if it used more), an ended one its use.

    One query per level of the tree and one for the calls.
    """
    nodes: dict[uuid.UUID, dict[str, Any]] = {}
    children: defaultdict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
    frontier = [run_id]
    for _ in range(MAX_SUBAGENT_DEPTH):
        rows = list(
            AgentRun.objects.filter(parent_run_id__in=frontier).values(
                "id", "parent_run_id", "status", "limits", "prompt_tokens", "completion_tokens", "inner_calls_charged"
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
    calls = {
        run_id: (turns, inner)
        for run_id, turns, inner in ToolCall.objects.filter(_BUDGETED, run_id__in=list(nodes))
        .values("run_id")
        .annotate(turns=Count("id", filter=Q(kind=CallKind.CALL)), inner=Count("id", filter=Q(kind=CallKind.INNER)))
        .values_list("run_id", "turns", "inner")
    }

    def used(node_id: uuid.UUID) -> Spending:
        row = nodes[node_id]
        turns, inner = calls.get(node_id, (0, 0))
        own = Spending(turns + max(inner, row["inner_calls_charged"]), row["prompt_tokens"] + row["completion_tokens"])
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
