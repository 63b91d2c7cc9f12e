"""The models of agentic tools (``toolhub.agentic``): the core asks through a resolver this app registers."""

import copy
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agents_app.budgets import budget_of, calls_used, spending_below, tokens_added_sql
from agents_app.model_answers import billed_tokens
from agents_app.models import AgentRun
from agents_app.models_adapters import adapter_for
from agents_app.selectors import agent_for_run, providers_usable_by
from toolhub.agentic.models import InnerModel
from toolhub.audit import audit_append
from toolhub.exceptions import ModelError, ToolError
from toolhub.models import ToolCall, is_undoing
from toolhub.tools.context import ToolContext

__all__ = ["agentic_model"]


def agentic_model(ctx: ToolContext, *, agent: str = "", provider: str = "") -> InnerModel:
    """The model of an agentic tool's call.

    The named agent's (of the call's tenant, else global), the named provider's with the run's agent's
    settings, or the run's agent's. Errors name no setting, only what to ask.
    """
    tenant = str(ctx.tenant or "")
    run: AgentRun | None = None
    if agent:
        chosen = agent_for_run(tenant=tenant, name=agent)
        if chosen is None:
            raise ToolError(f"The model of this agentic tool (agent {agent!r}) is not available; ask an administrator.")
    else:
        run = _run_of(ctx)
        if run is None:
            raise ToolError("This agentic tool uses its run's model; call it from an agent run.")
        chosen = run.agent
        if provider:
            # As if the run's agent named it: an enabled provider of its tenant or a global one; another
            # tenant's endpoint and key answer like a missing provider.
            named = providers_usable_by(chosen.tenant_id).filter(name=provider).first()
            if named is None:
                raise ToolError(
                    f"Model provider {provider!r} of this agentic tool is not configured; ask an administrator."
                )
            chosen = copy.copy(chosen)
            chosen.provider = named
    try:
        adapter = adapter_for(chosen)
    except ModelError as exc:
        raise ToolError(str(exc)) from None
    run = run or _run_of(ctx)
    # A compensation's model (the call undoing a step, or its inner calls) is the saga's work, not the run's: it is
    # not charged to the run whose step it undoes, nor refused because that run ended or spent what it was given.
    if run is not None and not is_undoing("", ctx.as_dict()):
        adapter = _ChargedToRun(adapter, run.id)
    else:
        adapter = _RecordedOnCall.of(adapter, ctx)
    return InnerModel(adapter=adapter, profile=chosen.provider.effective_schema_profile)


