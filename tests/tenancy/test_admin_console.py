"""The admin as a tenant-scoped console: lists, filters, change pages, decisions, bulk actions and forms
show and act on the user's tenants only; platform-wide configuration is changed only across the boundary."""

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from approvals.models import ApprovalRequest, ApprovalRule, ApprovalStatus, WebhookDelivery
from demo.models import Account
from tests.helpers import action_confirmation, console
from tests.tenancy.conftest import AcmeData, database_state, make_user
from toolhub.catalogue import tool_catalogue_sync
from toolhub.models import AuditEvent, Grant, Tenant, TenantMembership, ToolDefinition
from toolhub.sagas.models import Compensation, Saga, SagaStatus

pytestmark = pytest.mark.django_db(transaction=True)

MISSING_ID = "987654321"


def changelists(acme: AcmeData) -> dict[str, str]:
    return {
        "calls": "/admin/toolhub/toolcall/",
        "audit events": "/admin/toolhub/auditevent/",
        "approvals": "/admin/approvals/approvalrequest/",
        "runs": "/admin/agents_app/agentrun/",
        "sagas": "/admin/sagas/saga/",
        "compensations": "/admin/sagas/compensation/",
        "webhook deliveries": "/admin/approvals/webhookdelivery/",
        "tenants": "/admin/toolhub/tenant/",
        "memberships": "/admin/toolhub/tenantmembership/",
        "approval rules": "/admin/approvals/approvalrule/",
        "grants": "/admin/toolhub/grant/",
    }


def change_pages(acme: AcmeData) -> dict[str, tuple[str, str]]:
    """Each acme row's change page, with the same page for an id that does not exist."""
    event = AuditEvent.objects.filter(tenant="acme").first()
    assert event is not None
    membership = TenantMembership.objects.filter(tenant__slug="acme").first()
    assert membership is not None
    pages = {
        "call": ("toolhub/toolcall", str(acme.artifact_call.pk), "00000000-0000-0000-0000-000000000000"),
        "audit event": ("toolhub/auditevent", str(event.pk), MISSING_ID),
        "approval": ("approvals/approvalrequest", str(acme.approval.pk), MISSING_ID),
        "run": ("agents_app/agentrun", str(acme.ledger_run.pk), "00000000-0000-0000-0000-000000000000"),
        "saga": ("sagas/saga", str(acme.saga.pk), MISSING_ID),
        "compensation": ("sagas/compensation", str(acme.compensation.pk), MISSING_ID),
        "tenant": ("toolhub/tenant", str(Tenant.objects.get(slug="acme").pk), MISSING_ID),
        "membership": ("toolhub/tenantmembership", str(membership.pk), MISSING_ID),
    }
    return {
        name: (f"/admin/{path}/{pk}/change/", f"/admin/{path}/{missing}/change/")
        for name, (path, pk, missing) in pages.items()
    }


@pytest.fixture
def acme_delivery(acme: AcmeData) -> WebhookDelivery:
    return WebhookDelivery.objects.create(
        event="approval.requested",
        payload={"request": acme.approval.pk, "tenant": "acme", "tool": "create_order"},
        next_attempt_at=timezone.now(),
    )


@pytest.fixture
def acme_config(acme: AcmeData) -> dict[str, object]:
    """An approval rule and a grant bound to acme, and a global rule bound to no tenant."""
    acme_tenant = Tenant.objects.get(slug="acme")
    return {
        "acme_rule": ApprovalRule.objects.create(name="acme-big-orders", tenant=acme_tenant, tool_name="create_order"),
        "global_rule": ApprovalRule.objects.create(name="everyone-critical", min_risk="critical"),
        "acme_grant": Grant.objects.create(tool_name="debit", tenant=acme_tenant, note="acme-ledger-grant"),
    }


