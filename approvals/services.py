"""Approval services: create requests and decide them (exactly one decision wins; one past its deadline expires).

Requests nobody decides are withdrawn, expired and escalated in ``approvals.unanswered``. An edit replaces the
version under approval and opens a new round: approvals count within one round, so every required approval is
given by people who saw the arguments that will run.
"""

from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from approvals import signals
from approvals.deciders import ApproverStanding, approval_may_decide, decider_as_now, decides_as_superuser_only
from approvals.editing import EditedVersion, edited_version
from approvals.governing import governing_groups, required_approvals_now, restricts
from approvals.models import APPROVAL_TRANSITIONS, ApprovalRequest, ApprovalStatus, DecisionKind
from approvals.rows import ASKERS_READ, Decisions, locked_request, request_decisions
from approvals.unanswered import expire_request
from approvals.versions import arguments_diff, shown_diff
from approvals.writes import decided_row, decision_row, notify
from toolhub import signals as toolhub_signals
from toolhub.audit import EventSpec, Write, WriteMissedError, audit_call_event, audit_call_events
from toolhub.conf import toolhub_settings
from toolhub.exceptions import (
    AlreadyDecidedError,
    ApprovalError,
    ArgumentsChangedError,
    DecisionNotAllowedError,
    NotInTenantError,
)
from toolhub.execution_checks import unbuildable_problem
from toolhub.governance import governance_scope
from toolhub.models import CallStatus, ToolCall
from toolhub.pipeline import approval_hash, approval_hash_matches
from toolhub.policy import ApprovalVerdict, decision_stamp
from toolhub.sagas.selectors import compensation_askers
from toolhub.storable import json_storage_problem
from toolhub.tools.registry import registry
from toolhub.transitions import guarded_save
from toolhub.waiting import tool_call_refuse, tool_call_release

__all__ = [
    "approval_request_create",
    "approval_approve",
    "approval_reject",
]


def approval_request_create(*, call: ToolCall, verdict: ApprovalVerdict) -> ApprovalRequest:
    """Open (or reopen) the request for a call the pipeline held back, inside the pipeline's transaction."""
    now = timezone.now()
    timeout = verdict.timeout_seconds or toolhub_settings().APPROVAL_TIMEOUT_SECONDS
    governing = governing_groups(call.tool_name, call.tenant)
    group = governing[0] if governing else None
    escalate_after = (group.escalate_after_seconds if group else None) or float(
        toolhub_settings().ESCALATE_AFTER_SECONDS
    )
    terms = {
        "reason": verdict.reason[:500],
        "source": verdict.source,
        "rule_id": verdict.rule_id,
        "risk": verdict.risk,
        "required_approvals": verdict.required_approvals,
        "approver_group": group.approver_group if group else None,
        "approver_permission": group.approver_permission if group else "",
        "further_restrictions": [
            {"group": other.approver_group_id, "permission": other.approver_permission}
            for other in governing[1:]
            if restricts(other)
        ],
        "escalation_group": group.escalation_group if group else None,
        "escalate_at": now + timedelta(seconds=escalate_after) if group and group.escalation_group_id else None,
        "escalated_at": None,
        "expires_at": now + timedelta(seconds=timeout),
    }
    # The version under approval: the call's arguments, bound by the hash the pipeline computed.
    terms.update(arguments=call.arguments, arguments_hash=call.approval_hash)
    request = ApprovalRequest.objects.filter(call=call).select_for_update().first()
    if request is None:
        request = ApprovalRequest.objects.create(
            call=call,
            tool_name=call.tool_name,
            requested_by_id=call.user_id,
            agent_name=call.agent_name,
            tenant=call.tenant,
            original_arguments=call.arguments,
            **terms,
        )
    else:
        # The call came back (its tool changed after approval): a new round, earlier decisions no longer count,
        # and it needs at least the approvals it needed before (a critical call is never left to one person).
        terms["required_approvals"] = max(request.required_approvals, verdict.required_approvals)
        for name, value in terms.items():
            setattr(request, name, value)
        request.round += 1
        request.decided_at = None
        _reopen(request)
    # Everyone who asked for the call in its user's name is barred: for a compensation who rolled back, retried it or
    # chose to compensate its held step; for a run's call who retried the run or an ancestor (``call_askers``). A
    # reopened request keeps those it had and adds who asked since.
    askers = _askers(call)
    if askers:
        request.askers.add(*askers)  # forgets the askers read before (``approvals.deciders.asker_ids``)
        request.__dict__.pop(ASKERS_READ, None)
    notify(signals.approval_requested, request, "approval.requested")
    return request


