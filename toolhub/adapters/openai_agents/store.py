"""The adapter's database side (no SDK import): governed calls keyed by the SDK's call ids, paused runs.

Each SDK tool call maps to one toolhub call whose id is derived from the run's key and the SDK's
``call_id``, so asking whether it needs approval, pausing on it and invoking it all reach the same row:
the call is requested once, decided once (by policy or an operator) and executed at most once.
"""

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from toolhub.adapters._common import Decision, own_call, pause_decision
from toolhub.audit import audit_call_event, redacted_arguments_text
from toolhub.authorization import CallPrincipal, standing_refusal
from toolhub.direct import call_wait, caller_principal, direct_call_request
from toolhub.exceptions import ToolhubError
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.storable import storable_text
from toolhub.tenancy import tenant_scope
from toolhub.tools.registry import registry
from toolhub.waiting import CallNotWithdrawableError, tool_call_cancel

from .models import PausedAgentRun, PausedRunStatus

__all__ = [
    "AdapterError",
    "RunNotDecidedError",
    "PendingItem",
    "Decision",
    "governed_call_id",
    "governed_call",
    "governed_call_result",
    "paused_run_create",
    "paused_run_claim",
    "paused_run_release",
    "paused_run_refused",
    "paused_runs_ready",
    "redacted_state",
]

#: Namespace of the toolhub call ids derived from (run key, SDK call id).
_CALL_NAMESPACE = uuid.UUID("5d0c8a4e-1f7b-4c55-9a63-0f2b7c1d9e42")


class AdapterError(ToolhubError):
    """The adapter cannot do what was asked (nothing was run)."""


class RunNotDecidedError(AdapterError):
    """The paused run still waits for an operator's decision on some of its calls."""


@dataclass(frozen=True)
class PendingItem:
    """One SDK interruption: which tool, the SDK's call id and the model's raw arguments."""

    tool_name: str
    sdk_call_id: str
    arguments: str


def governed_call_id(run_key: str, sdk_call_id: str) -> uuid.UUID:
    """The toolhub call id of the SDK's ``sdk_call_id`` in run ``run_key`` (stable across pause and resume).

    Derived from the id as the paused state keeps it (``storable_text``: a NUL or a lone surrogate escaped), so the
    resumed run, which reads it back escaped, reaches the call its pause requested.
    """
    return uuid.uuid5(_CALL_NAMESPACE, f"{run_key}\x1f{storable_text(sdk_call_id)}")


def governed_call(
    *,
    user: AbstractBaseUser,
    tenant: str | None,
    run_key: str,
    tool_name: str,
    sdk_call_id: str,
    arguments: str | Mapping[str, Any] | None,
    client: Mapping[str, Any] | None = None,
) -> ToolCall:
    """The toolhub call of this SDK call: requested through the governed pipeline the first time, read after.

    The pipeline decides as it does for every caller (validation, grants, interceptors, approval rules);
    a low-risk call is queued (or run by this process when tasks are eager) right away.
    """
    principal = caller_principal(user, tenant=tenant)
    call_id = governed_call_id(run_key, sdk_call_id)
    existing = _own_call(call_id, principal, tool_name)
    if existing is not None:
        return existing
    try:
        return direct_call_request(
            user=user,
            tool_name=tool_name,
            arguments=arguments,
            tenant=principal.tenant or None,
            kind=CallKind.CALL,
            client=client,
            call_id=call_id,
        ).call
    except IntegrityError:
        # The same SDK call asked twice at once: the first request's row is the call.
        raced = _own_call(call_id, principal, tool_name)
        if raced is None:
            raise
        return raced


def _own_call(call_id: uuid.UUID, principal: CallPrincipal, tool_name: str) -> ToolCall | None:
    try:
        return own_call(call_id, principal, tool_name)
    except LookupError:
        raise AdapterError("This run's tool call id is taken by another call; use a new run key.") from None


