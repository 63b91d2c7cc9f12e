"""Tools about the calling run itself: its blackboard, its status and budget, and messages to its user.

Ordinary governed tools (grants, approval rules, audit apply); an agent opts in by listing them. Each
finds its run from the boundary's context (run id and tenant), never from arguments, so it only ever
reads or writes the calling run: another run's or tenant's rows never show.
"""

import json
from typing import Annotated, Any

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone
from pydantic import Field

from agents_app.blackboard import blackboard_count as _count
from agents_app.blackboard import blackboard_entries, blackboard_entry, blackboard_headers, entry_summary
from agents_app.blackboard import blackboard_last as _last
from agents_app.budgets import Spending, budget_of, calls_used, spending_below
from agents_app.models import AgentRun, agent_call_limit
from approvals.webhooks import webhook_enqueue
from toolhub.exceptions import ToolError
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.tools.context import ToolContext
from toolhub.tools.decorators import tool
from toolhub.tools.definition import Risk
from toolhub.tools.specs import Param

#: Most entries ``blackboard_list`` shows, calls ``run_history`` shows, and characters ``blackboard_describe`` writes.
MAX_LISTED = 100
MAX_DESCRIBED_CHARS = 4000
MAX_INDEX = 1_000_000
#: Most ``communicate`` messages a run keeps (the oldest go first); the longest message and progress note.
MAX_MESSAGES = 50
MAX_MESSAGE_LENGTH = 2000
MAX_PROGRESS_LENGTH = 200

Name = Annotated[str, Param("The entry's name, as blackboard_list shows it."), Field(max_length=200)]
Kind = Annotated[
    str,
    Param("The type to match: its simple name (Person) or full name (crm.Person)."),
    Field(min_length=1, max_length=200),
]


def _current_run(ctx: ToolContext) -> AgentRun:
    """The calling run, by the boundary's run id and tenant; a call outside a run is told so."""
    run_id = ctx.run_id
    run = None
    if run_id:
        try:
            run = AgentRun.objects.select_related("agent").filter(id=run_id, tenant=ctx.tenant or "").first()
        except Exception:  # noqa: BLE001 - a malformed id is no run
            run = None
    if run is None:
        raise ToolError("This tool works only inside an agent run.")
    return run


def _names_hint(run: AgentRun) -> str:
    names = list(dict.fromkeys(blackboard_entries(run).values_list("name", flat=True)))
    if not names:
        return "The blackboard is empty."
    shown = ", ".join(repr(name) for name in names[-20:])
    return f"Names on the blackboard: {shown}{' (latest 20)' if len(names) > 20 else ''}."


@tool(risk=Risk.LOW, idempotent=True, category="blackboard")
def blackboard_list(ctx: ToolContext) -> dict[str, Any]:
    """List the objects on this run's blackboard (artifacts, subagent answers) with their index, name, kind and size."""
    entries = list(blackboard_headers(_current_run(ctx)))
    shown = [entry_summary(entry, index) for index, entry in enumerate(entries)][-MAX_LISTED:]
    answer: dict[str, Any] = {"entries": shown, "total": len(entries)}
    if len(entries) > MAX_LISTED:
        answer["note"] = f"Only the latest {MAX_LISTED} are listed."
    return answer


@tool(risk=Risk.LOW, idempotent=True, category="blackboard")
def blackboard_get(
    ctx: ToolContext,
    name: Annotated[
        str, Param("The entry's name; the latest entry of that name is returned."), Field(max_length=200)
    ] = "",
    index: Annotated[int | None, Param("Or the entry's index from blackboard_list."), Field(ge=0, le=MAX_INDEX)] = None,
) -> Any:
    """Get an object from this run's blackboard by name (or by its index in blackboard_list)."""
    run = _current_run(ctx)
    if (index is None) == (not name):
        raise ToolError("Give exactly one of name or index.")
    if index is not None:
        entries = list(blackboard_headers(run)[: MAX_INDEX + 1])  # the value of the one asked for only
        if index >= len(entries):
            where = f" (0 to {len(entries) - 1})" if entries else ""
            raise ToolError(f"No entry at index {index}; the blackboard has {len(entries)} entries{where}.")
        return entries[index].value
    entry = blackboard_entry(run, name)
    if entry is None:
        raise ToolError(f"No blackboard entry named {name[:100]!r}. {_names_hint(run)}")
    return entry.value


