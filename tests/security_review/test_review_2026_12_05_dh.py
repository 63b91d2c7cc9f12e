"""Review dh: the admin's delete confirmation pages (one row, and "Delete selected") as tenant staff see them.

Findings:
1. A delete page refused by rows that protect the row said the wrong thing. Django reports a protected row whose
   admin refuses its deletion as a permission the viewer lacks ("your account doesn't have permission to delete the
   following types of objects: agent run"), and that branch wins over the protected list: an agent that has run
   (``AgentRun.agent`` is ``PROTECT``, runs are read-only records) and a Django group a tool group or a pending request
   names as approvers (d5d84f3: ``PROTECT``, ``approvals.models.protect_pending``) sent superusers and tenant staff
   after a permission nobody holds, while what the operator must do is decide or cancel the pending requests, or give
   the tool group another approver group. Now protected rows are reported as protecting the row, under the remedy
   their model declares for the protecting field (``protected_because``), on the one-row page and on "Delete
   selected" (``toolhub.admin_deletion``, mixed into every console admin through ``TenantScopedAdmin``,
   ``CrossTenantChangesOnly`` and ``CrossTenantOnly``).
2. Listing the protected rows must not disclose other tenants' rows (review dc's lead: an agent moved by platform
   staff from globex to acme keeps its globex runs). As found, that leak was masked by finding 1 (the permission
   branch names model types only); Django's list names every row by ``str()`` with a link, whatever its tenant and
   whatever the viewer may open. Now a related row is named, and linked, only when its model's admin shows it to the
   viewer (that admin's queryset: its tenants; and its view or change permission); every other row is a count ("1
   agent run you cannot see"), and a deletion that would take rows the viewer cannot see with it is refused as one
   they lack the permission for (a governance console never lets tenant staff delete another tenant's rows, even by
   a cascade, and never deletes what the page did not name).

Checked and holds:
- Which tenant-scoped pages tenant staff may delete from: grants and approval rules (developers, by role); agents,
  memberships and the demo's accounts, entries and orders only with a permission an administrator adds. Runs, calls,
  requests, events and webhooks are read-only to everyone; tenants, users, roles, tool groups, the catalogue,
  providers, tokens and login records are deleted only by people who cross the boundary.
- Of those, only an agent has related rows that can belong to another tenant (its runs, once it moved): grants have
  none, a rule's requests are emptied (``SET_NULL``, not listed), a membership has none, a demo account's entries
  share its tenant. Django already refuses a cascade into rows whose admin refuses their deletion (out of scope).
- Django checks the delete permission before it builds the page: another tenant's row answers 403/redirect as
  before, and the POST of a refused deletion deletes nothing.
- No cascade reachable by tenant staff today takes another tenant's rows or a row of a model without its own page
  (checked over every registered admin's relations); the refusal and the counting of such rows are defence in depth.
- The summary's counts ("Agent runs: 2") appear only on a page that may be confirmed, where every row is the viewer's.
"""

import re

import pytest
from django.contrib.auth.models import Group, User

from agents_app.models import Agent, AgentRun, RunStatus
from approvals.models import ApprovalRequest
from tests.approvals.conftest import Hold, hold  # noqa: F401 - a fixture, registered by being imported here
from tests.helpers import console
from tests.tenancy.conftest import make_user
from toolhub.models import Tenant, ToolGroup

pytestmark = pytest.mark.django_db


def _moved_agent(tenant: Tenant, other_tenant: Tenant) -> tuple[Agent, AgentRun, AgentRun]:
    """An agent that ran in globex, moved by platform staff to acme, where it ran once more."""
    agent = Agent.objects.create(name="helper", tenant=other_tenant)
    theirs = AgentRun.objects.create(
        agent=agent, tenant="globex", input="globex secret plan", status=RunStatus.COMPLETED
    )
    agent.tenant = tenant
    agent.save(update_fields=["tenant"])
    ours = AgentRun.objects.create(agent=agent, tenant="acme", input="acme work", status=RunStatus.COMPLETED)
    return agent, theirs, ours


def _text(page: str) -> str:
    """The page's content without its tags, whitespace folded."""
    content = page.split('id="content"', 1)[-1]
    return " ".join(re.sub(r"<[^>]+>", " ", content).split())


