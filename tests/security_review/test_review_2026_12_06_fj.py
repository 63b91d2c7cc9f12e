"""Review 2026-12-06 fj: four-eyes approvals after the approval_shortfall / send-back changes (reviews eu, ez, fd).

Each finding's test failed on the reviewed code (main at 3fc511b) and passes now.

Findings:

1. The worker did not judge again the approvers' standing of the approval it runs a call on (the known gap): an
   approver deactivated, deleted, removed from the call's tenant or from the tool group's approver group between
   approving and the worker's claim still released the call, which ran on the word of someone who could no longer
   give it (a pending request's quorum already dropped such approvals: ``ApproverStanding``). The worker's
   ``approval_shortfall`` answer (``approvals.shortfall``) now reads the released round's approvals with their request
   and askers in one statement (``approvals.rows.released_request``) and judges their givers as governance has them
   (``ApproverStanding(cached=True)``: ``decider_as_now``); fewer than the call was released on send it back for a new
   round through the same send-back as ``rules_changed`` (claim given back, the event's reason naming whose approval
   lapsed and how many still count). Approve -> completed is 10 statements (9 before): the one read. Tests:
   ``test_an_approval_whose_giver_was_deactivated_before_the_worker_runs_does_not_release``,
   ``..._left_the_tenant_...``, ``..._left_the_approver_group_...``, ``..._was_deleted_...``,
   ``test_one_lapsed_approval_of_two_sends_a_critical_call_back_for_two_again``; README.

Checked and holding:
- The same person never approves a version twice: a second approval by the same user (service, REST after the
  service, after being renamed) is refused while it would count; an edit counts as its editor's approval, and the
  editor's approval of their own edit adds nothing (a critical call still needs a second, distinct approver).
- The requester never approves their own call: REST answers 403, the admin's *Approve selected* with their own
  call among the rows ticked reports it and leaves it pending (the other row is approved).
- An approval whose giver still stands is not sent back (no extra round), and a call never held runs with no read.
- Send-back does not loop or lose attempts: a call sent back for a lapsed approval runs as attempt 1 after the new
  round; a rule raised, lowered and raised again sends back only while it asks more than the call was released on.
- Tenant scoping: the REST queue lists only the caller's tenants' requests, another tenant's request answers 404;
  the admin desk lists only theirs, another tenant's page is not shown and *Approve selected* with its id decides
  nothing of it.
- An external compensation's retry (review ez) is asked anew when an approval it had lapsed: it reads the same
  ``approval_no_longer_suffices`` (``toolhub.sagas.compensating._may_ask_again``); outside a governance scope the
  approvers are judged on a fresh stamp read.
"""

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest, ApprovalRule, ApprovalStatus
from approvals.services import approval_approve
from tests.approvals.conftest import (  # noqa: F401 - fixtures, registered by being imported here
    Hold,
    hold,
    third_operator,
)
from tests.approvals.released import released_not_run, run_held, sent_back
from tests.helpers import RequestCall
from toolhub.exceptions import DecisionNotAllowedError
from toolhub.models import AuditEvent, CallStatus, Tenant, TenantMembership, ToolCall, ToolGroup

pytestmark = pytest.mark.django_db

Settle = Callable[..., Any]


