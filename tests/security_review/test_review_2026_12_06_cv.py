"""Review 2026-12-06 cv: four eyes and approvals (a review of reviews bx, cm, cp, br).

The finding's test failed on the reviewed code (main at ea55f42) and passes now.

Findings:

1. An operator's edit went through the intake every version takes (bounds, schema, ``before`` interceptors) but not
   the tenant-argument check the model's request met after it: an edit of ``tenant_id`` to another tenant was
   recorded as the version under approval and released; only the worker's re-check refused it. The check now runs
   in ``toolhub.call_arguments.prepared_version`` (after the interceptors), the intake of the model's request and of
   every edit alike (``test_an_edit_naming_another_tenant_is_refused_at_the_desk``).

Checked and holding:
- Own call by every path: ``approval_approve`` / ``approval_reject`` are the only deciders (desk, bulk action,
  REST); MCP only cancels. The requester and everyone in ``askers`` are refused before the superuser bypass (bx);
  there is no delegation or "act as" in the product: a call's requester is its run's (or token's) user.
- A superuser is not held to a tool group's approver group or permission: documented (README, "A superuser is not
  held ..."), they could grant it to themselves; held to everything else. Kept as designed.
- An edit cannot add a hidden parameter (``ctx``, ``idempotency_key``, unknown keys: the schema forbids extras);
  an edit of a sensitive value is redacted in the response, the diff, the decision and the trail; it opens a new
  round, so the other required approvers approve it again.
- A stale desk post (round 1's fields after a colleague's edit opened round 2) records nothing: its round binds it
  (``test_a_stale_edit_from_the_desk_is_refused``); bulk approvals are bound to the listed hash and fields version.
- An approver taken out of the tenant after reading a request decides nothing by the API (404), the desk or the bulk
  action (``test_an_approver_who_left_the_tenant_after_loading_the_page_decides_nothing``); cross-tenant crafted
  posts are covered by the tenancy suites (queryset scoping, then ``require_tenant`` under the lock).
- PostgreSQL races: two deciders of a one-approver request release it once; one operator's double post counts once;
  an approver removed from the deciding group while queued on the lock is refused (judged after the lock).
- Wait slots: a give-back after the slot's life leaves the next wait's slot (token check); the only window left is a
  slot expiring between the give-back's read and delete, one wait more at worst, and the cache API has no
  compare-and-delete. Caps per user are the fair bound (an overall cap would let one tenant hold every other's).
"""

from contextlib import ExitStack
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import transaction

from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from approvals.services import approval_approve
from tests.approvals.conftest import Hold, hold  # noqa: F401 - a fixture, registered by being imported here
from tests.helpers import RequestCall, action_confirmation, console
from tests.security_review.conftest import client_for
from tests.security_review.pg_races import in_thread, wait_for_lock_waiter
from tests.security_review.test_review_2026_12_06_s import cache_clock  # noqa: F401 - a fixture
from toolhub import Risk, registry, tool
from toolhub.api.wait_slots import wait_slot
from toolhub.conf import toolhub_settings
from toolhub.exceptions import DecisionNotAllowedError, EditedArgumentsError
from toolhub.models import AuditEvent, TenantMembership, ToolCall

#: The decision path's locking read (``approvals.rows.locked_request``): what a queued decider waits in.
LOCKED_READ = "FOR UPDATE OF"

RAN: list[str] = []


@tool(risk=Risk.HIGH)
def cv_move_funds(tenant_id: str, amount: int) -> dict[str, Any]:
    """Move funds within a tenant (high risk: an operator approves)."""
    RAN.append(tenant_id)
    return {"moved": amount}


