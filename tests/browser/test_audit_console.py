"""An auditor filters calls, opens one's re-verified timeline, exports CSV, and can decide or save nothing."""

import csv
import io
import re
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import transaction
from playwright.sync_api import Page, expect

from tests.browser.conftest import ARTIFACTS, admin_login
from toolhub.audit import audit_call_event
from toolhub.catalogue import tool_catalogue_sync
from toolhub.models import AuditEvent, CallStatus, Tenant, TenantMembership, ToolCall

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]


def _call(tenant: str, tool_name: str, status: str, agent: str) -> ToolCall:
    with transaction.atomic():
        call = ToolCall.objects.create(
            tool_name=tool_name, status=status, tenant=tenant, agent_name=agent, arguments={"order_id": 7}
        )
        audit_call_event(call, "call.requested", actor=f"agent:{agent}")
        audit_call_event(call, f"call.{status}", actor="worker")
    return call


@pytest.fixture
def console_auditor() -> Iterator[User]:
    """An auditor of acme (the auditors role), with calls of acme and of globex in the trail."""
    tool_catalogue_sync()
    call_command("toolhub_roles", verbosity=0)
    acme, _ = Tenant.objects.get_or_create(slug="acme", defaults={"name": "ACME"})
    Tenant.objects.get_or_create(slug="globex", defaults={"name": "Globex"})
    user = User.objects.create_user("auditor", "auditor@example.com", "auditor-password", is_staff=True)
    user.groups.add(Group.objects.get(name="auditors"))
    TenantMembership.objects.create(user=user, tenant=acme)
    yield user


def test_auditor_filters_opens_a_verified_timeline_and_exports_csv(page: Page, console_auditor: User) -> None:
    failed = _call("acme", "get_order", CallStatus.FAILED, "order-bot")
    succeeded = _call("acme", "get_order", CallStatus.SUCCEEDED, "order-bot")
    theirs = _call("globex", "get_order", CallStatus.FAILED, "globex-bot")
    ARTIFACTS.mkdir(exist_ok=True)

    admin_login(page, "auditor", "auditor-password")
    # the index: the dashboard with acme's figures and the chain status, no decide button
    expect(page.locator("#toolhub-dashboard")).to_contain_text("pending approvals")
    expect(page.locator("#calls-per-tool-chart")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "console_index.png"), full_page=True)

    # when: the auditor filters the calls by status
    page.goto("/admin/toolhub/toolcall/")
    expect(page.locator("#audit-chain-status")).to_contain_text("Audit trail")
    # acme's own chains, never verified on their own yet: the auditor has a worker prove them, reads it in full
    own = page.locator("#audit-tenant-verification-acme")
    expect(own).to_contain_text("never verified on their own")
    expect(page.locator("#audit-verify-globex")).to_have_count(0)
    page.locator("#audit-verify-acme").click()
    expect(page.locator("ul.messagelist")).to_contain_text("A worker is verifying acme's own audit chains")
    expect(own).to_contain_text("acme's own chains: verified")
    expect(own).to_contain_text("(4 events)")
    page.locator("#changelist-filter").get_by_role("link", name="Failed", exact=True).click()
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(str(failed.pk))
    assert str(theirs.pk) not in page.content() and str(succeeded.pk) not in page.content()
    # and by agent, typed in
    page.locator("input[name=agent]").fill("order-bot")
    page.locator("input[name=agent]").press("Enter")
    expect(page).to_have_url(re.compile(r"agent=order-bot"))
    assert "status__exact=failed" in page.url  # the other filter is kept
    expect(rows).to_have_count(1)
    page.screenshot(path=str(ARTIFACTS / "console_calls_filtered.png"), full_page=True)

    # then: the export carries the same filters and only acme's failed call
    with page.expect_download() as download_info:
        page.locator("#export-csv").click()
    exported = list(csv.DictReader(io.StringIO(open(download_info.value.path()).read())))
    assert [row["id"] for row in exported] == [str(failed.pk)]
    assert AuditEvent.objects.filter(event_type="calls.exported", actor="user:auditor").count() == 1

    # when: the auditor opens the call: its timeline is re-verified on the page
    page.get_by_role("link", name=str(failed.pk)).click()
    expect(page.locator("#call-audit-verdict")).to_contain_text("verified: 2 events")
    expect(page.locator("#call-audit-events tbody tr")).to_have_count(2)
    expect(page.locator("#call-audit-events tbody tr").first).to_contain_text("verified")
    page.screenshot(path=str(ARTIFACTS / "console_call_timeline.png"), full_page=True)

    # and nowhere a decide or save button
    for url in (
        "/admin/",
        "/admin/toolhub/toolcall/",
        f"/admin/toolhub/toolcall/{failed.pk}/change/",
        "/admin/toolhub/auditevent/",
        "/admin/approvals/approvalrequest/",
    ):
        page.goto(url)
        for name in ("Save", "Approve", "Reject", "Delete"):
            expect(page.get_by_role("button", name=name)).to_have_count(0)
        expect(page.locator("input[type=submit][name=_save]")).to_have_count(0)
        assert str(theirs.pk) not in page.content()
