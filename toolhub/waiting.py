"""Calls that wait for someone else: an operator's release or refusal, an external result, a fresh approval.

``toolhub.pipeline`` writes a call held for approval or awaiting an outside result; these are the moves
that end the wait, each one guarded transition with its audit events (``toolhub.calls``).
"""

import copy
import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from toolhub.audit import EventSpec, Write, redact
from toolhub.audit_hash import canonical_json
from toolhub.authorization import tool_definitions
from toolhub.caller_view import CallerView
from toolhub.calls import call_transition
from toolhub.catalogue import effective_risk
from toolhub.conf import toolhub_settings
from toolhub.dispatch import dispatch_call
from toolhub.exceptions import ToolhubError
from toolhub.execution_checks import refusal_at_execution
from toolhub.governance import governance_scope
from toolhub.models import CallStatus, ToolCall, is_undoing
from toolhub.pipeline import approval_hash
from toolhub.policy import ApprovalVerdict, recorded_call_verdict
from toolhub.selectors import withheld_names
from toolhub.signals import approval_needed, approval_withdrawing, call_suspended
from toolhub.storable import json_storage_problem, storable_text
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry
from toolhub.tools.secrets import SecretScrubber, sensitive_values

__all__ = [
    "ExternalResultError",
    "ResultNotAwaitedError",
    "tool_call_refuse",
    "tool_call_release",
    "tool_call_require_reapproval",
    "tool_call_submit_result",
    "awaiting_results_past_deadline",
    "tool_call_expire_awaiting",
    "tool_call_withdraw",
    "tool_call_cancel",
    "CallNotWithdrawableError",
    "CancelReasonError",
    "cancel_reason_problem",
    "WITHDRAWABLE_STATUSES",
]


def tool_call_release(
    *,
    call: ToolCall,
    actor: str,
    arguments: Mapping[str, Any] | None = None,
    preceding: Sequence[EventSpec] = (),
    writes: Sequence[Write] = (),
    approved_under: int | None = None,
) -> bool:
    """Queue an approved call for execution (with operator-edited arguments, when given).

    ``preceding``: the deciding approval's audit events, appended with the release's in one write;
    ``writes``: the approval's own rows, written in the same statement (``call_transition``);
    ``approved_under``: the governance stamp its approvals were judged under (``toolhub.policy.decision_stamp``),
    kept on the call: a worker that claims it under the same stamp knows nothing that decides approvals changed since
    (``toolhub.signals.approval_shortfall``).
    """
    tool = registry.get(call.tool_name)
    fields: dict[str, Any] = {"queued_at": timezone.now(), "approved_under": approved_under}
    data: dict[str, Any] = {"reason": "approved"}
    if arguments is not None:
        # The operator's edit is what was approved: the binding follows the new arguments.
        fields["arguments"] = dict(arguments)
        fields["approval_hash"] = approval_hash(call.tool_name, call.tool_version, fields["arguments"])
        data["arguments"] = redact(
            dict(arguments), withheld_names(call.tool_name, arguments, version=call.tool_version)
        )
    external = tool is not None and tool.is_external
    refusal = _refusal_going_out(call, tool, fields) if external else None
    if refusal:
        # No worker will check it: released, it goes out to the outside system, so it is checked here.
        return call_transition(
            call,
            to=CallStatus.DENIED,
            allowed_from={CallStatus.PENDING_APPROVAL},
            actor=actor,
            data={**data, "error": refusal},
            preceding=preceding,
            writes=writes,
            error=refusal,
            finished_at=timezone.now(),
            **fields,
        )
    with transaction.atomic(savepoint=False):  # one with the approval that released it
        moved = call_transition(
            call,
            # An approved call of an external tool waits for its result instead of a worker.
            to=CallStatus.AWAITING_RESULT if external else CallStatus.QUEUED,
            allowed_from={CallStatus.PENDING_APPROVAL},
            actor=actor,
            data=data,
            preceding=preceding,
            writes=writes,
            **fields,
        )
        if moved and not external:
            dispatch_call(call)
    return moved


def _refusal_going_out(call: ToolCall, tool: Tool | None, fields: Mapping[str, Any]) -> str | None:
    """An approved external call checked as a worker checks what it runs, with the version it is released with."""
    released = copy.copy(call)
    for name, value in fields.items():
        setattr(released, name, value)
    with governance_scope():
        return refusal_at_execution(released, tool)


#: Calls awaiting a result that expire: all but those suspended with ``expires=False`` (the key is only ever False).
AWAITING_RESULT_EXPIRES = Q(suspension__isnull=True) | Q(suspension__expires__isnull=True)
#: When a call began to wait for its result: ``queued_at``, else (a row written before every way into
#: ``awaiting_result`` set it) ``created_at``; without it such a call would never expire.
_WAITING_SINCE = Coalesce(F("queued_at"), F("created_at"))