@pytest.mark.django_db
def test_an_edit_naming_another_tenant_is_refused_at_the_desk(
    request_call: RequestCall, alice: User, operator: User
) -> None:
    """Found: an operator's edit went through the intake (schema, interceptors) but not the tenant-argument check the
    model's request goes through: editing ``tenant_id`` to ``globex`` was recorded as the version under approval and
    released, and only the worker refused it (the call failed as denied after being approved).

    Expect: the edit is refused as the model's request would be (``EditedArgumentsError``, nothing recorded); the
    request stays pending on the model's version.
    """
    with registry.temporarily(cv_move_funds):
        call = request_call("cv_move_funds", {"tenant_id": "acme", "amount": 5}, alice, tenant="acme")
        request = ApprovalRequest.objects.get(call=call)

        with pytest.raises(EditedArgumentsError, match="your own tenant"):
            approval_approve(request_id=request.pk, user=operator, arguments={"tenant_id": "globex"})

    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and request.round == 1
    assert request.arguments == {"tenant_id": "acme", "amount": 5}
    assert not request.decisions.exists() and RAN == []
    assert ToolCall.objects.get(pk=call.pk).arguments == {"tenant_id": "acme", "amount": 5}


def _decide_while_locked(request: ApprovalRequest, *deciders: User, meanwhile: Any = None) -> list[Any]:
    """Each of ``deciders`` approves ``request`` from its own session while this one holds the request's lock (and
    does ``meanwhile`` under it); returns each outcome (the request, or the exception), once all queued on the lock.
    """
    with transaction.atomic():
        ApprovalRequest.objects.select_for_update().get(pk=request.pk)
        racers = [
            in_thread(
                lambda user=user: approval_approve(request_id=request.pk, user=user, expected_round=request.round)
            )
            for user in deciders
        ]
        wait_for_lock_waiter(LOCKED_READ, count=len(deciders))
        if meanwhile is not None:
            meanwhile()
    outcomes = []
    for thread, result in racers:
        thread.join(timeout=30)
        outcomes.extend(result)
    return outcomes


@pytest.mark.postgres  # row locks: SQLite has none
@pytest.mark.django_db(transaction=True)
def test_two_operators_approving_at_once_release_the_call_once(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
) -> None:
    """Found: nothing (holds). Expect: of two approvals of a one-approver request queued on its lock, one releases the
    call, the other is told it was decided meanwhile; one decision row, one approval event, one release."""
    request = hold("pay 5000")

    outcomes = _decide_while_locked(request, operator, second_operator)

    assert sorted(type(outcome).__name__ for outcome in outcomes) == ["AlreadyDecidedError", "ApprovalRequest"]
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED
    assert ApprovalDecision.objects.filter(request=request).count() == 1
    assert AuditEvent.objects.filter(call_id=request.call_id, event_type="approval.approve").count() == 1
    assert ToolCall.objects.get(pk=request.call_id).status != "pending_approval"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_one_operators_double_post_counts_once_toward_two_approvers(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
) -> None:
    """Found: nothing (holds). Expect: the same operator's approval sent twice at once on a call needing two
    approvers records one approval; the second is refused as a repeat; the call stays held."""
    request = hold("pay 5000", approvers=2)

    outcomes = _decide_while_locked(request, operator, operator)

    refused = [outcome for outcome in outcomes if isinstance(outcome, Exception)]
    assert len(refused) == 1 and isinstance(refused[0], DecisionNotAllowedError), outcomes
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    assert ApprovalDecision.objects.filter(request=request).count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_approver_taken_out_of_the_operators_while_queued_is_refused(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
) -> None:
    """Found: nothing (holds). Expect: an approval queued on the request's lock while an administrator takes its
    giver out of the group that gives the decide permission (committed first) is refused: the decider is judged as
    they are once the lock is theirs, not as when their request began (``decider_as_now``)."""
    request = hold("pay 5000")
    assert operator.has_perm("approvals.decide_approvalrequest")

    outcomes = _decide_while_locked(
        request, operator, meanwhile=lambda: operator.groups.remove(Group.objects.get(name="operators"))
    )

    assert len(outcomes) == 1 and isinstance(outcomes[0], DecisionNotAllowedError), outcomes
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and not request.decisions.exists()


@pytest.mark.django_db
def test_a_stale_edit_from_the_desk_is_refused(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
) -> None:
    """Found: nothing (holds). Expect: an operator posting the desk's form of round 1 (its fields as they showed,
    one changed) after a colleague's edit opened round 2 records nothing: the form's changes are read against the
    version now, which would revert the colleague's edit, but the page's round binds it."""
    request = hold("pay 5000", approvers=2)
    approval_approve(request_id=request.pk, user=second_operator, arguments={"note": "pay 9000"}, expected_round=1)
    page = f"/admin/approvals/approvalrequest/{request.pk}/"
    answer = console(operator).post(
        f"{page}approve/", {"round": "1", "arguments_hash": "", "arg__note": "pay 5000", "comment": ""}
    )

    assert answer.status_code == 302
    request.refresh_from_db()
    assert (request.round, request.arguments["note"]) == (2, "pay 9000")
    assert list(request.decisions.values_list("decided_by_name", flat=True)) == ["operator2"]