def governed_call_result(call: ToolCall, *, wait_seconds: float) -> str:
    """What the SDK's model reads for ``call``: its result or its (sanitized) error, once it has settled.

    A call still waiting for an operator is never waited for here: approving in the SDK alone does not
    release a toolhub call, only an operator's decision in toolhub does.
    """
    if call.status == CallStatus.PENDING_APPROVAL:
        return f"The call of {call.tool_name} is waiting for an operator's approval in toolhub; it has not run."
    settled = call_wait(call=call, seconds=wait_seconds)
    if not settled.is_settled:
        return f"The call of {settled.tool_name} is still {settled.status} in toolhub (call {settled.pk})."
    return settled.model_text()


@transaction.atomic
def paused_run_create(
    *,
    user: AbstractBaseUser,
    tenant: str | None,
    run_key: str,
    agent_name: str,
    state: dict[str, Any],
    items: Sequence[PendingItem],
    client: Mapping[str, Any] | None = None,
) -> PausedAgentRun:
    """Store an interrupted run; each interruption's toolhub call exists (requested now if it was not yet).

    A call the SDK paused on without asking toolhub (arguments it could not parse) is requested here,
    so toolhub's answer (invalid, denied or held for approval) decides it like any other.
    """
    principal = caller_principal(user, tenant=tenant)
    calls = [
        governed_call(
            user=user,
            tenant=tenant,
            run_key=run_key,
            tool_name=item.tool_name,
            sdk_call_id=item.sdk_call_id,
            arguments=item.arguments,
            client=client,
        )
        for item in items
    ]
    paused = PausedAgentRun.objects.create(
        run_key=run_key,
        tenant=principal.tenant,
        user_id=user.pk,
        agent_name=agent_name[:200],
        state=state,
        call_ids=[str(call.pk) for call in calls],
    )
    for call in calls:
        audit_call_event(
            call,
            "openai_agents.paused",
            actor=f"user:{user.get_username()}",
            data={"paused_run": str(paused.pk), "agent": paused.agent_name},
        )
    return paused


#: What a refused run withdraws: a call still held; one an operator approved meanwhile is theirs to have run.
_HELD = frozenset({CallStatus.PENDING_APPROVAL})


def paused_run_refused(
    *, user: AbstractBaseUser, tenant: str | None, run_key: str, items: Sequence[PendingItem], reason: str
) -> None:
    """Withdraw the held toolhub calls of an interrupted run that is not stored (nothing will ever resume it).

    Asking the SDK's ``needs_approval`` requested them, so they wait on the approval desk: approved, one would run
    for a run nobody resumes, its result read by no model. Each is cancelled by the run's user with ``reason``
    (``tool_call_cancel``: its approval request ends ``cancelled``, audited); a call decided meanwhile is left.
    """
    principal = caller_principal(user, tenant=tenant)
    for item in items:
        call = _own_call(governed_call_id(run_key, item.sdk_call_id), principal, item.tool_name)
        if call is None or call.status != CallStatus.PENDING_APPROVAL:
            continue
        try:
            tool_call_cancel(
                call=call, actor=f"user:{user.get_username()}", reason=reason, reader=user, allowed_from=_HELD
            )
        except CallNotWithdrawableError:
            continue  # decided meanwhile: the operator's decision stands


def redacted_state(state: Any) -> Any:
    """``state`` (a ``RunState.to_json()``) with each toolhub tool call's arguments as the agent loop keeps them.

    The SDK keeps the model's tool calls in clear wherever it repeats them (the model's responses, the
    generated and session items, the interruptions): a ``sensitive=`` value would be stored here and sent to
    the model again on resume, which toolhub's own runs never do (``redacted_arguments_text``, as in a run's
    messages). Resuming needs no argument of a governed call: its toolhub call exists and runs as decided there.
    Another tool's call (not toolhub's) is kept as it is.
    """
    if isinstance(state, list):
        return [redacted_state(item) for item in state]
    if not isinstance(state, dict):
        return state
    kept = {key: redacted_state(value) for key, value in state.items()}
    name, arguments = kept.get("name"), kept.get("arguments")
    if kept.get("type") == "function_call" and isinstance(name, str) and isinstance(arguments, str):
        tool = registry.get(name)
        if tool is not None and tool.sensitive:
            kept["arguments"] = redacted_arguments_text(tool, arguments)
    return kept


