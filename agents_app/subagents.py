"""Subagents (Embabel ``Subagent``): an agent exposed as a tool whose call runs it as a child run.

``Subagent.of("researcher", "Finds sources", ResearchRequest)`` is an ordinary tool (grants, approval
rules, audit apply). Its call, on the worker, creates a child ``AgentRun`` for the parent run's user,
tenant and context (never the model's say), linked both ways (``parent_run``, ``parent_call_id``), and
suspends itself (``ToolSuspend``): the parent's call awaits its result and the parent run waits. The
child starts once that suspension is committed (``call_suspended``); its own calls are governed and
audited as its own, under its run id, so an approval inside it holds the child, and through the
suspended call the parent. When the child ends (``subagent_run_ended``, from the loop), its answer
settles the parent's call, which wakes the parent run; that end is final (a child is never retried).
Only a run's own turns start children: an agentic tool's inner call of a subagent tool is refused, since
nothing waits for it and the child would outlive its parent.

Limits per parent run (``SubagentLimits``): nesting depth, and the tool calls and tokens all its
children may spend together; a child gets what is left as its own budget (``AgentRun.limits``).
"""

import hashlib
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, OuterRef, Subquery
from django.dispatch import receiver
from django.utils import timezone
from pydantic import BaseModel

from agents_app.blackboard import BlackboardError, blackboard_copy_to_parent, blackboard_put
from agents_app.budgets import MAX_SUBAGENT_DEPTH, budget_of, spending_below, spending_of
from agents_app.delegation import delegators_held
from agents_app.models import AgentRun, RunStatus
from agents_app.selectors import agents_of_tenant
from agents_app.steprows import locked_run
from agents_app.transitions import RUN_TRANSITIONS
from toolhub.audit import redacted_arguments_text
from toolhub.audit_hash import canonical_json
from toolhub.calls import call_transition
from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolDefinitionError, ToolError, ToolSuspend
from toolhub.models import SETTLED_STATUSES, CallKind, CallStatus, ToolCall
from toolhub.signals import call_suspended
from toolhub.storable import storable_text
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Risk, Tool
from toolhub.transitions import guarded_update_sql

__all__ = [
    "Subagent",
    "SubagentLimits",
    "runs_waiting_on_parked_calls",
    "subagent_calls_settle_ended",
    "subagent_run_ended",
    "SUBAGENT_ANSWER_KIND",
]

logger = logging.getLogger(__name__)

#: The names of the tools ``Subagent.of`` built: the calls of a turn that will start a child.
_SUBAGENT_TOOLS: set[str] = set()

#: The blackboard kind of a child run's answer, put on its parent's board.
SUBAGENT_ANSWER_KIND = "SubagentAnswer"


@dataclass(frozen=True)
class SubagentLimits:
    """What the children of one parent run may spend: nesting depth, tool calls and tokens, all children together."""

    max_depth: int = 3
    max_calls: int = 50
    max_tokens: int = 200_000

    def __post_init__(self) -> None:
        # Refused here, when the tool is defined (at import): a deeper tree would be found out only at run time, by
        # budgets whose walk stops at ``MAX_SUBAGENT_DEPTH`` levels and so miss what the deepest children spend.
        if not isinstance(self.max_depth, int) or not 1 <= self.max_depth <= MAX_SUBAGENT_DEPTH:
            raise ToolDefinitionError(
                f"SubagentLimits(max_depth={self.max_depth!r}): subagents nest 1 to {MAX_SUBAGENT_DEPTH} levels deep; "
                f"give a max_depth in that range."
            )