def _askers(call: ToolCall) -> list[int]:
    """The ids of the people who set ``call`` in motion in its user's name: a compensation's, and the apps' answers."""
    answers = [pk for _, ids in toolhub_signals.call_askers.send(sender=ToolCall, call=call) for pk in ids or ()]
    return list(dict.fromkeys([*compensation_askers(call), *answers]))


def approval_approve(
    *,
    request_id: int,
    user: AbstractBaseUser,
    comment: str = "",
    arguments: Mapping[str, Any] | None = None,
    expected_round: int | None = None,
    expected_arguments_hash: str | None = None,
) -> ApprovalRequest:
    """Approve the version under approval, or edit it (which opens a new round); the call runs once enough agree.

    ``expected_round`` / ``expected_arguments_hash`` name the version the approver reviewed: when it is no
    longer current, ``ArgumentsChangedError`` is raised and nothing is recorded. Without either, the approver
    is taken to have seen the model's original arguments, which is refused once someone edited them.
    """
    return _decide(
        request_id=request_id,
        user=user,
        kind=DecisionKind.APPROVE,
        comment=comment,
        arguments=arguments,
        seen=(expected_round, expected_arguments_hash),
    )


def approval_reject(*, request_id: int, user: AbstractBaseUser, comment: str = "") -> ApprovalRequest:
    """Reject; the model is told the call was rejected by an operator, with the comment."""
    return _decide(
        request_id=request_id, user=user, kind=DecisionKind.REJECT, comment=comment, arguments=None, seen=(None, None)
    )


def _decide(**options: Any) -> ApprovalRequest:
    try:
        request = _decide_in_transaction(**options)
    except WriteMissedError:
        # The request's guarded move found it decided (its lock makes this unreachable); all was rolled back.
        raise AlreadyDecidedError("This approval request was decided meanwhile; nothing was changed.") from None
    if request.status == ApprovalStatus.EXPIRED:
        # Raised only now, so that the expiry found on the way is committed and the model is told.
        raise AlreadyDecidedError("This approval request expired; nothing was changed.")
    return request


@transaction.atomic
def _decide_in_transaction(
    *,
    request_id: int,
    user: AbstractBaseUser,
    kind: DecisionKind,
    comment: str,
    arguments: Mapping[str, Any] | None,
    seen: tuple[int | None, str | None],
) -> ApprovalRequest:
    # The row lock makes concurrent deciders queue; the checks below then see the latest round and version.
    request = locked_request(request_id)
    # Every decision of the request, read once (the checks and the count below work on this list), with the
    # governance stamp after the lock: the decider is judged as they are now, not as when their request began.
    decisions, stamp = request_decisions(request)
    with governance_scope(stamp=stamp):
        return _decided(request, decisions, user, kind, comment, arguments, seen)


def _decided(
    request: ApprovalRequest,
    decisions: Decisions,
    user: AbstractBaseUser,
    kind: DecisionKind,
    comment: str,
    arguments: Mapping[str, Any] | None,
    seen: tuple[int | None, str | None],
) -> ApprovalRequest:
    """Decide the locked ``request`` for ``user``, under the governance read after its lock."""
    # Who may decide is answered before the state, so that a user without the right learns nothing of it.
    decider = decider_as_now(user)
    if decider is None:
        raise NotInTenantError("No such record among your tenants.")
    refusal = approval_may_decide(request, decider)
    if refusal:
        raise DecisionNotAllowedError(refusal)
    # A superuser deciding outside the approvers the tool's groups name is allowed, and said so on the trail.
    marks = {"superuser_outside_approvers": True} if decides_as_superuser_only(request, decider) else {}
    if request.status != ApprovalStatus.PENDING:
        raise AlreadyDecidedError(f"This approval request is already {request.status}; nothing was changed.")
    if request.expires_at <= timezone.now():
        expire_request(request)
        return request
    problem = json_storage_problem(comment, "the comment")
    if problem:
        raise ApprovalError(f"The decision was not recorded: {problem}.")
    if kind == DecisionKind.REJECT:
        # A rejection ends the request whatever version the rejecter saw.
        _reject(request, user, comment, marks)
        return request

    unbuildable = unbuildable_problem(registry.get(request.tool_name))
    if unbuildable:
        raise DecisionNotAllowedError(f"Nothing was recorded: {unbuildable}")
    _check_seen_version(request, decisions, *seen)
    edited = edited_version(request, arguments) if arguments is not None else None
    if edited is None:
        event, decision = _approval(request, user, comment, decisions)
    else:
        event, decision = _edit(request, user, comment, edited)
    approvers, outside = _approvers_counted(request, user, decisions, bool(marks))
    needed = required_approvals_now(request)
    # The trail says, for each approval, whose approvals of this version count now and how many the call needs:
    # an auditor reads who released it from the releasing event alone (an earlier giver may no longer count), and
    # which of them count only as superusers outside the tool groups' approvers.
    counted = {"approved_by": approvers, "required_approvals": needed}
    if outside:
        counted["superusers_outside_approvers"] = outside
    event = replace(event, data={**(event.data or {}), **marks, **counted})
    if len(approvers) >= needed:
        # The decision's row, the request's move and the release are one write with both audit events.
        _release(request, user, comment, event, decision, needed)
    else:
        audit_call_events(request.call, [event], writes=[decision] if decision else [])
        notify(
            signals.approval_decided,
            request,
            "approval.partial",
            decision="partial",
            by=user.get_username(),
            comment=comment,
        )
    return request


