"""The console as its roles use it, in Chromium at 1,400 x 900, with the demo's users and role groups.

An operator works the approval desk (pending count, oldest first, edit then approve, the run's
transcript); a second operator completes a request that needs two; an auditor finds nothing to
press anywhere; a developer manages agents; an operator retries a failed compensation from the
saga's page; nobody sees another tenant's request. Every page is kept as a screenshot under
test-artifacts/console/.
"""

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect
from pytest_django.live_server_helper import LiveServer

from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.services import agent_create, run_start
from approvals.models import ApprovalRequest, ApprovalStatus
from demo.models import Order
from tests.browser.conftest import ARTIFACTS, admin_login, policy_violations, start_waiting_run
from tests.sagas.sample_tools import RELEASE_FAILS, TOOLS
from toolhub.models import AuditEvent, Tenant, TenantMembership, ToolCall, ToolDefinition
from toolhub.sagas.models import Compensation, CompensationStatus, Saga, SagaStatus
from toolhub.sagas.recovery import sagas_sweep
from toolhub.tools.registry import registry

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]

SHOTS = ARTIFACTS / "console"

#: What nobody without a role to change things may find on a page: decide, save, add, delete, actions.
CHANGE_CONTROLS = (
    "#approval-decision, #saga-retry, select[name=action], .submit-row input[type=submit], "
    "input[name=_save], input[name=_continue], input[name=_addanother], a.addlink, a.deletelink"
)


@pytest.fixture
def demo(transactional_db: None) -> dict[str, User]:
    """The demo's tenant, users (one per role, two operators) and agents, as ``make run`` has them."""
    call_command("load_demo", "--demo-passwords", verbosity=0)
    return {user.username: user for user in User.objects.all()}


def _desk(browser: Browser, live_server: LiveServer) -> Iterator[Page]:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    expect.set_options(timeout=15_000)
    violations = policy_violations(page)
    yield page
    context.close()
    assert not violations, f"the Content-Security-Policy refused: {violations}"


@pytest.fixture
def desk(browser: Browser, live_server: LiveServer) -> Iterator[Page]:
    yield from _desk(browser, live_server)


@pytest.fixture
def other_desk(browser: Browser, live_server: LiveServer) -> Iterator[Page]:
    """A second browser session: another person at another desk."""
    yield from _desk(browser, live_server)