def _runs_of(user: AbstractBaseUser) -> list[PausedAgentRun]:
    scope = tenant_scope(user)
    runs = PausedAgentRun.objects.filter(user_id=user.pk, status=PausedRunStatus.PAUSED)
    return [run for run in runs if not run.tenant or scope.allows(run.tenant)]


def paused_runs_ready(*, user: AbstractBaseUser) -> list[PausedAgentRun]:
    """The user's paused runs whose calls have all been decided (ready for ``resume_governed``)."""
    ready = []
    for run in _runs_of(user):
        calls = ToolCall.objects.filter(pk__in=run.call_ids, tenant=run.tenant)
        if all(pause_decision(call) is not None for call in calls):
            ready.append(run)
    return ready


@transaction.atomic
def paused_run_claim(
    *, paused_run_id: uuid.UUID | str, user: AbstractBaseUser
) -> tuple[PausedAgentRun, dict[str, Decision]]:
    """Take a decided paused run for resuming (once); return it with the decision of each of its calls.

    Only the user who started the run, within their tenants, may resume it, and only while they keep their
    standing (active, still in the run's tenant: ``standing_refusal``, as the agent loop asks before every model
    turn), in a tenant or in none. Raises :class:`RunNotDecidedError` (nothing changed) while an operator has yet
    to decide a call.
    """
    scope = tenant_scope(user)
    run = (
        PausedAgentRun.objects.select_for_update()
        .filter(pk=paused_run_id, user_id=user.pk, status=PausedRunStatus.PAUSED)
        .first()
    )
    if run is None or (run.tenant and not scope.allows(run.tenant)):
        raise AdapterError("No paused run with this id is waiting for you (it was resumed already, or is not yours).")
    refusal = standing_refusal(CallPrincipal(user_id=user.pk, username="", tenant=run.tenant))
    if refusal:
        raise AdapterError(f"This paused run is not resumed: {refusal}")
    calls = {str(call.pk): call for call in ToolCall.objects.filter(pk__in=run.call_ids, tenant=run.tenant)}
    decisions: dict[str, Decision] = {}
    waiting = []
    for call_id in run.call_ids:
        call = calls.get(call_id)
        decision = pause_decision(call) if call is not None else Decision(False, "The call was not found in toolhub.")
        if decision is None:
            waiting.append(call_id)
        else:
            decisions[call_id] = decision
    if waiting:
        raise RunNotDecidedError(f"Still waiting for an operator's decision on call(s) {', '.join(waiting)}.")
    PausedAgentRun.objects.filter(pk=run.pk, status=PausedRunStatus.PAUSED).update(
        status=PausedRunStatus.RESUMED, resumed_at=timezone.now()
    )
    for call_id, decision in decisions.items():
        audit_call_event(
            calls[call_id],
            "openai_agents.resumed",
            actor=f"user:{user.get_username()}",
            data={"paused_run": str(run.pk), "decision": "approve" if decision.approve else "reject"},
        )
    return run, decisions


@transaction.atomic
def paused_run_release(*, paused_run_id: uuid.UUID | str, user: AbstractBaseUser) -> bool:
    """Give a claimed run back (its resumed SDK run failed before finishing), so it can be resumed again.

    Only by the run's own user (who claimed it): ``False`` for anyone else, nothing changed.

    Safe to repeat: the decided calls keep their toolhub ids, so a second resume reads the same calls'
    results and runs nothing twice. Each call's chain records the release (``openai_agents.released``, by the
    run's user) as it records the claim: its ``openai_agents.resumed`` no longer stands for a run that went on.
    """
    run = (
        PausedAgentRun.objects.select_for_update()
        .filter(pk=paused_run_id, user_id=user.pk, status=PausedRunStatus.RESUMED)
        .first()
    )
    if run is None:
        return False
    PausedAgentRun.objects.filter(pk=run.pk).update(status=PausedRunStatus.PAUSED, resumed_at=None)
    for call in ToolCall.objects.filter(pk__in=run.call_ids, tenant=run.tenant).order_by("created_at", "id"):
        audit_call_event(
            call,
            "openai_agents.released",
            actor=f"user:{user.get_username()}",
            data={"paused_run": str(run.pk)},
        )
    return True