def _approvers_counted(
    request: ApprovalRequest, user: AbstractBaseUser, decisions: Decisions, user_outside: bool
) -> tuple[list[str], list[str]]:
    """Whose approvals of the current round count once ``user`` decided (by username, oldest first), and which.

    The second list: those counted only as superusers outside the tool groups' approvers (``user_outside``: the
    decider is one).

    The decision just made counts (an edit opens a new round in which only the editor's approval counts); earlier
    approvals of the round count only while their givers may still decide (``ApproverStanding``); one person once.
    Each is named as their approval is recorded (``decided_by_name``, their event's actor), the decider as now: a
    later rename does not make the trail name someone no approval on it carries.
    """
    givers: dict[int, str] = {}
    for kind, round_, by, name in decisions:
        if round_ == request.round and kind != DecisionKind.REJECT and by:
            givers.setdefault(by, name)
    standing = ApproverStanding()
    counted = standing.counted(request, (pk for pk in givers if pk != user.pk))
    outside = standing.superusers_only(request, counted) | ({user.pk} if user_outside else set())
    names = {pk: name for pk, name in givers.items() if pk in counted}
    names[user.pk] = user.get_username()
    order = [pk for pk in dict.fromkeys([*givers, user.pk]) if pk in names]
    return [names[pk] for pk in order], [names[pk] for pk in order if pk in outside]


def _check_seen_version(
    request: ApprovalRequest, decisions: Decisions, expected_round: int | None, expected_hash: str | None
) -> None:
    """Refuse an approval of a version that is no longer the one under approval."""
    current = f"now round {request.round}, arguments_hash {request.arguments_hash}"
    if expected_round is None and expected_hash is None:
        if any(decision == DecisionKind.EDIT for decision, *_ in decisions):
            raise ArgumentsChangedError(
                f"The arguments changed since the call was requested ({current}); review them again and send "
                "the round or arguments_hash you approved."
            )
        return
    stale_round = expected_round is not None and expected_round != request.round
    stale_hash = expected_hash is not None and expected_hash != request.arguments_hash
    if stale_round or stale_hash:
        raise ArgumentsChangedError(f"The arguments changed since you looked; review them again ({current}).")


def _approval(
    request: ApprovalRequest, user: AbstractBaseUser, comment: str, decisions: Decisions
) -> tuple[EventSpec, Write | None]:
    """One approval of the current version; the same person approves a version once.

    A second approval of the same version by the same person is a confirmation: it counts nothing new, and is
    taken only when it releases the call — when the approvals standing now reach the quorum, as after an
    earlier approver's standing came back (``ApproverStanding`` counts standing only when someone decides).
    Returns its audit event and its row, written together by the caller.
    """
    earlier = {
        decided_by
        for decision, round_, decided_by, _ in decisions
        if round_ == request.round and decision != DecisionKind.REJECT
    }
    confirms = user.pk in earlier
    if confirms and 1 + len(ApproverStanding().counted(request, earlier - {user.pk})) < required_approvals_now(request):
        raise DecisionNotAllowedError(
            "You already approved this version of the call; a second, different operator must approve it too."
        )
    data = {
        "decision": str(DecisionKind.APPROVE),
        "comment": comment,
        "request": request.pk,
        "round": request.round,
        "arguments_hash": request.arguments_hash,
    }
    if confirms:
        data["confirms_own_approval"] = True
    # A confirmation adds no row: the person's approval of this round is on record once.
    row = None if confirms else decision_row(request, user, DecisionKind.APPROVE, comment)
    return EventSpec("approval.approve", _actor(user), data), row