def shot(page: Page, name: str) -> None:
    """Keep what the page looks like at 1,400 x 900 (the viewport; full pages are kept too)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    page.screenshot(path=str(SHOTS / f"{name}-full.png"), full_page=True)


def _order_run(demo: dict[str, User], *, minutes_ago: int = 0) -> tuple[AgentRun, ApprovalRequest]:
    run, request = start_waiting_run(Agent.objects.get(name="order-demo"), demo["alice"])
    if minutes_ago:
        ApprovalRequest.objects.filter(pk=request.pk).update(created_at=timezone.now() - timedelta(minutes=minutes_ago))
    return run, request


def test_an_operator_sees_the_count_opens_the_oldest_edits_an_argument_approves_and_sees_the_run_complete(
    demo: dict[str, User], desk: Page
) -> None:
    # given: two orders of 5000 wait, the first for 20 minutes
    oldest_run, oldest = _order_run(demo, minutes_ago=20)
    _, newest = _order_run(demo)

    # when: the operator opens the approval desk
    admin_login(desk, "operator", "operator")
    desk.goto("/admin/approvals/approvalrequest/")

    # then: it lists the pending requests, oldest first, with their count in the title and the tab
    expect(desk.locator("#desk-title")).to_have_text("Approval desk: 2 pending")
    assert "Approval desk: 2 pending" in desk.title()
    rows = desk.locator("#result_list tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text(f"#{oldest.pk}")
    expect(rows.nth(0).locator("td.field-age")).to_contain_text("20")
    expect(rows.nth(0).locator("td.field-expires_in")).to_contain_text("hours")
    expect(rows.nth(0)).to_contain_text("create_order")
    expect(rows.nth(0)).to_contain_text("alice")
    expect(rows.nth(1)).to_contain_text(f"#{newest.pk}")
    shot(desk, "01-operator-desk")

    # when: they open the oldest request
    rows.nth(0).locator("a").first.click()

    # then: the page shows what the user asked, the arguments that will run, and who may still approve
    expect(desk.locator(".field-user_input")).to_contain_text("Order a laptop for me.")
    expect(desk.locator(".field-model_message")).to_contain_text("the model only called the tool")
    expect(desk.locator(".field-arguments_to_run")).to_contain_text('"amount": "5000"')
    expect(desk.locator(".field-still_to_approve")).to_contain_text("1 more approval(s) needed")
    expect(desk.locator(".field-still_to_approve")).to_contain_text("operator2")
    expect(desk.locator("#id_arg__amount")).to_have_value("5000")
    # and the decision form sits below the request's fieldsets (its header no longer spans the page behind them)
    form_bottom = desk.locator("#approvalrequest_form").evaluate("e => e.getBoundingClientRect().bottom")
    assert desk.locator("#approval-decision").evaluate("e => e.getBoundingClientRect().top") >= form_bottom
    shot(desk, "02-operator-request")

    # when: they lower the amount in its field and approve
    desk.locator("#id_arg__amount").fill("500")
    desk.get_by_label("Comment").fill("500 is the budget.")
    desk.get_by_role("button", name="Approve").click()

    # then: exactly the edited order ran and the run completed
    expect(desk.locator(".messagelist .success")).to_contain_text(f"Request #{oldest.pk} (create_order) was approved")
    expect(desk.locator(".field-arguments_diff")).to_contain_text('"before": "5000"')
    shot(desk, "03-operator-approved")
    order = Order.objects.get()
    assert (order.product, str(order.amount)) == ("Laptop", "500.00")
    oldest_run.refresh_from_db()
    assert oldest_run.status == RunStatus.COMPLETED

    # and the run's page reads as a transcript: the user, the model, the call with the edited value
    desk.goto(f"/admin/agents_app/agentrun/{oldest_run.pk}/change/")
    transcript = desk.locator("#run-transcript")
    expect(transcript.locator("#run-usage")).to_contain_text("completed")
    expect(transcript).to_contain_text("Order a laptop for me.")
    expect(transcript.locator(".toolhub-call")).to_contain_text('"amount": "500"')
    expect(transcript.locator(".toolhub-call")).to_contain_text("succeeded")
    expect(transcript.locator(".toolhub-approval")).to_contain_text("edit by operator")
    expect(transcript).to_contain_text("Done. The order tool answered")
    shot(desk, "04-run-transcript")

    # and the desk now counts one
    desk.goto("/admin/approvals/approvalrequest/")
    expect(desk.locator("#desk-title")).to_have_text("Approval desk: 1 pending")


def test_a_second_operator_completes_a_request_that_needs_two(
    demo: dict[str, User], desk: Page, other_desk: Page
) -> None:
    # given: orders are critical (two approvers); the first operator approves
    ToolDefinition.objects.filter(name="create_order").update(risk_override="critical")
    run, request = _order_run(demo)
    assert request.required_approvals == 2
    admin_login(desk, "operator", "operator")
    desk.goto(f"/admin/approvals/approvalrequest/{request.pk}/change/")
    desk.get_by_role("button", name="Approve").click()
    expect(desk.locator(".messagelist .success")).to_contain_text("it needs 1 more approver(s)")
    expect(desk.locator(".field-still_to_approve")).to_contain_text("Approved in this round by: operator")
    shot(desk, "05-first-of-two-approvals")
    assert not Order.objects.exists()

    # when: the second operator opens it from the desk and approves
    admin_login(other_desk, "operator2", "operator2")
    other_desk.goto("/admin/approvals/approvalrequest/")
    other_desk.locator("#result_list tbody tr").first.locator("a").first.click()
    other_desk.get_by_role("button", name="Approve").click()

    # then: the order ran once and the run completed
    expect(other_desk.locator(".messagelist .success")).to_contain_text("was approved")
    shot(other_desk, "06-second-approval")
    assert Order.objects.count() == 1
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED


def _rollback_saga(demo: dict[str, User]) -> Saga:
    """The demo's saga: a debit, a credit to a frozen account that fails, the debit refunded."""
    run = run_start(
        agent=Agent.objects.get(name="rollback-demo"), user=demo["alice"], input="Move 100 to the frozen one"
    )
    return Saga.objects.get(key=str(run.pk))


