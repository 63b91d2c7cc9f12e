"""Browser fixtures: Debian's Chromium driven by Playwright against pytest-django's live server.

The live server runs in a thread of this process, so Celery's eager mode (set by the root conftest)
and temporarily registered tools apply to what the browser triggers too.
"""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from playwright.sync_api import Browser, Page, expect, sync_playwright
from pytest_django.live_server_helper import LiveServer

from agents_app.models import Agent, AgentRun
from agents_app.services import run_start
from approvals.models import ApprovalRequest, ApprovalStatus
from demo.management.commands.load_demo import ORDER_SCRIPT
from tests.conftest import CHROMIUM
from toolhub.models import Tenant, TenantMembership

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Keep each phase's report on the item, so the page fixture knows whether to take a screenshot."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium for one test module; module scope keeps Playwright's event loop out of other tests.

    Playwright's sync API runs an event loop in this thread, so Django's async-safety check would
    refuse the tests' own ORM calls: it is lifted while the browser runs, and only then.
    """
    if not os.path.exists(CHROMIUM):
        # Outside CI, tests/conftest.py already skipped browser tests at collection; here it is a failure.
        pytest.fail(f"{CHROMIUM} is missing; install Debian's chromium package")
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def policy_violations(page: Page) -> list[str]:
    """Chromium's console reports of what the Content-Security-Policy refused, gathered as the pages run.

    Watched on the page's whole context: the windows it opens (the admin's "+" and lookup popups) are pages of
    their own, whose refusals the page's own console never shows.
    """
    violations: list[str] = []
    page.context.on(
        "console",
        lambda message: violations.append(message.text) if "Content Security Policy" in message.text else None,
    )
    return violations


@pytest.fixture
def page(browser: Browser, live_server: LiveServer, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page of its own context; every browser test also fails on anything the console's CSP refused."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15_000)
    expect.set_options(timeout=15_000)
    violations = policy_violations(page)
    yield page
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert not violations, f"the Content-Security-Policy refused: {violations}"


def admin_login(page: Page, username: str, password: str) -> None:
    """Log in through the admin's own login form."""
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#user-tools")).to_contain_text(username.upper(), ignore_case=True)


@pytest.fixture
def auditor(tenant: Tenant) -> User:
    """A staff user with view permissions only: browses calls, audit events, approvals and runs."""
    user = User.objects.create_user("auditor", "auditor@example.com", "auditor-password", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label__in=["approvals", "toolhub", "agents_app"], codename__startswith="view_"
        )
    )
    TenantMembership.objects.create(user=user, tenant=tenant)
    return user


@pytest.fixture
def order_agent(transactional_db: None) -> Agent:
    """The demo's scripted agent: orders a laptop for 5000, which needs an operator's approval."""
    return Agent.objects.create(
        name="order-demo",
        script=ORDER_SCRIPT,
        system_prompt="You place orders for the user.",
        tools=["create_order", "get_order"],
    )


def start_waiting_run(agent: Agent, user: User) -> tuple[AgentRun, ApprovalRequest]:
    """Start a run that stops on its held-back call; return it with its pending approval request."""
    run = run_start(agent=agent, user=user, input="Order a laptop for me.")
    run.refresh_from_db()
    request = ApprovalRequest.objects.select_related("call").get(call__run_id=run.id)
    assert run.status == "waiting", run.error
    assert request.status == ApprovalStatus.PENDING
    return run, request


@pytest.fixture
def waiting_run(order_agent: Agent, alice: User) -> tuple[AgentRun, ApprovalRequest]:
    """Alice's run, waiting for an operator to decide on her order of 5000."""
    return start_waiting_run(order_agent, alice)