def _edit(
    request: ApprovalRequest, user: AbstractBaseUser, comment: str, version: EditedVersion
) -> tuple[EventSpec, Write]:
    """Replace the version under approval and open a new round, in which the editor's approval counts once.

    The request takes the edit's terms: the approvals policy holds the new version for (never fewer than
    before) and the higher risk. Returns the edit's audit event and decision row, written together by the
    caller (with the release, when the edit suffices).
    """
    call = request.call
    previous, previous_hash = request.arguments, request.arguments_hash
    request.round += 1
    request.arguments = version.arguments
    request.required_approvals, request.risk = version.required_approvals, version.risk
    request.save(update_fields=["round", "arguments", "required_approvals", "risk"])
    # The binding is computed over the values as the database returns them, as the worker will read them.
    request.refresh_from_db(fields=["arguments"])
    request.arguments_hash = approval_hash(call.tool_name, call.tool_version, request.arguments)
    request.save(update_fields=["arguments_hash"])
    diff = arguments_diff(request.tool_name, previous, request.arguments, version=call.tool_version)
    decision = decision_row(request, user, DecisionKind.EDIT, comment, edited_arguments=request.arguments, diff=diff)
    return EventSpec(
        "approval.edit",
        _actor(user),
        {
            "decision": str(DecisionKind.EDIT),
            "comment": comment,
            "request": request.pk,
            "round": request.round,
            "previous_arguments_hash": previous_hash,
            "arguments_hash": request.arguments_hash,
            "diff": diff,
            "diff_from_original": shown_diff(request),
            "required_approvals": request.required_approvals,
            "policy": version.policy_reason,
            **({"rewritten_by": version.rewritten_by} if version.rewritten_by else {}),
        },
    ), decision


def _reject(request: ApprovalRequest, user: AbstractBaseUser, comment: str, marks: Mapping[str, Any]) -> None:
    """End the request and refuse its call: the decision's row, the request's move and the call's are one write."""
    username = user.get_username()
    rejected = EventSpec(
        "approval.reject",
        _actor(user),
        {
            "decision": str(DecisionKind.REJECT),
            "comment": comment,
            "request": request.pk,
            "round": request.round,
            **marks,
        },
    )
    writes = [
        decision_row(request, user, DecisionKind.REJECT, comment),
        decided_row(request, ApprovalStatus.REJECTED),
    ]
    message = f"Rejected by operator: {comment}" if comment else "Rejected by operator (no comment given)."
    call = request.call
    if not tool_call_refuse(
        call=call, actor=_actor(user), status=CallStatus.REJECTED, message=message, preceding=[rejected], writes=writes
    ):
        # The call left pending_approval some other way; the rejection is audited all the same.
        audit_call_event(call, rejected.event_type, actor=rejected.actor, data=rejected.data)
    notify(signals.approval_decided, request, "approval.rejected", decision="rejected", by=username, comment=comment)


def _release(
    request: ApprovalRequest,
    user: AbstractBaseUser,
    comment: str,
    decided: EventSpec,
    decision: Write | None,
    needed: int,
) -> None:
    """Run exactly the version that was approved: its binding is checked, then it becomes the call's arguments.

    ``decided`` (the deciding approval's audit event) and ``decision`` (its row) are written in the statement
    of the call's release, with the request's move. The request keeps the approvals it was released on
    (``needed``): a worker that finds governance asking more of the call sends it back
    (``approvals.shortfall.approval_shortfall``).
    """
    call = request.call
    if not approval_hash_matches(request.arguments_hash, call.tool_name, call.tool_version, request.arguments):
        raise ApprovalError(
            "The arguments under approval no longer match the version that was approved; nothing was recorded. "
            "Reject this request and ask for the call again."
        )
    released = decided_row(request, ApprovalStatus.APPROVED, required_approvals=needed)
    writes = [*([decision] if decision else []), released]
    edited = request.arguments if request.arguments != call.arguments else None
    # Judged under the governance read after the request's lock (``_decide``): kept on the call, so a worker claiming it
    # under the same stamp, its tool in the same code groups, reads nothing to know its approvals still stand
    # (``approvals.shortfall``).
    approved_under = decision_stamp(call.tool_name)
    if not tool_call_release(
        call=call,
        actor=_actor(user),
        arguments=edited,
        preceding=[decided],
        writes=writes,
        approved_under=approved_under,
    ):
        # The call left pending_approval some other way; the decision is audited all the same.
        audit_call_event(call, decided.event_type, actor=decided.actor, data=decided.data)
    username = user.get_username()
    notify(signals.approval_decided, request, "approval.approved", decision="approved", by=username, comment=comment)


def _actor(user: AbstractBaseUser) -> str:
    return f"operator:{user.get_username()}"


def _reopen(request: ApprovalRequest) -> None:
    """Move a request (locked by the caller) back to pending through ``APPROVAL_TRANSITIONS``, saving every field."""
    if not guarded_save(request, table=APPROVAL_TRANSITIONS, to=ApprovalStatus.PENDING, allowed_from={request.status}):
        raise AlreadyDecidedError(f"This approval request is no longer {request.status}; nothing was changed.")