@tool(risk=Risk.LOW, idempotent=True, category="blackboard")
def blackboard_last(kind: Kind, ctx: ToolContext) -> dict[str, Any]:
    """Get the latest object of a type from this run's blackboard."""
    run = _current_run(ctx)
    entry = _last(run, kind)
    if entry is None:
        raise ToolError(f"No blackboard entry of kind {kind[:100]!r}. {_names_hint(run)}")
    return {"name": entry.name, "kind": entry.kind, "value": entry.value}


@tool(risk=Risk.LOW, idempotent=True, category="blackboard")
def blackboard_describe(name: Name, ctx: ToolContext) -> str:
    """Describe an object on this run's blackboard: its kind, size, where it came from and its content."""
    run = _current_run(ctx)
    entry = blackboard_entry(run, name)
    if entry is None:
        raise ToolError(f"No blackboard entry named {name[:100]!r}. {_names_hint(run)}")
    content = entry.value if isinstance(entry.value, str) else json.dumps(entry.value, indent=2, ensure_ascii=False)
    if len(content) > MAX_DESCRIBED_CHARS:
        content = content[:MAX_DESCRIBED_CHARS] + f"\n... ({len(content) - MAX_DESCRIBED_CHARS} more characters)"
    origin = f"produced by call {entry.produced_by_call_id}" if entry.produced_by_call_id else "put by the run"
    return f"{entry.name} (kind {entry.kind}, {entry.size} bytes, {origin}):\n{content}"


@tool(risk=Risk.LOW, idempotent=True, category="blackboard")
def blackboard_count(kind: Kind, ctx: ToolContext) -> dict[str, Any]:
    """Count the objects of a type on this run's blackboard."""
    return {"kind": kind, "count": _count(_current_run(ctx), kind)}


def _calls(run: AgentRun) -> Any:
    return ToolCall.objects.filter(run_id=run.id, kind=CallKind.CALL)


@tool(risk=Risk.LOW, idempotent=True, category="run")
def run_status(ctx: ToolContext) -> dict[str, Any]:
    """Tell this run's id, agent, status, turn, subagent depth and how long it has been running."""
    run = _current_run(ctx)
    return {
        "run_id": str(run.id),
        "agent": run.agent.name,
        "status": run.status,
        "turn": run.turn,
        "depth": run.depth,
        "parent_run": str(run.parent_run_id) if run.parent_run_id else None,
        "elapsed_seconds": round((timezone.now() - run.created_at).total_seconds(), 1),
    }


@tool(risk=Risk.LOW, idempotent=True, category="run")
def run_budget(ctx: ToolContext) -> dict[str, Any]:
    """What this run may still spend: tool calls and tokens, used and left."""
    run = _current_run(ctx)
    own_calls, budgeted = calls_used(run)
    # What its children hold or used counts against a budget its parent gave it (``agents_app.budgets``), and so
    # do its agentic tools' inner calls.
    held = spending_below(run.id) if run.limits else Spending()
    call_limit = agent_call_limit(run.agent)
    calls_left, used = call_limit - own_calls, own_calls
    given_calls = budget_of(run, "max_tool_calls")
    if given_calls is not None:
        call_limit = min(call_limit, given_calls)
        calls_left = min(calls_left, given_calls - budgeted - held.calls)
        used = budgeted
    used += held.calls
    tokens = run.prompt_tokens + run.completion_tokens + held.tokens
    token_limit = budget_of(run, "max_tokens")
    return {
        "tool_calls": {"used": used, "limit": call_limit, "left": max(calls_left, 0)},
        "tokens": {
            "used": tokens,
            "limit": token_limit,
            "left": max(token_limit - tokens, 0) if token_limit is not None else None,
        },
        "turns": run.turn,
    }