@pytest.mark.parametrize("who", ["globex_auditor", "globex_operator"])
def test_changelists_and_filters_show_nothing_of_another_tenant(
    who: str, acme: AcmeData, acme_delivery: WebhookDelivery, acme_config: dict, request: pytest.FixtureRequest
) -> None:
    client = console(request.getfixturevalue(who))

    for name, url in changelists(acme).items():
        response = client.get(url)
        assert response.status_code == 200, name
        body = response.content.decode().lower()
        # no row, no filter choice, no link names acme (its slug, its agents, its runs' ids)
        assert "acme" not in body, name
        assert str(acme.ledger_run.id) not in body and str(acme.artifact_call.id) not in body, name
    # a filter asked for by hand finds nothing either
    by_hand = client.get("/admin/toolhub/toolcall/?tenant=acme").content.decode()
    assert str(acme.artifact_call.id) not in by_hand and "0 tool calls" in by_hand


def test_acmes_operator_sees_acmes_rows_and_filters(
    acme: AcmeData, acme_delivery: WebhookDelivery, acme_operator: User
) -> None:
    client = console(acme_operator)

    for name, url in changelists(acme).items():
        if name in {"approval rules", "grants"}:
            continue
        body = client.get(url).content.decode()
        assert "acme" in body, name
    assert str(acme.ledger_run.id) in client.get("/admin/agents_app/agentrun/").content.decode()
    assert "acme-ledger" in client.get("/admin/agents_app/agentrun/").content.decode()  # the agent filter
    for name, (url, _) in change_pages(acme).items():
        assert client.get(url).status_code == 200, name


@pytest.mark.parametrize("who", ["globex_auditor", "globex_operator"])
def test_another_tenants_change_pages_answer_like_missing_ones(
    who: str, acme: AcmeData, request: pytest.FixtureRequest
) -> None:
    client = console(request.getfixturevalue(who))

    for name, (foreign_url, missing_url) in change_pages(acme).items():
        foreign, missing = client.get(foreign_url), client.get(missing_url)
        assert foreign.status_code == missing.status_code == 302, name
        assert foreign["Location"] == missing["Location"] == "/admin/", name


def test_the_operator_of_another_tenant_cannot_decide_from_the_change_page(
    acme: AcmeData, globex_operator: User, acme_operator: User
) -> None:
    before = database_state()
    client = console(globex_operator)

    for decision in ("approve", "reject"):
        foreign = client.post(f"/admin/approvals/approvalrequest/{acme.approval.pk}/{decision}/", {"comment": "x"})
        missing = client.post(f"/admin/approvals/approvalrequest/{MISSING_ID}/{decision}/", {"comment": "x"})
        assert foreign.status_code == missing.status_code == 302
        assert foreign["Location"] == missing["Location"] == "/admin/"

    assert database_state() == before
    # acme's operator decides it from the same page
    console(acme_operator).post(f"/admin/approvals/approvalrequest/{acme.approval.pk}/approve/", {"comment": "ok"})
    assert ApprovalRequest.objects.get(pk=acme.approval.pk).status == ApprovalStatus.APPROVED


@pytest.mark.parametrize("action", ["approve_selected", "reject_selected"])
def test_the_operator_of_another_tenant_cannot_decide_in_bulk(
    action: str, acme: AcmeData, globex_operator: User, acme_operator: User
) -> None:
    # what acme's operator's confirmation page posts back (the request bound to what it showed)
    client = console(acme_operator)
    confirmation = action_confirmation(client, "/admin/approvals/approvalrequest/", action, [acme.approval.pk])
    form = {**confirmation, "comment": "bulk"}
    before = database_state()

    console(globex_operator).post("/admin/approvals/approvalrequest/", form)

    assert database_state() == before
    client.post("/admin/approvals/approvalrequest/", form)
    assert ApprovalRequest.objects.get(pk=acme.approval.pk).status != ApprovalStatus.PENDING


def _hold(acme: AcmeData) -> None:
    """acme's debit waits for an operator's decision: retrying it pays the money back."""
    Compensation.objects.filter(pk=acme.compensation.pk).update(status="held")
    Saga.objects.filter(pk=acme.saga.pk).update(status=SagaStatus.NEEDS_ATTENTION)