def test_an_approval_whose_giver_was_deactivated_before_the_worker_runs_does_not_release(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Settle,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: an approver deactivated after approving, before a worker claimed the call: the worker ran it on their
    approval (``approval_shortfall`` judged only the rules' count, never the approvers' standing).

    Expect: the worker runs nothing and sends the call back for a new round (the claim given back), its event naming
    whose approval no longer counts; another approver's approval then runs it, as attempt 1.
    """
    request = hold()
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    operator.is_active = False
    operator.save(update_fields=["is_active"])
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert call.status == CallStatus.PENDING_APPROVAL, call.status
    assert call.attempts == 0
    reason = sent_back(call.id)["reason"]
    assert "the approval of operator no longer counts" in reason and "0 of the 1" in reason, reason
    request.refresh_from_db()
    assert (request.status, request.round, request.required_approvals) == (ApprovalStatus.PENDING, 2, 1)
    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=2)
    call.refresh_from_db()
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)


def test_an_approval_whose_giver_left_the_tenant_before_the_worker_runs_does_not_release(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: an approver removed from the call's tenant after approving: the worker ran the call on their approval.

    Expect: the call goes back to the desk; nothing ran.
    """
    request = hold()
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    TenantMembership.objects.filter(user=operator).delete()
    run_held(callbacks, django_capture_on_commit_callbacks)
    assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.PENDING_APPROVAL


def test_an_approval_whose_giver_left_the_approver_group_before_the_worker_runs_does_not_release(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: an approver removed from the tool group's approver group after approving: the call still ran.

    Expect: it goes back to the desk; the remaining member of the group may approve it.
    """
    treasury = Group.objects.create(name="treasury-fj")
    treasury.user_set.add(operator, second_operator)
    ToolGroup.objects.create(name="payments-fj", extra_tools=["risky_effect"], approver_group=treasury)
    request = hold()
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    treasury.user_set.remove(operator)
    run_held(callbacks, django_capture_on_commit_callbacks)
    assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.PENDING_APPROVAL


def test_an_approval_whose_giver_was_deleted_before_the_worker_runs_does_not_release(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: an approver's account deleted after approving (their decision's ``decided_by`` emptied): the call ran.

    Expect: it goes back to the desk, the event naming the approval by the name it was given under.
    """
    request = hold()
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    operator.delete()
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert call.status == CallStatus.PENDING_APPROVAL
    assert "the approval of operator no longer counts" in sent_back(call.id)["reason"]


def test_one_lapsed_approval_of_two_sends_a_critical_call_back_for_two_again(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    third_operator: User,  # noqa: F811 - the fixture
    committed: Settle,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: a critical call released by two approvers ran when one of them was deactivated before the worker
    claimed it: one standing approver released a call that needs two distinct ones.

    Expect: sent back, needing two again (one of two still counts); the standing approver and a third release it.
    """
    request = hold(approvers=2)
    committed(approval_approve, request_id=request.pk, user=operator, expected_round=1)
    callbacks = released_not_run(request, second_operator, django_capture_on_commit_callbacks)
    operator.is_active = False
    operator.save(update_fields=["is_active"])
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert call.status == CallStatus.PENDING_APPROVAL
    assert "1 of the 2" in sent_back(call.id)["reason"]
    request.refresh_from_db()
    assert request.required_approvals == 2 and request.round == 2
    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=2)
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.PENDING_APPROVAL  # one of two
    committed(approval_approve, request_id=request.pk, user=third_operator, expected_round=2)
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.SUCCEEDED


def test_an_approval_whose_giver_still_stands_runs_without_a_new_round(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): a governance change that leaves the approver standing (another user deactivated) sends
    nothing back: the call runs in its first round."""
    request = hold()
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    second_operator.is_active = False
    second_operator.save(update_fields=["is_active"])
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)
    assert not AuditEvent.objects.filter(call_id=call.id, event_type="call.pending_approval", actor__startswith="w")


def test_the_same_person_never_approves_a_version_twice(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    committed: Settle,
) -> None:
    """Expect (holds): a second approval by the same user is refused (service, REST, after a rename); the call waits."""
    request = hold(approvers=2)
    committed(approval_approve, request_id=request.pk, user=operator, expected_round=1)
    with pytest.raises(DecisionNotAllowedError):
        approval_approve(request_id=request.pk, user=operator, expected_round=1)
    client = APIClient()
    client.force_authenticate(operator)
    response = client.post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
    assert response.status_code == 403, response.content
    operator.username = "operator-renamed"
    operator.save(update_fields=["username"])
    with pytest.raises(DecisionNotAllowedError):
        approval_approve(request_id=request.pk, user=User.objects.get(pk=operator.pk), expected_round=1)
    assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.PENDING_APPROVAL


def test_an_editor_approving_their_own_edit_adds_nothing(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Settle,
) -> None:
    """Expect (holds): on a critical call, an edit is its editor's one approval of the new round; the editor's
    approval after it is refused, the earlier approval of the old version no longer counts, a distinct second
    approver releases the edited version."""
    request = hold(approvers=2)
    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=1)
    committed(approval_approve, request_id=request.pk, user=operator, arguments={"note": "pay 10"}, expected_round=1)
    request.refresh_from_db()
    assert request.round == 2 and ToolCall.objects.get(pk=request.call_id).status == CallStatus.PENDING_APPROVAL
    with pytest.raises(DecisionNotAllowedError):
        approval_approve(request_id=request.pk, user=operator, expected_round=2)
    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=2)
    call = ToolCall.objects.get(pk=request.call_id)
    assert (call.status, call.arguments) == (CallStatus.SUCCEEDED, {"note": "pay 10"})


