"""Review of 2026-12-05 (bj): what an auditor relies on: the trail's coverage of governance changes.

Each test fails on the reviewed code (main at 2c4a08d) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. Grants, approval rules, tool groups and tenant memberships changed in the admin left no audit event: only
   Django's admin history (``LogEntry``: rows the application's role may update and delete, outside the hash
   chains, read by no tenant's auditor), though the README says "every transition, decision and operator change
   is a hash-chained AuditEvent" and these decide who may call what and who must approve it. Now each addition,
   change and deletion (change pages, ``list_editable``, "Delete selected") appends ``governance.added`` /
   ``governance.changed`` / ``governance.deleted`` (who, the row's values, before and after for a change) in the
   transaction that writes it, to the chains of every tenant the row was bound to before or after
   (``toolhub.admin_governance_audit.GovernanceAudited``).

Checked and found holding (no test here): events are appended under the head's lock in the statement (PostgreSQL)
or the transaction of the change they record (``audit._append_many`` refuses otherwise); reviews y, ac and probes
g, i, j, k, x hold the chain's tamper evidence (altered, inserted, reordered, deleted events, rewound heads,
forged or deleted checkpoints) and concurrent appends; the catalogue's operator changes (``catalogue.changed``),
exports (``calls.exported``, per tenant), acknowledgements and run cancellations are recorded with the actor.
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from tests.helpers import console
from tests.tenancy.conftest import make_user
from toolhub.models import AuditEvent, Grant, GrantEffect, Tenant, TenantMembership, ToolGroup

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme_developer(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-developer", tenant=tenant, staff=True, groups=(roles["developers"],))


def _grant_form(tenant: Tenant, **fields: Any) -> dict[str, Any]:
    return {"effect": "allow", "note": "", "tool_name": "debit", "tool_group": "", "tenant": tenant.pk, **fields}


def _events(kind: str, tenant: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(event_type=kind, tenant=tenant).order_by("id"))


def test_a_tenant_developers_grant_changes_are_in_the_tenants_trail(acme_developer: User, tenant: Tenant) -> None:
    """Found: acme's developer added a deny of ``debit`` for acme, flipped it to allow and deleted it in the
    admin; acme's trail held nothing of it. Expect: ``governance.added`` / ``changed`` / ``deleted`` in acme's
    chains, naming the developer, the grant and what changed."""
    browser = console(acme_developer)
    assert browser.post("/admin/toolhub/grant/add/", _grant_form(tenant, effect="deny")).status_code == 302
    grant = Grant.objects.get(tool_name="debit", tenant=tenant)
    changed = browser.post(f"/admin/toolhub/grant/{grant.pk}/change/", _grant_form(tenant, effect="allow"))
    assert changed.status_code == 302
    deleted = browser.post(
        "/admin/toolhub/grant/", {"action": "delete_selected", "_selected_action": [grant.pk], "post": "yes"}
    )
    assert deleted.status_code == 302 and not Grant.objects.filter(pk=grant.pk).exists()

    (added,) = _events("governance.added", "acme")
    assert added.actor == "user:acme-developer" and added.payload["model"] == "toolhub.grant"
    assert added.payload["values"]["effect"] == GrantEffect.DENY and added.payload["id"] == grant.pk
    (change,) = _events("governance.changed", "acme")
    assert change.payload["changes"] == {"effect": {"before": "deny", "after": "allow"}}
    (removal,) = _events("governance.deleted", "acme")
    assert removal.actor == "user:acme-developer" and removal.payload["values"]["effect"] == "allow"


def test_a_grant_moved_to_another_tenant_is_in_both_tenants_trails(
    superuser: User, tenant: Tenant, other_tenant: Tenant
) -> None:
    """Found: a grant moved from acme to globex left acme's auditors nothing of it. Expect: the change in both."""
    grant = Grant.objects.create(effect=GrantEffect.ALLOW, tool_name="debit", tenant=tenant)
    moved = console(superuser).post(f"/admin/toolhub/grant/{grant.pk}/change/", _grant_form(other_tenant))
    assert moved.status_code == 302
    for slug in ("acme", "globex"):
        (event,) = _events("governance.changed", slug)
        assert event.payload["changes"]["tenant_id"] == {"before": tenant.pk, "after": other_tenant.pk}


def test_an_approval_rule_switched_off_in_the_list_is_in_the_trail(superuser: User, tenant: Tenant) -> None:
    """Found: switching an approval rule off with the list's checkbox (``list_editable``) left no event, though it
    lets calls run without approval. Expect: ``governance.changed`` in acme's trail with ``enabled`` before/after."""
    from approvals.models import ApprovalRule

    rule = ApprovalRule.objects.create(name="big debits", tool_name="debit", tenant=tenant, priority=5)
    listed = console(superuser).post(
        "/admin/approvals/approvalrule/",
        {
            "form-TOTAL_FORMS": "1",
            "form-INITIAL_FORMS": "1",
            "form-0-id": rule.pk,
            "form-0-priority": "5",
            "_save": "Save",
        },
    )
    assert listed.status_code == 302
    rule.refresh_from_db()
    assert rule.enabled is False
    (event,) = _events("governance.changed", "acme")
    assert event.payload["changes"] == {"enabled": {"before": True, "after": False}}


def test_a_membership_removed_and_a_tool_group_changed_are_in_the_trail(superuser: User, tenant: Tenant) -> None:
    """Found: removing someone from acme, or changing a tool group's approvers, left no audit event. Expect:
    ``governance.deleted`` in acme's trail, and the group's change in the platform's chains (tenant "")."""
    member = make_user("leaver", tenant=tenant)
    membership = TenantMembership.objects.get(user=member, tenant=tenant)
    browser = console(superuser)
    removed = browser.post(f"/admin/toolhub/tenantmembership/{membership.pk}/delete/", {"post": "yes"})
    assert removed.status_code == 302
    (event,) = _events("governance.deleted", "acme")
    assert event.payload["values"]["user_id"] == member.pk and event.actor == "user:root"

    group = ToolGroup.objects.create(name="payments")
    approvers = Group.objects.create(name="payment approvers")
    form = {
        "name": "payments",
        "description": "",
        "provider": "",
        "extra_tools": "[]",
        "capabilities": "[]",
        "active_by_default": "on",
        "activation_rules": "[]",
        "system_prompt_addition": "",
        "approver_group": approvers.pk,
        "approver_permission": "",
        "escalation_group": "",
        "escalate_after_seconds": "",
    }
    changed = browser.post(f"/admin/toolhub/toolgroup/{group.pk}/change/", form)
    assert changed.status_code == 302, changed.content.decode()[:3000]
    (event,) = _events("governance.changed", "")
    assert event.payload["changes"]["approver_group_id"] == {"before": None, "after": approvers.pk}
