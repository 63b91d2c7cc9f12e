"""Auditors browse calls, runs and the audit trail read-only, and never see sensitive values."""

from collections.abc import Iterator
from typing import Annotated

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.services import run_start
from tests.browser.conftest import ARTIFACTS, admin_login
from toolhub import Param, tool
from toolhub.audit_verify import verify_audit_chains
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.tools.registry import registry

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]

SECRET = "tok-5ecret-do-not-show"


@tool(sensitive=("api_token",))
def lookup_customer(
    customer: Annotated[str, Param("The customer's name.")],
    api_token: Annotated[str, Param("The CRM's API token.")],
) -> dict:
    """Look up a customer's tier in a CRM that needs a token."""
    return {"customer": customer, "tier": "gold"}


@pytest.fixture
def completed_crm_run(alice: User) -> Iterator[AgentRun]:
    """Alice's finished run whose one call carried a secret token."""
    with registry.temporarily(lookup_customer):
        agent = Agent.objects.create(
            name="crm-demo",
            tools=["lookup_customer"],
            script=[
                {
                    "content": "",
                    "tool_calls": [{"name": "lookup_customer", "arguments": {"customer": "ACME", "api_token": SECRET}}],
                },
                {"content": "ACME's tier: {last_tool_result}"},
            ],
        )
        run = run_start(agent=agent, user=alice, input="What tier is ACME?")
        run.refresh_from_db()
        assert run.status == RunStatus.COMPLETED, run.error
        yield run


def test_auditor_browses_calls_runs_and_audit_events_read_only(
    page: Page, auditor: User, completed_crm_run: AgentRun
) -> None:
    # given: a succeeded call whose stored arguments hold a secret, and its audit trail
    call = ToolCall.objects.get(run_id=completed_crm_run.id)
    assert call.status == CallStatus.SUCCEEDED
    assert call.arguments["api_token"] == SECRET
    events_before = list(AuditEvent.objects.order_by("id").values_list("id", "hash"))
    assert events_before

    admin_login(page, "auditor", "auditor-password")

    # when: the auditor opens the call from the list of calls
    page.goto("/admin/toolhub/toolcall/")
    expect(page.locator("#result_list")).to_contain_text("lookup_customer")
    expect(page.locator("a.addlink")).to_have_count(0)  # no "Add tool call"
    expect(page.locator("select[name=action]")).to_have_count(0)  # no delete action
    page.get_by_role("link", name=str(call.id)).click()

    # then: arguments are redacted, the result and the audit events are shown, nothing is editable
    expect(page.locator(".field-shown_arguments")).to_contain_text('"api_token": "***redacted***"')
    expect(page.locator(".field-shown_arguments")).to_contain_text('"customer": "ACME"')
    expect(page.locator(".field-shown_result")).to_contain_text('"tier": "gold"')
    events = page.locator("#call-audit-events tbody tr")
    expect(events.first).to_contain_text("call.requested")
    expect(events.last).to_contain_text("call.succeeded")
    assert SECRET not in page.content()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "toolcall_change_page.png"), full_page=True)
    expect(page.get_by_role("button", name="Save")).to_have_count(0)
    expect(page.locator("a.deletelink")).to_have_count(0)

    # when: the auditor follows the run and its messages
    page.get_by_role("link", name=str(completed_crm_run.id)).click()
    expect(page.locator(".field-status")).to_contain_text("Completed")
    expect(page.locator("#run-tool-calls")).to_contain_text("lookup_customer")
    expect(page.locator(".field-shown_messages")).to_contain_text("***redacted***")
    assert SECRET not in page.content()
    page.locator("#run-tool-calls").get_by_role("link", name=str(call.id)).click()
    expect(page).to_have_url(f"{page.url.split('/admin/')[0]}/admin/toolhub/toolcall/{call.id}/change/")

    # when: the auditor searches the audit trail by call id and opens an event
    page.goto("/admin/toolhub/auditevent/")
    expect(page.locator("a.addlink")).to_have_count(0)
    page.fill("#searchbar", str(call.id))
    page.get_by_role("button", name="Search").click()
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(AuditEvent.objects.filter(call_id=call.id).count())
    requested = AuditEvent.objects.get(call_id=call.id, event_type="call.requested")
    page.get_by_role("link", name=str(requested.pk), exact=True).click()
    expect(page.locator(".field-shown_data")).to_contain_text("***redacted***")
    assert SECRET not in page.content()
    expect(page.get_by_role("button", name="Save")).to_have_count(0)
    expect(page.locator("a.deletelink")).to_have_count(0)

    # then: browsing changed nothing and the chain still verifies
    assert list(AuditEvent.objects.order_by("id").values_list("id", "hash")) == events_before
    _, problems = verify_audit_chains()
    assert problems == []
