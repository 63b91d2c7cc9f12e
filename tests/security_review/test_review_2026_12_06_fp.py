"""Review 2026-12-06 fp: the worker's lapsed-approval check (review fj) and its fast path (``approved_under``).

Each finding's test failed on the reviewed code (main at fe8d6ff) and passes now.

Findings:

1. An approval that a tool group's restriction made since no longer covers still ran the call: the worker judged
   the approvals an approved call was released on (``ApproverStanding(cached=True)``) with the approver restrictions
   the request copied when it opened only (``further_restrictions`` adds those of now only while a request is
   pending), so a tool added to a group restricting approvers, or its group given an approver group or permission
   (or another one) between the release and the worker's claim, let the call run on the word of an operator who could
   not give it now, though the README says the worker sends back what governance asks more of "the same changes,
   made while it sat in the queue" and a pending request's deciders are held to them.
   ``ApproverStanding(released=True)`` (the worker's, ``approvals.shortfall``) now holds the givers to the
   restrictions of the tool's groups now (``further_restrictions(governing_now=True)``); the call goes back to the
   desk for a new round. Tests:
   ``test_a_tool_group_restricting_approvers_after_release_sends_the_call_back``,
   ``test_a_group_given_an_approver_permission_after_release_sends_the_call_back``,
   ``test_a_group_whose_approvers_changed_after_release_sends_the_call_back``; README.

Checked and holding:
- The fast path never skips a lapse: every change that makes an approval lapse stamps governance (the triggers on
  auth_user's active and superuser bits, groups, user and group permissions, memberships, tool groups, rules,
  tenants): a deactivation by a bulk update or raw SQL, the decide permission taken from a group or from the user,
  their groups cleared, a membership moved to another tenant, a superuser's bit cleared by a bulk update each send
  the call back; ``approved_under`` equals the stamp at release and the stamp moved after the change. ``is_staff``
  is not watched on UPDATE, but no decider's standing reads it (the API decides without it), so the fast path and
  the full read agree.
- The worker's stamp is current: a single claim checks the process's cached stamp in its UPDATE (a moved stamp fails
  it and the claim reads the stamp again: a worker whose cache still holds the release's stamp after a raw-SQL
  deactivation judges the approvals under the new one), a claim whose stamp moved while it waited for its locks sets
  ``governance_moved`` (PostgreSQL) and the re-check reads the stamp, a batch's re-checks read it (test); the
  last claim try (unchecked) reads it fresh first. Only another thread of the same process putting an older stamp
  back as the process's cache (``_snapshot`` of a stamp it read before the change) between a claim and its re-check
  could make the re-check use the release's stamp again; not probed: a race between threads, left noted.
- ``approved_under`` is never stale: only ``_release`` sets it (``tool_call_release``), a call sent back and approved
  again keeps the new release's stamp and runs, a call never released carries none (read in full); no path copies a
  call row (retries go through the pipeline as new calls); a compensation retried or a call requeued by the
  reconciler keeps it, and is read in full once anything changed since (stamps never repeat: a PostgreSQL sequence,
  64-bit random numbers on SQLite) (read in the code). An external tool's release checks what a worker would, the
  approvals having just been judged; its compensation's retry reads them outside any scope (a fresh stamp: in full).
- An approver unstaffed by a bulk update (``is_staff`` is not a watched column) still counts, in the fast path and
  the full read alike: standing never read it (the REST API decides without the console).
- A restriction the approver still meets, a new one they meet, or one lifted after the release sends nothing back.
- The send-back's reason is bounded: three names at most (150 characters each) and a count of the rest, under 1,000
  characters (the reopened request's reason cut at 500); it names usernames, never an argument (a sensitive value of
  the call is in neither the event nor the request).
"""

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection

