"""Review 2026-12-06 (dn): credentials that landed today (API keys as digests, token revocation), attacked.

Reviews cu, cy and dh. Each test fails on the reviewed code (main at dc76274) and states what was reached
("Found: ...") and what is expected ("Expect: ...").

Findings:

1. Console sessions were stored by their key: ``django_session.session_key`` is the cookie's value, so whoever read
   the database (the threat review dh closed for API keys: a backup, a read role, a dump) sent it as ``sessionid``
   and was any signed-in administrator, superusers included, on the console and, through
   ``ConsoleSessionAuthentication``, on the REST API: more than any API key gives. Now the sessions are stored by
   their key's digest (``toolhub.session_store``, the same ``key_digest`` as API keys, 40 hex: the column's width);
   the cookie keeps the key, and every read, write, rotation and deletion digests it first.

Checked and holding (probes run on the code as found, no test kept unless above):

- Every place a key authenticates goes through ``token_owner``'s digest: REST (``ExpiringTokenAuthentication``, the
  only token class in ``DEFAULT_AUTHENTICATION_CLASSES``; no view sets its own ``authentication_classes``, no
  ``obtain_auth_token`` URL) and MCP (``token_user``, ``Bearer``/``Token``); a 40-hex digest read from the table is
  digested again and found by nothing, so a digest never authenticates; a key with non-ASCII characters or a NUL is
  digested before the query (no database error); repeated ``Authorization`` headers join into no key.
- No raw key is stored or compared elsewhere: ``Token.objects`` is used only by ``drf_create_token`` (existence and
  ``-r``'s delete; the printed token is never saved), ``api_key_issue`` and the admin's ``save_model`` store the
  digest; DRF's own ``Token.save`` stores a drawn key that authenticates no one.
- The admin's Tokens: the proxy's pk is the user's id (URLs, checkboxes, ``LogEntry.object_id``), its name is
  ``token_handle`` (no key, no digest), the add answer shows the key once (no-store); the governance events of a
  token name it ``[redacted]`` where its primary key is the key. The OpenAPI schema names the scheme only.
- Revocation runs in the save's transaction on every toolhub path that changes a password or deactivates (admin's
  user form and password form, the user's own password form, ``changepassword`` under ``governance_recording``,
  ``loaddata``): a rollback of the save takes the token deletion and its events with it. A login's hash upgrade
  (the only autocommit password save) never revokes. ``update_session_auth_hash`` (own password form) keeps only the
  changer's session; ``cycle_key`` deletes the old row through the store (digested with this fix).
- A user removed from every tenant keeps a token that reaches no tenant's rows (scope read per request); a deleted
  user's tokens cascade; a group or permission change is read per request, not at token issue.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def _stored_session_keys() -> list[str]:
    """What a reader of the database sees in the session table."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT session_key FROM django_session")
        return [row[0] for row in cursor.fetchall()]


def _signed_in(cookie: str) -> tuple[int, int]:
    """What the console's index and the REST API answer a browser sending ``sessionid=<cookie>``."""
    console = Client()
    console.cookies["sessionid"] = cookie
    api = APIClient()
    api.cookies["sessionid"] = cookie
    return console.get("/admin/").status_code, api.get("/api/v1/calls/").status_code


def test_a_value_read_from_the_session_table_signs_in_no_one(superuser: User, tenant: Any) -> None:
    """Found: a superuser's console session was stored under the cookie's own value: the value a database reader
    took from ``django_session`` opened the console (200) and the REST API (200) as that superuser. Expect: the
    table holds no cookie's value; what it holds signs in to nothing; the cookie itself still works, and signing
    out deletes the stored row."""
    browser = Client()
    browser.force_login(superuser)
    cookie = browser.cookies["sessionid"].value

    (stored,) = _stored_session_keys()
    assert stored != cookie
    assert _signed_in(stored) == (302, 401)
    assert _signed_in(cookie) == (200, 200)

    browser.post("/admin/logout/")
    assert _stored_session_keys() == []
    assert _signed_in(cookie) == (302, 401)
