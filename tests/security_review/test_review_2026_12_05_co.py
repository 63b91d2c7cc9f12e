"""Review of 2026-12-05 (co): the lifecycle of governing objects, deleted or deactivated while work depends on them.

Each test fails on the reviewed code (main at 4cd7ff4) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A deleted tenant's trail could no longer be verified as its own: ``verify_audit --tenant acme`` answered "There
   is no tenant 'acme'; nothing was verified", and the whole trail's run neither recorded acme's result nor named
   acme in a problem of its chains, although its events stay (append-only) and its slug is retired precisely because
   rows still name it. Offboarding a customer is when their auditors most need the proof. Now the tenants whose
   trail is verified (``toolhub.audit_proof``) are the living and the retired ones (``RetiredTenantSlug``).
2. Deleting the Django group a tool group names as its only approvers (``approver_group``) lifted the restriction
   instead of keeping it: both ``ToolGroup.approver_group`` and a pending ``ApprovalRequest.approver_group`` were
   ``SET_NULL``, so a held payment that only treasury might decide became decidable by every operator of the
   tenant, and so did every later call of the group. Now a group is not deleted while a tool group names it as its
   approvers (``PROTECT``) or a pending request waits on it (``approvals.models.protect_pending``): the admin's
   delete page answers "Cannot delete group"; a decided request keeps its history as before (``SET_NULL``).
3. A saga step whose outcome became unknown (its worker died: ``needs_attention``) before any rollback vanished
   from the rollback once its tool left the code: ``hold_unknown_steps`` held only steps of tools registered now
   with a compensation, so the rollback undid the others and the saga read ``compensated`` over a step that may
   have moved money. Now such a step is held for an operator (the saga ``needs_attention``), its compensation
   naming no tool and saying the step's tool is no longer registered.
4. A paused OpenAI Agents SDK run (``PausedAgentRun``: the only record of which held calls an outside run waits
   for, and its conversation) could be deleted in the admin, by one row or "Delete selected", with nothing in the
   trail, though its page is documented read-only: its calls stayed on the desk to be decided for a run nobody can
   resume. Now its admin is read-only (``ReadOnlyMixin``) as the agent runs' is.
5. A deletion in the admin recorded only the row deleted, not the governance rows Django's cascade took with it:
   deleting the ``payments`` tool group also deleted acme's deny grant and the approval rule holding its payments,
   and the trail said only "tool group deleted"; likewise a tenant's grants, rules and memberships, a user's
   memberships and grants. Now ``GovernanceAudited`` records a ``governance.deleted`` event for every cascaded row
   of a governance-audited model, in that row's own tenants' chains, in the deletion's transaction.

Checked and holding (no test here):

- No foreign key reaches the trail: ``AuditEvent``, ``AuditChainHead``, ``AuditCheckpoint`` and verifications name
  tenants by slug, so no deletion (a tenant's in the admin included) cascades into them; a tenant with agents or
  model providers is not deleted at all (``PROTECT``); its memberships, grants and rules cascade, its slug is retired,
  and the whole trail's ``verify_audit`` still verifies its chains (now per tenant too, finding 1).
- People: a deactivated user's session (``ModelBackend.get_user``), API token and MCP calls (``token_owner`` reads
  ``is_active`` per request) are refused at the next request; ``tenant_scope`` is memoized on the request's user
  object only (Celery tasks and ``decider_as_now`` load fresh ones, the latter under the governance stamp).
  Removal, deactivation and deletion cancel runs and deny held or queued calls where they execute, and an approval
  counts only while its giver stands (reviews ac, at, au, bh).
- Tools: a queued or approved call whose tool left the code is refused where it executes ("no longer exists"); a
  recorded compensation whose compensating tool was removed fails visibly ("Unknown tool"), the saga
  ``needs_attention``; ``sync_tools`` keeps an operator's ``enabled=False`` on a tool that leaves and comes back;
  catalogue rows cannot be deleted in the admin; a disabled model provider or one bound to another tenant stops
  a run at its next turn (``adapter_for``); an agent with runs is not deleted (``PROTECT``), its tenant is fixed.
- Admin delete pages of tenant staff (memberships, grants, approval rules, agents, remote credentials): nothing of
  another tenant cascades from or protects these rows (``SET_NULL`` relations are not listed by Django), agents'
  runs stay in the agent's fixed tenant, and shared rows (tool groups, users, roles, tenants) are deleted only by
  people who cross the boundary.

Seen, not fixed: a succeeded step whose settle notification was lost is recorded by the next rollback only if its
tool is still registered with a compensation (``record_missing_steps``), and a saga with no row yet is started only
for such tools: whether a removed tool was compensable is not stored on its calls (a column is needed). The
"Cannot delete group" page of finding 2 says the user lacks the permission to delete approval requests (Django
lists a protected row of a model without delete permission that way) rather than naming the pending request.
"""