@tool(risk=Risk.LOW, idempotent=True, category="run")
def run_history(
    ctx: ToolContext,
    last: Annotated[int, Param("How many of the latest calls to show."), Field(ge=1, le=MAX_LISTED)] = 20,
) -> list[dict[str, Any]]:
    """List this run's tool calls so far, oldest first: turn, tool and status (never arguments or results)."""
    from agents_app.loop import statuses_for_model

    run = _current_run(ctx)
    rows = list(reversed(_calls(run).order_by("-turn", "-position").values("turn", "tool_name", "status")[:last]))
    statuses = statuses_for_model(run, [(r["tool_name"], r["status"]) for r in rows])
    return [{"turn": r["turn"], "tool": r["tool_name"], "status": s} for r, s in zip(rows, statuses, strict=True)]


@tool(risk=Risk.LOW, idempotent=True, category="run")
def run_tool_stats(ctx: ToolContext) -> dict[str, dict[str, int]]:
    """How often this run called each tool, and how many of those calls succeeded or failed."""
    run = _current_run(ctx)
    rows = (
        _calls(run)
        .values("tool_name")
        .annotate(
            calls=Count("id"),
            succeeded=Count("id", filter=Q(status=CallStatus.SUCCEEDED)),
            failed=Count("id", filter=~Q(status=CallStatus.SUCCEEDED) & Q(finished_at__isnull=False)),
        )
        .order_by("tool_name")
    )
    return {r["tool_name"]: {"calls": r["calls"], "succeeded": r["succeeded"], "failed": r["failed"]} for r in rows}


def _add_update(run: AgentRun, update: dict[str, Any]) -> AgentRun:
    """Append ``update`` to the run's updates under its row lock: messages kept (bounded), one latest progress note."""
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update(of=("self",)).get(pk=run.pk)
        updates = [u for u in (locked.updates or []) if isinstance(u, dict)]
        if update["kind"] == "progress":
            updates = [u for u in updates if u.get("kind") != "progress"]
        updates.append(update)
        messages = [u for u in updates if u.get("kind") == "message"]
        if len(messages) > MAX_MESSAGES:
            dropped = {id(u) for u in messages[: len(messages) - MAX_MESSAGES]}
            updates = [u for u in updates if id(u) not in dropped]
        locked.updates = updates
        locked.save(update_fields=["updates", "updated_at"])
        if update["kind"] == "message":
            webhook_enqueue(
                event="run.message",
                payload={
                    "run": str(locked.id),
                    "tenant": locked.tenant,
                    "agent": run.agent.name,
                    "user_id": locked.user_id,
                    "message": update["text"],
                },
            )
    return locked


@tool(risk=Risk.LOW, category="run")
def communicate(
    message: Annotated[
        str,
        Param("What to tell the user; kept on the run page and sent as a notification."),
        Field(min_length=1, max_length=MAX_MESSAGE_LENGTH),
    ],
    ctx: ToolContext,
) -> str:
    """Send the user a lasting message (a result, a link, an important finding) while you keep working."""
    run = _current_run(ctx)
    text = message.strip()
    if not text:
        raise ToolError("communicate needs a message with some text.")
    _add_update(run, {"kind": "message", "text": text, "at": timezone.now().isoformat()})
    return "Message sent to the user."


@tool(risk=Risk.LOW, category="run")
def progress(
    status: Annotated[
        str,
        Param("A short note on what you are doing now, e.g. 'Searching invoices'."),
        Field(min_length=1, max_length=MAX_PROGRESS_LENGTH),
    ],
    ctx: ToolContext,
) -> str:
    """Report what you are doing now during long work; shown on the run page until the next note."""
    run = _current_run(ctx)
    _add_update(run, {"kind": "progress", "text": status.strip(), "at": timezone.now().isoformat()})
    return "Progress noted."
