"""Review of 2026-12-05 (af): the console (Django admin) as operators and auditors use it in a browser.

Each test fails on the reviewed code (main at d0e1730) and states who reaches what, where ("Found: ...") and what
is expected ("Expect: ...").

Findings:

1. "Approve selected" / "Reject selected" on the desk (which lists pending requests) acted only on the selected
   requests the list's filter still matched when the operator confirmed: a request a colleague decided, or that
   expired, between the listing and the confirmation vanished from the action without a word ("1 request(s)
   approved." after confirming "Approve 2 request(s)"; no message at all when every one had gone), though the
   confirmation page promises that such requests "are reported". The same held for every action with a
   confirmation page (runs' and calls' cancel, sagas' and compensations' resolve) under a list filter. Fixed in
   the shared mechanism (``toolhub.admin_actions.CommentActionMixin.response_action``): the ticked rows are read
   again from the admin's own tenant-scoped rows, not narrowed by the list's filters, so the service says what
   became of each ("Select all" keeps the filtered list it names).
2. "Approve selected" counted an approval recorded on a request that needs two approvers as approved ("2
   request(s) approved.") while the call still waited for a second, different operator: the operator was told a
   held call was released that was not. Now such an approval is said apart, as the request's own page says it
   ("Your approval of request #N was recorded (round 1); it needs 1 more approver(s).",
   ``approvals.admin_decisions._decide_selected``).

Checked and found holding (no test here; Chromium through Playwright and Django's test client, an operator of acme
and globex beside one of acme only):

- A request's page: approve, reject with a comment (the model reads it), edit in the typed fields then approve (a
  new round, the editor's approval counted once); a page whose version changed meanwhile (an edit, a re-hold) is
  refused on approve, with the current round named and nothing recorded (the form's stale edit is not taken: the
  version check runs before the edit); a request that expired while the page was open is expired on the press
  and the operator told "This approval request expired; nothing was changed"; double-clicking Approve records
  one approval; the back button after a decision re-reads the page (the admin's ``never_cache``) and a second
  press is refused with the reason ("already approved", "You already approved this version ..."). Rejection is
  bound to no version by design (it ends the request whatever was seen, and nothing runs).
- Four eyes on the page: the requester sees why they may not decide, an operator who approved this round is told
  another must approve, "Still to approve" names who may; the services refuse the requester and a second
  approval by the same person through the page and both bulk actions.
- Scoping: the desk's count (title, tab, dashboard), its filter choices (risk, tool, source, "Show counts"), the
  runs' agent filter, the calls' and events' tenant filter, search, and the "Verify now" buttons (one per own
  tenant) show the 2-tenant operator both tenants and the 1-tenant operator acme only.
- The run page: its calls link to their pages, "audit events of this run" to the trail searched by the run's id;
  the saga page's retry acts on the saga's compensations that need attention and says "Nothing to do" otherwise.

Seen and not fixed (product, not security): the desk has no tenant filter (a 2-tenant operator narrows it by
searching a tenant's slug, or ``?tenant=``), and its list shows neither a request's approvals so far nor whether the
viewer approved it already or is its requester (its page does).
"""

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect
from pytest_django.live_server_helper import LiveServer

from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.services import agent_create, run_cancel_by, run_start
from approvals.forms import shown_fields_version
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from approvals.services import approval_reject
from approvals.unanswered import approvals_expire_due
from demo.management.commands.load_demo import ORDER_SCRIPT
from tests.approvals.conftest import Hold, hold  # noqa: F401 - a fixture, registered by being imported here
from tests.browser.conftest import (  # noqa: F401 - fixtures, registered by being imported here
    admin_login,
    browser,
    order_agent,
    page,
    start_waiting_run,
)
from toolhub.admin_marks import marks_field, row_mark
from toolhub.models import ToolDefinition

pytestmark = pytest.mark.django_db

