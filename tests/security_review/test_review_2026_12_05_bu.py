"""Review of 2026-12-05 (bu): regressions and sibling holes in the commits 317e64f..1a7a2e2.

Each test fails on the reviewed code (main at 1a7a2e2) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A grant to a user or to a role (Django group), added, changed or deleted in the admin, went to the platform's
   chains only: the tenants whose people it lets call (or bars from calling) a tool saw nothing of it, though a
   role's own change goes to its holders' tenants (review bs). Now the grant's event also goes to the chains of
   the user's tenants and of the role holders' tenants.
2. The shell allow list caught a path attached to one short option (``-f/etc/passwd``) but not after a cluster of
   them (``tar -xf/etc/shadow``, which getopt reads the same way) nor a ``file:`` URL (``curl file:///etc/passwd``):
   under a loose pattern they ran unattended. Now both wait for an operator (``builtins.shell._paths_in``).
3. Review bj's governance trail left out remote MCP servers and their credentials: lowering a server's risk (its
   tools then run without approval) or naming the variable holding a tenant's token left only Django's admin
   history. Now their admins are ``GovernanceAudited`` (servers: the platform's chains; a credential: its tenant's).
4. A tenant added, renamed or deleted in the admin left no audit event, though a deletion takes the tenant's grants,
   approval rules and memberships with it (no other page records that cascade). Now in the tenant's own chains.

Checked and found holding (no test here): ``run.failed`` is appended in the run's tenant (``""``, the platform's
chains, for a platform run) and every path to ``failed`` goes through ``ending.run_finish`` (budgets, model errors,
lost steps); the run rollback's descendants and sagas are filtered by the run's tenant, and the saga API refuses a
run's saga (409), so no path rolls back part of a run tree outside it; saga ids holding '/' are refused for REST and
MCP alike (``direct._checked_saga_id``); the subagent call cancel refusal covers REST, the admin action and MCP (all
through ``waiting.tool_call_cancel``); a provider's tenant binding holds for agentic tools' inner models
(``agentic_model`` builds through ``adapter_for``; ``provider=`` only among ``providers_usable_by``); every admin
action in the code declares its permissions; a state machine's ``held_refusal`` refuses no legitimate call under
``serial_tool_execution`` (a turn's deferred calls are all checked against the state the turn started in, applied
only after the turn); migration 0032 covers every plpgsql function the migrations create, and the governance stamp's
functions set their own search_path; the artifact endpoint is the only download of tool output.

Noted, not changed: ``compensate_on_error``'s automatic rollback undoes the run's own saga only, not its subagents'
(unlike ``POST /runs/{id}/rollback/``); README states this as intended (a subagent's own agent compensates its own
failures), and waiting on descendants' compensations would stall the parent (they wake the child run). A remote MCP
server's ``select_predicate`` imports any dotted path (platform staff only), unlike ``TOOL_PROVIDERS``' allow list.
Model providers and agents changed in the admin are still not in the governance trail.
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from tests.helpers import assert_audit_intact, console
from tests.security_review.conftest import server_form
from tests.tenancy.conftest import make_user
from toolhub.models import AuditEvent, Grant, Tenant

pytestmark = pytest.mark.django_db


def _grant_events(kind: str, tenant: str) -> list[AuditEvent]:
    events = AuditEvent.objects.filter(event_type=kind, tenant=tenant).order_by("id")
    return [event for event in events if event.payload.get("model") == "toolhub.grant"]


def _user_grant_form(**fields: Any) -> dict[str, Any]:
    return {"effect": "allow", "note": "", "tool_name": "debit", "tool_group": "", **fields}


def test_a_grant_to_a_user_or_role_is_in_their_tenants_trail(
    superuser: User, alice: User, tenant: Tenant, other_tenant: Tenant
) -> None:
    """Found: the platform allowed ``debit`` to alice (of acme), then to a role held by a globex user, in the admin;
    acme's and globex's chains held nothing of either, only the platform's. Expect: ``governance.added`` in acme's
    chain for alice's grant and in globex's for the role's."""
    browser = console(superuser)
    assert browser.post("/admin/toolhub/grant/add/", _user_grant_form(user=alice.pk)).status_code == 302
    role = Group.objects.create(name="debiters")
    make_user("gina", tenant=other_tenant, groups=(role,))
    assert browser.post("/admin/toolhub/grant/add/", _user_grant_form(group=role.pk)).status_code == 302
    assert Grant.objects.filter(tool_name="debit").count() == 2

    (alices,) = _grant_events("governance.added", "acme")
    assert alices.payload["values"]["user_id"] == alice.pk
    (roles,) = _grant_events("governance.added", "globex")
    assert roles.payload["values"]["group_id"] == role.pk


