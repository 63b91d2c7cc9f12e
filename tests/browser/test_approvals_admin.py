"""Operators decide held-back calls in the admin; the run goes on with the decision."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from playwright.sync_api import Page, expect

from agents_app.models import Agent, AgentRun, RunStatus
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from demo.models import Order
from tests.browser.conftest import ARTIFACTS, admin_login, start_waiting_run
from toolhub.models import CallStatus

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]

Waiting = tuple[AgentRun, ApprovalRequest]


def test_operator_approves_from_the_change_page_and_the_run_completes(
    page: Page, operator: User, waiting_run: Waiting
) -> None:
    # given: alice's run waits on her order of 5000
    run, request = waiting_run

    # when: the operator finds the request in the list, reads it, comments and approves
    admin_login(page, "operator", "operator-password")
    page.get_by_role("link", name="Approval requests").first.click()
    page.get_by_role("link", name=f"#{request.pk}", exact=True).click()
    expect(page.locator(".field-arguments_to_run")).to_contain_text('"amount": "5000"')
    expect(page.locator(".field-reason")).to_contain_text("orders above 1000 need an operator's approval")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "approval_change_page.png"), full_page=True)
    page.get_by_label("Comment").fill("Budget confirmed with finance.")
    page.get_by_role("button", name="Approve").click()

    # then: the decision is reported, recorded, the call ran once and the run completed
    expect(page.locator(".messagelist .success")).to_contain_text(f"Request #{request.pk} (create_order) was approved")
    expect(page.locator("#approval-decision")).to_have_count(0)
    expect(page.locator(".inline-group")).to_contain_text("Budget confirmed with finance.")
    request.refresh_from_db()
    request.call.refresh_from_db()
    run.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED
    decision = ApprovalDecision.objects.get(request=request)
    assert (decision.decision, decision.decided_by_name, decision.comment) == (
        "approve",
        "operator",
        "Budget confirmed with finance.",
    )
    assert request.call.status == CallStatus.SUCCEEDED
    assert Order.objects.filter(call_id=str(request.call.id)).count() == 1
    assert run.status == RunStatus.COMPLETED
    assert run.output.startswith("Done. The order tool answered:")


def test_operator_rejects_with_a_comment_the_model_reads(page: Page, operator: User, waiting_run: Waiting) -> None:
    run, request = waiting_run

    admin_login(page, "operator", "operator-password")
    page.goto(f"/admin/approvals/approvalrequest/{request.pk}/change/")
    page.get_by_label("Comment").fill("Laptops need a purchase order.")
    page.get_by_role("button", name="Reject").click()

    expect(page.locator(".messagelist .success")).to_contain_text("was rejected")
    request.refresh_from_db()
    request.call.refresh_from_db()
    run.refresh_from_db()
    assert request.status == ApprovalStatus.REJECTED
    assert request.call.status == CallStatus.REJECTED
    assert not Order.objects.exists()
    assert run.status == RunStatus.COMPLETED
    tool_messages = [m["content"] for m in run.messages if m.get("role") == "tool"]
    assert tool_messages == ["Rejected by operator: Laptops need a purchase order."]


def test_staff_without_the_permission_sees_no_decision_buttons_or_actions(
    page: Page, viewer: User, waiting_run: Waiting
) -> None:
    # given: a staff user who may look at approval requests but not decide them
    _, request = waiting_run
    viewer.user_permissions.add(Permission.objects.get(codename="view_approvalrequest"))

    admin_login(page, "viewer", "viewer-password")
    page.goto(f"/admin/approvals/approvalrequest/{request.pk}/change/")

    expect(page.locator(".field-arguments_to_run")).to_contain_text('"product": "Laptop"')
    expect(page.locator(".toolhub-notice")).to_contain_text("waits for an operator")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    expect(page.get_by_role("button", name="Reject")).to_have_count(0)
    page.goto("/admin/approvals/approvalrequest/")
    expect(page.locator("#result_list")).to_contain_text("create_order")
    expect(page.locator("select[name=action] option", has_text="Approve selected")).to_have_count(0)
    expect(page.locator("select[name=action] option", has_text="Reject selected")).to_have_count(0)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING


def test_requester_cannot_approve_her_own_call(page: Page, operator: User, alice: User, waiting_run: Waiting) -> None:
    # given: alice is an operator too, and her own run waits for approval
    run, request = waiting_run
    alice.is_staff = True
    alice.save(update_fields=["is_staff"])
    alice.groups.add(Group.objects.get(name="operators"))

    admin_login(page, "alice", "alice-password")
    page.goto(f"/admin/approvals/approvalrequest/{request.pk}/change/")
    expect(page.locator("#approval-decision .toolhub-warning")).to_contain_text("You started this call")
    page.get_by_label("Comment").fill("Approving my own order.")
    page.get_by_role("button", name="Approve").click()

    expect(page.locator(".messagelist .error")).to_contain_text(
        "You started this call; another operator must decide it."
    )
    request.refresh_from_db()
    run.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    assert not request.decisions.exists()
    assert run.status == RunStatus.WAITING
    assert not Order.objects.exists()


def test_approve_selected_asks_for_a_comment_then_approves_each(
    page: Page, operator: User, alice: User, order_agent: Agent
) -> None:
    # given: two of alice's runs wait for approval
    first_run, first = start_waiting_run(order_agent, alice)
    second_run, second = start_waiting_run(order_agent, alice)

    # when: the operator selects both, picks the action, and confirms with a comment
    admin_login(page, "operator", "operator-password")
    page.goto("/admin/approvals/approvalrequest/?status__exact=pending")
    page.locator(f"input[name=_selected_action][value='{first.pk}']").check()
    page.locator(f"input[name=_selected_action][value='{second.pk}']").check()
    page.select_option("select[name=action]", "approve_selected")
    page.get_by_role("button", name="Go").click()
    expect(page.locator("#selected-requests tbody tr")).to_have_count(2)
    page.get_by_label("Comment").fill("Both within this quarter's budget.")
    page.screenshot(path=str(ARTIFACTS / "decide_selected_page.png"), full_page=True)
    page.get_by_role("button", name="Approve 2 request(s)").click()

    # then: both were approved with the comment, both calls ran, both runs completed
    expect(page.locator(".messagelist .success")).to_contain_text("2 request(s) approved.")
    for run, request in ((first_run, first), (second_run, second)):
        request.refresh_from_db()
        run.refresh_from_db()
        assert request.status == ApprovalStatus.APPROVED
        assert request.decisions.get().comment == "Both within this quarter's budget."
        assert run.status == RunStatus.COMPLETED
    assert Order.objects.count() == 2


def test_approve_selected_reports_what_could_not_be_approved(
    page: Page, operator: User, second_operator: User, alice: User, order_agent: Agent
) -> None:
    # given: one pending request and one another operator rejected already
    _, pending = start_waiting_run(order_agent, alice)
    _, decided = start_waiting_run(order_agent, alice)
    from approvals.services import approval_reject

    approval_reject(request_id=decided.pk, user=second_operator, comment="No.")

    admin_login(page, "operator", "operator-password")
    page.goto("/admin/approvals/approvalrequest/?status=all")
    page.locator("#action-toggle").check()
    page.select_option("select[name=action]", "approve_selected")
    page.get_by_role("button", name="Go").click()
    page.get_by_role("button", name="Approve 2 request(s)").click()

    expect(page.locator(".messagelist .success")).to_contain_text("1 request(s) approved.")
    expect(page.locator(".messagelist .error")).to_contain_text(f"#{decided.pk} (create_order)")
    expect(page.locator(".messagelist .error")).to_contain_text("already rejected")
    pending.refresh_from_db()
    decided.refresh_from_db()
    assert pending.status == ApprovalStatus.APPROVED
    assert decided.status == ApprovalStatus.REJECTED
    assert list(decided.decisions.values_list("decided_by_name", flat=True)) == ["operator2"]
