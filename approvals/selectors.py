"""Reads of approval requests: who sees them, who may still decide one, and what was said before the call."""

import operator
from dataclasses import dataclass
from functools import reduce
from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model, load_backend
from django.contrib.auth.models import AbstractBaseUser, Group
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db.models import Q, QuerySet

from approvals.deciders import DECIDE_PERMISSION, RoundStanding, further_restrictions, round_standing
from approvals.models import ApprovalRequest, ApprovalStatus
from toolhub.models import CallKind, TenantMembership, ToolCall
from toolhub.tenancy import CROSS_TENANT_PERMISSION, has_tenant_wide_role, scoped, visible_rows

__all__ = [
    "approval_requests_visible_to",
    "pending_count",
    "approvers_of",
    "approval_progress",
    "approvers_still_counting",
    "conversation_before",
    "ApprovalProgress",
    "ConversationBefore",
]


def approval_requests_visible_to(user: AbstractBaseUser) -> QuerySet[ApprovalRequest]:
    """Operators (and other staff) see every request of their tenants; anyone else only those of their own calls."""
    requests = ApprovalRequest.objects.select_related("call", "requested_by").prefetch_related("decisions", "askers")
    return visible_rows(
        requests, user, tenant_wide=has_tenant_wide_role(user, DECIDE_PERMISSION), owner_field="requested_by"
    )


def pending_count(user: AbstractBaseUser) -> int:
    """How many requests of the user's tenants wait for a decision (the desk's title)."""
    return scoped(ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING), user).count()


def approvers_of(request: ApprovalRequest) -> list[AbstractBaseUser]:
    """The active people who may decide ``request`` now: the permission, its tenant, its approver group.

    Whoever started the call is left out (four eyes), as is anyone the services would refuse. Superusers
    are included only when they hold the permission through a group or directly, not by being superusers,
    so that a platform team is not mailed every tenant's requests; a platform operator holding both the
    decide and the cross-tenant permission is, for every tenant, as they may decide them all.

    One query whatever the number of operators (the desk's page and the approvers' e-mail both ask): it
    is :func:`approvals.deciders.approval_may_decide` as a filter, and a test holds the two to the same
    answer for every kind of person (``tests/approvals/test_approvers.py``).
    """
    deciders = _holders(DECIDE_PERMISSION, include_superusers=False).filter(is_active=True)
    in_tenant = Q(pk__in=_holders(CROSS_TENANT_PERMISSION).values("pk"))  # superusers included
    if request.tenant:
        members = TenantMembership.objects.filter(tenant__slug=request.tenant).values("user_id")
        in_tenant |= Q(pk__in=members)
    deciders = deciders.filter(in_tenant)
    if request.requested_by_id is not None:
        deciders = deciders.exclude(pk=request.requested_by_id)
    if request.pk is not None:  # everyone who asked for it (``askers_of``), in the same query
        askers = ApprovalRequest.askers.through.objects.filter(approvalrequest_id=request.pk)
        deciders = deciders.exclude(pk__in=askers.values("user_id"))
    rules = [_meeting(group_id, permission) for group_id, permission in further_restrictions(request)]
    if request.approver_group_id or request.approver_permission:
        own = _meeting(request.approver_group_id, request.approver_permission)
        if request.escalated_at and request.escalation_group_id:
            own |= Q(pk__in=_members_of(request.escalation_group_id))
        rules.append(own)
    if rules:
        deciders = deciders.filter(Q(is_superuser=True) | reduce(operator.and_, rules))
    return list(deciders.order_by("pk"))


def _meeting(group_id: int | None, permission: str) -> Q:
    """The users who meet one approver restriction (``approval_may_decide``'s ``_holds`` as a filter)."""
    rule = Q()
    if group_id:
        rule &= Q(pk__in=_members_of(group_id))
    if permission:
        rule &= Q(pk__in=_holders(permission).values("pk"))
    return rule


def _holders(permission: str, **options: Any) -> QuerySet[Any]:
    """The users holding ``permission``, as the first backend that grants permissions reads it.

    ``with_perm`` must be told which backend once there are several (the login guard's comes first and grants
    nothing): without it, it raises, and no one could be named as an approver.
    """
    for path in settings.AUTHENTICATION_BACKENDS:
        if hasattr(load_backend(path), "with_perm"):
            return get_user_model().objects.with_perm(permission, backend=path, **options)  # type: ignore[no-any-return]
    raise ImproperlyConfigured("No authentication backend grants permissions (with_perm).")


def _members_of(group_id: int) -> QuerySet[Any]:
    """The ids of a group's members, as a subquery."""
    return get_user_model().groups.through.objects.filter(group_id=group_id).values("user_id")


@dataclass(frozen=True)
class ApprovalProgress:
    """Where a request's current round stands: the approvals that count and by whom, and who may still give one."""

    needed: int
    given_by: list[str]
    remaining: int
    may_approve: list[str]
    group: str


