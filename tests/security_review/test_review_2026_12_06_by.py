"""Review of 2026-12-06 (by): the HTTP response posture (Content-Security-Policy, cache, security headers, /mcp).

Findings (fixed, one mechanism: ``toolhub.response_headers``):

1. No API answer said how it may be stored: approval requests with their call arguments, runs, calls, call results
   and artifact downloads answered with no ``Cache-Control`` (only ``Vary: Accept``, not ``Cookie``), so a shared
   proxy could keep one tenant's data fetched with a session or token and the browser's disk cache kept it after
   logout. Every answer is now ``private`` and ``no-store`` (``PrivateAnswersMiddleware``).
2. ``/mcp`` (the Starlette app beside Django) answered without the headers Django's answers carry: no
   ``X-Content-Type-Options``, ``Referrer-Policy``, ``Cross-Origin-Opener-Policy``, ``X-Frame-Options``,
   ``Content-Security-Policy``, and its answers (tool results on an event stream) were cacheable
   (``no-cache, no-transform`` only, or nothing on a 401). Its answers now get the same headers from the same
   settings and middleware (``with_answer_headers`` in ``toolhub.asgi``).
3. The ASGI body bound's refusal (413, answered before Django: ``toolhub.asgi_body``) had none of those headers
   either; it now gets them the same way (``answer_headers``).
4. The browser suite's guard (``policy_violations``, every browser test's ``page``) listened to the test's first
   page only: a refusal in a window the page opened (the admin's "+" and raw-id lookup popups) passed unseen. It now
   listens on the page's whole browser context.

Checked and holding: in Chromium under the policy, the raw-id lookup and "+" popups hand their choice back to the
opener, the date widgets open their calendar, password change and logout answer, the browsable API's forms render
(test below); a download's own ``sandbox`` policy is kept (django-csp leaves a response's own policy), and it
keeps ``nosniff``; Django's answers (pages, API, 404s under ``/api/`` and elsewhere, the login page) all carry
``nosniff``, ``Referrer-Policy: same-origin``, ``Cross-Origin-Opener-Policy: same-origin``, ``X-Frame-Options: DENY``
and the policy (Django's ``SecurityMiddleware`` defaults, not overridden); admin pages (the desk, the audit console's
verify and export pages, the lockout) were already ``no-store`` (``admin_view`` is ``never_cache``); the policy is
exempted by django-csp only for DEBUG's 404/500 technical pages; the approval desk's queue refresh is a file
(``queue-refresh.js``) fetching its own page (``connect-src 'self'``); no template holds an inline script or an
``on...=`` handler attribute.
"""

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from playwright.sync_api import Browser, Page, expect
from pytest_django.live_server_helper import LiveServer

from approvals.models import ApprovalRequest
from tests.browser.conftest import admin_login, browser, page, policy_violations
from tests.helpers import RequestCall
from tests.mcp.conftest import serve_asgi, token
from tests.security_review.conftest import client_for
from tests.security_review.test_review_2026_12_05_ax import SAVE_PAGE
from toolhub import registry
from toolhub.asgi_body import bounded_body
from toolhub.models import CallStatus

__all__ = ["browser", "page"]  # the browser suite's fixtures, used here

_DJANGO_HEADERS = ("x-content-type-options", "referrer-policy", "cross-origin-opener-policy", "x-frame-options")


def _stored_nowhere(cache_control: str) -> bool:
    directives = {part.strip().split("=")[0] for part in cache_control.split(",")}
    return {"private", "no-store"} <= directives and "public" not in directives


@pytest.mark.django_db
def test_api_answers_are_private_and_stored_nowhere(alice: User, operator: User, waiting_approval_path: str) -> None:
    """Found: the API's answers (approvals with their arguments, runs, calls; by token or session) had no
    ``Cache-Control``, so a shared proxy or the browser's cache could keep them. Expect: ``private, no-store``."""
    # given: the same lists read with a token and with a console session (an operator's)
    session = Client()
    session.force_login(operator)
    for client in (client_for(alice), session):
        for path in ("/api/v1/approvals/", waiting_approval_path, "/api/v1/runs/", "/api/v1/calls/", "/api/v1/nope/"):
            # when
            answer = client.get(path)
            # then
            assert answer.status_code in (200, 404), (path, answer.status_code)
            assert _stored_nowhere(answer.get("Cache-Control", "")), (path, answer.get("Cache-Control"))


@pytest.mark.django_db
def test_a_download_keeps_its_sandbox_and_is_stored_nowhere(request_call: RequestCall, alice: User) -> None:
    """Found: an artifact's download (a tool's output) had no ``Cache-Control``. Expect: ``private, no-store``, and
    its own ``sandbox`` policy and ``nosniff`` kept, not replaced by the console's policy."""
    # given
    with registry.temporarily(SAVE_PAGE):
        call = request_call("review_ax_save_page", {"name": "page.html"}, alice, tenant="acme")
    assert call.status == CallStatus.SUCCEEDED, call.error
    artifact = call.artifacts.get()
    # when
    answer = client_for(alice).get(f"/api/v1/calls/{call.pk}/artifacts/{artifact.pk}/")
    # then
    assert answer.status_code == 200
    assert answer["Content-Security-Policy"] == "sandbox; default-src 'none'"
    assert answer["X-Content-Type-Options"] == "nosniff"
    assert _stored_nowhere(answer["Cache-Control"])


@pytest.fixture
def waiting_approval_path(request_call: RequestCall, alice: User) -> str:
    """The API address of a pending approval request of alice's (its arguments in the answer)."""
    call = request_call("create_order", {"product": "Laptop", "amount": "5000"}, alice, tenant="acme")
    return f"/api/v1/approvals/{ApprovalRequest.objects.get(call=call).pk}/"