from approvals.models import ApprovalRequest, ApprovalRule, ApprovalStatus
from approvals.services import approval_approve
from tests.approvals.conftest import (  # noqa: F401 - fixtures, registered by being imported here
    Hold,
    hold,
    secret_tool,
    third_operator,
)
from tests.approvals.released import released_not_run, run_held, sent_back
from tests.helpers import RequestCall
from toolhub.governance import governance_stamp
from toolhub.models import CallStatus, Tenant, TenantMembership, ToolCall, ToolGroup

pytestmark = pytest.mark.django_db

Settle = Callable[..., Any]


def test_a_tool_group_restricting_approvers_after_release_sends_the_call_back(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Settle,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: the tool put in a group whose approvers are treasury after the operator (not in treasury) approved it,
    before a worker claimed it: the call ran on their approval (the worker read the restrictions the request copied
    when it opened only).

    Expect: the worker runs nothing and sends it back, naming whose approval no longer counts; a treasury member's
    approval then runs it.
    """
    treasury = Group.objects.create(name="treasury-fp")
    treasury.user_set.add(second_operator)
    request = hold()
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    ToolGroup.objects.create(name="payments-fp", extra_tools=["risky_effect"], approver_group=treasury)
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert call.status == CallStatus.PENDING_APPROVAL, call.status
    assert "the approval of operator no longer counts" in sent_back(call.id)["reason"]
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=request.round)
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.SUCCEEDED


def test_a_group_given_an_approver_permission_after_release_sends_the_call_back(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: the tool's group (restricting nobody when the call was held) given an approver permission the approver
    lacks after they approved: the call ran.

    Expect: it goes back to the desk.
    """
    ToolGroup.objects.create(name="payments-fp", extra_tools=["risky_effect"])
    request = hold()
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    ToolGroup.objects.filter(name="payments-fp").update(approver_permission="approvals.add_approvalrule")
    run_held(callbacks, django_capture_on_commit_callbacks)
    assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.PENDING_APPROVAL


def test_a_restriction_lifted_or_met_after_release_sends_nothing_back(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): a restriction the approver met at release and still meets, a new one they meet too, or one
    lifted since, sends nothing back: each call runs in its first round."""
    treasury = Group.objects.create(name="treasury-fp")
    treasury.user_set.add(operator)
    group = ToolGroup.objects.create(name="payments-fp", extra_tools=["risky_effect"], approver_group=treasury)
    first, second = hold("pay 1"), hold("pay 2")
    callbacks = released_not_run(first, operator, django_capture_on_commit_callbacks)
    ToolGroup.objects.create(name="audit-fp", extra_tools=["risky_effect"], approver_group=treasury)
    run_held(callbacks, django_capture_on_commit_callbacks)
    callbacks = released_not_run(second, operator, django_capture_on_commit_callbacks)
    group.approver_group = None
    group.save()
    ToolGroup.objects.filter(name="audit-fp").delete()
    run_held(callbacks, django_capture_on_commit_callbacks)
    for request in (first, second):
        call = ToolCall.objects.get(pk=request.call_id)
        assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1), request


def _deactivated_by_update(user: User) -> None:
    User.objects.filter(pk=user.pk).update(is_active=False)


def _deactivated_by_sql(user: User) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {User._meta.db_table} SET is_active = %s WHERE id = %s", [False, user.pk])


def _decide_permission_taken_from_the_group(user: User) -> None:
    Group.objects.get(name="operators").permissions.remove(_decide_permission())


def _groups_cleared(user: User) -> None:
    user.groups.clear()


def _membership_moved(user: User) -> None:
    elsewhere = Tenant.objects.create(slug="elsewhere-fp", name="Elsewhere")
    TenantMembership.objects.filter(user=user).update(tenant=elsewhere)


def _decide_permission() -> Permission:
    return Permission.objects.get(content_type__app_label="approvals", codename="decide_approvalrequest")


@pytest.mark.parametrize(
    "change",
    [
        _deactivated_by_update,
        _deactivated_by_sql,
        _decide_permission_taken_from_the_group,
        _groups_cleared,
        _membership_moved,
    ],
)
def test_every_change_that_lapses_an_approval_stamps_governance_and_sends_the_call_back(
    change: Callable[[User], None],
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): the fast path (``approved_under`` equal to the worker's stamp: nothing read) never skips a
    lapse: a deactivation by a bulk update or raw SQL, the decide permission taken from the approver's group, their
    groups cleared, their membership moved to another tenant each stamp a new governance version (the triggers), so
    the worker reads the approvals and sends the call back."""
    request = hold()
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert call.approved_under is not None and call.approved_under == _stamp()
    change(operator)
    assert _stamp() != call.approved_under
    run_held(callbacks, django_capture_on_commit_callbacks)
    call.refresh_from_db()
    assert (call.status, call.attempts) == (CallStatus.PENDING_APPROVAL, 0)
    assert "the approval of operator no longer counts" in sent_back(call.id)["reason"]


def _stamp() -> int | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT stamp FROM toolhub_governanceversion WHERE id = 1")
        row = cursor.fetchone()
    return row[0] if row else None


def test_a_direct_permission_or_the_superuser_bit_taken_back_sends_the_call_back(
    hold: Hold,  # noqa: F811 - the fixture
    tenant: Tenant,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): an approver whose decide permission was their own (``user_permissions``) and a superuser
    outside the tool group's approvers each lapse when it is taken back (the permission removed, the bit cleared by a
    bulk update): both stamp governance, and the worker sends each call back."""
    direct = User.objects.create_user("direct-fp", "direct@example.com", "direct-password")
    direct.user_permissions.add(_decide_permission())
    TenantMembership.objects.create(user=direct, tenant=tenant)
    root = User.objects.create_superuser("root-fp", "root@example.com", "root-password")
    treasury = Group.objects.create(name="treasury-fp")
    first = hold("pay 1")
    callbacks = released_not_run(first, direct, django_capture_on_commit_callbacks)
    direct.user_permissions.remove(_decide_permission())
    run_held(callbacks, django_capture_on_commit_callbacks)
    ToolGroup.objects.create(name="payments-fp", extra_tools=["risky_effect"], approver_group=treasury)
    second = hold("pay 2")
    callbacks = released_not_run(second, root, django_capture_on_commit_callbacks)
    User.objects.filter(pk=root.pk).update(is_superuser=False)
    run_held(callbacks, django_capture_on_commit_callbacks)
    for request in (first, second):
        assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.PENDING_APPROVAL, request


def test_the_stamp_kept_on_a_call_is_its_latest_release(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Settle,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): a call sent back (an approval lapsed) and approved again keeps the stamp of its new release,
    never the first one's, and runs; a call held for approval and never released carries none."""
    request = hold()
    assert ToolCall.objects.get(pk=request.call_id).approved_under is None
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    first = ToolCall.objects.get(pk=request.call_id).approved_under
    _deactivated_by_update(operator)
    run_held(callbacks, django_capture_on_commit_callbacks)
    request.refresh_from_db()
    callbacks = released_not_run(request, second_operator, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert call.approved_under == _stamp() and call.approved_under != first
    run_held(callbacks, django_capture_on_commit_callbacks)
    call.refresh_from_db()
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)


