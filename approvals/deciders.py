"""Who may decide an approval request, and whose approvals still count toward its quorum.

Read by the decision service, the approval desk, the API and the operators' lists alike, so that what a page
shows as decidable and counted is what a decision will find.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from approvals.governing import governing_groups, required_approvals_now, restricts
from approvals.models import ApprovalRequest, ApprovalStatus, DecisionKind
from approvals.rows import ASKERS_READ
from toolhub.exceptions import NotInTenantError
from toolhub.governance import governance_cached
from toolhub.tenancy import require_tenant, tenant_scope

__all__ = [
    "DECIDE_PERMISSION",
    "ApproverStanding",
    "approval_may_decide",
    "decides_as_superuser_only",
    "asker_ids",
    "asker_names",
    "decider_as_now",
    "RoundStanding",
    "approvals_in_round",
    "round_standing",
    "further_restrictions",
]

DECIDE_PERMISSION = "approvals.decide_approvalrequest"


def approval_may_decide(
    request: ApprovalRequest, user: AbstractBaseUser, *, governing_now: bool | None = None
) -> str | None:
    """Why ``user`` may not decide ``request``, or ``None`` when they may.

    A user outside the request's tenant is refused with :class:`NotInTenantError` before anything
    else is checked, so that the answer reveals nothing of the request (callers answer it as 404).
    ``governing_now``: held to the restrictions of the groups governing its tool now (``further_restrictions``).
    """
    require_tenant(user, request.tenant)
    if not user.has_perm(DECIDE_PERMISSION):
        return "You need the 'Can approve or reject held-back tool calls' permission."
    if request.requested_by_id is not None and request.requested_by_id == user.pk:
        return "You started this call; another operator must decide it."
    if user.pk in asker_ids(request):
        return (
            "You asked for this call in its user's name (you retried its run, or rolled back the saga it undoes a step "
            "of, retried it or chose to compensate its held step); another operator must decide it."
        )
    if not user.is_superuser and not _meets_approver_restrictions(request, user, governing_now):
        return "Only the approvers of this tool's groups may decide this request."
    return None


def decides_as_superuser_only(request: ApprovalRequest, user: AbstractBaseUser) -> bool:
    """Whether ``user`` may decide ``request`` only because they are a superuser: outside its approver restrictions.

    A superuser is not held to a tool group's approver group or permission (they could grant it to themselves), but
    such a decision is audited distinctly (``superuser_outside_approvers`` on its event), and every approval event
    whose ``approved_by`` counts such a superuser names them (``superusers_outside_approvers``: the releasing event
    too, though another approver gave it), so an auditor finds the calls released past the approvers the tool's
    groups name from the releasing event alone, without reading every approver's groups.
    """
    return bool(user.is_superuser) and not _meets_approver_restrictions(request, user)


def _meets_approver_restrictions(
    request: ApprovalRequest, user: AbstractBaseUser, governing_now: bool | None = None
) -> bool:
    """Whether ``user`` meets the approver group and permission of ``request``'s tool groups (then and now)."""
    further = further_restrictions(request, governing_now=governing_now)
    if not (request.approver_group_id or request.approver_permission or further):
        return True
    groups = _group_ids(user)
    fallback = bool(request.escalated_at) and request.escalation_group_id in groups
    governing = fallback or _holds(user, groups, request.approver_group_id, request.approver_permission)
    return governing and all(_holds(user, groups, group_id, perm) for group_id, perm in further)


def asker_ids(request: ApprovalRequest) -> frozenset[int]:
    """The ids of everyone who asked for ``request``'s call in its user's name (``ApprovalRequest.askers``).

    None of them decides it. Read once per instance: from a list's prefetched ``askers``, from the locked read of
    the decision path (``approvals.rows.request_decisions``, after the lock), else one query kept on the instance.
    """
    prefetched = getattr(request, "_prefetched_objects_cache", {}).get("askers")
    if prefetched is not None:
        return frozenset(asker.pk for asker in prefetched)
    if request.pk is None:
        return frozenset()
    if ASKERS_READ not in request.__dict__:
        through = ApprovalRequest.askers.through.objects.filter(approvalrequest_id=request.pk)
        request.__dict__[ASKERS_READ] = frozenset(through.values_list("user_id", flat=True))
    known: frozenset[int] = request.__dict__[ASKERS_READ]
    return known


def asker_names(request: ApprovalRequest) -> list[str]:
    """Who asked for ``request``'s call, by their names now (a list prefetches ``askers``), for the admin and API."""
    return [asker.get_username() for asker in request.askers.all()]


def decider_as_now(user: AbstractBaseUser) -> AbstractBaseUser | None:
    """``user`` as the current governance has them, to judge their decision with (``None``: no such user now).

    A decision judges its decider once the request is locked, which it may have waited for; the object an HTTP
    request brought holds its active flag from the request's start and memoized its tenants and permissions when the
    view looked the request up. Memberships, groups, permissions and the active and superuser bits are governance
    tables, so the fresh instance is kept per process until the next change (the caller's ``governance_scope``
    holds the stamp read after the lock): nothing is read while nothing changed. Shared by threads, it is only
    read: its permissions and tenants are memoized before it is handed out. Names still come from ``user``.
    """

    def load() -> AbstractBaseUser | None:
        fresh = get_user_model().objects.filter(pk=user.pk).first()
        if fresh is not None:
            fresh.has_perm(DECIDE_PERMISSION)  # memoizes every permission of theirs (none when inactive)
            tenant_scope(fresh)
        return fresh

    return governance_cached(("approval_decider", user.pk), load)


