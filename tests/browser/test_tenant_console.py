"""The admin as a tenant-scoped console: an operator of globex sees nothing of acme's, and acme's pages do not open."""

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from playwright.sync_api import Page, expect

from agents_app.models import Agent, AgentRun
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.browser.conftest import admin_login, start_waiting_run
from toolhub.models import Tenant, TenantMembership, ToolCall

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]

PASSWORD = "globex-operator-password"


@pytest.fixture
def globex_operator(other_tenant: Tenant) -> User:
    """An operator (the role made by ``manage.py toolhub_roles``) of tenant globex only."""
    call_command("toolhub_roles", verbosity=0)
    user = User.objects.create_user("globex-operator", "ops@globex.example", PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name="operators"))
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    return user


@pytest.fixture
def globex_waiting_run(order_agent: Agent, other_tenant: Tenant) -> tuple[AgentRun, ApprovalRequest]:
    """A run of a globex user, waiting for an operator: what the globex operator should see."""
    gina = User.objects.create_user("gina", "gina@globex.example", "gina-password")
    TenantMembership.objects.create(user=gina, tenant=other_tenant)
    return start_waiting_run(order_agent, gina)


def test_an_operator_of_globex_sees_none_of_acmes_rows_and_acmes_pages_do_not_open(
    page: Page,
    globex_operator: User,
    waiting_run: tuple[AgentRun, ApprovalRequest],
    globex_waiting_run: tuple[AgentRun, ApprovalRequest],
) -> None:
    # given: acme's run waiting on an approval (alice's), and globex's own
    acme_run, acme_request = waiting_run
    globex_run, globex_request = globex_waiting_run
    assert acme_request.tenant == "acme" and globex_request.tenant == "globex"
    acme_call = ToolCall.objects.get(run_id=acme_run.id)

    admin_login(page, "globex-operator", PASSWORD)

    # when: the operator browses approvals, calls and runs
    for url, globex_text, acme_text in [
        ("/admin/approvals/approvalrequest/", str(globex_request.pk), None),
        ("/admin/toolhub/toolcall/", str(ToolCall.objects.get(run_id=globex_run.id).pk), str(acme_call.pk)),
        ("/admin/agents_app/agentrun/", str(globex_run.pk), str(acme_run.pk)),
    ]:
        page.goto(url)
        # then: globex's rows are listed, acme's are not, and no filter offers acme
        results = page.locator("#result_list")
        expect(results).to_contain_text(globex_text)
        expect(results).not_to_contain_text("acme")
        if acme_text:
            expect(results).not_to_contain_text(acme_text)
        expect(page.locator("#changelist-filter")).not_to_contain_text("acme")
    page.goto("/admin/approvals/approvalrequest/")
    expect(page.locator(f"#result_list a[href$='/approvalrequest/{acme_request.pk}/change/']")).to_have_count(0)
    expect(page.locator("#result_list tbody tr")).to_have_count(1)

    # when: the operator opens acme's approval by its URL
    page.goto(f"/admin/approvals/approvalrequest/{acme_request.pk}/change/")

    # then: it answers like a request that does not exist, with no decision buttons
    expect(page).to_have_url(f"{page.url.split('/admin/')[0]}/admin/")
    expect(page.locator(".messagelist")).to_contain_text(f"with ID “{acme_request.pk}” doesn’t exist")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    page.goto("/admin/approvals/approvalrequest/987654/change/")
    expect(page.locator(".messagelist")).to_contain_text("with ID “987654” doesn’t exist")

    # and: acme's request is still pending, decided by nobody
    acme_request.refresh_from_db()
    assert acme_request.status == ApprovalStatus.PENDING
    assert not acme_request.decisions.exists()
