"""Probe 2026-12-05 (k): identities that are renamed, deleted or re-created, and state keyed by them.

Found (fixed): a tenant's slug is what every tenant-scoped row, the audit chains, remote MCP credentials and the
built-in workspace name, yet the platform could rename it (its members lost their rows) and issue a freed slug
to another tenant (which inherited them); a tool group's row could be renamed away from the name the code gives
its tools, silently dropping the deny and approver restriction on them. Both names are now fixed once the row
exists (model, admin, trigger), and a deleted tenant's slug is retired.

Checked and found holding: the governance cache keys grants and user facts by user id (never username) and every
table they read is stamped on change (``auth_group`` and memberships included), so a removal or revocation made
in another process is seen by the next call; search indexes are cached per (tenant, user id, agent, names) under
the stamp; a removed member's held approval, run or MCP call runs nothing (``_standing_refusal`` at request and
execution); the MCP server is stateless (no session outlives a membership); throttles key on the user's id;
the four-eyes rule compares user ids; agent grants bound to a tenant hold only there, and an agent's tenant is
fixed; a tenant with agents or providers cannot be deleted (PROTECT); idempotency keys and sagas are per
(tenant, user) and die with the user. Not reported: activation rules name Django groups and agents by name (a
renamed role stops matching), which only changes visibility, never permission (README).
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from tests.security_review.conftest import client_for
from tests.tenancy.conftest import AcmeData, make_user
from toolhub.models import AuditEvent, Tenant

pytestmark = pytest.mark.django_db(transaction=True)


def _admin(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _rows_seen_by(user: User) -> dict[str, list[str]]:
    """What ``user`` reads through the API: runs, calls, approval requests (their ids)."""
    client = client_for(user)
    seen: dict[str, list[str]] = {}
    for name, url in (("runs", "/api/v1/runs/"), ("calls", "/api/v1/calls/"), ("approvals", "/api/v1/approvals/")):
        answer = client.get(url)
        assert answer.status_code == 200, answer.content
        body: Any = answer.json()
        rows = body["results"] if isinstance(body, dict) else body
        seen[name] = sorted(str(row["id"]) for row in rows)
    return seen


def test_a_renamed_tenant_loses_its_history_and_a_new_tenant_of_its_old_slug_inherits_it(
    acme: AcmeData, alice: User, superuser: User, roles: dict[str, Group]
) -> None:
    """The platform renames tenant ``acme`` to ``acme-corp`` in the admin (the customer rebranded; the admin's
    change page offers the slug), then signs a new customer up under the free slug ``acme`` and makes
    ``mallory`` its operator.

    Found: every tenant-scoped row stores the tenant's slug as a string (``ToolCall.tenant``, ``AgentRun.tenant``,
    ``ApprovalRequest.tenant``, ``AuditEvent.tenant``, sagas, blackboard, remote MCP credentials, the built-in
    tools' workspace directory, the audit chains derived from the slug), and ``TenantAdmin`` lets the slug change.
    After the rename alice, still a member of the same tenant, sees none of her runs, calls or held approval;
    mallory, an operator of a different customer, reads and may decide them all.
    Expect: a tenant's slug is its identity for all those rows: it cannot change once the tenant exists
    (admin and model refuse), so alice keeps her rows and nobody else's tenant gets them.
    """
    acme_pk = Tenant.objects.get(slug="acme").pk
    platform = _admin(superuser)
    before = _rows_seen_by(alice)
    assert before["runs"] and before["approvals"]

    platform.post(f"/admin/toolhub/tenant/{acme_pk}/change/", {"slug": "acme-corp", "name": "ACME Corp"})
    platform.post("/admin/toolhub/tenant/add/", {"slug": "acme", "name": "A new customer"})
    successor = Tenant.objects.filter(slug="acme").exclude(pk=acme_pk).first()
    mallory = make_user("mallory", tenant=successor, staff=True, groups=(roles["operators"],))

    stolen = _rows_seen_by(mallory)
    kept = _rows_seen_by(User.objects.get(pk=alice.pk))
    assert (stolen, kept == before) == ({"runs": [], "calls": [], "approvals": []}, True), (
        f"the new tenant 'acme' reads the old one's rows {stolen}; alice still sees hers: {kept == before}"
    )


def test_a_tenant_re_created_under_a_deleted_tenants_slug_inherits_its_calls_trail_and_remote_credential(
    request_call: Any, superuser: User, roles: dict[str, Group]
) -> None:
    """initech, a customer that called tools over the API only (no agents), leaves: the platform deletes the
    tenant in the admin. Months later a different customer signs up and is given the free slug ``initech``;
    ``nina`` is its auditor.

    Found: deleting a ``Tenant`` leaves every row that names it by slug (``ToolCall.tenant``, ``AuditEvent.tenant``,
    ``RemoteMcpCredential.tenant``...), and nothing stops the slug being issued again, so the new tenant is the
    old one to all of them: nina reads the old customer's calls and audit trail, and the new tenant's calls to
    the remote MCP server would authenticate with the old customer's credential.
    Expect: a slug, once a tenant's, is never another tenant's: creating a tenant under a deleted tenant's slug
    is refused (the admin's form says so), so no new tenant inherits anything.
    """
    from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer

    initech = Tenant.objects.create(slug="initech", name="Initech")
    ian = make_user("ian", tenant=initech)
    call = request_call("record_effect", {"note": "initech's secret plan"}, ian, tenant="initech")
    server = RemoteMcpServer.objects.create(name="crm", url="https://crm.example.com/mcp")
    RemoteMcpCredential.objects.create(server=server, tenant="initech", credential_env="CRM_TOKEN_INITECH")

    platform = _admin(superuser)
    platform.post(f"/admin/toolhub/tenant/{initech.pk}/delete/", {"post": "yes"})
    platform.post("/admin/toolhub/tenant/add/", {"slug": "initech", "name": "Another customer"})
    successor = Tenant.objects.filter(slug="initech").exclude(pk=initech.pk).first()
    inherited: dict[str, Any] = {}
    if successor is not None:
        nina = make_user("nina", tenant=successor, staff=True, groups=(roles["auditors"],))
        inherited["calls"] = _rows_seen_by(nina)["calls"]
        inherited["events"] = AuditEvent.objects.filter(tenant=successor.slug, call_id=call.id).count()
        inherited["credential"] = list(
            RemoteMcpCredential.objects.filter(tenant=successor.slug).values_list("credential_env", flat=True)
        )
    assert successor is None, f"a new tenant took the deleted tenant's slug and inherits: {inherited}"


def probe_k_transfer(amount: int) -> dict[str, int]:
    """Move money (a code member of tool group ``probe_k_payments``)."""
    return {"moved": amount}


def test_renaming_a_tool_group_in_the_admin_silently_drops_the_deny_that_named_it(
    alice: User, tenant: Tenant, superuser: User, settings: Any
) -> None:
    """The platform denies tool group ``probe_k_payments`` (declared by the code: ``@tool(group=...)``) to tenant
    acme, then renames the group's row in the admin (say, to ``payments-legacy``: the change page offers the name).

    Found: a tool's groups are the names its code declares (``toolhub.authorization.tool_group_names``), while a
    grant, an approval rule and the approver restriction point at the group's row; ``ToolGroupAdmin`` lets the
    row's name change, so the deny now names a group the tool is not in and alice's agent calls the tool again;
    its approver restriction (``approvals.services._governing_groups``, by name) is gone the same way.
    Expect: a tool group's name is fixed once the row exists (the admin shows it read-only, the model refuses),
    so what was granted, denied or restricted on it keeps holding for its tools.
    """
    from tests.helpers import principal_for
    from toolhub import registry, tool
    from toolhub.authorization import authorization_denial
    from toolhub.models import Grant, GrantEffect, ToolGroup

    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "allow"}
    transfer = tool(group="probe_k_payments")(probe_k_transfer)
    with registry.temporarily(transfer):
        group = ToolGroup.objects.create(name="probe_k_payments")
        Grant.objects.create(effect=GrantEffect.DENY, tool_group=group, tenant=tenant)
        principal = principal_for(alice, tenant="acme")
        assert authorization_denial("probe_k_transfer", principal) is not None

        _admin(superuser).post(
            f"/admin/toolhub/toolgroup/{group.pk}/change/",
            {
                "name": "payments-legacy",
                "description": "",
                "provider": "",
                "extra_tools": "[]",
                "capabilities": "[]",
                "active_by_default": "on",
                "activation_rules": "[]",
                "system_prompt_addition": "",
                "approver_group": "",
                "approver_permission": "",
                "escalation_group": "",
                "escalate_after_seconds": "",
            },
        )
        group.refresh_from_db()
        denial = authorization_denial("probe_k_transfer", principal)
    assert denial is not None, f"after the group's row was renamed to {group.name!r}, acme may call the denied tool"


@pytest.mark.parametrize(("model", "field"), [("Tenant", "slug"), ("ToolGroup", "name")])
def test_the_database_refuses_renaming_an_identity_on_any_other_path(model: str, field: str, tenant: Tenant) -> None:
    """A bulk update (a script, a data migration, raw SQL) renames a tenant's slug or a tool group's name.

    Found: only the admin's form and the model's ``save`` were in the way: ``QuerySet.update`` renamed the row.
    Expect: the database refuses it (a trigger, as for the audit tables), so no path orphans what names it.
    """
    from django.db import DatabaseError, transaction

    from toolhub.models import ToolGroup

    row = tenant if model == "Tenant" else ToolGroup.objects.create(name="probe_k_group")
    with pytest.raises(DatabaseError), transaction.atomic():
        type(row).objects.filter(pk=row.pk).update(**{field: "probe-k-renamed"})