@pytest.mark.parametrize(
    ("changelist", "action", "selected"),
    [
        ("/admin/sagas/saga/", "retry_selected", "saga"),
        ("/admin/sagas/saga/", "resolve_selected", "saga"),
        ("/admin/sagas/compensation/", "retry_selected", "compensation"),
        ("/admin/sagas/compensation/", "resolve_selected", "compensation"),
    ],
)
def test_the_operator_of_another_tenant_cannot_operate_its_saga(
    changelist: str, action: str, selected: str, acme: AcmeData, globex_operator: User, acme_operator: User
) -> None:
    _hold(acme)
    pk = acme.saga.pk if selected == "saga" else acme.compensation.pk
    form = {"action": action, "_selected_action": [str(pk)], "apply": "1", "note": "done by hand"}
    before = database_state()

    console(globex_operator).post(changelist, form)

    assert database_state() == before
    assert Account.objects.get(account_id="ACC-ACME").balance == Decimal("900")
    operator = console(acme_operator)  # confirms as a browser does: the retry is bound to the marks its page lists
    operator.post(changelist, {**action_confirmation(operator, changelist, action, [pk]), "note": "done by hand"})
    assert Compensation.objects.get(pk=acme.compensation.pk).status in {"succeeded", "resolved"}
    if action == "retry_selected":
        assert Account.objects.get(account_id="ACC-ACME").balance == Decimal("1000")


def test_a_tenant_admin_cannot_put_anyone_into_another_tenant(acme: AcmeData, other_tenant: Tenant) -> None:
    admin = make_user(
        "globex-admin",
        tenant=other_tenant,
        staff=True,
        permissions=("toolhub.add_tenantmembership", "toolhub.view_tenantmembership", "toolhub.view_tenant"),
    )
    client = console(admin)
    acme_tenant = Tenant.objects.get(slug="acme")

    # the form offers only globex
    form = client.get("/admin/toolhub/tenantmembership/add/")
    assert list(form.context["adminform"].form.fields["tenant"].queryset) == [other_tenant]
    # and posting acme by hand is refused, nothing written
    before = database_state()
    refused = client.post("/admin/toolhub/tenantmembership/add/", {"user": admin.pk, "tenant": acme_tenant.pk})
    assert refused.status_code == 200 and refused.context["adminform"].form.errors["tenant"]
    assert database_state() == before
    # a member added to their own tenant works
    newcomer = make_user("newcomer")
    added = client.post("/admin/toolhub/tenantmembership/add/", {"user": newcomer.pk, "tenant": other_tenant.pk})
    assert added.status_code == 302
    assert TenantMembership.objects.filter(user=newcomer, tenant=other_tenant).exists()
    # tenants themselves are added only across the boundary
    assert client.get("/admin/toolhub/tenant/add/").status_code == 403


def test_tenant_bound_rules_and_grants_are_scoped_and_global_rules_read_only(
    acme: AcmeData, acme_config: dict, other_tenant: Tenant, globex_developer: User
) -> None:
    client = console(globex_developer)
    global_rule = acme_config["global_rule"]

    # acme's rule and grant are absent; the global rule is shown, read-only
    assert client.get(f"/admin/approvals/approvalrule/{acme_config['acme_rule'].pk}/change/").status_code == 302
    assert client.get(f"/admin/toolhub/grant/{acme_config['acme_grant'].pk}/change/").status_code == 302
    page = client.get(f"/admin/approvals/approvalrule/{global_rule.pk}/change/")
    assert page.status_code == 200 and not page.context["has_change_permission"]
    assert client.post(f"/admin/approvals/approvalrule/{global_rule.pk}/change/", {"name": "x"}).status_code == 403
    # nor through list_editable
    listing = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-MIN_NUM_FORMS": "0",
        "form-MAX_NUM_FORMS": "1000",
        "form-0-id": str(global_rule.pk),
        "form-0-priority": "1",
        "_save": "Save",
    }
    client.post("/admin/approvals/approvalrule/", listing)
    global_rule.refresh_from_db()
    assert (global_rule.enabled, global_rule.priority) == (True, 100)

    # a new rule must be bound to one of the developer's tenants
    add = client.get("/admin/approvals/approvalrule/add/").context["adminform"].form.fields["tenant"]
    assert list(add.queryset) == [other_tenant] and add.required
    fields = {"name": "globex-rule", "enabled": "on", "priority": "10", "required_approvals": "1"}
    assert client.post("/admin/approvals/approvalrule/add/", fields).status_code == 200  # no tenant: refused
    acme_tenant = Tenant.objects.get(slug="acme")
    assert client.post("/admin/approvals/approvalrule/add/", {**fields, "tenant": acme_tenant.pk}).status_code == 200
    assert not ApprovalRule.objects.filter(name="globex-rule").exists()
    assert client.post("/admin/approvals/approvalrule/add/", {**fields, "tenant": other_tenant.pk}).status_code == 302
    assert ApprovalRule.objects.get(name="globex-rule").tenant == other_tenant