import io

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.models import ProtectedError

from approvals.deciders import approval_may_decide
from approvals.models import ApprovalRule, ApprovalStatus
from tests.approvals.conftest import Hold, hold  # noqa: F401 - a fixture, registered by being imported here
from tests.audit.conftest import owner_tampering
from tests.audit.test_console import make_call
from tests.helpers import console
from tests.sagas.test_services import _call, _compensations
from toolhub.adapters.openai_agents.models import PausedAgentRun
from toolhub.models import (
    AuditEvent,
    AuditVerification,
    CallStatus,
    Grant,
    GrantEffect,
    Tenant,
    ToolCall,
    ToolGroup,
)
from toolhub.sagas.models import Compensation, CompensationStatus, Saga, SagaStatus
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db


def _verify(*arguments: str) -> str:
    out = io.StringIO()
    call_command("verify_audit", "--no-progress", "--workers", "1", *arguments, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_a_deleted_tenants_trail_is_still_verified_as_its_own() -> None:
    """Found: once acme was deleted, ``verify_audit --tenant acme`` refused ("There is no tenant") and the whole
    trail's run kept no record of acme and named no problem as acme's. Expect: acme's chains verify by its retired
    slug, and a tampered event of acme's is reported as acme's, in acme's own record."""
    # given: acme with events of its own, then deleted (offboarded); its events stay
    for slug in ("acme", "globex"):
        Tenant.objects.create(slug=slug, name=slug)
        for _ in range(3):
            make_call(slug)
    Tenant.objects.filter(slug="acme").delete()
    acme_events = AuditEvent.objects.filter(tenant="acme").count()
    assert acme_events == 6

    # when / then: its own chains verify by the retired slug
    assert f"acme's chains verified: {acme_events} events, every chain intact" in _verify("--tenant", "acme")
    assert AuditVerification.objects.get(tenant="acme").ok

    # and a tampered event of acme's is acme's problem, in acme's record of the whole trail's run
    target = AuditEvent.objects.filter(tenant="acme").order_by("id").last()
    assert target is not None
    with owner_tampering(), connection.cursor() as cursor:
        cursor.execute("UPDATE toolhub_auditevent SET actor = 'someone else' WHERE id = %s", [target.pk])
    with pytest.raises(CommandError, match="does not verify") as failed:
        _verify()
    assert "acme's chain" in str(failed.value)
    newest = AuditVerification.objects.filter(tenant="acme").order_by("-id").first()
    assert newest is not None and not newest.ok and f"event #{target.pk}" in newest.problems


def test_deleting_the_approvers_group_never_lets_every_operator_decide(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    admin_user: User,
) -> None:
    """Found: deleting ``treasury`` (the payments group's only approvers) emptied the request's and the tool group's
    ``approver_group``, so operator (not in treasury) approved the held payment, and could every later one. Expect:
    the deletion is refused (the admin's delete page says it cannot delete, for the pending request), and operator
    still may not decide; once nothing pending or governing names it, the group is deleted."""
    # given treasury alone decides the payments group's calls, and one of alice's calls waits for it
    treasury = Group.objects.create(name="treasury")
    treasury.user_set.add(second_operator)
    payments = ToolGroup.objects.create(name="payments", extra_tools=["risky_effect"], approver_group=treasury)
    request = hold()
    assert request.approver_group == treasury
    assert approval_may_decide(request, User.objects.get(pk=operator.pk)) is not None

    # when a superuser deletes treasury
    page = console(admin_user).get(f"/admin/auth/group/{treasury.pk}/delete/").content.decode()
    with pytest.raises(ProtectedError):
        treasury.delete()

    # then the admin said what holds it, and the restriction still holds
    assert "Cannot delete group" in page and "approval request" in page
    request.refresh_from_db()
    assert request.approver_group_id == treasury.pk
    assert approval_may_decide(request, User.objects.get(pk=operator.pk)) is not None

    # once the request is decided and the tool group no longer names treasury, it goes (history kept, link emptied)
    type(request).objects.filter(pk=request.pk).update(status=ApprovalStatus.CANCELLED)
    payments.approver_group = None
    payments.save(update_fields=["approver_group"])
    treasury.delete()
    request.refresh_from_db()
    assert request.approver_group_id is None


@pytest.mark.django_db(transaction=True)
def test_an_unknown_step_whose_tool_left_the_code_is_held_not_forgotten(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: a ``book`` step whose worker died (``needs_attention``, before any rollback) was left out of the
    rollback once ``book`` was removed from the code: the other step was undone and the saga read ``compensated``.
    Expect: the unknown step is held for an operator, the saga ``needs_attention``, its error naming the tool."""
    from tests.sagas.sample_tools import TOOLS

    with registry.temporarily(*TOOLS):
        # given two booked steps of a direct saga, the second's outcome unknown (its worker died before recording)
        first = _call("book", {"item": "flight"}, saga="trip", user=alice)
        unknown = _call("book", {"item": "hotel"}, saga="trip", user=alice)
        ToolCall.objects.filter(pk=unknown.pk).update(status=CallStatus.NEEDS_ATTENTION)
        Compensation.objects.filter(step_call_id=unknown.pk).delete()  # as when it was never recorded

        # when book leaves the code (a deploy) and a later step fails, rolling the saga back
        monkeypatch.delitem(registry._tools, "book")
        _call("explode", {"reason": "no visa"}, saga="trip", user=alice)

    # then the first is undone and the unknown step is held, visibly, for an operator
    compensations = {c.step_call_id: c for c in _compensations("trip")}
    assert compensations[first.pk].status == CompensationStatus.SUCCEEDED
    held = compensations.get(unknown.pk)
    assert held is not None and held.status == CompensationStatus.HELD
    assert "'book' is no longer registered" in held.mapping_error
    assert Saga.objects.get(key="trip").status == SagaStatus.NEEDS_ATTENTION


def test_a_paused_sdk_run_is_not_deleted_in_the_admin(alice: User, admin_user: User) -> None:
    """Found: a superuser deleted alice's paused SDK run from its admin page (and "Delete selected" was offered),
    leaving its held calls on the desk for a run nobody could resume, with no trace in the trail. Expect: the page is
    read-only: the delete page answers 403, no delete action is offered, the row stays."""
    # given alice's SDK run paused on a held call
    paused = PausedAgentRun.objects.create(run_key="sdk-1", tenant="acme", user=alice, agent_name="sdk", state={})

    # when a superuser opens its delete page and posts it
    client = console(admin_user)
    url = f"/admin/openai_agents_adapter/pausedagentrun/{paused.pk}/delete/"
    shown, posted = client.get(url), client.post(url, {"post": "yes"})

    # then both are refused and the run stays; the list offers no bulk deletion
    assert (shown.status_code, posted.status_code) == (403, 403)
    assert PausedAgentRun.objects.filter(pk=paused.pk).exists()
    listing = client.get("/admin/openai_agents_adapter/pausedagentrun/").content.decode()
    assert "delete_selected" not in listing


def test_a_deletion_records_the_governance_rows_its_cascade_takes(admin_user: User) -> None:
    """Found: deleting the ``payments`` tool group in the admin also deleted acme's deny grant on it and the approval
    rule holding its calls (CASCADE), and the trail recorded only the group's deletion. Expect: one
    ``governance.deleted`` event per cascaded grant and rule, in acme's chain for acme's grant."""
    # given a tool group with a deny grant of acme's and an approval rule on it
    acme, _ = Tenant.objects.get_or_create(slug="acme", defaults={"name": "acme"})
    payments = ToolGroup.objects.create(name="payments", extra_tools=["risky_effect"])
    grant = Grant.objects.create(tool_group=payments, tenant=acme, effect=GrantEffect.DENY)
    rule = ApprovalRule.objects.create(name="payments-held", tool_group=payments)

    # when a superuser deletes the group in the admin
    response = console(admin_user).post(f"/admin/toolhub/toolgroup/{payments.pk}/delete/", {"post": "yes"})

    # then the grant and the rule are gone, and the trail says so, each in its own chains
    assert response.status_code == 302 and not Grant.objects.exists() and not ApprovalRule.objects.exists()
    deleted = AuditEvent.objects.filter(event_type="governance.deleted")
    recorded = {(event.payload["model"], event.payload["id"], event.tenant) for event in deleted}
    assert ("toolhub.grant", grant.pk, "acme") in recorded
    assert ("approvals.approvalrule", rule.pk, "") in recorded
    assert ("toolhub.toolgroup", payments.pk, "") in recorded