def test_a_path_after_clustered_short_options_or_in_a_file_url_needs_an_operator(settings: Any) -> None:
    """Found: with a loose pattern (``.*``) on the allow list, ``tar -xf/etc/shadow`` (the path after a cluster of
    short options, as getopt reads it), ``-xf../x`` and ``curl file:///etc/passwd`` ran unattended; only a path
    right after one option letter (``-f/etc/passwd``) was caught. Expect: each names a path outside the workspace,
    and option clusters without a path (``-xzf``, ``-n5``) still match."""
    from toolhub.builtins.shell import allow_list_problem

    settings.TOOLHUB = {**settings.TOOLHUB, "SHELL_COMMANDS": [{"command": "tar", "arguments": [".*"]}]}
    outside = "argument 1 of 'tar' names a path outside the workspace"
    for argument in ("-xf/etc/shadow", "-xvf~/.ssh/id_rsa", "-xf../x", "file:///etc/passwd", "FILE:/etc/passwd"):
        assert allow_list_problem(["tar", argument]) == outside, argument
    for argument in ("-xzf", "-n5", "-xf", "archive.tar", "https://example.com/a/b"):
        assert allow_list_problem(["tar", argument]) is None, argument


def test_a_remote_mcp_servers_risk_and_a_tenants_credential_changed_in_the_admin_are_in_the_trail(
    superuser: User, tenant: Tenant
) -> None:
    """Found: lowering a remote MCP server's risk from high to low in the admin (its tools' calls then run without an
    operator's approval) and naming the environment variable that holds acme's token for it left no audit event,
    only Django's admin history, as grants did before review bj. Expect: ``governance.changed`` with the risk
    before and after in the platform's chains, ``governance.added`` of the credential in acme's."""
    from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer

    server = RemoteMcpServer.objects.create(name="crm", url="https://crm.example.com/mcp", risk="high")
    browser = console(superuser)
    changed = browser.post(f"/admin/toolhub/remotemcpserver/{server.pk}/change/", server_form(risk="low"))
    assert changed.status_code == 302, changed.content[:2000]
    server.refresh_from_db()
    assert server.risk == "low"
    credential = {"server": server.pk, "tenant": "acme", "credential_env": "ACME_CRM_TOKEN", "header": "Authorization"}
    added = browser.post("/admin/toolhub/remotemcpcredential/add/", {**credential, "scheme": "Bearer"})
    assert added.status_code == 302, added.content[:2000]
    assert RemoteMcpCredential.objects.filter(server=server, tenant="acme").exists()

    (change,) = AuditEvent.objects.filter(event_type="governance.changed", tenant="")
    assert change.payload["model"] == "toolhub.remotemcpserver"
    assert change.payload["changes"] == {"risk": {"before": "high", "after": "low"}}
    (addition,) = AuditEvent.objects.filter(event_type="governance.added", tenant="acme")
    assert addition.payload["values"]["credential_env"] == "ACME_CRM_TOKEN"


def test_a_tenant_added_renamed_and_deleted_in_the_admin_is_in_the_trail(superuser: User) -> None:
    """Found: a tenant added, renamed and deleted in the admin left no audit event, though its deletion takes its
    grants, approval rules and memberships with it (a cascade no other page records) and stops everything running in
    it. Expect: ``governance.added`` / ``changed`` / ``deleted`` in the tenant's own chains."""
    browser = console(superuser)
    assert browser.post("/admin/toolhub/tenant/add/", {"slug": "initech", "name": "Initech"}).status_code == 302
    initech = Tenant.objects.get(slug="initech")
    renamed = browser.post(f"/admin/toolhub/tenant/{initech.pk}/change/", {"name": "Initech Corp"})
    assert renamed.status_code == 302
    deleted = browser.post(f"/admin/toolhub/tenant/{initech.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302 and not Tenant.objects.filter(slug="initech").exists()

    kinds = [
        (event.event_type, event.payload.get("model"))
        for event in AuditEvent.objects.filter(tenant="initech", event_type__startswith="governance.").order_by("id")
    ]
    assert kinds == [
        ("governance.added", "toolhub.tenant"),
        ("governance.changed", "toolhub.tenant"),
        ("governance.deleted", "toolhub.tenant"),
    ]
    change = AuditEvent.objects.get(tenant="initech", event_type="governance.changed")
    assert change.payload["changes"] == {"name": {"before": "Initech", "after": "Initech Corp"}}
    assert assert_audit_intact() >= 3  # the deleted tenant's chains still verify
