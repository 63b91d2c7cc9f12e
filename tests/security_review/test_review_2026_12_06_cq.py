"""Review of 2026-12-06 (cq): the HTTP answer posture and the ASGI entry (reviews by, ch, co, bt, ck), adversarially.

Findings (fixed):

1. An answer a Django middleware gave by itself, before any view (``StorableAddressMiddleware``'s 400 for a NUL and
   413 for a declared body over the bound, ``CommonMiddleware``'s 400 for a host not allowed and its slash redirect),
   had no ``Content-Security-Policy`` and no ``X-Frame-Options``: both middleware sat inside those, so only views'
   answers got them, while ``/mcp``'s and the ASGI body bound's refusals of the same kind carry both
   (``answer_headers``). ``XFrameOptionsMiddleware`` and ``CSPMiddleware`` now sit right inside ``SecurityMiddleware``.

Checked and holding:
"""

from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client
from playwright.sync_api import Page, expect, sync_playwright
from pytest_django.live_server_helper import LiveServer

from tests.browser.conftest import CHROMIUM_ARGS, policy_violations
from tests.conftest import CHROMIUM

#: Requests Django's middleware answers itself, before the view: a NUL in the query string (400, the console's page
#: and the API's JSON), a host not allowed (400), a declared body over the bound under ``/api/`` (413), a missing slash
#: (301).
MIDDLEWARE_ANSWERS = [
    ("/admin/login/?next=%00", {}, "get"),
    ("/api/v1/tools/?q=%00", {}, "get"),
    ("/admin/login/", {"HTTP_HOST": "evil.example"}, "get"),
    ("/api/v1/calls/", {"CONTENT_LENGTH": "999999999"}, "post"),
    ("/admin", {}, "get"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "extra", "method"), MIDDLEWARE_ANSWERS)
def test_answers_of_djangos_middleware_carry_the_policy_and_frame_refusal(
    path: str, extra: dict[str, str], method: str
) -> None:
    """Found: an answer a middleware gave before the view (``StorableAddressMiddleware``'s 400 and 413,
    ``CommonMiddleware``'s 400 for a host not allowed and its slash redirect) had no ``Content-Security-Policy`` and no
    ``X-Frame-Options``: both middleware sat inside them, so only views' answers got them, while ``/mcp``'s and the
    body bound's refusals of the same kind carry both. Expect: every such answer carries them (and ``no-store``)."""
    client = Client(raise_request_exception=False)
    # when
    answer = getattr(client, method)(path, **extra)
    # then
    assert answer.status_code in (301, 400, 413), answer.status_code
    assert "frame-ancestors 'none'" in answer.headers.get("Content-Security-Policy", ""), dict(answer.headers)
    assert answer.headers.get("X-Frame-Options") == "DENY"
    assert answer.headers["X-Content-Type-Options"] == "nosniff"
    assert "no-store" in answer.headers["Cache-Control"]


#: A name the browser resolves to the live server: the API docs as served under a real host name, not "localhost".
DOCS_HOST = "toolhub.example"


@pytest.mark.browser
@pytest.mark.usefixtures("transactional_db", "alice")
def test_the_api_docs_reach_no_other_origin_under_a_real_host_name(live_server: LiveServer, settings: Any) -> None:
    """Checked (holds): under a host name that is not ``localhost`` (where Swagger UI would show its online validator
    badge, an image from validator.swagger.io carrying the schema's address), the API docs load only from this server
    and nothing is refused by the policy."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, DOCS_HOST]
    port = urlsplit(live_server.url).port
    requested: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[*CHROMIUM_ARGS, f"--host-resolver-rules=MAP {DOCS_HOST} 127.0.0.1"],
        )
        try:
            context = browser.new_context(base_url=f"http://{DOCS_HOST}:{port}")
            page: Page = context.new_page()
            violations = policy_violations(page)
            context.on("request", lambda request: requested.append(request.url))
            # when
            page.goto("/api/docs/")
            expect(page.locator(".opblock").first).to_be_visible()
            page.wait_for_load_state("networkidle")
        finally:
            browser.close()
    # then
    assert not violations, violations
    assert any(url.endswith("/api/schema/") for url in requested), requested
    assert all(urlsplit(url).hostname == DOCS_HOST for url in requested), requested
