"""The console's Content-Security-Policy: every page people use runs under it, and nothing on them is refused.

The policy (``CONTENT_SECURITY_POLICY`` in the settings) allows scripts only as files from toolhub itself. A page
that still needed an inline script (Swagger UI's single-page view did) would silently lose its behaviour, so each
page here is opened in Chromium and checked to do its job; the ``page`` fixture fails any test on a refusal.
"""

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from tests.browser.conftest import admin_login

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]


def test_the_console_pages_answer_with_the_policy(page: Page, operator: User, waiting_run: tuple) -> None:
    """The login page, the desk and a request's page carry the policy, and their scripts still run."""
    _run, request = waiting_run
    login = page.goto("/admin/login/")
    assert login is not None
    policy = login.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy and "object-src 'none'" in policy

    admin_login(page, "operator", "operator-password")
    desk = page.goto("/admin/approvals/approvalrequest/")
    assert desk is not None and "script-src 'self'" in desk.headers["content-security-policy"]
    # The admin's own scripts ran: the action bar's counter is filled in by actions.js.
    page.locator("input.action-select").first.check()
    expect(page.locator(".action-counter")).to_contain_text("1 of 1 selected")

    page.goto(f"/admin/approvals/approvalrequest/{request.pk}/change/")
    expect(page.locator("#approval-decision")).to_be_visible()


def test_the_api_docs_render_under_the_policy(page: Page, alice: User) -> None:
    """Swagger UI draws the API's operations with its script served as a file, not inline."""
    answer = page.goto("/api/docs/")
    assert answer is not None and "script-src 'self'" in answer.headers["content-security-policy"]
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("toolhub API")
    expect(page.locator(".opblock").first).to_be_visible()


@pytest.mark.usefixtures("waiting_run")
def test_the_browsable_api_runs_under_the_policy(page: Page, operator: User) -> None:
    """The browsable API's page (an operator logged in) shows a list, a request on it, under the policy."""
    admin_login(page, "operator", "operator-password")
    answer = page.goto("/api/v1/approvals/")
    assert answer is not None and "script-src 'self'" in answer.headers["content-security-policy"]
    expect(page.locator(".response-info")).to_contain_text("HTTP 200 OK")
    expect(page.locator(".response-info")).to_contain_text("create_order")
