"""Probe of 2026-12-04 (q): the admin console's writes and forms as tenant-scoped staff.

Each test fails on the code as probed; its docstring says what was found and what is expected.
"""

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from agents_app.models import ModelProvider
from agents_app.services import agent_create
from tests.helpers import console
from tests.tenancy.conftest import make_user
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer
from toolhub.mcp_client.services import credential_headers, credential_scrubber
from toolhub.models import Tenant, TenantMembership

pytestmark = pytest.mark.django_db


# --- agents: the admin moves an agent (and the runs it drives) to another tenant ----------------------------------

AGENT_FIELDS = {
    "description": "",
    "script": json.dumps([{"content": "hi"}]),
    "system_prompt": "",
    "tools": json.dumps(["calculate"]),
    "max_tool_calls": "10",
    "tool_choice": "",
    "tool_provider": "",
}


def test_the_admin_moves_an_agent_with_acmes_runs_into_globex(
    tenant: Tenant, other_tenant: Tenant, roles: dict[str, Group], alice: User, globex_developer: User
) -> None:
    """Found: the API refuses to change an agent's tenant ("An agent's tenant cannot be changed; create the agent
    in the other tenant instead", agents_app/serializers.py), but the admin's ``AgentForm`` keeps ``tenant`` an
    editable field on the change page, checked only against the editor's own tenants. A developer who belongs to
    acme and globex moves acme's agent into globex: acme's runs of it (``AgentRun.agent``, PROTECT) now run an
    agent globex owns, whose prompt, tools and provider globex's developers (who are not in acme) change and
    which acme's developers can no longer open.
    Expect: an existing agent's tenant does not change in the admin either (read-only on the change page, or
    refused): the agent stays acme's, and globex's developer cannot open it.
    """
    from agents_app.services import run_start

    both = make_user("acme-globex-developer", tenant=tenant, staff=True, groups=(roles["developers"],))
    TenantMembership.objects.create(user=both, tenant=other_tenant)
    agent = agent_create(name="acme-helper", tenant="acme", tools=["calculate"], script=[{"content": "hi"}])
    run = run_start(agent=agent, user=alice, input="hello")
    assert run.tenant == "acme"
    scripted = ModelProvider.objects.get(name="scripted")

    console(both).post(
        f"/admin/agents_app/agent/{agent.pk}/change/",
        {**AGENT_FIELDS, "name": "acme-helper", "tenant": other_tenant.pk, "provider": scripted.pk},
    )

    agent.refresh_from_db()
    assert agent.tenant_id == tenant.pk, "acme's agent (and the acme runs it drives) now belongs to globex"
    assert console(globex_developer).get(f"/admin/agents_app/agent/{agent.pk}/change/").status_code == 302


def test_the_admin_agent_form_names_every_registered_tool_to_a_creator_without_the_catalogue(
    tenant: Tenant, settings: Any
) -> None:
    """Found: ``AgentForm.clean_tools`` (agents_app/admin.py) answers an unknown tool name with "Known tools:
    <registry.names()>", the whole registry. The API was fixed (probe 2026-12-03: ``_tools_nameable_by`` names
    only the creator's own tools to someone without ``toolhub.view_tooldefinition``); the admin's form, the
    other door to the same write, was not. Staff of acme who may add agents but hold no catalogue role read
    every tool name: tools denied to them, tools of groups activated only for other tenants.
    Expect: the admin's refusal names only the tools the creator may see, as the API does.
    """
    from toolhub.models import Grant

    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "DEFAULT_TOOL_ACCESS": "deny"}
    builder = make_user(
        "acme-admin-builder",
        tenant=tenant,
        staff=True,
        permissions=("agents_app.add_agent", "agents_app.view_agent"),
    )
    Grant.objects.create(tool_name="calculate", user=builder)
    scripted = ModelProvider.objects.get(name="scripted")

    answer = console(builder).post(
        "/admin/agents_app/agent/add/",
        {
            **AGENT_FIELDS,
            "name": "rocketeer",
            "tools": json.dumps(["launch_rockets"]),
            "tenant": tenant.pk,
            "provider": scripted.pk,
        },
    )

    assert answer.status_code == 200
    errors = json.dumps(answer.context["adminform"].form.errors)
    assert "launch_rockets" in errors  # refused, as it should be
    for hidden in ("refund_payment", "send_email", "delete_record", "create_order", "debit"):
        assert hidden not in errors, errors