def test_a_wait_that_outlived_its_slot_leaves_the_next_waits_slot_taken(
    cache_clock: list[float],  # noqa: F811 - the fixture
) -> None:
    """Found: nothing (holds; the carried "read-then-delete" give-back). Expect: a wait stalled past its slot's life
    (the longest wait and a minute), whose slot another wait of the user's took meanwhile, gives nothing back when it
    ends: the slot is the other wait's (its token), and the user's cap still holds. The give-back's only window is a
    slot expiring between its read and its delete, a process stalled exactly there past that life: at worst one more
    wait for that user, which the cache API (no compare-and-delete) cannot close."""
    settings = toolhub_settings()
    cap = settings.CALL_WAITS_PER_USER
    life = max(settings.CALL_WAIT_MAX_SECONDS, settings.MCP_CALL_WAIT_SECONDS) + 60
    stalled = [wait_slot(7101) for _ in range(cap)]
    assert all(slot.__enter__() for slot in stalled)
    cache_clock[0] += life + 1
    with ExitStack() as holding:
        assert all(holding.enter_context(wait_slot(7101)) for _ in range(cap))
        for slot in stalled:
            slot.__exit__(None, None, None)
        assert not holding.enter_context(wait_slot(7101)), "the stalled waits gave back the slots of the new ones"


def test_wait_caps_are_each_users_own(cache_clock: list[float]) -> None:  # noqa: F811 - the fixture
    """Found: nothing (holds; the carried "per user, not overall"). Expect: one user at their cap takes nothing from
    another (of any tenant): an overall cap would let one tenant's users hold every other tenant's waits, so each
    user's own cap is the fair bound; what bounds all users together is the server's workers, as for any request."""
    cap = toolhub_settings().CALL_WAITS_PER_USER
    with ExitStack() as holding:
        assert all(holding.enter_context(wait_slot(7201)) for _ in range(cap))
        assert not holding.enter_context(wait_slot(7201))
        assert all(holding.enter_context(wait_slot(7202)) for _ in range(cap))


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["rest", "desk", "bulk"])
def test_an_approver_who_left_the_tenant_after_loading_the_page_decides_nothing(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    path: str,
) -> None:
    """Found: nothing (holds). Expect: an operator who read a request (API detail, desk page, bulk confirmation page)
    and was then taken out of its tenant records nothing by posting it: the API answers 404 as for a missing request,
    the desk and the bulk action leave it pending. The same post approves a request while they are a member."""
    api, desk = client_for(operator), console(operator)
    changelist = "/admin/approvals/approvalrequest/"

    def read(request: ApprovalRequest) -> dict[str, Any]:
        assert api.get(f"/api/v1/approvals/{request.pk}/").status_code == 200
        assert desk.get(f"{changelist}{request.pk}/change/").status_code == 200
        return action_confirmation(desk, changelist, "approve_selected", [request.pk])

    def approve(request: ApprovalRequest, confirmation: dict[str, Any]) -> int:
        if path == "rest":
            return api.post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json").status_code
        if path == "desk":
            form = {"round": "1", "arguments_hash": request.arguments_hash, "comment": ""}
            return desk.post(f"{changelist}{request.pk}/approve/", form).status_code
        return desk.post(changelist, confirmation).status_code

    control, target = hold("pay 5000"), hold("pay 6000")
    approve(control, read(control))
    shown = read(target)
    TenantMembership.objects.filter(user=operator).delete()
    answer = approve(target, shown)

    control.refresh_from_db()
    target.refresh_from_db()
    assert control.status == ApprovalStatus.APPROVED
    assert target.status == ApprovalStatus.PENDING and not target.decisions.exists()
    assert path != "rest" or answer == 404
