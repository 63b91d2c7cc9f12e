"""Adversarial probe (2026-12-03, fourth pass) of the Django admin as tenant-scoped staff.

As acme's operator, auditor and developer (and staff holding a role but no tenant at all) try to see or act on
globex's rows, or on rows the role may not act on, through the admin's own machinery: every bulk action posted
with crafted ``_selected_action`` lists mixing acme's and globex's ids (and ``select_across`` with a filter),
``delete_selected`` and ``list_editable``, the choices of change forms (tenants, tool groups, Django groups,
users, model providers), grants and approval rules bound to globex or to no tenant by a crafted POST, an edit of a
globex request's arguments on the approval desk's decide endpoints with crafted ids, the saga page's retry,
model provider and remote MCP pages (endpoints, key names, per-tenant credentials), history pages, the
``?_changelist_filters=``, ``?e=`` and ``?_to_field=`` paths, CSV and JSON Lines exports with crafted filters,
and the dashboard with crafted query parameters.

Tests named ``test_fixed_*`` are leaks this probe found (written first as strict expected failures asserting
the secure behaviour), fixed the same day. The others passed when written and stay as regression tests.
"""

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from agents_app.models import Agent, AgentRun, ModelProvider, RunStatus
from agents_app.services import agent_create, run_start
from approvals.forms import shown_fields_version
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalRule, ApprovalStatus, WebhookDelivery
from demo.models import Account
from tests.helpers import RequestCall, confirmation_fields, console
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import AcmeData, database_state, make_user
from toolhub.admin_marks import marks_field, row_mark
from toolhub.exceptions import ToolError
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.services import credential_headers
from toolhub.models import AuditEvent, Grant, Tenant, TenantMembership, ToolCall, ToolGroup
from toolhub.sagas.models import Compensation, Saga, SagaStatus

pytestmark = pytest.mark.django_db(transaction=True)

MISSING_ID = "987654321"
MISSING_UUID = "00000000-0000-0000-0000-000000000000"
GLOBEX_PRODUCT = "GLOBEX-SECRET-PRODUCT"


def leaks(text: str, *markers: str) -> list[str]:
    """The markers found in ``text``, not inside a longer word (``gina`` is not in ``paginator``)."""
    return [marker for marker in markers if re.search(rf"(?<![A-Za-z]){re.escape(marker)}(?![A-Za-z])", text)]


def without_echo(body: str, url: str) -> str:
    """``body`` without the echoes of the request's own query (links keeping the filters, hidden inputs)."""
    for key, value in parse_qsl(urlsplit(url).query):
        for echo in (f"{key}={quote(value, safe='')}", f"{key}={quote(value)}", f"{key}={value}"):
            body = body.replace(echo, "")
        body = body.replace(f'name="{key}" value="{value}"', "")
    return body


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]] if response.context else []


# --- globex's rows, the mirror of acme's ------------------------------------------------------------------------


@dataclass(frozen=True)
class GlobexData:
    gina: User
    ledger_run: AgentRun
    saga: Saga
    compensation: Compensation
    waiting_run: AgentRun
    approval: ApprovalRequest


@pytest.fixture
def globex(other_tenant: Tenant) -> GlobexData:
    """globex's data, all gina's: a run that debited ACC-GLOBEX (a saga with a compensable step) and a run whose
    order (product ``GLOBEX-SECRET-PRODUCT``) waits for an operator. Both agents are globex's own."""
    gina = make_user("gina", tenant=other_tenant)
    Account.objects.create(account_id="ACC-GLOBEX", owner="gina", tenant="globex", balance=Decimal("5000"))
    ledger = agent_create(
        name="globex-ledger",
        tenant="globex",
        tools=["debit"],
        script=[
            {"tool_calls": [{"name": "debit", "arguments": {"account_id": "ACC-GLOBEX", "amount": "700"}}]},
            {"content": "Debited: {last_tool_result}"},
        ],
    )
    ledger_run = run_start(agent=ledger, user=gina, input="globex pays its supplier")
    ledger_run.refresh_from_db()
    assert ledger_run.status == RunStatus.COMPLETED, ledger_run.error
    saga = Saga.objects.get(key=str(ledger_run.id))
    orders = agent_create(
        name="globex-orders",
        tenant="globex",
        tools=["create_order"],
        script=[
            {"tool_calls": [{"name": "create_order", "arguments": {"product": GLOBEX_PRODUCT, "amount": "9000"}}]},
            {"content": "Order placed: {last_tool_result}"},
        ],
    )
    waiting_run = run_start(agent=orders, user=gina, input="globex orders a secret product")
    approval = ApprovalRequest.objects.get(call__run_id=waiting_run.id)
    assert approval.tenant == saga.tenant == "globex" and approval.status == ApprovalStatus.PENDING
    return GlobexData(gina, ledger_run, saga, saga.compensations.get(), waiting_run, approval)


def globex_state() -> dict[str, Any]:
    """Everything of globex an acme request could have changed."""
    return {
        "calls": sorted((str(pk), s) for pk, s in ToolCall.objects.filter(tenant="globex").values_list("id", "status")),
        "runs": sorted((str(pk), s) for pk, s in AgentRun.objects.filter(tenant="globex").values_list("id", "status")),
        "approvals": sorted(
            ApprovalRequest.objects.filter(tenant="globex").values_list("id", "status", "round", "arguments_hash")
        ),
        "decisions": ApprovalDecision.objects.filter(request__tenant="globex").count(),
        "sagas": sorted(Saga.objects.filter(tenant="globex").values_list("id", "status")),
        "compensations": sorted(
            Compensation.objects.filter(saga__tenant="globex").values_list("id", "status", "attempts")
        ),
        "balance": Account.objects.get(account_id="ACC-GLOBEX").balance,
        "audit_events": AuditEvent.objects.filter(tenant="globex").count(),
        "agents": sorted(Agent.objects.filter(tenant__slug="globex").values_list("id", "name")),
    }


def _hold(saga: Saga, compensation: Compensation) -> None:
    """The saga's debit waits for an operator: retrying the compensation pays the money back."""
    Compensation.objects.filter(pk=compensation.pk).update(status="held")
    Saga.objects.filter(pk=saga.pk).update(status=SagaStatus.NEEDS_ATTENTION)