def approval_progress(request: ApprovalRequest) -> ApprovalProgress:
    """The current round's approvals that count and the people who may still approve (none once it is decided).

    Counted as a decision counts them (``ApproverStanding``): an approval whose giver may no longer decide is
    neither listed as given nor subtracted from what is needed, though its giver may not approve this version again.
    """
    round_ = round_standing(request)
    may_approve = [user.get_username() for user in approvers_still_counting(request, round_)]
    group = ", ".join(_approver_group_names(request))
    if request.escalated_at and request.escalation_group_id:
        group = f"{group or 'operators'}, or since escalation {request.escalation_group.name}"
    return ApprovalProgress(round_.needed, round_.given_by, round_.remaining, may_approve, group)


def approvers_still_counting(request: ApprovalRequest, round_: RoundStanding | None = None) -> list[AbstractBaseUser]:
    """The people whose approval, given now, counts as a decision counts it (``services._approval``).

    While approvals are missing: whoever may decide and has not approved this round (one person approves a
    version once). Once the approvals standing reach the quorum (an approver's standing came back): those
    approvers, whose confirmation releases the call. Nobody once the request is decided. The desk's "May still
    approve" and the approvers' e-mails both read this, so neither names someone a decision would refuse.
    """
    if request.status != ApprovalStatus.PENDING:
        return []
    round_ = round_ or round_standing(request)
    if round_.remaining:
        return [user for user in approvers_of(request) if user.pk not in round_.approver_ids]
    return list(get_user_model().objects.filter(pk__in=round_.counted).order_by("pk"))


def _approver_group_names(request: ApprovalRequest) -> list[str]:
    """The names of the groups whose members the request asks for (its own, then the other governing groups')."""
    names = [request.approver_group.name] if request.approver_group_id else []
    further = [group_id for group_id, _ in further_restrictions(request) if group_id]
    if further:
        names += Group.objects.filter(pk__in=further).order_by("name").values_list("name", flat=True)
    return names


@dataclass(frozen=True)
class ConversationBefore:
    """What the approver reads before deciding: the user's last input and the model's message with the call."""

    user_input: str
    model_message: str
    found: bool


def conversation_before(request: ApprovalRequest) -> ConversationBefore:
    """The user input and the model's words that led to the call, read from its run (if agents are installed).

    The assistant message is the one carrying the call's id; the user input is the last user message
    before it, else the run's input. Tool arguments are not taken from here: the page shows the version
    under approval, redacted.
    """
    call = request.call
    if call.run_id is None:
        return ConversationBefore("", "", False)
    try:
        run_model = apps.get_model("agents_app", "AgentRun")
    except LookupError:
        return ConversationBefore("", "", False)
    run = run_model.objects.filter(pk=call.run_id).only("input", "messages").first()
    if run is None:
        return ConversationBefore("", "", False)
    messages: list[dict[str, Any]] = [m for m in (run.messages or []) if isinstance(m, dict)]
    at = _assistant_message_of(messages, *_asking_turn_and_id(call))
    model_message = str(messages[at].get("content") or "") if at is not None else ""
    before = messages[:at] if at is not None else messages
    user_input = next(
        (str(m.get("content") or "") for m in reversed(before) if m.get("role") == "user"), str(run.input or "")
    )
    return ConversationBefore(user_input, model_message, True)


def _asking_turn_and_id(call: Any) -> tuple[int, str]:
    """The turn and model call id of the run's own call that asked for ``call``: itself, or an inner call's outer one.

    An inner call was asked for by an agentic tool's model, whose words are not in the run's conversation: the
    words that led to it are those with the outer call (``context.parent_call_id``, a call of the same run).
    """
    if call.kind != CallKind.INNER:
        return call.turn, call.model_call_id
    parent_id = (call.context or {}).get("parent_call_id") if isinstance(call.context, dict) else None
    try:
        outer = ToolCall.objects.filter(pk=parent_id, run_id=call.run_id).only("turn", "model_call_id").first()
    except (ValueError, ValidationError):  # not a call's id
        return 0, ""
    return (outer.turn, outer.model_call_id) if outer is not None else (0, "")


def _assistant_message_of(messages: list[dict[str, Any]], turn: int, model_call_id: str) -> int | None:
    """The index of turn ``turn``'s assistant message if it carries ``model_call_id``, else ``None``.

    Each of a run's turns records exactly one assistant message (``agents_app.loop``). A model's call ids are unique
    within its turn only: matched by id alone, a call of a later turn reusing an earlier id ("c1" again) showed the
    approver the earlier turn's words, not those the model wrote with the call under approval.
    """
    seen = 0
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        seen += 1
        if seen == turn:
            asked = [tc for tc in message.get("tool_calls") or [] if isinstance(tc, dict)]
            return index if model_call_id and any(tc.get("id") == model_call_id for tc in asked) else None
    return None