def test_the_requester_approves_their_own_call_through_no_path(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    alice: User,
) -> None:
    """Expect (holds): a requester who may decide approvals is refused by REST (403) and by *Approve selected* with
    their own call among the rows (reported, left pending; the other row is approved)."""
    operator_group = Group.objects.get(name="operators")
    alice.groups.add(operator_group)
    alice.is_staff = True
    alice.save(update_fields=["is_staff"])
    own, other = hold("own call"), hold("other call", user=operator)
    client = APIClient()
    client.force_authenticate(alice)
    response = client.post(f"/api/v1/approvals/{own.pk}/approve/", {"round": 1}, format="json")
    assert response.status_code == 403, response.content
    browser = Client()
    browser.force_login(alice)
    selected = {"action": "approve_selected", "_selected_action": [own.pk, other.pk]}
    confirmation = browser.post("/admin/approvals/approvalrequest/", selected).content.decode()
    marks = _hidden(confirmation, "marks")
    response = browser.post(
        "/admin/approvals/approvalrequest/", {**selected, "apply": "yes", "comment": "ok", "marks": marks}, follow=True
    )
    body = response.content.decode()
    assert "You started this call" in body, body[-3000:]
    assert ApprovalRequest.objects.get(pk=own.pk).status == ApprovalStatus.PENDING
    assert ApprovalRequest.objects.get(pk=other.pk).status == ApprovalStatus.APPROVED


def _hidden(page: str, name: str) -> str:
    import re

    match = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', page)
    assert match, f"no hidden {name} on the page"
    return match.group(1)


def test_a_rule_raised_lowered_and_raised_again_sends_back_only_while_it_asks_more(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    third_operator: User,  # noqa: F811 - the fixture
    committed: Settle,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): a call released on one approval, sent back for a rule raised to two; the rule lowered and a
    second round released on two; the rule raised again to two asks nothing more: it runs, as attempt 1."""
    request = hold("pay fj")
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    rule = ApprovalRule.objects.create(
        name="two for fj",
        tool_name="risky_effect",
        argument="note",
        operator="==",
        value="pay fj",
        required_approvals=2,
    )
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert (call.status, call.attempts) == (CallStatus.PENDING_APPROVAL, 0)
    rule.required_approvals = 1
    rule.save()
    request.refresh_from_db()
    assert request.required_approvals == 2  # never fewer than it needed
    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=2)
    request.refresh_from_db()
    callbacks = released_not_run(request, third_operator, django_capture_on_commit_callbacks)
    rule.required_approvals = 2
    rule.save()
    run_held(callbacks, django_capture_on_commit_callbacks)
    call.refresh_from_db()
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)


def test_the_rest_queue_is_scoped_to_the_callers_tenants(
    request_call: RequestCall,
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    other_tenant: Tenant,
) -> None:
    """Expect (holds): another tenant's pending request is neither listed nor readable nor decidable (404)."""
    bob = User.objects.create_user("bob-fj", "bob@example.com", "bob-password")
    TenantMembership.objects.create(user=bob, tenant=other_tenant)
    ours = hold()
    theirs = ApprovalRequest.objects.get(call=request_call("risky_effect", {"note": "globex"}, bob, tenant="globex"))
    client = APIClient()
    client.force_authenticate(operator)
    listed = client.get("/api/v1/approvals/?status=pending").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["id"] for row in rows] == [ours.pk]
    assert client.get(f"/api/v1/approvals/{theirs.pk}/").status_code == 404
    assert client.post(f"/api/v1/approvals/{theirs.pk}/approve/", {"round": 1}, format="json").status_code == 404


def test_the_admin_desk_is_scoped_to_the_operators_tenants(
    request_call: RequestCall,
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    other_tenant: Tenant,
) -> None:
    """Expect (holds): the desk lists only the operator's tenants' requests; another tenant's page answers 404 and
    *Approve selected* with its id posted approves nothing of it."""
    bob = User.objects.create_user("bob-fj2", "bob2@example.com", "bob-password")
    TenantMembership.objects.create(user=bob, tenant=other_tenant)
    ours = hold()
    theirs = ApprovalRequest.objects.get(call=request_call("risky_effect", {"note": "globex"}, bob, tenant="globex"))
    browser = Client()
    browser.force_login(operator)
    desk = browser.get("/admin/approvals/approvalrequest/").content.decode()
    assert f"/admin/approvals/approvalrequest/{ours.pk}/change/" in desk
    assert f"/admin/approvals/approvalrequest/{theirs.pk}/change/" not in desk
    assert browser.get(f"/admin/approvals/approvalrequest/{theirs.pk}/change/").status_code in (302, 404)
    selected = {"action": "approve_selected", "_selected_action": [theirs.pk]}
    browser.post("/admin/approvals/approvalrequest/", selected)
    browser.post("/admin/approvals/approvalrequest/", {**selected, "apply": "yes", "comment": "x", "marks": ""})
    assert ApprovalRequest.objects.get(pk=theirs.pk).status == ApprovalStatus.PENDING