def _headers(answer: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in answer.headers.items()}


@pytest.mark.django_db(transaction=True)
def test_mcp_answers_carry_the_headers_django_answers_carry(alice: User) -> None:
    """Found: ``/mcp`` (Starlette) answered without ``nosniff``, ``Referrer-Policy``, ``Cross-Origin-Opener-Policy``,
    ``X-Frame-Options`` or the policy, and cacheable (tool results). Expect: the same headers as Django's answers,
    ``private, no-store``, the app's own headers (``WWW-Authenticate``, the stream's ``no-transform``) kept."""
    server = serve_asgi()
    base = next(server)
    try:
        key = token(alice)
        django_answer = _headers(httpx2.get(f"{base}/api/v1/tools/", headers={"Authorization": f"Token {key}"}))
        accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        # when: refused without a token, and a session opened with one (an event stream)
        refused = _headers(httpx2.get(f"{base}/mcp", headers=accept))
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        opened = httpx2.post(f"{base}/mcp", headers={**accept, "Authorization": f"Bearer {key}"}, json=initialize)
        assert opened.status_code == 200, opened.text
        stream = _headers(opened)
    finally:
        next(server, None)
    # then
    assert refused["www-authenticate"].startswith("Bearer")
    assert "no-transform" in stream["cache-control"]
    for answer in (refused, stream):
        for name in _DJANGO_HEADERS:
            assert answer.get(name) == django_answer[name], (name, answer.get(name))
        assert answer["content-security-policy"] == django_answer["content-security-policy"]
        assert _stored_nowhere(answer["cache-control"]), answer["cache-control"]


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=10_000)
def test_the_asgi_body_bounds_refusal_carries_the_headers_django_answers_carry() -> None:
    """Found: the 413 the ASGI body bound answers before Django had no ``nosniff``, ``Referrer-Policy``,
    ``Cross-Origin-Opener-Policy``, ``X-Frame-Options``, policy or cache directives. Expect: all of them."""
    sent: list[dict[str, Any]] = []

    async def unreached(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("a body over the bound reached the app")

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "scheme": "http",
        "path": "/admin/login/",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-length", b"20000")],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
    }
    # when
    # on a thread of its own: the browser tests' event loop may be running in this one
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, bounded_body(unreached)(scope, receive, send)).result()
    # then
    start = sent[0]
    headers = {name.decode().lower(): value.decode() for name, value in start["headers"]}
    assert start["status"] == 413
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == headers["cross-origin-opener-policy"] == "same-origin"
    assert headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert _stored_nowhere(headers["cache-control"])
    assert headers["content-type"].startswith("text/plain") and headers["connection"] == "close"


@pytest.mark.browser
@pytest.mark.usefixtures("transactional_db")
def test_the_policy_guard_watches_the_windows_a_page_opens(browser: Browser, live_server: LiveServer) -> None:
    """Found: the browser suite's guard (``policy_violations``) listened to the test's first page only: a refusal in
    a window it opened (the admin's "+" and lookup popups) passed unseen. Expect: a refusal there is reported."""
    # given: a console page watched by the guard
    User.objects.create_superuser("root", "root@example.com", "root-password")
    context = browser.new_context(base_url=live_server.url)
    try:
        opener = context.new_page()
        violations = policy_violations(opener)
        admin_login(opener, "root", "root-password")
        opener.goto("/admin/toolhub/tenantmembership/add/")
        with opener.expect_popup() as opened:
            opener.click("#lookup_id_user")
        popup = opened.value
        popup.wait_for_load_state()
        # when: markup in the popup tries an inline script
        popup.evaluate("document.body.insertAdjacentHTML('beforeend', '<img src=x onerror=\"window.ran = 1\">')")
        popup.wait_for_timeout(500)
        # then
        assert popup.evaluate("window.ran === undefined")
        assert any("inline event handler" in text or "script-src" in text for text in violations), violations
    finally:
        context.close()


@pytest.mark.browser
@pytest.mark.usefixtures("transactional_db")
def test_the_admins_popups_widgets_and_account_pages_run_under_the_policy(page: Page, alice: User) -> None:
    """Checked (holds): the raw-id lookup and "+" windows hand their choice back, the date widgets open their
    calendar, password change and logout answer, under the policy (the ``page`` fixture fails on any refusal)."""
    User.objects.create_superuser("root", "root@example.com", "root-password")
    admin_login(page, "root", "root-password")
    page.goto("/admin/toolhub/tenantmembership/add/")
    with page.expect_popup() as lookup:
        page.click("#lookup_id_user")
    # The popup's links hand their row back once its scripts ran (the load event); a click before follows the link.
    lookup.value.wait_for_load_state("load")
    lookup.value.locator("#result_list tbody th a").first.click()
    expect(page.locator("#id_user")).not_to_have_value("")
    with page.expect_popup() as added:
        page.click("#add_id_tenant")
    added.value.wait_for_load_state("load")
    added.value.fill("#id_slug", "newt")
    added.value.fill("#id_name", "New tenant")
    added.value.locator("input[name=_save]").click()
    expect(page.locator("#id_tenant option:checked")).to_have_text("newt")

    page.goto(f"/admin/auth/user/{alice.pk}/change/")
    page.locator("#calendarlink0").click()
    expect(page.locator("#calendarbox0")).to_be_visible()

    page.goto("/admin/password_change/")
    expect(page.locator("#id_old_password")).to_be_visible()
    page.goto("/admin/")
    page.locator("#logout-form button").click()
    expect(page.locator("#content h1")).to_contain_text("Logged out")