@pytest.fixture
def acme_auditor(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-auditor-d", tenant=tenant, staff=True, groups=(roles["auditors"],))


@pytest.fixture
def acme_developer(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-developer-d", tenant=tenant, staff=True, groups=(roles["developers"],))


@pytest.fixture
def acme_staff(acme_operator: User, acme_auditor: User, acme_developer: User) -> dict[str, User]:
    return {"operator": acme_operator, "auditor": acme_auditor, "developer": acme_developer}


@pytest.fixture
def configuration(tenant: Tenant, other_tenant: Tenant) -> dict[str, Any]:
    """Rules and grants of acme, of globex and of no tenant; a tool group and a Django group of globex alone."""
    approvers = Group.objects.create(name="globex-approvers")
    payments = ToolGroup.objects.create(
        name="globex-payments", activation_rules=[{"tenants": ["globex"]}], approver_group=approvers
    )
    return {
        "acme_rule": ApprovalRule.objects.create(name="acme-rule", tenant=tenant, tool_name="create_order"),
        "globex_rule": ApprovalRule.objects.create(name="globex-rule", tenant=other_tenant, tool_name="create_order"),
        "global_rule": ApprovalRule.objects.create(name="global-rule", min_risk="critical"),
        "acme_grant": Grant.objects.create(
            tool_name="debit", tenant=tenant, note="acme-grant", set_by_platform=False
        ),  # acme's own
        "globex_grant": Grant.objects.create(tool_name="debit", tenant=other_tenant, note="globex-grant"),
        "agent_grant": Grant.objects.create(tool_name="debit", agent_name="globex-ledger", note="agent-grant"),
        "group_grant": Grant.objects.create(tool_group=payments, group=approvers, note="group-grant"),
        "payments": payments,
        "approvers": approvers,
    }


def configuration_state() -> dict[str, Any]:
    return {
        "rules": sorted(
            ApprovalRule.objects.values_list("id", "name", "enabled", "priority", "tenant_id", "tool_name")
        ),
        "grants": sorted(Grant.objects.values_list("id", "effect", "tool_name", "tenant_id", "user_id", "note")),
        "agents": sorted(Agent.objects.values_list("id", "name", "tenant_id", "provider_id", "system_prompt")),
    }


# --- bulk actions posted with globex's ids ------------------------------------------------------------------


BULK = [
    ("/admin/approvals/approvalrequest/", "approve_selected", "approval", {"comment": "bulk"}),
    ("/admin/approvals/approvalrequest/", "reject_selected", "approval", {"comment": "bulk"}),
    ("/admin/sagas/saga/", "retry_selected", "saga", {}),
    ("/admin/sagas/saga/", "resolve_selected", "saga", {"note": "done by hand"}),
    ("/admin/sagas/compensation/", "retry_selected", "compensation", {}),
    ("/admin/sagas/compensation/", "resolve_selected", "compensation", {"note": "done by hand"}),
]


@pytest.mark.parametrize(("changelist", "action", "kind", "fields"), BULK)
def test_bulk_actions_with_globex_ids_mixed_in_act_on_acmes_rows_only(
    changelist: str,
    action: str,
    kind: str,
    fields: dict[str, str],
    acme: AcmeData,
    globex: GlobexData,
    acme_operator: User,
) -> None:
    """acme's operator posts each bulk action with ``_selected_action`` = [globex's row, acme's row, a missing id].

    Tried: the confirmation page (no ``apply``), then the confirmed action. globex's row must stay as it was and
    never be listed on the confirmation page; acme's row is acted on (the action did run).
    """
    _hold(acme.saga, acme.compensation)
    _hold(globex.saga, globex.compensation)
    theirs = {"approval": globex.approval.pk, "saga": globex.saga.pk, "compensation": globex.compensation.pk}[kind]
    ours = {"approval": acme.approval.pk, "saga": acme.saga.pk, "compensation": acme.compensation.pk}[kind]
    form = {"action": action, "_selected_action": [str(theirs), str(ours), MISSING_ID], **fields}
    before = globex_state()
    client = console(acme_operator)

    page = client.post(changelist, form)
    # confirmed as a browser posts the page (a retry is bound to the marks it lists)
    done = client.post(changelist, {**confirmation_fields(page.content.decode()), **form, "apply": "1"}, follow=True)

    assert globex_state() == before
    for response in (page, done):
        body = response.content.decode()
        leaked = leaks(body, GLOBEX_PRODUCT, "gina", "globex", str(globex.ledger_run.id))
        assert not leaked, (action, leaked)
    if "apply" not in form and action in {"reject_selected", "approve_selected", "resolve_selected", "retry_selected"}:
        assert page.status_code == 200 and page.context["selected"] == [ours]
    if kind == "approval":
        assert ApprovalRequest.objects.get(pk=acme.approval.pk).status != ApprovalStatus.PENDING
    else:
        assert Compensation.objects.get(pk=acme.compensation.pk).status in {"succeeded", "resolved"}
    assert Account.objects.get(account_id="ACC-GLOBEX").balance == Decimal("4300")


def test_select_across_with_a_filter_naming_globex_decides_nothing_of_globex(
    acme: AcmeData, globex: GlobexData, acme_operator: User
) -> None:
    """acme's operator rejects "all" requests (``select_across=1``) of lists filtered to globex by hand.

    Tried: ``?status=all&tenant=globex``, ``?status=all&q=gina``, ``?status=all&agent_name=globex-orders`` and
    ``?status=all&id=<globex's>`` with globex's id in ``_selected_action``, confirmed: nothing is rejected. Then
    ``?status=all&tenant__in=acme,globex``: acme's request alone is rejected.
    """
    before = globex_state()
    client = console(acme_operator)
    form = {
        "action": "reject_selected",
        "select_across": "1",
        "index": "0",
        "_selected_action": [str(globex.approval.pk)],
        "comment": "all of them",
        "apply": "1",
    }
    for query in ("tenant=globex", "q=gina", "agent_name=globex-orders", f"id={globex.approval.pk}"):
        response = client.post(f"/admin/approvals/approvalrequest/?status=all&{query}", form, follow=True)
        # No index holds the desk's agent_name: the list refuses to compare it (review bs), which decides nothing too.
        assert response.status_code == (400 if query.startswith("agent_name=") else 200), query
        assert globex_state() == before, query
        assert ApprovalRequest.objects.get(pk=acme.approval.pk).status == ApprovalStatus.PENDING, query

    client.post("/admin/approvals/approvalrequest/?status=all&tenant__in=acme,globex", form)

    assert globex_state() == before
    assert ApprovalRequest.objects.get(pk=acme.approval.pk).status == ApprovalStatus.REJECTED


def test_a_globex_id_alone_answers_a_bulk_action_like_a_missing_id(
    acme: AcmeData, globex: GlobexData, acme_operator: User
) -> None:
    """The messages of an action posted with only globex's id equal those of one posted with a missing id."""
    _hold(globex.saga, globex.compensation)
    client = console(acme_operator)
    request = globex.approval
    bound = marks_field([row_mark(request.pk, request.arguments_hash, shown_fields_version(request.tool_name))])
    cases = [
        ("/admin/sagas/compensation/", "retry_selected", str(globex.compensation.pk), {}),
        ("/admin/sagas/saga/", "retry_selected", str(globex.saga.pk), {}),
        ("/admin/approvals/approvalrequest/", "reject_selected", str(globex.approval.pk), {"comment": "x"}),
        # with globex's request bound as a page listing it would bind it: only the tenant scope refuses it
        ("/admin/approvals/approvalrequest/", "approve_selected", str(globex.approval.pk), {"comment": "x", **bound}),
    ]
    before = globex_state()
    for url, action, theirs, fields in cases:
        answers = [
            client.post(url, {"action": action, "_selected_action": [pk], "apply": "1", **fields}, follow=True)
            for pk in (theirs, MISSING_ID)
        ]
        assert [r.status_code for r in answers] == [200, 200], (url, action)
        assert messages_of(answers[0]) == messages_of(answers[1]), (url, action)
        assert answers[0].content.decode().count("globex") == 0, (url, action)
    assert globex_state() == before


ROLELESS_ACTIONS = [
    ("/admin/approvals/approvalrequest/", "approve_selected", "approval"),
    ("/admin/approvals/approvalrequest/", "reject_selected", "approval"),
    ("/admin/approvals/approvalrequest/", "delete_selected", "approval"),
    ("/admin/sagas/saga/", "retry_selected", "saga"),
    ("/admin/sagas/saga/", "resolve_selected", "saga"),
    ("/admin/sagas/compensation/", "retry_selected", "compensation"),
    ("/admin/sagas/compensation/", "delete_selected", "compensation"),
    ("/admin/agents_app/agentrun/", "delete_selected", "run"),
    ("/admin/toolhub/toolcall/", "delete_selected", "call"),
    ("/admin/toolhub/auditevent/", "delete_selected", "event"),
    ("/admin/agents_app/agent/", "delete_selected", "agent"),
    ("/admin/approvals/webhookdelivery/", "delete_selected", "delivery"),
    ("/admin/toolhub/tenantmembership/", "delete_selected", "membership"),
    ("/admin/toolhub/tenant/", "delete_selected", "tenant"),
]


@pytest.mark.parametrize("who", ["auditor", "developer", "operator"])
def test_actions_a_role_does_not_hold_do_nothing_whatever_ids_are_posted(
    who: str, acme: AcmeData, globex: GlobexData, acme_staff: dict[str, User]
) -> None:
    """Each role posts actions it does not hold (deciding and saga operations for auditors and developers,
    ``delete_selected`` on every record for everyone) with acme's and globex's ids, confirmed.

    Tried: ``action`` + ``_selected_action`` + ``apply`` / ``post=yes`` on approvals, sagas, compensations, runs,
    calls, audit events, agents, webhook deliveries, memberships and tenants. Nothing changes anywhere.
    """
    _hold(acme.saga, acme.compensation)
    WebhookDelivery.objects.create(
        event="approval.requested", payload={"tenant": "acme"}, next_attempt_at=acme.saga.created_at
    )
    ids = {
        "approval": [acme.approval.pk, globex.approval.pk],
        "saga": [acme.saga.pk, globex.saga.pk],
        "compensation": [acme.compensation.pk, globex.compensation.pk],
        "run": [acme.ledger_run.pk, globex.ledger_run.pk],
        "call": [acme.artifact_call.pk, acme.external_call.pk],
        "event": list(AuditEvent.objects.values_list("pk", flat=True)[:5]),
        "agent": list(Agent.objects.values_list("pk", flat=True)),
        "delivery": list(WebhookDelivery.objects.values_list("pk", flat=True)),
        "membership": [],
        "tenant": list(Tenant.objects.values_list("pk", flat=True)),
    }
    ids["membership"] = list(TenantMembership.objects.values_list("pk", flat=True))
    user = acme_staff[who]
    client = console(user)
    before, agents_before = database_state(), configuration_state()
    counts = {name: model.objects.count() for name, model in [("agents", Agent), ("tenants", Tenant)]}

    for url, action, kind in ROLELESS_ACTIONS:
        if who == "operator" and action != "delete_selected":
            continue  # operators hold these; the bulk test above probes them
        form = {
            "action": action,
            "_selected_action": [str(pk) for pk in ids[kind]],
            "apply": "1",
            "post": "yes",
            "comment": "x",
            "note": "x",
        }
        response = client.post(url, form)
        assert response.status_code in (200, 302, 403), (url, action, response.status_code)

    assert database_state() == before
    assert configuration_state() == agents_before
    assert {name: model.objects.count() for name, model in [("agents", Agent), ("tenants", Tenant)]} == counts


def test_a_developer_deletes_no_global_or_globex_rule_or_grant_in_bulk(
    configuration: dict[str, Any], acme_developer: User, globex: GlobexData
) -> None:
    """acme's developer (who holds ``delete_approvalrule`` and ``delete_grant``) runs ``delete_selected``, confirmed
    with ``post=yes``, on [globex's rule, the global rule, acme's rule] and [globex's grant, an agent grant, a group
    grant, acme's grant]. The global rule is listed to them (read-only); the others are not theirs.
    """
    client = console(acme_developer)
    mixes = [
        ("/admin/approvals/approvalrule/", ["globex_rule", "global_rule", "acme_rule"]),
        ("/admin/toolhub/grant/", ["globex_grant", "agent_grant", "group_grant", "acme_grant"]),
    ]
    for url, names in mixes:
        pks = [str(configuration[name].pk) for name in names]
        client.post(url, {"action": "delete_selected", "_selected_action": pks, "post": "yes"})

    assert ApprovalRule.objects.filter(name__in=["globex-rule", "global-rule"]).count() == 2
    assert Grant.objects.filter(note__in=["globex-grant", "agent-grant", "group-grant"]).count() == 3
    # globex's rows alone and the global rule alone are refused too; acme's own go
    for url, name in [("/admin/approvals/approvalrule/", "global_rule"), ("/admin/toolhub/grant/", "globex_grant")]:
        client.post(url, {"action": "delete_selected", "_selected_action": [configuration[name].pk], "post": "yes"})
    assert (
        ApprovalRule.objects.filter(name="global-rule").exists() and Grant.objects.filter(note="globex-grant").exists()
    )
    for url, name in [("/admin/approvals/approvalrule/", "acme_rule"), ("/admin/toolhub/grant/", "acme_grant")]:
        client.post(url, {"action": "delete_selected", "_selected_action": [configuration[name].pk], "post": "yes"})
    assert not ApprovalRule.objects.filter(name="acme-rule").exists()
    assert not Grant.objects.filter(note="acme-grant").exists()


def test_list_editable_rows_naming_globex_or_global_rules_change_nothing(
    configuration: dict[str, Any], acme_developer: User
) -> None:
    """acme's developer posts the rules' list_editable formset with globex's rule and the global rule as rows.

    Tried: ``form-0-id`` = globex's rule (not on their list), ``form-1-id`` = the global rule (on it, read-only),
    switched off and moved to priority 1. Then acme's rule alone, which is saved (the formset works).
    """
    client = console(acme_developer)
    rows = [configuration["globex_rule"], configuration["global_rule"]]
    formset = {
        "form-TOTAL_FORMS": str(len(rows)),
        "form-INITIAL_FORMS": str(len(rows)),
        "form-MIN_NUM_FORMS": "0",
        "form-MAX_NUM_FORMS": "1000",
        "_save": "Save",
    }
    for index, rule in enumerate(rows):
        formset.update({f"form-{index}-id": str(rule.pk), f"form-{index}-priority": "1"})
    before = configuration_state()

    client.post("/admin/approvals/approvalrule/", formset)

    assert configuration_state() == before
    own = {**formset, "form-TOTAL_FORMS": "1", "form-INITIAL_FORMS": "1"}
    own = {k: v for k, v in own.items() if not k.startswith("form-1-")}
    own.update({"form-0-id": str(configuration["acme_rule"].pk), "form-0-priority": "7", "form-0-enabled": "on"})
    assert client.post("/admin/approvals/approvalrule/", own).status_code == 302
    assert ApprovalRule.objects.get(name="acme-rule").priority == 7


# --- change forms and their choices -----------------------------------------------------------------------------


def _choices(client: Client, url: str) -> dict[str, list[str]]:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    form = response.context["adminform"].form
    return {
        name: [str(row) for row in field.queryset] for name, field in form.fields.items() if hasattr(field, "queryset")
    }


def test_change_forms_offer_only_acmes_tenants_users_and_providers(
    configuration: dict[str, Any], globex: GlobexData, acme_developer: User, other_tenant: Tenant, tenant: Tenant
) -> None:
    """acme's developer opens the add forms of grants, approval rules and agents, and acme's rule's change form.

    Tried: every foreign key's choices (tenant, agent tenant, user, model provider): none names globex, its
    people or its provider; a raw id typed in names no globex user.
    """
    ModelProvider.objects.create(
        name="globex-gpt", kind="openai", tenant=other_tenant, base_url="https://llm.globex.example/v1"
    )
    ModelProvider.objects.create(name="acme-gpt", kind="openai", tenant=tenant, base_url="https://llm.acme.example/v1")
    client = console(acme_developer)

    grant = _choices(client, "/admin/toolhub/grant/add/")
    rule = _choices(client, f"/admin/approvals/approvalrule/{configuration['acme_rule'].pk}/change/")
    agent = _choices(client, "/admin/agents_app/agent/add/")

    assert grant["tenant"] == rule["tenant"] == agent["tenant"] == ["acme"]
    assert sorted(agent["provider"]) == ["acme-gpt", "scripted"]
    # grants to a user, a group or an agent are the platform's: the form offers tenant staff none of those fields
    form = client.get("/admin/toolhub/grant/add/").context["adminform"].form
    assert {"user", "group", "agent_name", "agent_tenant"}.isdisjoint(form.fields)
    body = client.get("/admin/agents_app/agent/add/").content.decode()
    assert "llm.acme.example" not in body and "globex" not in body


def test_fixed_grant_and_rule_forms_offer_a_tool_group_activated_only_for_globex(
    configuration: dict[str, Any], acme_developer: User
) -> None:
    """acme's developer opens the grant and approval rule add forms.

    Found: the ``tool_group`` select lists ``globex-payments`` (``activation_rules=[{"tenants": ["globex"]}]``),
    which the tool groups' own list and page hide from acme's staff since the second probe.
    """
    client = console(acme_developer)
    assert "globex-payments" not in client.get("/admin/toolhub/toolgroup/").content.decode()  # hidden there

    for url in ("/admin/toolhub/grant/add/", "/admin/approvals/approvalrule/add/"):
        assert "globex-payments" not in _choices(client, url)["tool_group"], url
        assert "globex-payments" not in client.get(url).content.decode(), url


def test_fixed_the_grant_form_lists_every_django_group_globexs_approvers_included(
    configuration: dict[str, Any], acme_developer: User
) -> None:
    """acme's developer opens the grant add form. Found: the ``group`` select names ``globex-approvers``, a group
    of globex's approvers, though grants to groups are platform configuration acme's staff never see."""
    client = console(acme_developer)

    body = client.get("/admin/toolhub/grant/add/").content.decode()

    assert "globex-approvers" not in body


def test_a_developer_cannot_bind_a_grant_or_rule_to_globex_or_to_no_tenant_by_a_crafted_post(
    configuration: dict[str, Any], globex: GlobexData, acme_developer: User, other_tenant: Tenant, tenant: Tenant
) -> None:
    """acme's developer posts grants and rules naming globex, no tenant (global), globex's user, a Django group or an
    agent of any tenant; and changes acme's rule and grant to globex or to no tenant.

    Nothing is created or changed; each answer is the form again with an error.
    """
    client = console(acme_developer)
    grant = {"effect": "allow", "tool_name": "debit", "note": "crafted"}
    grants = [
        {**grant, "tenant": other_tenant.pk, "agent_tenant": tenant.pk},
        {**grant, "tenant": "", "agent_tenant": ""},
        {**grant, "user": globex.gina.pk, "agent_tenant": tenant.pk},
        {**grant, "group": configuration["approvers"].pk, "agent_tenant": tenant.pk},
        {**grant, "agent_name": "globex-ledger", "agent_tenant": other_tenant.pk},
        {**grant, "agent_name": "globex-ledger", "agent_tenant": ""},
    ]
    rule = {"name": "crafted", "enabled": "on", "priority": "1", "required_approvals": "1", "tool_name": "debit"}
    rules = [{**rule, "tenant": other_tenant.pk}, {**rule, "tenant": ""}, {**rule, "tenant": "globex"}]
    before = configuration_state()

    answers = [client.post("/admin/toolhub/grant/add/", fields) for fields in grants]
    answers += [client.post("/admin/approvals/approvalrule/add/", fields) for fields in rules]
    acme_rule, acme_grant = configuration["acme_rule"], configuration["acme_grant"]
    for tenant_value in (other_tenant.pk, ""):
        answers.append(
            client.post(
                f"/admin/approvals/approvalrule/{acme_rule.pk}/change/",
                {**rule, "name": "acme-rule", "tenant": tenant_value},
            )
        )
        answers.append(
            client.post(
                f"/admin/toolhub/grant/{acme_grant.pk}/change/",
                {**grant, "note": "acme-grant", "tenant": tenant_value, "agent_tenant": tenant.pk},
            )
        )

    assert configuration_state() == before
    for response in answers:
        assert response.status_code == 200 and response.context["adminform"].form.errors
    assert (
        not Grant.objects.filter(note="crafted").exists() and not ApprovalRule.objects.filter(name="crafted").exists()
    )
    # the same change within acme is saved: the form was reached
    saved = client.post(
        f"/admin/approvals/approvalrule/{acme_rule.pk}/change/", {**rule, "name": "acme-rule", "tenant": tenant.pk}
    )
    assert saved.status_code == 302 and ApprovalRule.objects.get(pk=acme_rule.pk).tool_name == "debit"


def test_a_developer_cannot_move_an_agent_to_globex_or_onto_globexs_provider(
    acme: AcmeData, globex: GlobexData, acme_developer: User, other_tenant: Tenant, tenant: Tenant
) -> None:
    """acme's developer creates and changes agents naming globex as tenant, globex's provider, or changes globex's
    agent and a global agent by their ids. Nothing is written; globex's agent page answers like a missing one."""
    provider = ModelProvider.objects.create(name="globex-gpt", kind="scripted", tenant=other_tenant)
    mine = agent_create(name="acme-own", tenant="acme", tools=["calculate"], script=[{"content": "hi"}])
    theirs = Agent.objects.get(name="globex-ledger")
    scripted = ModelProvider.objects.get(name="scripted")
    fields = {
        "name": "crafted-agent",
        "description": "",
        "script": json.dumps([{"content": "hi"}]),
        "system_prompt": "",
        "tools": json.dumps(["calculate"]),
        "max_tool_calls": "10",
        "tool_choice": "",
        "tool_provider": "",
    }
    client = console(acme_developer)
    before = configuration_state()

    answers = [
        client.post("/admin/agents_app/agent/add/", {**fields, "tenant": other_tenant.pk, "provider": scripted.pk}),
        client.post("/admin/agents_app/agent/add/", {**fields, "tenant": "", "provider": scripted.pk}),
        client.post("/admin/agents_app/agent/add/", {**fields, "tenant": tenant.pk, "provider": provider.pk}),
        client.post(
            f"/admin/agents_app/agent/{mine.pk}/change/",
            {**fields, "name": "acme-own", "tenant": other_tenant.pk, "provider": scripted.pk},
        ),
        client.post(
            f"/admin/agents_app/agent/{mine.pk}/change/",
            {**fields, "name": "acme-own", "tenant": tenant.pk, "provider": provider.pk},
        ),
    ]
    foreign = client.post(
        f"/admin/agents_app/agent/{theirs.pk}/change/", {**fields, "tenant": tenant.pk, "provider": scripted.pk}
    )
    missing = client.post(
        f"/admin/agents_app/agent/{MISSING_ID}/change/", {**fields, "tenant": tenant.pk, "provider": scripted.pk}
    )
    global_agent = acme.ledger_run.agent
    assert global_agent.tenant_id is None
    global_change = client.post(
        f"/admin/agents_app/agent/{global_agent.pk}/change/",
        {**fields, "name": global_agent.name, "tenant": tenant.pk, "provider": scripted.pk},
    )

    assert configuration_state() == before
    assert all(r.status_code == 200 and r.context["adminform"].form.errors for r in answers)
    assert foreign.status_code == missing.status_code == 302 and foreign["Location"] == missing["Location"]
    assert global_change.status_code == 403


# --- the approval desk's decide endpoints and the saga page's retry ----------------------------------------------


def test_an_operator_cannot_edit_or_decide_a_globex_request_by_crafted_ids(
    globex: GlobexData, acme: AcmeData, acme_operator: User
) -> None:
    """acme's operator approves globex's request with edited arguments (the product, the amount), and rejects it,
    by its id and by crafted spellings of it; each answers exactly like a missing id, nothing is recorded."""
    client = console(acme_operator)
    pk = globex.approval.pk
    edit = {
        "comment": "edited",
        "round": "1",
        "arguments_hash": globex.approval.arguments_hash,
        "arguments": json.dumps({"product": "acme-chosen", "amount": "1"}),
        "arg__product": "acme-chosen",
    }
    before = globex_state()
    spellings = [str(pk), f"0{pk}", f"{pk}%20", f"+{pk}", f"{pk}.0", f"{pk}/change"]
    for decision in ("approve", "reject"):
        missing = client.post(f"/admin/approvals/approvalrequest/{MISSING_ID}/{decision}/", edit, follow=True)
        for spelling in spellings:
            foreign = client.post(f"/admin/approvals/approvalrequest/{spelling}/{decision}/", edit, follow=True)
            assert foreign.status_code == missing.status_code, (spelling, decision)
            assert foreign.redirect_chain[-1:] == missing.redirect_chain[-1:], (spelling, decision)
            shown = [m.replace(unquote(spelling), "?") for m in messages_of(foreign)]
            assert shown == [m.replace(MISSING_ID, "?") for m in messages_of(missing)], (spelling, decision)
            assert GLOBEX_PRODUCT not in foreign.content.decode()

    assert globex_state() == before
    assert ApprovalRequest.objects.get(pk=pk).arguments["product"] == GLOBEX_PRODUCT


@pytest.mark.parametrize("who", ["auditor", "developer"])
def test_staff_without_the_decide_or_operate_permission_cannot_use_acmes_decide_and_retry_pages(
    who: str, acme: AcmeData, acme_staff: dict[str, User]
) -> None:
    """acme's auditor and developer post the decide endpoints of acme's own request and the retry of acme's held
    saga: 403, and nothing is recorded."""
    _hold(acme.saga, acme.compensation)
    client = console(acme_staff[who])
    before = database_state()

    answers = [
        client.post(f"/admin/approvals/approvalrequest/{acme.approval.pk}/{decision}/", {"comment": "x"})
        for decision in ("approve", "reject")
    ]
    answers.append(client.post(f"/admin/sagas/saga/{acme.saga.pk}/retry/"))

    assert [r.status_code for r in answers] == [403, 403, 403]
    assert database_state() == before


def test_the_saga_retry_page_of_a_globex_saga_answers_like_a_missing_one(
    globex: GlobexData, acme_operator: User
) -> None:
    """acme's operator posts ``/admin/sagas/saga/<globex's saga>/retry/`` for globex's held debit."""
    _hold(globex.saga, globex.compensation)
    client = console(acme_operator)
    before = globex_state()

    foreign = client.post(f"/admin/sagas/saga/{globex.saga.pk}/retry/", follow=True)
    missing = client.post(f"/admin/sagas/saga/{MISSING_ID}/retry/", follow=True)

    assert foreign.redirect_chain == missing.redirect_chain == [("/admin/", 302)]
    assert [m.replace(str(globex.saga.pk), "?") for m in messages_of(foreign)] == [
        m.replace(MISSING_ID, "?") for m in messages_of(missing)
    ]
    assert globex_state() == before and Account.objects.get(account_id="ACC-GLOBEX").balance == Decimal("4300")


# --- model providers, remote MCP servers and their credentials -----------------------------------------------


PLATFORM_PAGES = [
    ("agents_app", "modelprovider"),
    ("toolhub", "remotemcpserver"),
    ("toolhub", "remotemcptool"),
]


@pytest.fixture
def endpoints(tenant: Tenant, other_tenant: Tenant) -> dict[str, Any]:
    """A provider of acme's and one of globex's (URL and key variable each), a remote MCP server with a tool, and
    credentials of both tenants for it."""
    server = RemoteMcpServer.objects.create(name="crm", url="https://mcp.crm.example/secret-path")
    RemoteMcpServer.objects.create(name="erp", url="https://mcp.erp.example/mcp")
    return {
        "acme_provider": ModelProvider.objects.create(
            name="acme-gpt",
            kind="openai",
            tenant=tenant,
            base_url="https://llm.acme.internal/v1",
            credential_env="ACME_LLM_KEY_VARIABLE",
        ),
        "globex_provider": ModelProvider.objects.create(
            name="globex-gpt",
            kind="openai",
            tenant=other_tenant,
            base_url="https://llm.globex.internal/v1",
            credential_env="GLOBEX_LLM_KEY_VARIABLE",
        ),
        "server": server,
        "tool": RemoteMcpTool.objects.create(server=server, remote_name="lookup", tool_name="crm__lookup"),
        "acme_credential": RemoteMcpCredential.objects.create(
            server=server, tenant="acme", credential_env="CRM_TOKEN_ACME"
        ),
        "globex_credential": RemoteMcpCredential.objects.create(
            server=server, tenant="globex", credential_env="CRM_TOKEN_GLOBEX", header="X-Globex-Auth"
        ),
    }


@pytest.fixture
def acme_mcp_admin(tenant: Tenant) -> User:
    """A tenant administrator of acme for remote MCP: may read servers and manage credentials (README: "Tenant
    administrators see and edit their own tenants' references only")."""
    return make_user(
        "acme-mcp-admin",
        tenant=tenant,
        staff=True,
        permissions=(
            "toolhub.view_remotemcpserver",
            "toolhub.change_remotemcpserver",
            "toolhub.view_remotemcptool",
            "toolhub.view_remotemcpcredential",
            "toolhub.add_remotemcpcredential",
            "toolhub.change_remotemcpcredential",
            "agents_app.view_modelprovider",
            "agents_app.change_modelprovider",
        ),
    )


SECRETS = [
    "llm.acme.internal",
    "ACME_LLM_KEY_VARIABLE",
    "llm.globex.internal",
    "GLOBEX_LLM_KEY_VARIABLE",
    "mcp.crm.example",
    "secret-path",
    "CRM_TOKEN_GLOBEX",
    "X-Globex-Auth",
]


@pytest.mark.parametrize("who", ["operator", "auditor", "developer", "mcp_admin"])
def test_provider_and_remote_server_pages_show_tenant_staff_no_endpoint_or_key_name(
    who: str, endpoints: dict[str, Any], acme_staff: dict[str, User], acme_mcp_admin: User
) -> None:
    """acme's staff, and a tenant admin explicitly given view and change permissions on providers and servers,
    open the provider, server and remote tool lists, change, add and history pages, the admin index, and the
    autocomplete of a provider. None shows an endpoint, a key variable's name or globex's credential."""
    user = acme_mcp_admin if who == "mcp_admin" else acme_staff[who]
    client = console(user)
    rows = {
        "modelprovider": endpoints["globex_provider"].pk,
        "remotemcpserver": endpoints["server"].pk,
        "remotemcptool": endpoints["tool"].pk,
    }
    urls = ["/admin/", "/admin/agents_app/", "/admin/toolhub/"]
    for app, model in PLATFORM_PAGES:
        base = f"/admin/{app}/{model}/"
        urls += [base, f"{base}add/", f"{base}{rows[model]}/change/", f"{base}{rows[model]}/history/"]
        urls += [f"{base}{rows[model]}/delete/", f"{base}?q=acme"]
    urls.append("/admin/autocomplete/?app_label=agents_app&model_name=agent&field_name=provider&term=gpt")

    for url in urls:
        response = client.get(url)
        assert response.status_code in (200, 302, 403, 404), (url, response.status_code)
        if url.startswith(("/admin/agents_app/modelprovider/", "/admin/toolhub/remotemcp")):
            assert response.status_code in (302, 403), (url, response.status_code)
        body = response.content.decode()
        leaked = [secret for secret in SECRETS if secret in body]
        assert not leaked, (url, leaked)
    changed = client.post(
        f"/admin/agents_app/modelprovider/{endpoints['acme_provider'].pk}/change/",
        {"name": "acme-gpt", "kind": "openai", "base_url": "https://attacker.example/v1", "credential_env": "X"},
    )
    assert changed.status_code == 403
    assert ModelProvider.objects.get(name="acme-gpt").base_url == "https://llm.acme.internal/v1"


def test_a_failing_providers_key_variable_and_url_show_on_no_page_of_acmes_staff(
    endpoints: dict[str, Any], alice: User, acme_staff: dict[str, User], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An acme agent runs on acme's provider whose key variable is unset: the run fails. acme's staff read the
    run, its calls, the audit trail and the dashboard in the admin, and alice the run through the API; the
    variable's name and the provider's URL are on none of them (README: "which variable, only in the server log")."""
    monkeypatch.delenv("ACME_LLM_KEY_VARIABLE", raising=False)
    agent = agent_create(name="acme-llm-agent", tenant="acme", provider="acme-gpt", tools=["calculate"])
    run = run_start(agent=agent, user=alice, input="hello")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and "not configured" in run.error, (run.status, run.error)

    pages = [
        f"/admin/agents_app/agentrun/{run.pk}/change/",
        "/admin/agents_app/agentrun/",
        f"/admin/agents_app/agent/{agent.pk}/change/",
        "/admin/toolhub/auditevent/",
        f"/admin/toolhub/auditevent/?q={run.pk}",
        "/admin/",
    ]
    for who, user in acme_staff.items():
        client = console(user)
        for url in pages:
            response = client.get(url)
            assert response.status_code == 200, (who, url, response.status_code)
            body = response.content.decode()
            assert "ACME_LLM_KEY_VARIABLE" not in body and "llm.acme.internal" not in body, (who, url)
    api = client_for(alice).get(f"/api/v1/runs/{run.pk}/").content.decode()
    assert "ACME_LLM_KEY_VARIABLE" not in api and "llm.acme.internal" not in api
    stored = json.dumps(list(AuditEvent.objects.filter(tenant="acme").values_list("data", flat=True)))
    assert "ACME_LLM_KEY_VARIABLE" not in stored


def test_a_tenant_credential_admin_sees_and_saves_only_acmes_credentials(
    endpoints: dict[str, Any], acme_mcp_admin: User
) -> None:
    """acme's MCP administrator lists, searches, opens and changes credentials.

    Tried: the list and ``?q=globex`` / ``?tenant=globex`` / ``?server__id__exact=``; globex's credential's change,
    history and delete pages (like a missing id); a new credential for a tenant that does not exist, for no
    tenant; acme's credential moved to globex (with a server globex has none for). Nothing of globex shows,
    nothing is written outside acme.
    """
    client = console(acme_mcp_admin)
    theirs = endpoints["globex_credential"].pk
    erp = RemoteMcpServer.objects.get(name="erp")
    before = sorted(RemoteMcpCredential.objects.values_list("id", "server_id", "tenant", "credential_env", "header"))

    for query in ("", "?q=globex", "?tenant=globex", f"?server__id__exact={endpoints['server'].pk}"):
        response = client.get(f"/admin/toolhub/remotemcpcredential/{query}")
        assert response.status_code in (200, 302), query
        body = response.content.decode()
        assert "CRM_TOKEN_GLOBEX" not in body and "X-Globex-Auth" not in body, query
        if response.status_code == 200:
            assert [c.tenant for c in response.context["cl"].result_list] in ([], ["acme"]), query
    for page in ("change", "history", "delete"):
        foreign = client.get(f"/admin/toolhub/remotemcpcredential/{theirs}/{page}/")
        missing = client.get(f"/admin/toolhub/remotemcpcredential/{MISSING_ID}/{page}/")
        assert (foreign.status_code, foreign.get("Location")) == (missing.status_code, missing.get("Location")), page
    fields = {"credential_env": "CRM_TOKEN_NEW", "header": "Authorization", "scheme": "Bearer"}
    answers = [
        client.post("/admin/toolhub/remotemcpcredential/add/", {**fields, "server": erp.pk, "tenant": "nosuch"}),
        client.post("/admin/toolhub/remotemcpcredential/add/", {**fields, "server": erp.pk, "tenant": ""}),
        client.post("/admin/toolhub/remotemcpcredential/add/", {**fields, "server": erp.pk, "tenant": "globex"}),
        client.post(
            f"/admin/toolhub/remotemcpcredential/{endpoints['acme_credential'].pk}/change/",
            {**fields, "server": erp.pk, "tenant": "globex"},
        ),
    ]

    # adding is the platform's (403 whatever the tenant); on a change, server, tenant and variable are read-only
    assert [r.status_code for r in answers] == [403, 403, 403, 302]
    assert sorted(RemoteMcpCredential.objects.values_list("id", "server_id", "tenant", "credential_env", "header")) == (
        before
    )


def test_fixed_adding_a_credential_for_globex_tells_whether_globex_has_one_for_a_server(
    endpoints: dict[str, Any], acme_mcp_admin: User
) -> None:
    """acme's MCP administrator posts a new credential with ``tenant=globex`` for ``crm`` (globex has one) and for
    ``erp`` (globex has none). Found: the two answers differ, so acme learns which servers globex is set up for."""
    client = console(acme_mcp_admin)
    erp = RemoteMcpServer.objects.get(name="erp")
    fields = {"tenant": "globex", "credential_env": "X", "header": "Authorization", "scheme": "Bearer"}

    has_one = client.post("/admin/toolhub/remotemcpcredential/add/", {**fields, "server": endpoints["server"].pk})
    has_none = client.post("/admin/toolhub/remotemcpcredential/add/", {**fields, "server": erp.pk})

    assert has_one.status_code == has_none.status_code
    assert "already exists" not in has_one.content.decode()


@pytest.fixture
def globex_token() -> Iterator[str]:
    os.environ["CRM_TOKEN_GLOBEX"] = "globex-crm-bearer-token"
    yield "globex-crm-bearer-token"
    os.environ.pop("CRM_TOKEN_GLOBEX", None)


def test_fixed_a_tenant_credential_may_name_globexs_token_variable(
    endpoints: dict[str, Any], acme_mcp_admin: User, globex_token: str
) -> None:
    """acme's MCP administrator points acme's credential for ``crm`` at ``CRM_TOKEN_GLOBEX``, the variable globex's
    credential names (the help text's own naming scheme makes it easy to guess). Found: saved; the headers of
    acme's next call to ``crm`` carry globex's bearer token, so acme acts as globex on the CRM."""
    client = console(acme_mcp_admin)
    credential = endpoints["acme_credential"]

    client.post(
        f"/admin/toolhub/remotemcpcredential/{credential.pk}/change/",
        {
            "server": endpoints["server"].pk,
            "tenant": "acme",
            "credential_env": "CRM_TOKEN_GLOBEX",
            "header": "Authorization",
            "scheme": "Bearer",
        },
    )

    try:
        headers = credential_headers(endpoints["server"], "acme")
    except ToolError:  # acme's own variable is unset here: refused, which is secure too
        headers = {}
    assert globex_token not in json.dumps(headers)
    assert RemoteMcpCredential.objects.get(pk=credential.pk).credential_env == "CRM_TOKEN_ACME"


# --- history, changelist filters, error flags, to_field -------------------------------------------------------


def test_history_pages_of_globex_rows_answer_like_missing_ones_and_global_rows_show_only_their_own(
    configuration: dict[str, Any], globex: GlobexData, acme_developer: User, superuser: User
) -> None:
    """The platform changes globex's rule, the global rule and globex's agent in the admin (log entries). acme's
    developer opens the history pages: globex's rows like missing ids; the global rule's history names only its
    own changes (none of globex's rule)."""
    platform = console(superuser)
    rule = {"enabled": "on", "priority": "5", "required_approvals": "2", "tool_name": "debit"}
    globex_rule, global_rule = configuration["globex_rule"], configuration["global_rule"]
    assert (
        platform.post(
            f"/admin/approvals/approvalrule/{globex_rule.pk}/change/",
            {**rule, "name": "globex-rule-renamed", "tenant": globex_rule.tenant_id},
        ).status_code
        == 302
    )
    assert (
        platform.post(
            f"/admin/approvals/approvalrule/{global_rule.pk}/change/", {**rule, "name": "global-rule"}
        ).status_code
        == 302
    )
    client = console(acme_developer)
    globex_agent = Agent.objects.get(name="globex-ledger")
    pairs = [
        (
            f"/admin/approvals/approvalrule/{globex_rule.pk}/history/",
            f"/admin/approvals/approvalrule/{MISSING_ID}/history/",
        ),
        (
            f"/admin/toolhub/grant/{configuration['globex_grant'].pk}/history/",
            f"/admin/toolhub/grant/{MISSING_ID}/history/",
        ),
        (
            f"/admin/toolhub/grant/{configuration['agent_grant'].pk}/history/",
            f"/admin/toolhub/grant/{MISSING_ID}/history/",
        ),
        (f"/admin/agents_app/agent/{globex_agent.pk}/history/", f"/admin/agents_app/agent/{MISSING_ID}/history/"),
        (
            f"/admin/toolhub/toolgroup/{configuration['payments'].pk}/history/",
            f"/admin/toolhub/toolgroup/{MISSING_ID}/history/",
        ),
    ]
    for foreign_url, missing_url in pairs:
        foreign, missing = client.get(foreign_url), client.get(missing_url)
        assert (foreign.status_code, foreign.get("Location")) == (missing.status_code, missing.get("Location"))
    shown = client.get(f"/admin/approvals/approvalrule/{global_rule.pk}/history/")
    assert shown.status_code == 200
    body = shown.content.decode()
    assert "globex" not in body and len(shown.context["action_list"]) == 1


def test_changelist_filters_error_flags_and_to_field_show_nothing_of_globex(
    configuration: dict[str, Any], globex: GlobexData, acme_developer: User, acme_operator: User, other_tenant: Tenant
) -> None:
    """acme's staff craft the admin's query parameters.

    Tried: ``?tenant__id__exact=<globex>`` on grants and rules (on the list filter), ``?tenant__slug=globex`` and
    ``?agent__tenant__slug=globex`` (lookups the admin refuses), a bogus parameter (the ``?e=1`` page), a change
    page with ``?_changelist_filters=`` naming globex and the redirect after saving it, ``?_to_field=password`` on
    users and ``?_to_field=credential_env``, and ``_popup`` lists. No row, filter choice or name of globex shows.
    """
    developer, operator = console(acme_developer), console(acme_operator)
    globex_pk = other_tenant.pk
    urls = [
        (developer, f"/admin/toolhub/grant/?tenant__id__exact={globex_pk}"),
        (developer, f"/admin/approvals/approvalrule/?tenant__id__exact={globex_pk}"),
        (developer, "/admin/approvals/approvalrule/?tenant__slug=globex"),
        (developer, "/admin/toolhub/grant/?tenant__slug__startswith=glo"),
        (operator, "/admin/agents_app/agentrun/?agent__tenant__slug=globex"),
        (operator, f"/admin/agents_app/agentrun/?agent__id__exact={Agent.objects.get(name='globex-ledger').pk}"),
        (operator, "/admin/agents_app/agentrun/?user__username=gina"),
        (operator, "/admin/approvals/approvalrequest/?status=all&tenant=globex"),
        (operator, "/admin/approvals/approvalrequest/?status=all&requested_by__username=gina"),
        (operator, "/admin/sagas/compensation/?saga__tenant=globex"),
        (operator, "/admin/toolhub/grant/?bogus=1"),
        (operator, "/admin/toolhub/toolcall/?e=1"),
        (operator, "/admin/auth/user/?_to_field=password&_popup=1"),
        (operator, "/admin/toolhub/remotemcpcredential/?_to_field=credential_env&_popup=1"),
        (developer, "/admin/auth/user/?_to_field=id&_popup=1&q=gina"),
        (developer, f"/admin/approvals/approvalrule/?_changelist_filters=tenant__id__exact%3D{globex_pk}"),
        (
            developer,
            f"/admin/approvals/approvalrule/{configuration['acme_rule'].pk}/change/"
            f"?_changelist_filters=tenant__id__exact%3D{globex_pk}",
        ),
    ]
    for client, url in urls:
        response = client.get(url, follow=True)
        assert response.status_code in (200, 400, 403), (url, response.status_code)
        body = without_echo(response.content.decode(), url)
        body = body.replace(">globex-payments<", "")  # the tool group choice: test_leak_grant_and_rule_forms_...
        leaked = leaks(body, "globex", "gina", GLOBEX_PRODUCT, str(globex.ledger_run.id))
        assert not leaked, (url, leaked)
        changelist = response.context and response.context.get("cl")
        if changelist is not None:
            assert all(
                getattr(row, "tenant", None) in (None, "acme") or str(getattr(row, "tenant", "")) == "acme"
                for row in changelist.result_list
            ), url
    saved = developer.post(
        f"/admin/approvals/approvalrule/{configuration['acme_rule'].pk}/change/"
        f"?_changelist_filters=tenant__id__exact%3D{globex_pk}",
        {
            "name": "acme-rule",
            "enabled": "on",
            "priority": "3",
            "required_approvals": "1",
            "tool_name": "create_order",
            "tenant": configuration["acme_rule"].tenant_id,
        },
        follow=True,
    )
    assert saved.status_code == 200 and not leaks(
        without_echo(saved.content.decode(), "?" + saved.request["QUERY_STRING"]), "globex"
    )
    assert list(saved.context["cl"].result_list) == []


# --- exports and the dashboard -------------------------------------------------------------------------------------


def _export(client: Client, export_format: str, query: str) -> str:
    response = client.post(f"/admin/toolhub/toolcall/export/{export_format}/?{query}")
    assert response.status_code in (200, 400), (query, response.status_code)
    return b"".join(response.streaming_content).decode() if response.status_code == 200 else ""


@pytest.mark.parametrize("export_format", ["csv", "jsonl"])
def test_exports_with_filters_naming_globex_hold_no_row_of_globex(
    export_format: str, acme: AcmeData, globex: GlobexData, acme_auditor: User
) -> None:
    """acme's auditor exports calls with filters and searches aimed at globex's rows.

    Tried: ``tenant=globex``, ``tenant__exact=globex``, ``tenant__in=acme,globex``, ``tenant__startswith=g``,
    ``q=<globex call id>``, ``q=<globex run id>``, ``user=gina``, ``agent=globex-orders``, ``q=debit`` and
    ``user_id=<gina>``. Only acme's calls ever leave; the same export without a filter does hold them.
    """
    client = console(acme_auditor)
    globex_calls = [str(pk) for pk in ToolCall.objects.filter(tenant="globex").values_list("id", flat=True)]
    assert globex_calls
    queries = [
        "tenant=globex",
        "tenant__exact=globex",
        "tenant__in=acme,globex",
        "tenant__startswith=g",
        f"q={globex_calls[0]}",
        f"q={globex.ledger_run.id}",
        "user=gina",
        "agent=globex-orders",
        "q=debit",
        f"user_id={globex.gina.pk}",
        f"user__id__exact={globex.gina.pk}",
    ]
    for query in queries:
        text = _export(client, export_format, query)
        leaked = leaks(text, *globex_calls, "globex", "gina", GLOBEX_PRODUCT)
        assert not leaked, (query, leaked)
    everything = _export(client, export_format, "")
    assert str(acme.artifact_call.id) in everything and "globex" not in everything


def test_the_dashboard_with_crafted_query_parameters_counts_only_acme(
    acme: AcmeData, globex: GlobexData, acme_operator: User, other_tenant: Tenant
) -> None:
    """acme's operator opens the admin index with ``?tenant=globex``, ``?tenant__in=acme,globex``, ``?all=1``,
    ``?user=gina`` and ``?hours=100000``: the dashboard counts acme's calls and pending approvals only."""
    run_start(agent=Agent.objects.get(name="globex-orders"), user=globex.gina, input="a second globex order")
    assert ApprovalRequest.objects.filter(tenant="globex", status=ApprovalStatus.PENDING).count() == 2
    client = console(acme_operator)
    acme_pending = ToolCall.objects.filter(tenant="acme", status="pending_approval").count()

    for query in ("", "?tenant=globex", "?tenant__in=acme,globex", "?all=1", "?user=gina", "?hours=100000"):
        response = client.get(f"/admin/{query}")
        assert response.status_code == 200, query
        body = response.content.decode()
        pending = body.split('id="dashboard-pending"><span class="toolhub-figure-value">')[1].split("<")[0]
        assert int(pending) == acme_pending, query
        assert not leaks(body, "globex", "gina"), query


# --- staff with a role and no tenant at all ----------------------------------------------------------------------


CHANGELISTS = [
    "/admin/toolhub/toolcall/",
    "/admin/toolhub/auditevent/",
    "/admin/approvals/approvalrequest/?status=all",
    "/admin/agents_app/agentrun/",
    "/admin/agents_app/agent/",
    "/admin/sagas/saga/",
    "/admin/sagas/compensation/",
    "/admin/approvals/webhookdelivery/",
    "/admin/approvals/approvalrule/",
    "/admin/toolhub/grant/",
    "/admin/toolhub/tenant/",
    "/admin/toolhub/tenantmembership/",
    "/admin/auth/user/",
]


@pytest.mark.parametrize("role", ["auditors", "operators", "developers"])
def test_staff_with_a_role_and_no_tenant_see_and_do_nothing_of_any_tenant(
    role: str,
    acme: AcmeData,
    globex: GlobexData,
    configuration: dict[str, Any],
    roles: dict[str, Group],
    request_call: RequestCall,
) -> None:
    """A staff member of a role group with no membership at all (nor the cross-tenant permission).

    Tried: every changelist, the dashboard, an export, the add forms (tenant choices), the decide endpoints and
    the bulk actions with every id, and a call of a user of no tenant (tenant ""), which belongs to nobody's
    tenant. Only global agents and the global rule are shown (read-only); nothing else of any tenant or of ''.
    """
    lonely = make_user("lonely", staff=True, groups=(roles[role],))
    stray = make_user("stray")
    orphan = request_call("export_file", {"name": "orphan"}, stray)
    assert orphan.tenant == ""
    client = console(lonely)
    markers = ["acme", "globex", ">alice<", "user:alice", ">gina<", "user:gina", ">stray<", str(orphan.id)]
    markers += [str(acme.ledger_run.id), str(globex.ledger_run.id)]

    for url in CHANGELISTS:
        response = client.get(url)
        if response.status_code != 200:
            assert response.status_code in (302, 403), (url, response.status_code)
            continue
        rows = list(response.context["cl"].result_list)
        if url.startswith("/admin/agents_app/agent/"):
            assert all(agent.tenant_id is None for agent in rows), url
            continue
        if url.startswith("/admin/approvals/approvalrule/"):
            assert [rule.name for rule in rows] == ["global-rule"], url
            continue
        assert rows == [], (url, rows)
        body = response.content.decode()
        leaked = leaks(body, *markers)
        assert not leaked, (url, leaked)
    index = client.get("/admin/").content.decode()
    assert '"toolhub-figure-value">0<' in index and "export_file" not in index
    assert _export(client, "csv", "").strip().count("\n") == 0
    assert str(orphan.id) not in _export(client, "jsonl", f"q={orphan.id}")
    for url in ("/admin/agents_app/agent/add/", "/admin/approvals/approvalrule/add/", "/admin/toolhub/grant/add/"):
        response = client.get(url)
        if response.status_code == 200:
            assert list(response.context["adminform"].form.fields["tenant"].queryset) == [], url

    before, config_before = database_state(), configuration_state()
    for pk in (acme.approval.pk, globex.approval.pk):
        for decision in ("approve", "reject"):
            client.post(f"/admin/approvals/approvalrequest/{pk}/{decision}/", {"comment": "x"})
    _hold(acme.saga, acme.compensation)
    held = database_state()
    for url, action, _, _ in BULK:
        pks = [acme.approval.pk, globex.approval.pk, acme.saga.pk, globex.saga.pk]
        pks += [acme.compensation.pk, globex.compensation.pk]
        client.post(url, {"action": action, "_selected_action": [str(p) for p in pks], "apply": "1", "note": "x"})
    client.post(
        "/admin/approvals/approvalrule/",
        {"action": "delete_selected", "_selected_action": [str(configuration["global_rule"].pk)], "post": "yes"},
    )
    assert before["approvals"] == held["approvals"] and before["decisions"] == held["decisions"]
    assert database_state() == held and configuration_state() == config_before


def test_a_developer_grants_a_tool_to_their_tenant_in_the_admin(acme_developer: User, tenant: Tenant) -> None:
    """Noticed by this probe: every grant form of a tenant-scoped developer was refused (the agent tenant, made
    required like any tenant field, broke the grant's constraints). The form now holds only what they may grant."""
    client = console(acme_developer)

    saved = client.post(
        "/admin/toolhub/grant/add/", {"effect": "allow", "note": "n", "tool_name": "calculate", "tenant": tenant.pk}
    )

    assert saved.status_code == 302, saved.content.decode()[:2000]
    grant = Grant.objects.get(tool_name="calculate")
    assert (grant.tenant_id, grant.user_id, grant.group_id, grant.agent_name) == (tenant.pk, None, None, "")
