"""An agentic tool's inner calls: through the governed pipeline, with the outer call's principal, run here."""

import copy
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from toolhub.agentic.base import AgenticFacts, GatedTools
from toolhub.disclosure.state import done_among, done_names
from toolhub.models import SETTLED_STATUSES, CallKind, CallStatus, ToolCall, undoing
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Tool

if TYPE_CHECKING:
    from toolhub.agentic.simple import SimpleAgenticTool

__all__ = ["InnerState", "inner_definitions", "inner_tool_call", "inner_calls_of", "outer_turn", "refuse_nested"]


def inner_definitions(ctx: ToolContext, members: Sequence[Tool], profile: str) -> list[dict[str, Any]]:
    """The inner model's tool definitions: the members the call's principal is granted, nothing else."""
    from toolhub.agentic.runstate import granted_for
    from toolhub.tools.export import buildable, openai_tool

    allowed = set(granted_for(ctx, [tool.name for tool in members]))
    return buildable((tool for tool in members if tool.name in allowed), lambda tool: openai_tool(tool, profile))


def inner_tool_call(
    ctx: ToolContext,
    *,
    name: str,
    arguments: str,
    model_call_id: str,
    position: int,
    turn: int = 0,
    gate: Callable[[str], str | None],
    owner: str,
) -> ToolCall:
    """Request one inner call (audited, linked to the outer call) and, when policy lets it run now, run it here.

    Returned as the inner model reads it: a call denied a tool the run may not see reads as an unknown tool
    (status ``invalid``), as the run's own turns, REST and MCP answer it, so that a denial confirms no tool
    exists. The call's row and audit trail keep the denial.
    """
    from toolhub.disclosure.principals import principal_of_context
    from toolhub.dispatch import inline_execution
    from toolhub.execution import tool_call_run_claimed
    from toolhub.feedback import unknown_tool_message
    from toolhub.pipeline import CallRequest, run_context, tool_call_request, visible_tool_names
    from toolhub.tools.registry import registry

    outer = ctx.call_id
    worker, saga_id = _outer_row(ctx)
    principal = principal_of_context(ctx)
    context = ToolContext({k: v for k, v in ctx.as_dict().items() if k not in _OWN_KEYS})
    request = CallRequest(
        tool_name=name,
        arguments=arguments,
        principal=principal,
        context=context,
        run_id=_uuid(ctx.run_id),
        turn=turn,
        position=position,
        model_call_id=model_call_id[:100],
        saga_id=saga_id,
        kind=CallKind.INNER,
        interaction_context={"parent_call_id": str(outer or ""), "parent_tool": owner},
        gate=gate,
    )
    with inline_execution(worker):
        call = tool_call_request(request=request)
    if call.status == CallStatus.RUNNING and call.worker == worker:
        tool = registry.get(call.tool_name)
        assert tool is not None
        tool_call_run_claimed(call=call, tool=tool, arguments=tool.validate_arguments(call.arguments), worker=worker)
    call.refresh_from_db()
    if call.status == CallStatus.PENDING_APPROVAL:
        call.error = (
            f"The call of {call.tool_name} waits for an operator's approval; it was not run yet and will run "
            "once approved. Do not call it again."
        )
    if call.status == CallStatus.DENIED:
        visible = visible_tool_names(principal, run_context(request))
        if call.tool_name not in visible:
            shown = copy.copy(call)
            shown.status, shown.error = CallStatus.INVALID, unknown_tool_message(call.tool_name, visible)
            return shown
    return call