Committed = Callable[..., Any]
DESK = "/admin/approvals/approvalrequest/"


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _messages(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def _hashes(*requests: ApprovalRequest) -> dict[str, str]:
    """The version of each request as the confirmation page lists it and its form posts it back."""
    shown = (row_mark(item.pk, item.arguments_hash, shown_fields_version(item.tool_name)) for item in requests)
    return marks_field(shown)


def test_approve_selected_reports_a_request_a_colleague_rejected_after_it_was_listed(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Committed,
) -> None:
    """Found: the desk lists pending requests; the operator ticked two and got the confirmation page; a colleague
    rejected one; on confirming "Approve 2 request(s)" the operator read "1 request(s) approved." and nothing about
    the other (Django's action re-applied the desk's "pending" filter, and the rejected one dropped out).

    Expect: the rejected one reaches the service, which refuses it, and the operator is told so by number.
    """
    first, second = hold("pay 10"), hold("pay 20")
    client = _client(operator)
    selected = {"action": "approve_selected", "_selected_action": [first.pk, second.pk]}
    confirmation = client.post(DESK, selected).content.decode()
    assert "pay 20" in confirmation

    committed(approval_reject, request_id=second.pk, user=second_operator, comment="Not this one.")
    response = committed(
        client.post,
        DESK,
        {**selected, "apply": "yes", "comment": "Fine.", **_hashes(first, second)},
        follow=True,
    )

    shown = _messages(response)
    assert "1 request(s) approved." in shown
    assert any(f"#{second.pk} (risky_effect)" in text and "already rejected" in text for text in shown), shown
    assert ApprovalRequest.objects.get(pk=first.pk).status == ApprovalStatus.APPROVED
    assert list(ApprovalDecision.objects.filter(request=second).values_list("decided_by_name", flat=True)) == [
        "operator2"
    ]


def test_reject_selected_of_requests_that_all_expired_meanwhile_says_so(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    committed: Committed,
) -> None:
    """Found: when every request on the confirmation page had left the pending list (here: expired), confirming
    "Reject 1 request(s)" led back to the desk with no message at all: a silent no-op.

    Expect: the operator reads that the request expired and nothing was changed.
    """
    request = hold("pay 10")
    client = _client(operator)
    selected = {"action": "reject_selected", "_selected_action": [request.pk]}
    client.post(DESK, selected)
    ApprovalRequest.objects.filter(pk=request.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert committed(approvals_expire_due) == 1

    response = client.post(DESK, {**selected, "apply": "yes", "comment": "Too late."}, follow=True)

    shown = _messages(response)
    assert shown and "already expired" in shown[-1] and f"#{request.pk}" in shown[-1], shown
    assert not ApprovalDecision.objects.exists()


def test_cancel_selected_runs_reports_a_run_that_ended_after_it_was_listed(
    acme_operator: User, alice: User, committed: Committed
) -> None:
    """Found: the same drop in the runs' list filtered on "Waiting": a run cancelled meanwhile by its user vanished
    from the operator's "Cancel runs", which said "Cancelled 0 run(s)." and nothing about the run they chose.

    Expect: the run is counted as one that had ended and was left as it is.
    """
    agent = agent_create(name="acme-orders", provider="scripted", tools=["create_order"], script=ORDER_SCRIPT)
    run = committed(run_start, agent=agent, user=alice, input="Order a laptop for me.")
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    client = _client(acme_operator)
    url = "/admin/agents_app/agentrun/?status__exact=waiting"
    selected = {"action": "cancel_selected", "_selected_action": [str(run.pk)]}
    assert str(run.pk)[:8] in client.post(url, selected).content.decode()

    committed(run_cancel_by, run=AgentRun.objects.get(pk=run.pk), user=alice, reason="changed my mind")
    response = client.post(url, {**selected, "apply": "yes", "reason": "looping"}, follow=True)

    assert "1 selected run(s) had ended already and were left as they are." in _messages(response)
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED


def test_approve_selected_does_not_call_a_request_that_needs_another_approver_approved(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Committed,
) -> None:
    """Found: "Approve selected" on a plain request and one that needs two approvers said "2 request(s) approved."
    while the second's call still waited for a second, different operator.

    Expect: one approved; the other's approval said to be recorded, needing one more approver, as its page says.
    """
    plain, critical = hold("pay 10"), hold("pay 20", approvers=2, only_this=True)
    client = _client(operator)
    selected = {"action": "approve_selected", "_selected_action": [plain.pk, critical.pk]}
    assert f"{critical.pk}" in client.post(DESK, selected).content.decode()

    response = committed(
        client.post,
        DESK,
        {**selected, "apply": "yes", "comment": "Fine.", **_hashes(plain, critical)},
        follow=True,
    )

    shown = _messages(response)
    assert "1 request(s) approved." in shown, shown
    assert f"Your approval of request #{critical.pk} was recorded (round 1); it needs 1 more approver(s)." in shown
    assert ApprovalRequest.objects.get(pk=critical.pk).status == ApprovalStatus.PENDING


@pytest.fixture
def other_page(browser: Browser, live_server: LiveServer) -> Iterator[Page]:  # noqa: F811 - the imported fixture
    """A second browser session: a colleague at another desk."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 1000})
    other = context.new_page()
    other.set_default_timeout(15_000)
    yield other
    context.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_two_operators_at_the_desk_each_read_what_became_of_the_requests_they_chose(
    page: Page,  # noqa: F811 - the imported fixture
    other_page: Page,
    operator: User,
    second_operator: User,
    alice: User,
    order_agent: Agent,  # noqa: F811 - the imported fixture
) -> None:
    """Found: in Chromium, the first operator ticks alice's two orders (one of them critical: two approvers) and
    asks to approve them; while the confirmation page is open the colleague rejects the other from its page. On
    confirming, the first operator read "1 request(s) approved." only: the rejection was not mentioned and the
    critical order, still waiting for a second approver, was counted as approved.

    Expect: the rejected order named as such, the critical one's approval said to need one more approver.
    """
    ToolDefinition.objects.filter(name="create_order").update(risk_override="critical")
    _, critical = start_waiting_run(order_agent, alice)
    ToolDefinition.objects.filter(name="create_order").update(risk_override="")
    _, plain = start_waiting_run(order_agent, alice)
    assert (critical.required_approvals, plain.required_approvals) == (2, 1)

    admin_login(page, "operator", "operator-password")
    page.goto(DESK)
    for request in (critical, plain):
        page.locator(f"input[name=_selected_action][value='{request.pk}']").check()
    page.select_option("select[name=action]", "approve_selected")
    page.get_by_role("button", name="Go").click()
    expect(page.locator("#selected-requests tbody tr")).to_have_count(2)

    admin_login(other_page, "operator2", "operator2-password")
    other_page.goto(f"{DESK}{plain.pk}/change/")
    other_page.get_by_label("Comment").fill("No budget left.")
    other_page.get_by_role("button", name="Reject").click()
    expect(other_page.locator(".messagelist .success")).to_contain_text("was rejected")

    page.get_by_role("button", name="Approve 2 request(s)").click()

    expect(page.locator(".messagelist")).to_contain_text(
        f"Your approval of request #{critical.pk} was recorded (round 1); it needs 1 more approver(s)."
    )
    expect(page.locator(".messagelist .error")).to_contain_text(f"#{plain.pk} (create_order)")
    expect(page.locator(".messagelist .error")).to_contain_text("already rejected")
    expect(page.locator(".messagelist")).not_to_contain_text("request(s) approved.")
    assert ApprovalRequest.objects.get(pk=critical.pk).status == ApprovalStatus.PENDING
    assert ApprovalRequest.objects.get(pk=plain.pk).status == ApprovalStatus.REJECTED