def test_the_catalogue_is_read_only_for_tenant_staff_and_changed_across_the_boundary(
    globex_developer: User, platform_user: User
) -> None:
    tool_catalogue_sync()
    definition = ToolDefinition.objects.get(name="create_order")
    url = f"/admin/toolhub/tooldefinition/{definition.pk}/change/"

    # a developer of one tenant reads the catalogue but cannot switch a tool off for every tenant
    developer = console(globex_developer)
    assert developer.get(url).status_code == 200
    assert developer.post(url, {"enabled": "", "risk_override": ""}).status_code == 403
    assert ToolDefinition.objects.get(pk=definition.pk).enabled
    assert developer.get("/admin/toolhub/toolgroup/add/").status_code == 403

    # the platform team can
    assert console(platform_user).post(url, {"enabled": "", "risk_override": ""}).status_code == 302
    assert not ToolDefinition.objects.get(pk=definition.pk).enabled


def test_a_tool_group_withheld_from_a_tenant_is_named_on_none_of_its_rule_pages(
    tenant: Tenant, other_tenant: Tenant, roles: dict, globex_developer: User
) -> None:
    """A group bound to globex is withheld from acme's staff where a rule names it: the column, the filter, the
    change page (read-only, so that acme's own rule naming it keeps it when they save); globex's staff read it."""
    from toolhub.models import ToolGroup

    withheld = ToolGroup.objects.create(name="globex-treasury-ops", activation_rules=[{"tenants": ["globex"]}])
    shared = ToolGroup.objects.create(name="shared-reports")
    global_rule = ApprovalRule.objects.create(name="platform-floor", tool_group=withheld, required_approvals=2)
    ApprovalRule.objects.create(name="reports-floor", tool_group=shared)
    own_rule = ApprovalRule.objects.create(name="acme-odd", tool_group=withheld, tenant=tenant, priority=5)
    client = console(make_user("acme-developer", tenant=tenant, staff=True, groups=(roles["developers"],)))
    label = "a tool group of another tenant"

    listing = client.get("/admin/approvals/approvalrule/")
    content = listing.content.decode()
    assert "globex-treasury-ops" not in content and label in content and "shared-reports" in content
    choices = next(f for f in listing.context["cl"].filter_specs if f.field_path == "tool_group").lookup_choices
    assert choices == [(shared.pk, "shared-reports")]
    typed = client.get(f"/admin/approvals/approvalrule/?tool_group__id__exact={withheld.pk}")
    assert list(typed.context["cl"].result_list) == []

    page = client.get(f"/admin/approvals/approvalrule/{global_rule.pk}/change/").content.decode()
    assert label in page and "globex-treasury-ops" not in page and f"/toolgroup/{withheld.pk}/" not in page

    own = client.get(f"/admin/approvals/approvalrule/{own_rule.pk}/change/")
    assert own.context["has_change_permission"] and "tool_group" not in own.context["adminform"].form.fields
    assert label in own.content.decode() and "globex-treasury-ops" not in own.content.decode()
    saved = client.post(
        f"/admin/approvals/approvalrule/{own_rule.pk}/change/",
        {"name": "acme-odd", "enabled": "on", "priority": "7", "tenant": tenant.pk, "required_approvals": "1"},
    )
    assert saved.status_code == 302
    own_rule.refresh_from_db()
    assert (own_rule.priority, own_rule.tool_group_id) == (7, withheld.pk)  # still names the group

    # globex's staff, who see the group, read its name
    assert "globex-treasury-ops" in console(globex_developer).get("/admin/approvals/approvalrule/").content.decode()