def test_an_auditor_finds_nothing_to_press_on_any_page(demo: dict[str, User], desk: Page) -> None:
    # given: a waiting request, a finished run and a saga in acme
    run, request = _order_run(demo)
    saga = _rollback_saga(demo)
    call = ToolCall.objects.get(run_id=run.pk)

    # when: the auditor browses every kind of page
    admin_login(desk, "auditor", "auditor")
    pages = {
        "07-auditor-desk": "/admin/approvals/approvalrequest/",
        "08-auditor-request": f"/admin/approvals/approvalrequest/{request.pk}/change/",
        "09-auditor-calls": "/admin/toolhub/toolcall/",
        "10-auditor-call": f"/admin/toolhub/toolcall/{call.pk}/change/",
        "11-auditor-runs": "/admin/agents_app/agentrun/",
        "12-auditor-run": f"/admin/agents_app/agentrun/{run.pk}/change/",
        "13-auditor-sagas": "/admin/sagas/saga/",
        "14-auditor-saga": f"/admin/sagas/saga/{saga.pk}/change/",
        "15-auditor-rules": "/admin/approvals/approvalrule/",
        "16-auditor-agents": "/admin/agents_app/agent/",
    }
    for name, url in pages.items():
        desk.goto(url)
        # then: each page opens and reads, and holds no control that decides, saves, adds or deletes
        expect(desk.locator("#content h1")).to_be_visible()
        found = desk.locator(CHANGE_CONTROLS).evaluate_all(
            "els => els.filter(e => e.offsetParent !== null).map(e => e.outerHTML)"
        )
        assert found == [], (url, found)
        expect(desk.get_by_role("button", name="Approve")).to_have_count(0)
        shot(desk, name)
    desk.goto(f"/admin/approvals/approvalrequest/{request.pk}/change/")
    expect(desk.locator(".field-arguments_to_run")).to_contain_text('"amount": "5000"')
    expect(desk.locator(".toolhub-notice")).to_contain_text("waits for an operator")


def test_a_developer_adds_an_agent_and_cannot_decide(demo: dict[str, User], desk: Page) -> None:
    _, request = _order_run(demo)
    admin_login(desk, "developer", "developer")

    # a developer adds an agent of their tenant
    desk.goto("/admin/agents_app/agent/add/")
    desk.locator("#id_name").fill("helpdesk")
    desk.locator("#id_tenant").select_option(label=str(Tenant.objects.get(slug="acme")))
    desk.locator("#id_tools").fill('["get_order"]')
    shot(desk, "17-developer-add-agent")
    desk.locator("input[name=_save]").click()
    expect(desk.locator(".messagelist .success")).to_contain_text("helpdesk")
    assert Agent.objects.filter(name="helpdesk", tenant__slug="acme").exists()

    # and reads approval requests without deciding them
    desk.goto(f"/admin/approvals/approvalrequest/{request.pk}/change/")
    expect(desk.locator("#approval-decision")).to_have_count(0)
    expect(desk.locator("select[name=action]")).to_have_count(0)


@pytest.fixture
def trip_tools(settings: Any) -> Iterator[None]:
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 2, "SAGA_RETRY_BASE_SECONDS": 0.0}
    RELEASE_FAILS["on"] = False
    with registry.temporarily(*TOOLS):
        yield
    RELEASE_FAILS["on"] = False


