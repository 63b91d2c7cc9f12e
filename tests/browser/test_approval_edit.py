"""Four eyes with edits in the admin: an edit opens a new round, stale pages are refused, bad edits are form errors."""

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect
from pytest_django.live_server_helper import LiveServer

from agents_app.models import AgentRun, RunStatus
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from demo.models import Order
from tests.browser.conftest import ARTIFACTS, admin_login
from toolhub.models import AuditEvent, ToolDefinition

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]

Waiting = tuple[AgentRun, ApprovalRequest]


@pytest.fixture
def critical_orders(transactional_db: None) -> None:
    """Orders become critical: each needs two distinct approvers."""
    ToolDefinition.objects.filter(name="create_order").update(risk_override="critical")


@pytest.fixture
def other_page(browser: Browser, live_server: LiveServer) -> Iterator[Page]:
    """A second, independent browser session (another operator at another desk)."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def _open(page: Page, request: ApprovalRequest) -> None:
    page.goto(f"/admin/approvals/approvalrequest/{request.pk}/change/")


def _edit_and_approve(page: Page, arguments: dict[str, str], comment: str) -> None:
    """Edit in the fields generated from the tool's schema, then approve."""
    for name, value in arguments.items():
        page.locator(f"#id_arg__{name}").fill(value)
    page.get_by_label("Comment").fill(comment)
    page.get_by_role("button", name="Approve").click()


def test_an_edit_by_the_second_approver_must_be_approved_again_by_the_first(
    critical_orders: None,
    page: Page,
    other_page: Page,
    operator: User,
    second_operator: User,
    waiting_run: Waiting,
) -> None:
    # given: alice's order of 5000 needs two approvers; the first operator approves it as it is
    run, request = waiting_run
    assert request.required_approvals == 2
    admin_login(page, "operator", "operator-password")
    _open(page, request)
    expect(page.locator(".field-arguments_to_run")).to_contain_text('"amount": "5000"')
    page.get_by_role("button", name="Approve").click()
    expect(page.locator(".messagelist .success")).to_contain_text("it needs 1 more approver(s)")

    # when: the second operator lowers the amount and approves
    admin_login(other_page, "operator2", "operator2-password")
    _open(other_page, request)
    _edit_and_approve(other_page, {"product": "Laptop", "amount": "500"}, "500 is the budget.")

    # then: nothing ran; the page shows the arguments that will run, the diff, and a new round
    expect(other_page.locator(".messagelist .success")).to_contain_text("recorded (round 2); it needs 1 more")
    expect(other_page.locator(".field-arguments_to_run")).to_contain_text('"amount": "500"')
    expect(other_page.locator(".field-arguments_diff")).to_contain_text('"before": "5000"')
    expect(other_page.locator(".field-approvals_so_far")).to_contain_text("Round 2: 1 of 2 approval(s)")
    ARTIFACTS.mkdir(exist_ok=True)
    other_page.screenshot(path=str(ARTIFACTS / "approval_edited_new_round.png"), full_page=True)
    assert not Order.objects.exists()

    # when: the first operator reviews the edited order and approves it
    _open(page, request)
    expect(page.locator(".field-arguments_to_run")).to_contain_text('"amount": "500"')
    page.get_by_role("button", name="Approve").click()

    # then: exactly the edited order ran, once, and the run completed
    expect(page.locator(".messagelist .success")).to_contain_text(f"Request #{request.pk} (create_order) was approved")
    order = Order.objects.get()
    assert (order.product, str(order.amount)) == ("Laptop", "500.00")
    request.refresh_from_db()
    run.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED
    assert run.status == RunStatus.COMPLETED
    assert list(request.decisions.order_by("id").values_list("decided_by_name", "decision", "round")) == [
        ("operator", "approve", 1),
        ("operator2", "edit", 2),
        ("operator", "approve", 2),
    ]


def test_approving_a_page_whose_arguments_were_edited_meanwhile_is_refused(
    critical_orders: None,
    page: Page,
    other_page: Page,
    operator: User,
    second_operator: User,
    waiting_run: Waiting,
) -> None:
    # given: the first operator has the order of 5000 open
    _, request = waiting_run
    admin_login(page, "operator", "operator-password")
    _open(page, request)
    expect(page.locator(".field-arguments_to_run")).to_contain_text('"amount": "5000"')

    # when: meanwhile the second operator edits it, and then the first approves from the page they read
    admin_login(other_page, "operator2", "operator2-password")
    _open(other_page, request)
    _edit_and_approve(other_page, {"product": "Laptop", "amount": "9000"}, "Bigger model.")
    expect(other_page.locator(".messagelist .success")).to_contain_text("round 2")
    page.get_by_role("button", name="Approve").click()

    # then: the first operator is told to review again, sees the new arguments, and nothing of theirs counts
    expect(page.locator(".messagelist .error")).to_contain_text(
        "The arguments changed since you looked; review them again"
    )
    expect(page.locator(".field-arguments_to_run")).to_contain_text('"amount": "9000"')
    assert not ApprovalDecision.objects.filter(request=request, decided_by=operator).exists()
    assert not Order.objects.exists()


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ('{"amount": "500\\u0000"}', "amount contains a NUL character"),
        ('{"product": "Lap\\udc00top"}', "product contains an invalid character (a lone surrogate)"),
        ('{"product": ' + "[" * 150 + "]" * 150 + "}", "Arguments are nested deeper than 100 levels"),
    ],
    ids=["nul", "lone-surrogate", "deeply-nested"],
)
def test_an_edit_no_column_can_store_is_a_form_error(
    page: Page, operator: User, waiting_run: Waiting, typed: str, message: str
) -> None:
    # given: the operator has the order open
    run, request = waiting_run
    events = AuditEvent.objects.count()
    admin_login(page, "operator", "operator-password")
    _open(page, request)

    # when: they type arguments that cannot be used into the JSON box, and approve
    page.get_by_text("Edit as JSON").click()
    page.locator("#id_arguments").fill(typed)
    page.get_by_role("button", name="Approve").click()

    # then: the form shows what is wrong at the arguments, keeps their input, and nothing was written
    expect(page.locator(".messagelist .error")).to_contain_text("Nothing was recorded")
    expect(page.locator(".field-decision-arguments .errorlist")).to_contain_text(message)
    expect(page.locator("#id_arguments")).to_have_value(typed)
    request.refresh_from_db()
    run.refresh_from_db()
    assert (request.status, request.round) == (ApprovalStatus.PENDING, 1)
    assert not request.decisions.exists()
    assert AuditEvent.objects.count() == events
    assert run.status == RunStatus.WAITING
    assert not Order.objects.exists()