class Subagent:
    """Builds the tool that runs an agent as a subagent (``Subagent.of``)."""

    @staticmethod
    def of(
        agent: str,
        description: str,
        input_model: type[BaseModel],
        *,
        name: str = "",
        limits: SubagentLimits = SubagentLimits(),
        risk: Risk = Risk.MEDIUM,
        **options: Any,
    ) -> Tool:
        """A tool named ``name`` (default: the agent's name, ``-`` as ``_``) taking ``input_model``.

        The agent is looked up by name among the parent run's tenant's agents and the global ones when
        the tool is called. Further ``options`` are those of ``Tool.create`` (group, needs_approval, ...).
        """
        tool_name = name or agent.replace("-", "_")

        def run_subagent(arguments: BaseModel, ctx: ToolContext) -> Any:
            task = redacted_arguments_text(tool, arguments.model_dump(mode="json"))
            return _start_child(agent, tool_name, task, ctx, limits)

        run_subagent.__qualname__ = f"Subagent[{tool_name}]"
        tool = Tool.create(tool_name, description, input_model, run_subagent, risk=risk, **options)
        _SUBAGENT_TOOLS.add(tool_name)
        return tool


def _start_child(agent_name: str, tool_name: str, text: str, ctx: ToolContext, limits: SubagentLimits) -> Any:
    """Create (once per call) the child run for the calling run's principal, then suspend the call on it.

    ``text``: the call's arguments as the child's task, sensitive values replaced: the child's input and
    messages are shown to the run's readers (API, admin), as the parent's are. A secret a child's tools need
    travels in the run's context, never through a model.
    """
    parent = _calling_run(ctx)
    call_id = uuid.UUID(str(ctx.call_id))
    if ToolCall.objects.filter(id=call_id, kind=CallKind.INNER).exists():
        # An agentic tool's inner calls are not waited for by the run's turns: the run would go on, and end,
        # while its child still worked (or waited on the approval desk) in its user's name.
        raise ToolError(
            f"Subagent {agent_name!r} cannot be started from inside an agentic tool; answer without it "
            "(the run itself may call the subagent's tool)."
        )
    child = AgentRun.objects.filter(parent_call_id=call_id).first()  # a retried call waits on the same child
    if child is None:
        agent = agents_of_tenant(parent.tenant).filter(name=agent_name).order_by(F("tenant_id").asc(nulls_last=True))
        target = agent.first()
        if target is None:
            raise _unavailable(agent_name)
        messages: list[dict[str, Any]] = []
        if target.system_prompt:
            messages.append({"role": "system", "content": target.system_prompt})
        messages.append({"role": "user", "content": text})
        try:
            with transaction.atomic():
                # The parent's row lock orders its children's starts: each carves its budget from what the
                # ones before it left (``_budget_left``), never from the same remainder. Its ancestors' agents
                # are held first, and the child's: a rename in flight is waited for and its name recorded, an agent
                # deleted meanwhile is answered as a missing one (``delegators_held``).
                if not delegators_held(parent, target.pk):
                    raise _unavailable(agent_name)
                parent = AgentRun.objects.select_for_update(of=("self",)).get(pk=parent.pk)
                _refuse_unless_going(parent, agent_name)
                budget = _budget_left(parent, call_id, agent_name, limits)
                child = AgentRun.objects.create(
                    agent=target,
                    user_id=parent.user_id,
                    tenant=parent.tenant,
                    context=dict(parent.context),
                    input=text,
                    messages=messages,
                    parent_run=parent,
                    parent_call_id=call_id,
                    depth=parent.depth + 1,
                    delegated_by=[*parent.delegated_by, parent.agent.name],
                    limits=budget,
                )
                # Whoever retried the parent (or a run above it) sets the child's calls in motion too: four eyes
                # bar them from approving those (``agents_app.selectors.run_retriers``); read under the parent's lock.
                retriers = AgentRun.retried_by.through.objects.filter(agentrun_id=parent.pk)
                child.retried_by.add(*retriers.values_list("user_id", flat=True))
        except IntegrityError:
            child = AgentRun.objects.get(parent_call_id=call_id)
    raise ToolSuspend(
        f"waiting for subagent run {child.id} ({child.agent.name})",
        {"subagent_run": str(child.id), "agent": child.agent.name, "tool": tool_name},
        expires=False,  # the child run settles it when it ends, however long an operator takes on its calls
    )


def _unavailable(agent_name: str) -> ToolError:
    """A subagent the run may not start (none of that name among its tenant's and the global agents, or deleted)."""
    return ToolError(f"Subagent {agent_name!r} is not available to this run; answer without it.")


