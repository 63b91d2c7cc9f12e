"""Review of 2026-12-05 (at): people's standing changed by an administrator while their work is in flight.

Found (fixed):

1. Deleting a membership cancelled at once the runs of the member in that tenant (withdrawing their held and
   queued calls), but moving it did not: an administrator who edits alice's membership from acme to globex (the
   membership change page offers both the user and the tenant) removes her from acme, yet her acme run stayed
   ``waiting`` with its approval request pending on the desk, to be decided, until the loop's own check after a
   decision. Likewise the standing someone holds by permission: a platform user acting in a tenant they are no
   member of through ``toolhub.cross_tenant`` given by a group kept their runs there going when removed from
   the group, or when the group lost the permission. Fixed in ``agents_app.receivers``: a membership saved with
   another user or tenant, and a change of a user's groups or permissions or of a group's permissions, cancel
   (``runs_cancel_without_standing``) the runs of everyone whose standing it may have taken, as a deletion does.
2. An external tool's call held for approval and approved after its requester left the tenant (or was
   deactivated, or lost the grant) went to ``awaiting_result``: a worker's call is checked again where it
   executes, but an external call has no worker, and its release hands it to the outside system that acts on it
   (a back office sending the wire) with nothing checked. Fixed: ``toolhub.waiting.tool_call_release`` checks an
   external call as a worker checks what it runs (``toolhub.execution_checks.refusal_at_execution``, moved out of
   ``toolhub.execution`` so both use it) and denies it with the reason (``pending_approval`` -> ``denied``).

Checked and found holding (no test here; see tests/agents/test_run_cancel.py, probes 2026-12-04 and 2026-12-05 k):
deactivating, deleting or removing a member cancels their runs with ``governance`` as actor and the reason
audited; a call held or queued for someone who left is denied where it executes (``_standing_refusal``), and a
deleted user's call is judged by the id its context recorded; a signal-less change (bulk update, raw SQL) is
caught by the loop before every model turn; approvals given in a two-approver round count only while their giver
still stands (``ApproverStanding``), judged under the request's lock; REST and MCP tokens and sessions of a
deactivated user are refused per request (MCP is stateless); a saga's compensations of their steps still run and
are never withdrawn; a deleted tenant's memberships cascade (their runs there are cancelled) and its slug is
retired; a tenant's slug cannot change; a deleted approver's approval (``decided_by`` emptied) no longer counts; a
paused OpenAI-Agents run is resumed only by its user within their tenants as they stand (an inactive user has no
tenant scope), and its held calls are judged again where they execute.

Seen and not fixed: a deleted user's paused OpenAI-Agents run stays ``paused`` with no user (nobody may resume it,
the admin page is read-only, its held calls expire on the desk): a dead record, nothing runs from it.
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User

from agents_app.models import Agent, AgentRun, RunStatus, StopReason
from agents_app.services import agent_create
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.agents.conftest import start_run  # noqa: F401 - a fixture, registered by being imported here
from tests.security_review.conftest import client_for
from toolhub import Tool, registry
from toolhub.models import AuditEvent, CallStatus, Tenant, TenantMembership, ToolCall

pytestmark = pytest.mark.django_db

HELD_THEN_EFFECT = [
    {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]},
    {"tool_calls": [{"name": "record_effect", "arguments": {"note": "after"}}]},
    {"content": "done"},
]


def _waiting_run(start_run: Any, user: User, tenant: str = "acme") -> AgentRun:  # noqa: F811
    agent: Agent = agent_create(
        name=f"held-{tenant}",
        provider="scripted",
        tools=["risky_effect", "record_effect"],
        tenant=tenant,
        script=HELD_THEN_EFFECT,
    )
    run = start_run(agent, user, context={"tenant": tenant})
    assert run.status == RunStatus.WAITING
    return run


def _assert_cancelled_by_governance(run: AgentRun) -> None:
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == (RunStatus.CANCELLED, StopReason.CANCELLED)
    assert run.error.startswith("Cancelled by governance:")
    assert ApprovalRequest.objects.get(call__run_id=run.pk).status == ApprovalStatus.CANCELLED
    assert AuditEvent.objects.filter(run_id=run.pk, event_type="run.cancelled", actor="governance").exists()


def test_moving_a_membership_to_another_tenant_cancels_the_runs_left_behind(
    start_run: Any,  # noqa: F811
    django_capture_on_commit_callbacks: Any,
    alice: User,
    other_tenant: Tenant,
) -> None:
    """Found: a membership edited from acme to globex left alice's acme run waiting, its request on the desk.

    Expect: as a deletion does, the move cancels her acme run at once and withdraws its held call.
    """
    run = _waiting_run(start_run, alice)
    membership = TenantMembership.objects.get(user=alice, tenant__slug="acme")

    with django_capture_on_commit_callbacks(execute=True):
        membership.tenant = other_tenant
        membership.save()

    _assert_cancelled_by_governance(run)
    assert "no longer belongs to tenant 'acme'" in run.error


def test_a_membership_given_to_someone_else_cancels_the_former_members_runs(
    start_run: Any,  # noqa: F811
    django_capture_on_commit_callbacks: Any,
    alice: User,
    carol: User,
    other_tenant: Tenant,
) -> None:
    """Found: a membership whose user was changed from alice to someone else left alice's acme run going.

    Expect: alice, no longer in acme, has her acme run cancelled at once.
    """
    run = _waiting_run(start_run, alice)
    TenantMembership.objects.filter(user=carol).delete()
    membership = TenantMembership.objects.get(user=alice, tenant__slug="acme")

    with django_capture_on_commit_callbacks(execute=True):
        membership.user = carol
        membership.save()

    _assert_cancelled_by_governance(run)


def _platform_member(other_tenant: Tenant) -> tuple[User, Group]:
    """Someone of globex who acts in every tenant through a group holding ``toolhub.cross_tenant``."""
    platform = Group.objects.create(name="review-at-platform")
    platform.permissions.add(Permission.objects.get(codename="cross_tenant"))
    user = User.objects.create_user("review-at-platform-user", password="x")
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    user.groups.add(platform)
    return User.objects.get(pk=user.pk), platform


def test_removing_someone_from_the_group_that_let_them_act_everywhere_cancels_their_runs_elsewhere(
    start_run: Any,  # noqa: F811
    django_capture_on_commit_callbacks: Any,
    tenant: Tenant,
    other_tenant: Tenant,
) -> None:
    """Found: removed from the group giving ``toolhub.cross_tenant``, a platform user's acme run stayed waiting.

    Expect: their acme run (a tenant they are no member of) is cancelled at once; their globex run goes on.
    """
    user, platform = _platform_member(other_tenant)
    in_acme, in_globex = _waiting_run(start_run, user, "acme"), _waiting_run(start_run, user, "globex")

    with django_capture_on_commit_callbacks(execute=True):
        user.groups.remove(platform)

    _assert_cancelled_by_governance(in_acme)
    assert AgentRun.objects.get(pk=in_globex.pk).status == RunStatus.WAITING


def test_a_group_losing_the_permission_cancels_its_members_runs_where_they_no_longer_stand(
    start_run: Any,  # noqa: F811
    django_capture_on_commit_callbacks: Any,
    tenant: Tenant,
    other_tenant: Tenant,
) -> None:
    """Found: ``toolhub.cross_tenant`` taken from the group left its member's acme run waiting for a decision.

    Expect: the run is cancelled at once, its held call withdrawn.
    """
    user, platform = _platform_member(other_tenant)
    run = _waiting_run(start_run, user, "acme")

    with django_capture_on_commit_callbacks(execute=True):
        platform.permissions.clear()

    _assert_cancelled_by_governance(run)


def test_a_permission_taken_from_the_user_directly_cancels_their_runs_where_they_no_longer_stand(
    start_run: Any,  # noqa: F811
    django_capture_on_commit_callbacks: Any,
    other_tenant: Tenant,
    tenant: Tenant,
) -> None:
    """Found: ``toolhub.cross_tenant`` removed from a user's own permissions left their acme run going.

    Expect: the run is cancelled at once.
    """
    user = User.objects.create_user("review-at-direct", password="x")
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    cross = Permission.objects.get(codename="cross_tenant")
    user.user_permissions.add(cross)
    run = _waiting_run(start_run, User.objects.get(pk=user.pk), "acme")

    with django_capture_on_commit_callbacks(execute=True):
        user.user_permissions.remove(cross)

    _assert_cancelled_by_governance(run)


def test_a_group_emptied_of_its_members_cancels_their_runs_where_they_no_longer_stand(
    start_run: Any,  # noqa: F811
    django_capture_on_commit_callbacks: Any,
    tenant: Tenant,
    other_tenant: Tenant,
) -> None:
    """Found: a group giving ``toolhub.cross_tenant`` emptied of its members left their acme runs waiting.

    Expect: every former member's run where they no longer stand is cancelled at once.
    """
    user, platform = _platform_member(other_tenant)
    run = _waiting_run(start_run, user, "acme")

    with django_capture_on_commit_callbacks(execute=True):
        platform.user_set.clear()

    _assert_cancelled_by_governance(run)


# --- an approved external call of someone who left -------------------------------------------------------------

REVIEW_AT_WIRE = Tool.external(
    "review_at_wire",
    "Send a wire (done by the bank's back office, which posts the result).",
    {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
    risk="high",
)


def test_an_external_call_approved_after_its_requester_left_does_not_go_out(
    alice: User, tenant: Tenant, acme_operator: User
) -> None:
    """Found: an external tool's call approved after its requester left the tenant went to ``awaiting_result``.

    A worker's call is checked again where it executes (grants, the tool, the user's standing); an external
    tool's call has no worker: its release hands it to the outside system that acts on it, and nothing was
    checked there, so the back office was asked to send a wire for someone no longer in acme.

    Expect: released, it is checked as a worker would check it: denied, with the reason, never awaiting a result.
    """
    with registry.temporarily(REVIEW_AT_WIRE):
        held = client_for(alice).post(
            "/api/v1/calls/", {"tool": "review_at_wire", "arguments": {"amount": 9}}, format="json"
        )
        assert held.status_code == 202, held.content
        assert held.json()["status"] == CallStatus.PENDING_APPROVAL
        TenantMembership.objects.filter(user=alice, tenant=tenant).delete()
        approval = ApprovalRequest.objects.get(call_id=held.json()["id"]).pk

        approved = client_for(acme_operator).post(f"/api/v1/approvals/{approval}/approve/", {"round": 1}, format="json")

    assert approved.status_code == 200, approved.content
    call = ToolCall.objects.get(pk=held.json()["id"])
    assert call.status == CallStatus.DENIED
    assert "no longer belongs to tenant 'acme'" in call.error
    assert AuditEvent.objects.filter(call_id=call.pk, event_type="call.denied").exists()