def awaiting_results_past_deadline(now: datetime) -> QuerySet[ToolCall]:
    """Calls awaiting a result that began to wait more than ``EXTERNAL_RESULT_TIMEOUT_SECONDS`` before ``now``.

    One reading of the deadline for the sweep and for a result that comes late (``tool_call_submit_result``).
    """
    cutoff = now - timedelta(seconds=toolhub_settings().EXTERNAL_RESULT_TIMEOUT_SECONDS)
    return (
        ToolCall.objects.filter(AWAITING_RESULT_EXPIRES, status=CallStatus.AWAITING_RESULT)
        .alias(waiting_since=_WAITING_SINCE)
        .filter(waiting_since__lt=cutoff)
        .order_by("waiting_since")
    )


def tool_call_expire_awaiting(call: ToolCall, *, now: datetime) -> bool:
    """Expire a call whose result did not arrive in time; the model is told. False if it had moved on.

    Only in the attempt read as overdue: a call answered and asked again since (an external compensation's next
    attempt, a re-run that suspended itself) waits anew, counted from then, and a stale read must not cut it short.
    """
    seconds = toolhub_settings().EXTERNAL_RESULT_TIMEOUT_SECONDS
    message = f"No result for {call.tool_name} arrived within {seconds:.0f} s; the call expired unanswered."
    return call_transition(
        call,
        to=CallStatus.EXPIRED,
        allowed_from={CallStatus.AWAITING_RESULT},
        attempt=call.attempts,
        actor="expiry",
        data={"reason": "external result did not arrive in time"},
        error=message,
        finished_at=now,
    )


class ExternalResultError(ToolhubError):
    """An external tool's result was refused (the call does not await one, or the result cannot be stored)."""


class ResultNotAwaitedError(ExternalResultError):
    """The call does not await a result (any more): a second submission, or a call that never waited; 409."""

    status_code = 409


def tool_call_submit_result(
    *, call_id: uuid.UUID, actor: str, result: Any = None, error: str | None = None
) -> ToolCall:
    """Settle an external tool's call with the result (or the error) supplied from outside; the run resumes.

    The transition is audited like a worker's (with the result's size and SHA-256); a call that
    does not await a result refuses it, so a second submission changes nothing.
    """
    with transaction.atomic():
        call = ToolCall.objects.select_for_update().filter(id=call_id).first()
        if call is None:
            raise ExternalResultError("There is no such call.")
        if call.status != CallStatus.AWAITING_RESULT:
            raise ResultNotAwaitedError(
                f"This call is {call.status}; only a call that awaits its result "
                "(an external tool's, or one whose tool suspended itself) accepts one."
            )
        child = _subagent_run_of(call)
        if child:
            raise ExternalResultError(
                f"This call waits for its subagent run {child}; only that run's outcome settles it."
            )
        now = timezone.now()
        # A result after the deadline is refused as the sweep would have, had it come by first: the call expires
        # here (committed, so the model is told) and the sender learns why (raised below, after the commit).
        late = awaiting_results_past_deadline(now).filter(pk=call.pk).exists()
        expired = late and tool_call_expire_awaiting(call, now=now)
        if not expired:
            _settle_with_result(call, actor=actor, result=result, error=error, now=now)
    if expired:
        raise ResultNotAwaitedError(
            "This call expired: its result did not arrive within EXTERNAL_RESULT_TIMEOUT_SECONDS; nothing was kept."
        )
    return call


def _settle_with_result(call: ToolCall, *, actor: str, result: Any, error: str | None, now: datetime) -> None:
    """Settle the locked call awaiting its result with what came from outside (an error, or the result)."""
    # A connector that echoes a sensitive argument ("no match for <ssn>") is scrubbed as a worker's tool is.
    scrubber = _sensitive_scrubber(call)
    if error is not None:
        message = storable_text(scrubber.text(str(error)))[: toolhub_settings().MAX_STRING_LENGTH]
        if not message.strip():
            raise ExternalResultError("An error needs a message for the model.")
        call_transition(
            call,
            to=CallStatus.FAILED,
            allowed_from={CallStatus.AWAITING_RESULT},
            actor=actor,
            data={"source": "external", "error": message},
            error=message,
            finished_at=now,
        )
        return
    problem = json_storage_problem(result)
    if problem:
        raise ExternalResultError(f"The result cannot be stored: {problem}.")
    result = scrubber.value(result)
    encoded = canonical_json(result).encode("utf-8")
    limit = toolhub_settings().MAX_EXTERNAL_RESULT_BYTES
    if len(encoded) > limit:
        raise ExternalResultError(f"The result is larger than {limit} bytes.")
    call_transition(
        call,
        to=CallStatus.SUCCEEDED,
        allowed_from={CallStatus.AWAITING_RESULT},
        actor=actor,
        data={
            "source": "external",
            "result_bytes": len(encoded),
            "result_sha256": hashlib.sha256(encoded).hexdigest(),
        },
        result=result,
        finished_at=now,
    )