def _refuse_unless_going(parent: AgentRun, agent_name: str) -> None:
    """Start no child for a run that ended: a worker may have claimed the call just before its run was cancelled.

    Cancelling withdraws only calls that have not started, and cancels the children that exist: a child created
    after that would work (and spend) in the user's name for a run nobody waits on any more.
    """
    if parent.status not in (RunStatus.RUNNING, RunStatus.WAITING):
        raise ToolError(
            f"Subagent {agent_name!r} not started: its run {parent.id} is {parent.status} and waits on no answer."
        )


def _calling_run(ctx: ToolContext) -> AgentRun:
    """The run that made the call, from the boundary's values (run id and tenant), never from arguments."""
    try:
        run_id = uuid.UUID(str(ctx.run_id))
    except ValueError:
        run_id = None
    run = AgentRun.objects.filter(id=run_id, tenant=ctx.tenant or "").first() if run_id else None
    if run is None or not ctx.call_id:
        raise ToolError("A subagent can only be called by an agent run.")
    return run


def _budget_left(parent: AgentRun, call_id: uuid.UUID, agent_name: str, limits: SubagentLimits) -> dict[str, int]:
    """The child's budget, carved out of what the parent's children have not used or hold (``budgets``).

    Within the parent's own budget when it is itself a child. Children the model asked for in one turn share
    what is left: each not started yet gets an equal part, so the first does not take it all.
    """
    if parent.depth + 1 > limits.max_depth:
        raise ToolError(
            f"Subagent {agent_name!r} refused: subagents may nest at most {limits.max_depth} level(s) deep and this "
            f"run is at depth {parent.depth}. Do this part yourself or answer with what you have."
        )
    held = spending_below(parent.id)
    left = {"max_tool_calls": limits.max_calls - held.calls, "max_tokens": limits.max_tokens - held.tokens}
    if budget_of(parent, "max_tool_calls") is not None or budget_of(parent, "max_tokens") is not None:
        # A child's children share what the child itself was given.
        spent = spending_of(parent)
        for what, used in (("max_tool_calls", spent.calls), ("max_tokens", spent.tokens)):
            own = budget_of(parent, what)
            if own is not None:
                left[what] = min(left[what], own - used)
    if left["max_tool_calls"] <= 0:
        raise ToolError(
            f"Subagent {agent_name!r} refused: this run's subagents have used all {limits.max_calls} tool calls "
            "they may make together. Answer with what you have."
        )
    if left["max_tokens"] <= 0:
        raise ToolError(
            f"Subagent {agent_name!r} refused: this run's subagents have used all {limits.max_tokens} tokens "
            "they may spend together. Answer with what you have."
        )
    sharing = _children_to_start(parent, call_id)
    return {what: -(-value // sharing) for what, value in left.items()}  # the ceiling: the last gets the rest


def _children_to_start(parent: AgentRun, call_id: uuid.UUID) -> int:
    """How many children share what is left: this call and its turn's other subagent calls not started yet."""
    turn = ToolCall.objects.filter(id=call_id).values_list("turn", flat=True).first()
    if turn is None:
        return 1
    others = (
        ToolCall.objects.filter(run_id=parent.id, turn=turn, kind=CallKind.CALL, tool_name__in=_SUBAGENT_TOOLS)
        .exclude(id=call_id)
        .exclude(status__in=SETTLED_STATUSES)
        .exclude(id__in=AgentRun.objects.filter(parent_run=parent).values("parent_call_id"))
        .count()
    )
    return 1 + others


def subagent_run_of(call: ToolCall) -> str:
    """The id of the child run a suspended subagent call waits for, or ``""``."""
    suspension = call.suspension if isinstance(call.suspension, dict) else {}
    payload = suspension.get("payload")
    return str(payload.get("subagent_run") or "") if isinstance(payload, dict) else ""


@receiver(call_suspended, dispatch_uid="agents_app.subagents.start_child")
def _on_call_suspended(sender: type, call: ToolCall, **kwargs: Any) -> None:
    """The parent run waits on its suspended call; a subagent's child run starts now that the call can be settled."""
    if call.run_id is not None:
        _run_waits(call.run_id)
    child_id = subagent_run_of(call)
    if not child_id or _settled_by_ended_child(child_id):
        return
    from agents_app.tasks import advance_run_task

    advance_run_task.delay(child_id)


def _run_waits(run_id: uuid.UUID) -> bool:
    """Move a running run to ``waiting`` while a call of its turn awaits its result or an approval; whether it moved.

    A run whose step holds it (its lease), or whose call was settled meanwhile (a child's answer, then the run's
    wake-up), is left as it is. The run's row is locked first, and the move checked in a statement of its own: a move
    that waited for the row (a child's end settling the call) would check the call as it was when the move began. Only
    that row is held: this wait takes no part in a run tree's lock order.
    """
    with transaction.atomic():
        list(AgentRun.objects.select_for_update(no_key=True).filter(id=run_id).values_list("id", flat=True))
        now = timezone.now()
        sql, params = guarded_update_sql(
            AgentRun,
            run_id,
            table=RUN_TRANSITIONS,
            to=RunStatus.WAITING,
            allowed_from={RunStatus.RUNNING},
            values={"updated_at": now},
            condition=_parked_condition(now),
        )
        with transaction.get_connection().cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.rowcount > 0


def _parked_condition(now: Any) -> tuple[str, list[Any]]:
    """The SQL condition (and parameters): a run has no step in flight and a call of its turn awaits someone outside.

    Its result, or an approval: a call its worker sent to the desk (``call_suspended``) was queued, its run running.
    """
    run, calls = f'"{AgentRun._meta.db_table}"', f'"{ToolCall._meta.db_table}"'
    sql = (
        f'({run}."step_lease_until" IS NULL OR {run}."step_lease_until" <= %s) AND EXISTS (SELECT 1 FROM {calls} c '
        f'WHERE c."run_id" = {run}."id" AND c."turn" = {run}."turn" AND c."kind" = %s AND c."status" IN (%s, %s))'
    )
    return sql, [now, CallKind.CALL.value, CallStatus.AWAITING_RESULT.value, CallStatus.PENDING_APPROVAL.value]


#: A run's call parked waiting for someone outside: its result, or an approval (sent to the desk by its worker).
_PARKED = [CallStatus.AWAITING_RESULT, CallStatus.PENDING_APPROVAL]


def runs_waiting_on_parked_calls(*, limit: int = 500) -> int:
    """Move to ``waiting`` the running runs whose turn's call awaits its result or an approval; return how many.

    The runs sweep (``sweep_runs_task``) repairs what ``_on_call_suspended`` would have done: a worker dying between
    committing a call's suspension and that receiver left its run ``running`` (the run pages, the admin and the API
    said so) for as long as the call waited, since the sweep wakes no run with an open call. Read from the calls
    awaiting a result (the few live ones, on their status index), each asking its run's status by its key: only the
    runs still ``running`` are locked and moved, not every waiting one on each sweep.
    """
    run_status = AgentRun.objects.filter(id=OuterRef("run_id")).order_by().values("status")[:1]
    parked = (
        ToolCall.objects.filter(status__in=_PARKED, kind=CallKind.CALL, run_id__isnull=False)
        .annotate(run_status=Subquery(run_status))
        .filter(run_status=RunStatus.RUNNING)
        .order_by("created_at")
        .values_list("run_id", flat=True)[:limit]
    )
    return sum(_run_waits(run_id) for run_id in set(parked))


def _settled_by_ended_child(child_id: str) -> bool:
    """Settle the parent's call now if its child ended before the call was parked; return whether it had ended.

    A cancellation between the child's creation and the call's suspension cancels the child with its parent, but
    the call was still running then: the child's end settled nothing (``subagent_run_ended``), nor did the
    cancellation's withdrawal, and the call would await its result forever (it never expires).
    """
    with transaction.atomic():
        child = locked_run(uuid.UUID(child_id))
        if child is None or child.status in (RunStatus.RUNNING, RunStatus.WAITING):
            return False
        subagent_run_ended(child)
    return True


def subagent_calls_settle_ended(*, limit: int = 500) -> int:
    """Settle the subagent calls still awaiting a child run that ended; return how many were settled.

    The periodic runs sweep (``sweep_runs_task``) repairs what ``_settled_by_ended_child`` would have done: a worker
    that died between committing a call's suspension and its receiver (``call_suspended`` is sent after the commit)
    left a call whose child ended meanwhile (its run cancelled while the call parked) awaiting for ever, since a
    subagent call never expires. A child that never started while its parent goes on is woken by the same sweep
    (``runs_to_wake``: it is running, with no step and no open call), and settles the call when it ends.
    """
    # Read from the calls awaiting a result (the few live ones, oldest first on their status index), each asking for
    # its ended child on the child's unique parent_call_id: a scalar sub-select stays one index probe a call, where
    # an IN or EXISTS became a hash join reading every run ever ended, on each sweep.
    ended_child = AgentRun.objects.filter(parent_call_id=OuterRef("id")).exclude(
        status__in=(RunStatus.RUNNING, RunStatus.WAITING)
    )
    ended = (
        ToolCall.objects.filter(status=CallStatus.AWAITING_RESULT)
        .annotate(ended_child=Subquery(ended_child.order_by().values("id")[:1]))
        .filter(ended_child__isnull=False)
        .order_by("created_at")
        .values_list("ended_child", flat=True)[:limit]
    )
    settled = 0
    for child_id in list(ended):
        # One child that cannot be settled now (a lock timeout, a deadlock) waits for the next sweep; the others,
        # and the runs the sweep wakes after this, go on.
        try:
            settled += _settled_by_ended_child(str(child_id))
        except Exception:
            logger.exception("the call of ended child run %s was not settled; the next sweep tries again", child_id)
    return settled


def subagent_run_ended(run: AgentRun) -> None:
    """Settle the parent's call with a child run's outcome (in the transaction that ended the child).

    A completed child answers with its output (also put on the parent's blackboard); a failed one fails
    the call with why, for the parent's model. Its blackboard entries are copied to the parent's, last: puts to the
    parent's board take turns on the parent's row (``blackboard_put``), which this transaction then holds to its
    end, so nothing is locked after it (an audit chain's head another ending child holds while it waits its turn).
    """
    if run.parent_call_id is None:
        return
    call = ToolCall.objects.select_for_update().filter(id=run.parent_call_id).first()
    if call is None or call.status != CallStatus.AWAITING_RESULT:
        logger.warning("run %s ended but its parent's call is %s; nothing settled", run.id, call and call.status)
        return
    now, actor = timezone.now(), f"agent:{run.agent.name} run:{run.id}"
    limit = toolhub_settings().MAX_STRING_LENGTH
    if run.status == RunStatus.COMPLETED:
        output = storable_text(run.output)[: toolhub_settings().MAX_EXTERNAL_RESULT_BYTES // 4]
        encoded = canonical_json(output).encode("utf-8")
        data = {
            "source": "subagent",
            "child_run": str(run.id),
            "result_bytes": len(encoded),
            "result_sha256": hashlib.sha256(encoded).hexdigest(),
        }
        call_transition(
            call,
            to=CallStatus.SUCCEEDED,
            allowed_from={CallStatus.AWAITING_RESULT},
            actor=actor,
            data=data,
            result=output,
            finished_at=now,
        )
        blackboard_copy_to_parent(run)
        try:
            blackboard_put(run.parent_run_id, call.tool_name, output, kind=SUBAGENT_ANSWER_KIND, produced_by_call=call)
        except BlackboardError as exc:
            logger.warning("run %s: answer not put on the parent's blackboard: %s", run.id, exc)
        return
    why = run.error or run.get_stop_reason_display() or run.status
    message = storable_text(f"Subagent {run.agent.name!r} (run {run.id}) did not finish: {why}")[:limit]
    call_transition(
        call,
        to=CallStatus.FAILED,
        allowed_from={CallStatus.AWAITING_RESULT},
        actor=actor,
        data={"source": "subagent", "child_run": str(run.id), "error": message},
        error=message,
        finished_at=now,
    )
    blackboard_copy_to_parent(run)
