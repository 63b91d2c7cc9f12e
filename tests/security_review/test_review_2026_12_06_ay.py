"""Review of 2026-12-06 (ay): logins, sessions and API tokens (``toolhub.login_guard``, the admin site, the API's
authentication classes, settings).

The test fails on the reviewed code (main at 4ad49b4) and states who reaches what ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A console session kept authenticating the REST API after its user's staff status was removed: only the console's
   login (staff only) issues a session, and the console refused it at once, but DRF's ``SessionAuthentication``
   asks only ``is_active``, so the demoted operator went on listing, requesting and approving calls of their tenants
   through ``/api/v1/`` with the cookie for the session's remaining life (two weeks). Now the API takes a session
   only while its user may sign in to the console (``toolhub.api.sessions.ConsoleSessionAuthentication``).

Checked and found holding (no test here): Django's ``login`` rotates the session key (no fixation) and the CSRF
token; a password change (own or set by an administrator) ends the account's other sessions (session auth hash),
the changer's own kept (``update_session_auth_hash``); a deactivated account's sessions and API/MCP tokens
authenticate no one (``ModelBackend.get_user``, ``token_owner``); membership and permission changes apply to open
sessions and tokens at the next request/call (``_user_facts`` behind the governance stamp, the admin's checks read per
request); DRF enforces CSRF for every unsafe API request that a session authenticates, no view overrides the
authentication classes or is ``csrf_exempt``; MCP takes tokens only (no cookie, so no CSRF); the admin logout is
POST-only; no password-reset flow exists (no host-header poisoning); ``ALLOWED_HOSTS`` defaults to loopback and
``USE_X_FORWARDED_HOST`` is off; cookies are Secure (without DEBUG), HttpOnly (session) and SameSite=Lax;
``X-Frame-Options: DENY`` and ``nosniff`` on every page; the lockout's address ignores ``X-Forwarded-For`` with
``TRUSTED_PROXY_COUNT`` 0; a victim's pair is not locked from another address; the login form's NFKC-normalized,
case-sensitive name is what the lockout counts, so case or width variants name no account and unlock nothing;
token keys are matched by the database (as DRF does), never logged, shown once.

Not fixed (seen): an API token is not revoked when its user's password is changed (tokens are administered apart,
in the admin's Tokens); the console sets no Content-Security-Policy (framing is refused by ``X-Frame-Options``);
``SESSION_COOKIE_AGE`` is Django's two weeks.
"""

import pytest
from django.contrib.auth.models import User
from django.test import Client

from toolhub.models import Tenant

pytestmark = pytest.mark.django_db


def test_a_console_session_stops_authenticating_the_api_once_staff_status_is_removed(
    acme_operator: User, tenant: Tenant
) -> None:
    """Found: an operator demoted from staff (the console refused their session at once) went on using the REST
    API with the same session cookie: 200 on their tenant's calls. Expect: the API refuses the session (401) as the
    console does; a staff member's session still works."""
    assert acme_operator.is_staff
    browser = Client()
    browser.force_login(acme_operator)
    assert browser.get("/api/v1/calls/").status_code == 200
    assert browser.get("/admin/").status_code == 200

    User.objects.filter(pk=acme_operator.pk).update(is_staff=False)

    assert browser.get("/admin/").status_code == 302  # the console: to the login page
    refused = browser.get("/api/v1/calls/")
    assert refused.status_code == 401, refused.content
    assert browser.get("/api/v1/approvals/").status_code == 401