def test_the_send_back_reason_is_bounded_and_names_no_secret(
    request_call: RequestCall,
    secret_tool: None,  # noqa: F811 - the fixture
    alice: User,
    tenant: Tenant,
    committed: Settle,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): five lapsed approvals of a call needing five, their givers' names 150 characters long: the
    reason names three and counts the rest (under 1,000 characters; the request's reason is cut at 500), and
    neither the event nor the request carries the call's sensitive argument."""
    operators = Group.objects.get_or_create(name="operators")[0]
    operators.permissions.add(_decide_permission())
    givers = []
    for index in range(5):
        user = User.objects.create_user(f"{index}" + "o" * 149, f"o{index}@example.com", "operator-password")
        user.groups.add(operators)
        TenantMembership.objects.create(user=user, tenant=tenant)
        givers.append(user)
    ApprovalRule.objects.create(name="five fp", tool_name="rotate_secret", required_approvals=5)
    call = request_call("rotate_secret", {"username": "bob", "password": "hunter2-fp-secret"}, alice, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)
    for user in givers[:4]:
        committed(approval_approve, request_id=request.pk, user=user, expected_round=1)
    callbacks = released_not_run(request, givers[4], django_capture_on_commit_callbacks)
    User.objects.filter(pk__in=[user.pk for user in givers]).update(is_active=False)
    run_held(callbacks, django_capture_on_commit_callbacks)
    payload = sent_back(call.id)
    reason = payload["reason"]
    assert "and 2 more" in reason and "0 of the 5" in reason, reason
    assert len(reason) < 1000, len(reason)
    request.refresh_from_db()
    assert len(request.reason) <= 500
    assert "hunter2" not in json.dumps(payload) and "hunter2" not in request.reason


def test_an_approver_unstaffed_after_release_still_counts(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): ``is_staff`` cleared by a bulk update stamps nothing (not a watched column) and lapses
    nothing: no decider's standing reads it (the REST API decides without the console), so the call runs."""
    request = hold()
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    User.objects.filter(pk=operator.pk).update(is_staff=False)
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)


