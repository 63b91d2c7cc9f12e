"""Review of 2026-12-06 (cu): the lifecycle of credentials (API tokens, console sessions, MCP bearer tokens).

Each test fails on the reviewed code (main at ea55f42) and states what was reached ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. An API token outlived its user's password change (REST and MCP): the password is what an administrator resets
   when an account is feared taken, and the token the intruder made or copied went on working. Now a password set
   anywhere (``set_password`` then ``save``: the admin's password form, ``changepassword``, the user's own form)
   deletes the account's tokens in the same transaction (``toolhub.api.token_revocation``).
2. A deactivated account's token was only refused, not revoked: reactivating the account (a leave ends, a
   deactivation undone) brought the old key back to life, leaked or not. Now deactivating deletes the tokens;
   the administrator makes a new one on reactivation.

Checked and holding (no test here, most with a test in earlier reviews): a deactivated user's token and session are
refused at the next request (``token_owner``, ``ModelBackend.get_user``); a console session stops authenticating
the API once staff status goes (``ConsoleSessionAuthentication``); a password change ends the account's other
sessions (session auth hash); tokens expire after ``API_TOKEN_MAX_AGE_SECONDS`` (90 days by default), REST and MCP
alike (``token_owner``); a token whose user lost every membership reaches no tenant's rows (the tenant scope is
read per request); the token admin is for people who cross the tenant boundary only (``CrossTenantOnly``), so no
tenant's operator creates, rotates or deletes another tenant's user's token; the key is shown once, on the page
answering the add form (no-store), never in the list (``user``, ``created``), titles, ``LogEntry``, the governance
trail (``excluded`` key, redacted label) or a popup; a list filter on the key is refused (``hidden_lookups``);
``drf_create_token`` is recorded without the key; the MCP 401 says nothing of the key. Key comparison is the
database's equality on an indexed 40-hex key, as DRF and Django's sessions do: no per-character timing usable over
the network was found.
"""

import json

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.helpers import console
from toolhub.api.keys import api_key_issue
from toolhub.mcp_caller import token_user
from toolhub.models import AuditEvent, Tenant

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "A-new-passw0rd!"


def _api_status(key: str) -> int:
    """What ``/api/v1/calls/`` answers ``Authorization: Token <key>``."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return int(client.get("/api/v1/calls/").status_code)


def _mcp_user(key: str) -> User | None:
    """Whom the MCP server's auth wrapper takes ``Authorization: Bearer <key>`` for (None: a 401)."""
    user, _problem = token_user(f"Bearer {key}")
    return user


def test_a_password_reset_in_the_admin_revokes_the_accounts_api_token(
    alice: User, superuser: User, tenant: Tenant
) -> None:
    """Found: after an administrator reset alice's password in the admin (the account feared taken), alice's API
    token still answered 200 on the REST API and MCP took it as alice. Expect: the token is gone, REST answers 401
    and MCP refuses the key, the deletion is in acme's trail as the Tokens page records one (without the key); a
    new token made afterwards works."""
    key = api_key_issue(alice)
    assert _api_status(key) == 200
    assert _mcp_user(key) == alice

    reset = console(superuser).post(
        f"/admin/auth/user/{alice.pk}/password/",
        {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"},
    )
    assert reset.status_code == 302

    assert not Token.objects.filter(user=alice).exists()
    assert _api_status(key) == 401
    assert _mcp_user(key) is None
    (revoked,) = AuditEvent.objects.filter(event_type="governance.deleted", tenant="acme")
    assert revoked.actor == "revocation:password-changed"
    assert revoked.payload["model"] == "authtoken.tokenproxy"
    assert revoked.payload["values"]["user_id"] == alice.pk
    for event in AuditEvent.objects.all():
        assert key not in json.dumps(event.payload) + event.actor, event.event_type
    assert _api_status(api_key_issue(alice)) == 200


def test_a_password_set_in_code_revokes_the_token_and_other_saves_keep_it(alice: User, tenant: Tenant) -> None:
    """Found: ``set_password`` and ``save`` (what ``changepassword`` and the user's own password form do) left the
    account's token working. Expect: the token is deleted with the save; a save that sets no password (a login's
    ``last_login``, an e-mail change) keeps it."""
    key = api_key_issue(alice)
    alice.email = "alice@elsewhere.example"
    alice.save()
    assert _api_status(key) == 200

    alice.set_password(NEW_PASSWORD)
    alice.save()

    assert _api_status(key) == 401
    assert _mcp_user(key) is None


def test_a_deactivated_accounts_token_stays_dead_after_reactivation(alice: User, tenant: Tenant) -> None:
    """Found: deactivating alice only refused her token; reactivating the account brought the same key back (200 on
    the REST API, MCP took it as alice). Expect: deactivation deletes the token, so the reactivated account holds
    none until an administrator makes a new one."""
    key = api_key_issue(alice)
    assert _api_status(key) == 200

    alice.is_active = False
    alice.save()
    assert _api_status(key) == 401
    alice.is_active = True
    alice.save()

    assert _api_status(key) == 401
    assert _mcp_user(key) is None
    assert not Token.objects.filter(user=alice).exists()
    (revoked,) = AuditEvent.objects.filter(event_type="governance.deleted", tenant="acme")
    assert revoked.actor == "revocation:deactivated"