class InnerState:
    """What an agentic tool's inner model may call now.

    Its plain tools, and its playbooks' and state machines' members as their state allows; that state is
    replayed from the run's earlier inner calls of this tool, so a later call continues in it. A call that
    succeeds moves it at once; one let through that has not settled (held for an operator's approval) is
    ``open``: its outcome is not known, so a transition among them holds its state machine, whose later calls
    are refused until it settles (``GatedTools.held_refusal``), as the run's own model's are within a turn.
    """

    def __init__(self, ctx: ToolContext, owner: "SimpleAgenticTool", entries: dict[str, dict[str, Any]]) -> None:
        self.ctx = ctx
        self.owner = owner
        self.entries = entries
        #: The names of this tool's inner calls let through and not settled yet, in order.
        self.open: list[str] = []

    @classmethod
    def load(cls, ctx: ToolContext, *, owner: "SimpleAgenticTool") -> "InnerState":
        entries: dict[str, dict[str, Any]] = {gated.name: {} for gated in owner.gated}
        state = cls(ctx, owner, entries)
        run_id = _uuid(ctx.run_id)
        if owner.gated and run_id is not None:
            earlier = ToolCall.objects.filter(
                run_id=run_id,
                tenant=str(ctx.tenant or ""),
                kind=CallKind.INNER,
                context__parent_tool=owner.name,
            ).exclude(status__in=SETTLED_STATUSES - {CallStatus.SUCCEEDED})
            # A compensation's inner calls carry the run's id but are the saga's work (``is_undoing``): its state is
            # its own (the calls made undoing the same step: its earlier attempts), and never the run's.
            undone = ctx.get("compensates")
            earlier = earlier.filter(context__compensates=str(undone)) if undone else earlier.exclude(undoing())
            for name, status in earlier.order_by("created_at", "position").values_list("tool_name", "status")[:10_000]:
                if status == CallStatus.SUCCEEDED:
                    state.apply(name)
                else:
                    state.open.append(name)
        return state

    def apply(self, tool_name: str) -> None:
        for gated in self.owner.gated:
            if tool_name in gated.member_names():
                self.entries[gated.name] = gated.after_call(tool_name, self.entries[gated.name])

    def after(self, call: ToolCall) -> None:
        if call.status == CallStatus.SUCCEEDED:
            self.apply(call.tool_name)
        elif call.status not in SETTLED_STATUSES:
            self.open.append(call.tool_name)

    def _facts(self, gated: GatedTools, iteration: int) -> AgenticFacts:
        entry = self.entries[gated.name]
        done = frozenset(name for name in entry.get("done", []) if isinstance(name, str))
        return AgenticFacts(done=done, artifacts=self._artifacts(), turn=iteration, context=dict(self.ctx))

    def _artifacts(self) -> frozenset[str]:
        from toolhub.models import ToolCallArtifact

        run_id = _uuid(self.ctx.run_id)
        if run_id is None:
            return frozenset()
        rows = ToolCallArtifact.objects.filter(
            call__run_id=run_id, call__tenant=str(self.ctx.tenant or ""), call__status=CallStatus.SUCCEEDED
        ).values_list("name", flat=True)
        return frozenset(rows[:1000])

    def offered(self) -> list[Tool]:
        """The tools the inner model is offered now (grants filter them next)."""
        hidden: set[str] = set()
        shown: list[str] = []
        for gated in self.owner.gated:
            hidden |= gated.member_names()
            shown.extend(gated.shown(self.entries[gated.name], AgenticFacts()))
        names = [t.name for t in self.owner.members if t.name not in hidden] + shown
        by_name = {t.name: t for t in self.owner.members}
        tools = [by_name[name] for name in dict.fromkeys(names) if name in by_name]
        statuses = {t.name: self._status(t.name) for t in tools}
        return [t.with_description(f"{t.description}\n{statuses[t.name]}") if statuses[t.name] else t for t in tools]

    def _status(self, name: str) -> str:
        """A playbook's or state machine's status line, naming only done tools the principal may use now."""
        gated = next((g for g in self.owner.gated if g.name == name), None)
        return gated.status(self._described()[name], AgenticFacts()) if gated is not None else ""

    def _described(self) -> dict[str, dict[str, Any]]:
        """The entries as models read them (status lines, the call's result): done tools cut to those usable now.

        ``done_among`` with what the principal may use now; the gate reads ``entries`` whole.
        """
        from toolhub.agentic.runstate import granted_for

        return done_among(self.entries, granted_for(self.ctx, done_names(self.entries)))

    def gate(self, iteration: int) -> Callable[[str], str | None]:
        from toolhub.agentic.runstate import granted_for

        def granted(names: Iterable[str]) -> list[str]:
            return granted_for(self.ctx, names)

        def gate(tool_name: str) -> str | None:
            if tool_name not in self.owner.member_names():
                return f"Tool {tool_name!r} is not one of the tools of {self.owner.name}; it was not run."
            for gated in self.owner.gated:
                if tool_name in gated.member_names():
                    entry = self.entries[gated.name]
                    refusal = gated.held_refusal(tool_name, entry, self.open) or gated.refusal(
                        tool_name, entry, self._facts(gated, iteration), granted
                    )
                    if refusal:
                        return refusal
            return None

        return gate

    def result(self) -> dict[str, Any]:
        return {"state": self._described()} if self.entries else {}


def _outer_row(ctx: ToolContext) -> tuple[str, str]:
    """The worker running the outer call (its inner calls are recorded as run by it) and the outer's saga id.

    An inner call is a step of the outer call's saga (``STEP_KINDS``): its run's, or the direct saga it was called in.
    """
    from toolhub.dispatch import EAGER_WORKER

    row = ToolCall.objects.filter(id=ctx.call_id).values_list("worker", "saga_id").first() if ctx.call_id else None
    worker, saga_id = row or ("", "")
    return str(worker or EAGER_WORKER), str(saga_id or "")


def refuse_nested(ctx: ToolContext, name: str) -> None:
    """Refuse an agentic tool's call made as another's inner call, before its model is asked anything.

    Its own inner loop would make up to ``max_calls`` calls for each one the outer counts, so nesting would
    multiply the outer's ``max_calls`` and ``max_iterations``, which nothing else bounds outside a budgeted run.
    """
    from toolhub.exceptions import ToolError

    if ctx.call_id and ToolCall.objects.filter(id=ctx.call_id, kind=CallKind.INNER).exists():
        raise ToolError(
            f"{name} cannot run inside another agentic tool; nothing was run. Use the other tools you were given."
        )


def outer_turn(ctx: ToolContext) -> int:
    """The run turn of the call that runs an agentic tool (its inner calls are listed with it)."""
    if not ctx.call_id:
        return 0
    return int(ToolCall.objects.filter(id=ctx.call_id).values_list("turn", flat=True).first() or 0)


def inner_calls_of(call_id: uuid.UUID | str, *, user: Any) -> list[ToolCall]:
    """The inner calls an agentic tool's call made, in order, among the rows of ``user``'s tenants."""
    from toolhub.tenancy import scoped

    calls = ToolCall.objects.filter(kind=CallKind.INNER, context__parent_call_id=str(call_id))
    return list(scoped(calls, user).order_by("created_at", "position"))


#: The outer call's own keys, which the inner call gets afresh when it runs.
_OWN_KEYS = frozenset({"call_id", "idempotency_key"})


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None