def _sensitive_scrubber(call: ToolCall) -> SecretScrubber:
    """Replaces the values of the call's arguments that are never shown (``withheld_names``)."""
    arguments = call.arguments or {}
    withheld = withheld_names(call.tool_name, arguments, version=call.tool_version)
    tool = registry.get(call.tool_name)
    declared = tool.declared_names if tool is not None else frozenset()
    return SecretScrubber(sensitive_values(arguments, withheld, declared=declared))


def _subagent_run_of(call: ToolCall) -> str:
    """The child run a subagent tool's suspended call waits for (``agents_app.subagents``), or ``""``."""
    payload = (call.suspension or {}).get("payload") if isinstance(call.suspension, dict) else None
    return str(payload.get("subagent_run") or "") if isinstance(payload, dict) else ""


def tool_call_require_reapproval(
    *, call: ToolCall, tool: Tool, actor: str, reason: str = "", verdict: ApprovalVerdict | None = None
) -> bool:
    """Send a claimed call (back) for approval: its tool changed since it was approved, or ``reason`` says why.

    ``reason``: why the approval no longer applies though the tool is the same (governance asks more approvals of
    the call now, or an approval it was released on lapsed: ``toolhub.signals.approval_shortfall``), or why a call
    queued as needing none needs one now; ``verdict``: the policy's verdict that holds such a call
    (``toolhub.policy.policy_moved_verdict``), its terms those of the new request, judged once. The claim is
    given back, as a batch hands back a call it never started (``toolhub.execution``): the tool did not run, so the
    claim is no attempt of the call's; a call sent back however often runs its first time as attempt 1, and a
    compensation keeps every retry of its budget (``SAGA_MAX_ATTEMPTS`` counts the call's ``attempts``). Only this
    claim's move: not a later one's.
    """
    source = "rules_changed" if reason else "tool_changed"  # ``approvals.models.ApprovalSource``
    reason = reason or (
        f"tool {tool.name!r} changed after approval (version {call.tool_version} -> {tool.version}); "
        "the earlier approval no longer applies"
    )
    with transaction.atomic():
        moved = call_transition(
            call,
            to=CallStatus.PENDING_APPROVAL,
            allowed_from={CallStatus.RUNNING},
            attempt=call.attempts,
            actor=actor,
            data={
                "reason": reason,
                "approved_version": call.tool_version,
                "current_version": tool.version,
                "attempt": call.attempts,
            },
            tool_version=tool.version,
            approval_hash=approval_hash(tool.name, tool.version, call.arguments),
            attempts=call.attempts - 1,
            worker="",
            started_at=None,
            lease_expires_at=None,
        )
        if moved:
            terms = replace(verdict, reason=reason) if verdict else _changed_tool_verdict(call, tool, reason, source)
            approval_needed.send(sender=ToolCall, call=call, reason=reason, verdict=terms)
            # Its run waits for the decision, as for a call held when asked (one queued as needing none was running).
            transaction.on_commit(lambda: call_suspended.send(sender=ToolCall, call=call), robust=True)
    return moved


def _changed_tool_verdict(call: ToolCall, tool: Tool, reason: str, source: str) -> ApprovalVerdict:
    """The terms of a new decision on a call whose tool or rules changed: as policy judges the call with them now.

    A critical tool, a rule for two approvers, an operator's risk override hold the new round as they would
    hold the call asked now (the approvals app also keeps at least the approvals the request needed before).
    """
    judged = recorded_call_verdict(call=call, tool=tool, arguments=call.arguments)
    if judged is None:
        return ApprovalVerdict(reason, source, effective_risk(tool, tool_definitions().get(tool.name)))
    return replace(judged, reason=f"{reason}; {judged.reason}", source=source)