@dataclass(frozen=True)
class _ChargedToRun:
    """An inner model whose turns are its run's: counted in the run's usage and against the budget it was given.

    An answer the endpoint billed and the adapter refused (``RefusedTurn``: cut off, too big) is counted too
    (``model_answers.billed_tokens``, as the run's own step counts it).

    Its tool calls are the run's too (``budgets.BUDGETED_KINDS``): a turn asking for more than the run has left
    of the calls its parent gave it is refused whole before any of them runs, as the run's own turns are. A turn
    let through is charged at once (``AgentRun.inner_calls_charged``, one conditional UPDATE), so the inner
    models of two agentic tools of one turn, on two workers, never both take the same remainder.
    """

    adapter: Any
    run_id: uuid.UUID

    def complete(self, **kwargs: Any) -> Any:
        self._refuse_when_ended()
        self._refuse_when_spent()
        try:
            turn = self.adapter.complete(**kwargs)
        except Exception as exc:
            # An answer billed and refused (cut off, too big) counts on the run, as in its own loop's step.
            billed = billed_tokens(exc)
            if any(billed):
                self._charge(*billed)
            raise
        # Ended while the model answered (cancelled by its user, an operator or governance): none of it runs.
        self._refuse_when_ended()
        self._charge(turn.prompt_tokens, turn.completion_tokens)
        if turn.tool_calls:
            self._refuse_beyond_calls(len(turn.tool_calls))
        return turn

    def _charge(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Add a model answer's tokens to the run's usage (one UPDATE: the run is not locked here)."""
        AgentRun.objects.filter(id=self.run_id).update(
            prompt_tokens=tokens_added_sql("prompt_tokens", prompt_tokens),
            completion_tokens=tokens_added_sql("completion_tokens", completion_tokens),
            updated_at=timezone.now(),
        )

    def _refuse_beyond_calls(self, asked: int) -> None:
        run = AgentRun.objects.filter(id=self.run_id).only("limits", "inner_calls_charged").first()
        limit = budget_of(run, "max_tool_calls") if run is not None else None
        if run is None or limit is None:
            return
        turns, budgeted = calls_used(run)
        # What the inner calls may take in all: the budget less the turns' calls, the children's and any inner
        # call made without a charge.
        uncharged = budgeted - turns - run.inner_calls_charged
        room = limit - turns - uncharged - spending_below(run.id).calls
        charged = AgentRun.objects.filter(id=run.id, inner_calls_charged__lte=room - asked).update(
            inner_calls_charged=F("inner_calls_charged") + asked
        )
        if not charged:
            raise ModelError(
                f"the model asked for {asked} more tool call(s), beyond what is left of the run's budget of "
                f"{limit} (given by its parent run); none of them was run"
            )

    def _refuse_when_ended(self) -> None:
        """A run that ended (cancelled, failed) spends no more model turns, its agentic tools' included."""
        from agents_app.cancelling import GOING

        status = AgentRun.objects.filter(id=self.run_id).values_list("status", flat=True).first()
        if status not in GOING:
            raise ModelError(f"the run has ended ({status or 'gone'}); nothing more was run")

    def _refuse_when_spent(self) -> None:
        run = AgentRun.objects.filter(id=self.run_id).only("limits", "prompt_tokens", "completion_tokens").first()
        limit = budget_of(run, "max_tokens") if run is not None else None
        if run is None or limit is None:
            return
        spent = run.prompt_tokens + run.completion_tokens + spending_below(run.id).tokens
        if spent >= limit:
            raise ModelError(f"the run's token budget ({limit} tokens, given by its parent run) is spent")


@dataclass(frozen=True)
class _RecordedOnCall:
    """An inner model no run pays for (a compensation's, or a direct call's): its turns are on its call's trail.

    Each turn it was billed for is an ``agentic.model_turn`` event of its call (tokens, tool calls asked), so what it
    spent is seen and summed there; its turns and inner calls are bounded by the agentic tool's ``max_iterations``
    and ``max_calls``.
    """

    adapter: Any
    call_id: uuid.UUID
    tool_name: str
    tenant: str
    run_id: uuid.UUID | None

    @classmethod
    def of(cls, adapter: Any, ctx: ToolContext) -> Any:
        row = ToolCall.objects.filter(id=ctx.call_id).values_list("id", "tool_name", "tenant", "run_id").first()
        return adapter if row is None else cls(adapter, *row)

    def complete(self, **kwargs: Any) -> Any:
        try:
            turn = self.adapter.complete(**kwargs)
        except Exception as exc:
            billed = billed_tokens(exc)
            if any(billed):
                self._record(*billed, asked=0, refused=True)
            raise
        self._record(turn.prompt_tokens, turn.completion_tokens, asked=len(turn.tool_calls or ()), refused=False)
        return turn

    def _record(self, prompt_tokens: int, completion_tokens: int, *, asked: int, refused: bool) -> None:
        data = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "tool_calls": asked}
        with transaction.atomic():
            audit_append(
                event_type="agentic.model_turn",
                actor="agentic",
                data={**data, "refused": True} if refused else data,
                call_id=self.call_id,
                run_id=self.run_id,
                tool_name=self.tool_name,
                tenant=self.tenant,
            )


def _run_of(ctx: ToolContext) -> AgentRun | None:
    try:
        run_id = uuid.UUID(str(ctx.run_id)) if ctx.run_id else None
    except ValueError:
        return None
    if run_id is None:
        return None
    return (
        AgentRun.objects.select_related("agent", "agent__provider").filter(id=run_id, tenant=ctx.tenant or "").first()
    )