def _group_ids(user: AbstractBaseUser) -> set[int]:
    """The ids of ``user``'s groups: those loaded with them (``ApproverStanding``), or one query."""
    return {group.pk for group in user.groups.all()}  # type: ignore[attr-defined]


class ApproverStanding:
    """Whose approvals still count: the people who may decide a request now, each loaded once.

    An approval holds while its giver may give it: once they are deactivated, deleted, removed from the
    request's tenant or stripped of the right, it no longer counts toward the quorum (as a call whose
    requester left runs nothing), so the call waits for another approver instead of running on fewer.
    One instance serves a list of requests: each decider is read once with their groups, whatever the number
    of rows (``approval_may_decide`` reads the groups it loaded). ``released``: the approvals an approved call was
    released on, judged by a worker before it runs it (``approvals.shortfall``), under its governance scope: each
    decider is taken as the current governance has them (``decider_as_now``: read once per process until governance
    changes) and held to the restrictions of the groups governing its tool now, as a pending request's deciders are
    (a tool added to a restricted group, a group given approvers while the call sat in the queue).
    """

    def __init__(self, *, released: bool = False) -> None:
        self._users: dict[int, AbstractBaseUser | None] = {}
        self._released = released

    def counted(self, request: ApprovalRequest, decider_ids: Iterable[int | None]) -> frozenset[int]:
        """Those of ``decider_ids`` whose approval of ``request`` still counts."""
        ids = {pk for pk in decider_ids if pk is not None}
        unread = ids - set(self._users)
        if unread and self._released:
            model = get_user_model()
            self._users.update({pk: decider_as_now(model(pk=pk)) for pk in unread})
        elif unread:
            self._users.update(dict.fromkeys(unread))
            users = get_user_model().objects.filter(pk__in=unread).prefetch_related("groups")
            self._users.update({user.pk: user for user in users})
        governing_now = True if self._released else None
        return frozenset(
            pk for pk in ids if (user := self._users[pk]) is not None and _may_decide_now(request, user, governing_now)
        )

    def superusers_only(self, request: ApprovalRequest, counted: Iterable[int]) -> frozenset[int]:
        """Those of ``counted`` (read by ``counted``) whose approval counts only because they are superusers.

        A release names them (``superusers_outside_approvers``) whoever gave the approval that released the call.
        """
        return frozenset(
            pk
            for pk in counted
            if (user := self._users.get(pk)) is not None and decides_as_superuser_only(request, user)
        )


def _may_decide_now(request: ApprovalRequest, user: AbstractBaseUser, governing_now: bool | None = None) -> bool:
    try:
        return approval_may_decide(request, user, governing_now=governing_now) is None
    except NotInTenantError:
        return False


def approvals_in_round(request: ApprovalRequest, standing: ApproverStanding | None = None) -> int:
    """How many approvals of the current round count (an edit counts as its editor's): see ``round_standing``."""
    return len(round_standing(request, standing).counted)


@dataclass(frozen=True)
class RoundStanding:
    """The current round's approvals: who gave one, whose still count, and how many are still missing."""

    approver_ids: frozenset[int]
    counted: frozenset[int]
    given_by: list[str]
    remaining: int
    #: the approvals the request needs now (``approvals.governing.required_approvals_now``)
    needed: int


def round_standing(request: ApprovalRequest, standing: ApproverStanding | None = None) -> RoundStanding:
    """The current round as a decision counts it (``ApproverStanding``), for the desk, the API and the e-mails.

    One ``standing`` may serve a list of requests: each decider is then read once.
    """
    approved = [
        (decision.decided_by_id, decision.decided_by_name)
        for decision in request.decisions.all()
        if decision.round == request.round and decision.decision != DecisionKind.REJECT
    ]
    counted = (standing or ApproverStanding()).counted(request, (pk for pk, _ in approved))
    given_by = list(dict.fromkeys(name for pk, name in approved if pk in counted))  # a confirmation once
    needed = required_approvals_now(request)
    remaining = max(needed - len(counted), 0)
    return RoundStanding(frozenset(pk for pk, _ in approved if pk is not None), counted, given_by, remaining, needed)


def further_restrictions(
    request: ApprovalRequest, *, governing_now: bool | None = None
) -> list[tuple[int | None, str]]:
    """The other governing groups' restrictions (group id, permission) that hold besides the request's own.

    Those copied when the request opened, and, while it is pending, those of the groups governing its tool now
    (``approvals.governing``: a tool added to a restricted group, a group given approvers): a decision meets the
    rules as they stood at creation and as they stand when it is made, never looser than either. The escalation
    group stands in for the request's own restriction only, never for these. ``governing_now``: whether those of now
    hold too (by default, while it is pending); a worker about to run an approved call asks so of the approvals it
    was released on (``ApproverStanding(released=True)``), as governance asking more of it sends it back.
    """
    recorded = [
        (item.get("group"), item.get("permission") or "")
        for item in request.further_restrictions or []
        if isinstance(item, dict) and (item.get("group") or item.get("permission"))
    ]
    if not (request.status == ApprovalStatus.PENDING if governing_now is None else governing_now):
        return recorded
    held = {(request.approver_group_id, request.approver_permission), *recorded}
    now = [
        (group.approver_group_id, group.approver_permission)
        for group in governing_groups(request.tool_name, request.tenant)
        if restricts(group)
    ]
    return recorded + [restriction for restriction in dict.fromkeys(now) if restriction not in held]


def _holds(user: AbstractBaseUser, group_ids: set[int], group_id: int | None, permission: str) -> bool:
    """Whether ``user`` (a member of ``group_ids``) meets one restriction: its group, and its permission."""
    return (not group_id or group_id in group_ids) and (not permission or user.has_perm(permission))
