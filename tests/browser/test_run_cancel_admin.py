"""Operators cancel runs in the admin: they say why, the run stops, its held call can no longer be approved."""

import pytest
from django.contrib.auth.models import Permission, User
from playwright.sync_api import Page, expect

from agents_app.models import Agent, AgentRun, RunStatus
from approvals.models import ApprovalStatus
from demo.models import Order
from tests.browser.conftest import ARTIFACTS, admin_login, start_waiting_run
from toolhub.models import CallStatus

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]


def _may_operate_runs(user: User) -> User:
    user.user_permissions.add(Permission.objects.get(content_type__app_label="sagas", codename="operate_saga"))
    return user


def test_operator_cancels_a_waiting_run_with_a_reason_and_its_request_is_withdrawn(
    page: Page, operator: User, alice: User, order_agent: Agent
) -> None:
    # given: alice's run waits for an operator on her order, and another of her runs already ended
    _may_operate_runs(operator)
    run, request = start_waiting_run(order_agent, alice)
    ended, _ = start_waiting_run(order_agent, alice)
    AgentRun.objects.filter(pk=ended.pk).update(status=RunStatus.COMPLETED)

    # when: the operator selects both runs, picks the action and confirms with a reason
    admin_login(page, "operator", "operator-password")
    page.goto("/admin/agents_app/agentrun/")
    page.locator(f"input[name=_selected_action][value='{run.pk}']").check()
    page.locator(f"input[name=_selected_action][value='{ended.pk}']").check()
    page.select_option("select[name=action]", "cancel_selected")
    page.get_by_role("button", name="Go").click()
    expect(page.locator("#selected-runs tbody tr")).to_have_count(1)  # only the run still going
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING  # nothing before the confirmation
    page.get_by_role("button", name="Cancel 1 run(s)").click()  # without a reason: the form is not sent
    expect(page.get_by_label("Reason")).to_have_attribute("required", "")
    expect(page.locator("#selected-runs tbody tr")).to_have_count(1)
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    page.get_by_label("Reason").fill("Ordered for the wrong cost centre.")
    page.screenshot(path=str(ARTIFACTS / "cancel_runs_page.png"), full_page=True)
    page.get_by_role("button", name="Cancel 1 run(s)").click()

    # then: the run stopped, its held call was withdrawn with its request, nothing was ordered
    expect(page.locator(".messagelist .success")).to_contain_text("Cancelled 1 run(s).")
    expect(page.locator(".messagelist .warning")).to_contain_text("1 selected run(s) had ended already")
    run.refresh_from_db()
    request.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert run.error == "Cancelled by user:operator: Ordered for the wrong cost centre."
    assert request.status == ApprovalStatus.CANCELLED
    assert request.call.__class__.objects.get(pk=request.call_id).status == CallStatus.CANCELLED
    # the run's page says who and why; the request's page offers no decision any more
    page.goto(f"/admin/agents_app/agentrun/{run.pk}/change/")
    expect(page.locator("body")).to_contain_text("Cancelled by user:operator: Ordered for the wrong cost centre.")
    page.goto(f"/admin/approvals/approvalrequest/{request.pk}/change/")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    assert not Order.objects.exists()


def test_an_auditor_is_offered_no_cancel_action(page: Page, auditor: User, alice: User, order_agent: Agent) -> None:
    run, _ = start_waiting_run(order_agent, alice)

    admin_login(page, "auditor", "auditor-password")
    page.goto("/admin/agents_app/agentrun/")

    expect(page.locator(f"text={str(run.pk)[:8]}")).to_have_count(1)
    expect(page.locator("select[name=action] option[value=cancel_selected]")).to_have_count(0)
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING


def test_operator_cancels_a_held_call_from_the_tool_calls_list(
    page: Page, operator: User, alice: User, order_agent: Agent
) -> None:
    # given: alice's run waits on her held order; the operator may act on calls
    operator.user_permissions.add(Permission.objects.get(content_type__app_label="toolhub", codename="change_toolcall"))
    run, request = start_waiting_run(order_agent, alice)

    # when: the operator selects the call in the audit console and cancels it with a reason
    admin_login(page, "operator", "operator-password")
    page.goto("/admin/toolhub/toolcall/?status__exact=pending_approval")
    page.locator(f"input[name=_selected_action][value='{request.call_id}']").check()
    page.select_option("select[name=action]", "cancel_selected")
    page.get_by_role("button", name="Go").click()
    expect(page.locator("#selected-calls tbody tr")).to_have_count(1)
    page.get_by_label("Reason").fill("The laptop budget moved to next quarter.")
    page.get_by_role("button", name="Cancel 1 call(s)").click()

    # then: the call will not run, its request is withdrawn, and alice's run goes on with the model told why
    expect(page.locator(".messagelist .success")).to_contain_text("Cancelled 1 call(s).")
    request.refresh_from_db()
    run.refresh_from_db()
    assert request.status == ApprovalStatus.CANCELLED
    assert request.call.__class__.objects.get(pk=request.call_id).status == CallStatus.CANCELLED
    assert run.status == RunStatus.COMPLETED
    assert "Not executed: cancelled by user:operator: The laptop budget moved to next quarter." in str(run.messages)
    assert not Order.objects.exists()


def test_an_auditor_is_offered_no_cancel_action_on_calls(
    page: Page, auditor: User, alice: User, order_agent: Agent
) -> None:
    start_waiting_run(order_agent, alice)

    admin_login(page, "auditor", "auditor-password")
    page.goto("/admin/toolhub/toolcall/")

    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(page.locator("select[name=action] option[value=cancel_selected]")).to_have_count(0)