def test_a_group_whose_approvers_changed_after_release_sends_the_call_back(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: the tool's group, restricting approvers to treasury (the approver's group) when the call was held, handed
    to finance after the approval: the call ran on the word of an operator finance does not count (the request's
    copied restriction, treasury, was all the worker read).

    Expect: it goes back to the desk, as a pending request's treasury approval would no longer count.
    """
    treasury, finance = Group.objects.create(name="treasury-fp"), Group.objects.create(name="finance-fp")
    treasury.user_set.add(operator)
    group = ToolGroup.objects.create(name="payments-fp", extra_tools=["risky_effect"], approver_group=treasury)
    request = hold()
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    group.approver_group = finance
    group.save()
    run_held(callbacks, django_capture_on_commit_callbacks)
    assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.PENDING_APPROVAL


def test_a_worker_whose_cached_stamp_is_the_releases_reads_the_approvals_when_governance_moved(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): a worker process whose cache still holds the stamp the call was released under (it read none
    since) while a deactivation by raw SQL moved it: the claim's UPDATE checks that cached stamp and fails, the claim
    reads the stamp again, and the re-check judges the approvals under the new one: sent back, nothing ran."""
    request = hold()
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    released_under = ToolCall.objects.get(pk=request.call_id).approved_under
    _deactivated_by_sql(operator)
    assert governance_stamp(assume_current=True) == released_under != _stamp()
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert (call.status, call.attempts) == (CallStatus.PENDING_APPROVAL, 0)
    assert governance_stamp(assume_current=True) == _stamp()


def test_a_batch_claim_reads_the_approvals_of_each_call_it_runs(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): a worker claiming a batch (``WORKER_CLAIM_BATCH`` 2) checks no stamp in its claims, so each
    call's re-check reads the stamp: both calls released by an approver deactivated since go back to the desk."""
    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "WORKER_CLAIM_BATCH": 2}
    first, second = hold("pay 1"), hold("pay 2")
    callbacks = [
        *released_not_run(first, operator, django_capture_on_commit_callbacks),
        *released_not_run(second, operator, django_capture_on_commit_callbacks),
    ]
    _deactivated_by_sql(operator)
    run_held(callbacks, django_capture_on_commit_callbacks)
    for request in (first, second):
        call = ToolCall.objects.get(pk=request.call_id)
        assert (call.status, call.attempts) == (CallStatus.PENDING_APPROVAL, 0), request