def tool_call_refuse(
    *,
    call: ToolCall,
    actor: str,
    status: CallStatus,
    message: str,
    preceding: Sequence[EventSpec] = (),
    writes: Sequence[Write] = (),
    allowed_from: frozenset[CallStatus] = frozenset({CallStatus.PENDING_APPROVAL}),
) -> bool:
    """Settle a call that is waiting (for approval, by default) without running it: rejected, expired or cancelled.

    ``preceding`` and ``writes``: the deciding operator's audit event and rows, in the same write. A cancelled
    run also withdraws its calls still queued or awaiting a result (``allowed_from``).
    """
    return call_transition(
        call,
        to=status,
        allowed_from=allowed_from,
        actor=actor,
        data={"message": message},
        preceding=preceding,
        writes=writes,
        error=message,
        finished_at=timezone.now(),
    )


#: Calls that may be withdrawn: nothing of them has started (held for approval, queued, awaiting a result).
WITHDRAWABLE_STATUSES = frozenset({CallStatus.PENDING_APPROVAL, CallStatus.QUEUED, CallStatus.AWAITING_RESULT})


def tool_call_withdraw(
    *, call: ToolCall, actor: str, reason: str, allowed_from: frozenset[CallStatus] = WITHDRAWABLE_STATUSES
) -> bool:
    """Settle a call that has not started as ``cancelled``, in the caller's transaction; False if it had moved on.

    A held call's approval request ends with it (``approval_withdrawing``: no operator decides it any more); a
    queued call's worker then finds it cancelled and runs nothing. What the model reads: ``Not executed: reason``.
    ``allowed_from`` narrows what is withdrawn: ``{PENDING_APPROVAL}`` leaves a call an operator approved meanwhile
    (queued, not yet run) to its decision; without ``PENDING_APPROVAL`` a held call and its request are left.
    """
    # The request's withdrawal cancels the call from ``pending_approval``: only when that is a status withdrawn.
    if call.status == CallStatus.PENDING_APPROVAL and CallStatus.PENDING_APPROVAL in allowed_from:
        answers = approval_withdrawing.send(sender=ToolCall, call=call, actor=actor, reason=reason)
        if any(answer is True for _, answer in answers):
            return True
    return tool_call_refuse(
        call=call,
        actor=actor,
        status=CallStatus.CANCELLED,
        message=f"Not executed: {reason}",
        allowed_from=allowed_from,
    )


class CallNotWithdrawableError(ToolhubError):
    """The call has started or settled (or is a saga's compensation): it cannot be cancelled; 409."""

    status_code = 409


class CancelReasonError(ToolhubError):
    """A cancellation's reason that no column can store (a NUL, a lone surrogate); 400, nothing cancelled."""

    status_code = 400


def cancel_reason_problem(reason: str) -> str | None:
    """Why a cancellation's reason cannot be kept (in the audit trail, the call, what the model reads), or ``None``."""
    problem = json_storage_problem(reason, "the reason")
    return f"Nothing was cancelled: {problem}." if problem else None


def tool_call_cancel(
    *,
    call: ToolCall,
    actor: str,
    reason: str,
    reader: Any,
    allowed_from: frozenset[CallStatus] = WITHDRAWABLE_STATUSES,
) -> ToolCall:
    """Cancel one call that has not started, for the user it was made for or an operator (asked by the caller).

    A run waiting on it goes on, its model told the call was not executed and why. Returns the call as it is now.
    A subagent's call is refused: only its child run's end settles it (cancel the child run). A refusal names the
    call's status as ``reader`` (the user asking) reads it (``CallerView``): a denied call of a tool they may not
    see reads ``invalid``, as it was answered, so cancelling it tells no denied tool from a missing one.
    """
    problem = cancel_reason_problem(reason)
    if problem:
        raise CancelReasonError(problem)
    if is_undoing(call.kind, call.context):
        raise CallNotWithdrawableError(
            "A saga's compensation is not cancelled, nor a call made on its behalf: it undoes a completed step. If it "
            "must not run, resolve it by hand on the saga's page."
        )
    child = _subagent_run_of(call) if call.status == CallStatus.AWAITING_RESULT else ""
    if child:
        # Its child run would go on (and its held calls stay on the desk) for a parent that no longer waits: the
        # child's end settles this call, so cancelling that run is what stops both.
        raise CallNotWithdrawableError(
            f"This call waits for its subagent run {child}; cancel that run instead (its end settles this call). "
            "Nothing was changed."
        )
    with transaction.atomic():
        withdrawn = call.status in allowed_from and tool_call_withdraw(
            call=call, actor=actor, reason=reason, allowed_from=allowed_from
        )
    fresh = ToolCall.objects.get(pk=call.pk)
    if not withdrawn:
        shown = CallerView(reader).call(fresh)
        raise CallNotWithdrawableError(
            f"This call is {shown.status}; only a call that has not started (held for approval, queued or awaiting "
            "a result) can be cancelled. Nothing was changed."
        )
    return fresh