# --- remote MCP credentials: the scheme a tenant's staff type ------------------------------------------------


def test_a_scheme_with_a_space_typed_by_tenant_staff_leaves_the_bare_token_unscrubbed(
    tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: tenant administrators may change their credential's ``scheme`` (README; ``RemoteMcpCredentialAdmin``
    leaves ``header`` and ``scheme`` editable), and the form takes any text. ``credential_scrubber`` takes the
    secret to be "everything after the first space" of the header value (``value.split(" ", 1)[-1]``,
    toolhub/mcp_client/services.py), so with the scheme ``Bearer acme`` the scrubbed value is ``acme <token>``
    and the token alone is not. A server that answers "invalid token <token>" has the tenant's token stored
    in clear in the call's error, the audit trail and the pages (the README: the value "never reaches the
    database, the admin, the audit trail or messages").
    Expect: after acme's staff save their scheme, the token a server echoes alone is still replaced (or the form
    refuses a scheme the scrubber cannot split).
    """
    token = "crm-acme-token-1234567890abcdef"
    monkeypatch.setenv("CRM_TOKEN_ACME_Q", token)
    server = RemoteMcpServer.objects.create(name="crm-q", url="https://mcp.crm.example/mcp")
    credential = RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="CRM_TOKEN_ACME_Q")
    admin = make_user(
        "acme-mcp-admin-q",
        tenant=tenant,
        staff=True,
        permissions=("toolhub.view_remotemcpcredential", "toolhub.change_remotemcpcredential"),
    )

    saved = console(admin).post(
        f"/admin/toolhub/remotemcpcredential/{credential.pk}/change/",
        {"header": "Authorization", "scheme": "Bearer acme"},
    )

    # Fixed both ways: the form refuses a scheme that is not one token (RFC 9110), and a row stored with one
    # before that check still has its token alone replaced (the scrubber takes the value, not a split).
    assert saved.status_code == 200 and "scheme" in saved.context["adminform"].form.errors
    assert (
        console(admin)
        .post(
            f"/admin/toolhub/remotemcpcredential/{credential.pk}/change/",
            {"header": "Authorization", "scheme": "Token"},
        )
        .status_code
        == 302
    )  # saved: the scheme is the tenant staff's to change
    RemoteMcpCredential.objects.filter(pk=credential.pk).update(scheme="Bearer acme")
    headers = credential_headers(server, "acme")
    error = f"401 Unauthorized: invalid token {token}"
    assert token not in credential_scrubber(headers, server.url).text(error)


# --- global rules shown read-only: the tool group they name ------------------------------------------------------


def test_a_global_rule_names_to_acmes_staff_a_tool_group_activated_only_for_globex(
    tenant: Tenant, other_tenant: Tenant, roles: dict[str, Group]
) -> None:
    """Found: a tool group whose activation rules name only globex is withheld from acme's staff everywhere it
    was looked for: the tool group list, the grant and rule forms' choices (``ToolGroupAdmin.get_queryset`` /
    ``choosable_queryset``, probe 2026-12-03 d). But global rules are shown to every tenant's staff read-only
    (``global_rows_visible``), and the rule list's ``tool_group`` column, its ``tool_group`` list filter (built from
    the rules shown) and the rule's change page print the group's name and link to it: the platform's global
    rule for globex's group tells acme's developers the group exists and what it is called.
    Expect: nothing of a group acme's staff may not see is shown through a global rule (its name appears on no
    page of the rule list or the rule).
    """
    from approvals.models import ApprovalRule
    from toolhub.models import ToolGroup

    group = ToolGroup.objects.create(name="globex-treasury-ops", activation_rules=[{"tenants": ["globex"]}])
    rule = ApprovalRule.objects.create(name="platform-floor", tool_group=group, required_approvals=2)
    developer = make_user("acme-developer-q", tenant=tenant, staff=True, groups=(roles["developers"],))
    client = console(developer)
    assert client.get(f"/admin/toolhub/toolgroup/{group.pk}/change/").status_code == 302  # withheld there

    pages = {
        "list": client.get("/admin/approvals/approvalrule/"),
        "change": client.get(f"/admin/approvals/approvalrule/{rule.pk}/change/"),
    }

    assert all(response.status_code == 200 for response in pages.values())
    shown = [name for name, response in pages.items() if "globex-treasury-ops" in response.content.decode()]
    assert shown == [], f"globex's tool group is named on acme's {shown} page(s)"