def _agent_deleting_developer(tenant: Tenant, roles: dict[str, Group]) -> User:
    """acme's developer, allowed to delete agents."""
    return make_user(
        "acme-developer",
        tenant=tenant,
        staff=True,
        groups=(roles["developers"],),
        permissions=("agents_app.delete_agent",),
    )


def test_an_agents_delete_page_names_no_run_of_another_tenant(
    tenant: Tenant, other_tenant: Tenant, roles: dict[str, Group]
) -> None:
    """Found: acme's developer allowed to delete agents was told they lack the permission to delete agent runs (nobody
    has it); listing the runs instead would name the globex run of the agent moved to acme. Expect: the runs reported
    as protecting the agent, acme's own named, globex's only counted; nothing deleted."""
    agent, theirs, ours = _moved_agent(tenant, other_tenant)
    developer = _agent_deleting_developer(tenant, roles)
    client = console(developer)

    response = client.get(f"/admin/agents_app/agent/{agent.pk}/delete/")
    page = response.content.decode()

    assert response.status_code == 200
    assert str(theirs.pk) not in page
    assert str(ours.pk) in page
    assert "1 agent run you cannot see" in _text(page)
    assert "doesn't have permission" not in page and "take its tools away" in _text(page)
    client.post(f"/admin/agents_app/agent/{agent.pk}/delete/", {"post": "yes"})
    assert Agent.objects.filter(pk=agent.pk).exists()


def test_delete_selected_names_no_run_of_another_tenant(
    tenant: Tenant, other_tenant: Tenant, roles: dict[str, Group]
) -> None:
    """Found: the list's "Delete selected" page said the same wrong thing. Expect: as the one-row page, globex's run
    counted, not named."""
    agent, theirs, ours = _moved_agent(tenant, other_tenant)
    developer = _agent_deleting_developer(tenant, roles)

    response = console(developer).post(
        "/admin/agents_app/agent/", {"action": "delete_selected", "_selected_action": [str(agent.pk)]}
    )
    page = response.content.decode()

    assert response.status_code == 200
    assert str(theirs.pk) not in page and str(ours.pk) in page
    assert "1 agent run you cannot see" in _text(page)
    assert Agent.objects.filter(pk=agent.pk).exists()


def test_rows_of_a_model_the_viewer_may_not_see_are_only_counted(tenant: Tenant, other_tenant: Tenant) -> None:
    """Found: staff who may delete agents but not view runs were told they lack a permission; Django's list would name
    their tenant's runs with a link to a page that answers them 403. Expect: both runs counted, none named or linked."""
    agent, theirs, ours = _moved_agent(tenant, other_tenant)
    keeper = make_user(
        "acme-keeper", tenant=tenant, staff=True, permissions=("agents_app.view_agent", "agents_app.delete_agent")
    )

    page = console(keeper).get(f"/admin/agents_app/agent/{agent.pk}/delete/").content.decode()

    assert str(theirs.pk) not in page and str(ours.pk) not in page
    assert "/admin/agents_app/agentrun/" not in page
    assert "2 agent runs you cannot see" in _text(page)


def test_a_protected_approver_group_says_what_to_do(
    hold: Hold,  # noqa: F811 - the fixture
    second_operator: User,
    admin_user: User,
) -> None:
    """Found: deleting the group a tool group and a pending request name as approvers told a superuser their account
    lacks the permission to delete approval requests (what protects the group is not a permission). Expect: the page
    says to decide or cancel the pending requests and to give the tool group another approver group, without a server
    error; nothing is deleted."""
    treasury = Group.objects.create(name="treasury")
    treasury.user_set.add(second_operator)
    ToolGroup.objects.create(name="payments", extra_tools=["risky_effect"], approver_group=treasury)
    request = hold()
    assert isinstance(request, ApprovalRequest) and request.approver_group == treasury

    for response in (
        console(admin_user).get(f"/admin/auth/group/{treasury.pk}/delete/"),
        console(admin_user).post(
            "/admin/auth/group/", {"action": "delete_selected", "_selected_action": [treasury.pk]}
        ),
    ):
        text = _text(response.content.decode())
        assert response.status_code == 200
        assert "would require deleting the following protected related objects" not in text
        assert "doesn't have permission" not in text
        assert "decide or cancel them first" in text
        assert "choose another approver group for them first" in text
        assert "payments" in text
    assert Group.objects.filter(pk=treasury.pk).exists()