def _failed_trip(demo: dict[str, User]) -> Saga:
    """alice's trip: it fails at its third step and the seat's release fails for good (the saga needs attention)."""
    RELEASE_FAILS["on"] = True
    agent_create(
        name="trip",
        tenant="acme",
        script=[
            {"content": "", "tool_calls": [{"name": "book", "arguments": {"item": "flight"}}]},
            {"content": "", "tool_calls": [{"name": "reserve", "arguments": {"item": "seat"}}]},
            {"content": "", "tool_calls": [{"name": "explode", "arguments": {"reason": "card declined"}}]},
            {"content": "Sorry: {last_tool_result}"},
        ],
        tools=["book", "reserve", "explode"],
        compensate_on_error=True,
    )
    run = run_start(agent=Agent.objects.get(name="trip"), user=demo["alice"], input="Book my trip")
    for _ in range(3):
        sagas_sweep()
    saga = Saga.objects.get(key=str(run.pk))
    assert saga.status == SagaStatus.NEEDS_ATTENTION
    return saga


def test_an_operator_retries_a_failed_compensation_from_the_sagas_page(
    demo: dict[str, User], trip_tools: None, desk: Page
) -> None:
    # given: alice's trip fails at its third step and the seat's release fails for good
    saga = _failed_trip(demo)
    run_pk = saga.run_id

    # when: the operator opens the saga (Sagas opens for them), the cause is fixed, and they retry
    admin_login(desk, "operator", "operator")
    desk.goto("/admin/sagas/saga/?attention=yes")
    expect(desk.locator("#result_list")).to_contain_text(str(run_pk)[:8])
    desk.goto(f"/admin/sagas/saga/{saga.pk}/change/")
    expect(desk.locator("#saga-retry")).to_contain_text("1 compensation(s) of this saga need attention")
    expect(desk.locator("#saga-attempts")).to_contain_text("failed")
    shot(desk, "18-operator-saga-needs-attention")
    RELEASE_FAILS["on"] = False
    desk.get_by_role("button", name="Retry the compensations that need attention").click()

    # then: the compensation ran, the saga is compensated, and the button is gone
    expect(desk.locator(".messagelist .success")).to_contain_text("1 compensation(s) retried.")
    expect(desk.locator("#saga-retry")).to_have_count(0)
    shot(desk, "19-operator-saga-retried")
    saga.refresh_from_db()
    assert saga.status == SagaStatus.COMPENSATED
    assert saga.compensations.get(step_tool="reserve").status == CompensationStatus.SUCCEEDED

    # and the run's page shows the saga with its compensations
    desk.goto(f"/admin/agents_app/agentrun/{run_pk}/change/")
    expect(desk.locator("#run-saga")).to_contain_text("compensated")
    expect(desk.locator("#run-compensations")).to_contain_text("release")
    shot(desk, "20-run-with-saga")


def test_an_operator_of_acme_never_sees_globexs_request(demo: dict[str, User], desk: Page) -> None:
    # given: a request in acme and one in globex
    _, acme_request = _order_run(demo)
    globex = Tenant.objects.create(slug="globex", name="Globex")
    gina = User.objects.create_user("gina", "gina@globex.example", "gina-password")
    TenantMembership.objects.create(user=gina, tenant=globex)
    gina.user_permissions.set(demo["alice"].user_permissions.all())  # the demo groups' capabilities
    agent = Agent.objects.get(name="order-demo")
    agent.pk, agent.tenant = None, globex  # the same scripted agent, of globex
    agent.save()
    _, globex_request = start_waiting_run(agent, gina)
    assert globex_request.tenant == "globex"

    # when: acme's operator opens the desk, every status, and the globex request's page
    admin_login(desk, "operator", "operator")
    desk.goto("/admin/approvals/approvalrequest/")

    # then: only acme's request is counted and listed; globex's page answers like a missing one
    expect(desk.locator("#desk-title")).to_have_text("Approval desk: 1 pending")
    expect(desk.locator("#result_list tbody tr")).to_have_count(1)
    expect(desk.locator("#result_list")).to_contain_text(f"#{acme_request.pk}")
    desk.goto("/admin/approvals/approvalrequest/?status=all")
    expect(desk.locator("#result_list")).not_to_contain_text("globex")
    desk.goto(f"/admin/approvals/approvalrequest/{globex_request.pk}/change/")
    expect(desk.locator(".messagelist")).to_contain_text("doesn’t exist")
    assert ApprovalRequest.objects.get(pk=globex_request.pk).status == ApprovalStatus.PENDING


def test_the_queue_refreshes_by_itself_when_a_request_arrives(
    demo: dict[str, User], desk: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given: the desk refreshes every 2 seconds and shows one pending request
    monkeypatch.setattr("approvals.admin.QUEUE_REFRESH_SECONDS", 2)
    _order_run(demo)
    admin_login(desk, "operator", "operator")
    desk.goto("/admin/approvals/approvalrequest/")
    expect(desk.locator("#desk-title")).to_have_text("Approval desk: 1 pending")

    # when: another request arrives while the operator watches
    _, arrived = _order_run(demo)

    # then: the queue shows it without anyone reloading the page
    expect(desk.locator("#desk-title")).to_have_text("Approval desk: 2 pending")
    expect(desk.locator("#result_list")).to_contain_text(f"#{arrived.pk}")

    # and while the operator has a row selected, nothing is replaced under their hand
    desk.locator("input.action-select").first.check()
    desk.evaluate("window.__same_page = true")
    _order_run(demo)
    desk.wait_for_timeout(5_000)
    assert desk.evaluate("window.__same_page === true")
    expect(desk.locator("#desk-title")).to_have_text("Approval desk: 2 pending")


def test_an_operator_retries_from_the_sagas_list_what_its_confirmation_page_listed(
    demo: dict[str, User], trip_tools: None, desk: Page
) -> None:
    # given: a saga whose seat release failed for good
    saga = _failed_trip(demo)
    release = saga.compensations.get(step_tool="reserve")

    # when: the operator ticks it on the list and chooses "Retry": the page lists what will be retried, nothing yet
    admin_login(desk, "operator", "operator")
    desk.goto("/admin/sagas/saga/?attention=yes")
    desk.locator(f"input[name=_selected_action][value='{saga.pk}']").check()
    desk.select_option("select[name=action]", "retry_selected")
    desk.get_by_role("button", name="Go").click()
    expect(desk.locator("#selected-compensations tbody tr")).to_have_count(1)
    expect(desk.locator("#selected-compensations")).to_contain_text("release")
    shot(desk, "21-operator-saga-list-retry-confirmation")
    assert not AuditEvent.objects.filter(event_type="compensation.retry_requested").exists()

    # and the compensation moves before they confirm: refused, nothing retried
    Compensation.objects.filter(pk=release.pk).update(attempts=release.attempts + 1)
    desk.get_by_role("button", name="Retry 1 compensation(s)").click()
    expect(desk.locator(".messagelist .error")).to_contain_text("changed since you read this page; nothing was retried")
    assert not AuditEvent.objects.filter(event_type="compensation.retry_requested").exists()

    # then: chosen again (the page shows it as it is now) and confirmed, it runs once
    RELEASE_FAILS["on"] = False
    desk.locator(f"input[name=_selected_action][value='{saga.pk}']").check()
    desk.select_option("select[name=action]", "retry_selected")
    desk.get_by_role("button", name="Go").click()
    desk.get_by_role("button", name="Retry 1 compensation(s)").click()
    expect(desk.locator(".messagelist .success")).to_contain_text("1 compensation(s) retried.")
    shot(desk, "22-operator-saga-list-retried")
    saga.refresh_from_db()
    assert saga.status == SagaStatus.COMPENSATED
    assert AuditEvent.objects.filter(event_type="compensation.retry_requested").count() == 1
