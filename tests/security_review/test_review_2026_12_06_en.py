"""Review 2026-12-06 (en): console sessions stored by digest (review dn) and cookies under a root path (review em).

Each finding's test fails on the reviewed code (main at 98885c5) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A session refused while its account could not sign in came back with the account. Django refuses a session whose
   account is inactive (``ModelBackend.get_user``) or no longer staff (the admin, ``toolhub.api.sessions``) only
   while that lasts: the row stayed, so reactivating the account (or making it staff again) signed the old cookie in
   again, on the console and the REST API, as review cu found for API tokens (``toolhub.api.token_revocation``:
   "reactivating the account brought the same key back"). An operator who deactivated an account to cut a stolen
   browser session and reactivated it later gave the session back. Now the same revocation ends the account's
   sessions in the save's transaction when a save takes the console away (an active staff account saved inactive or
   not staff) or writes another password (``toolhub.session_store.sessions_end``: no column names a session's user,
   so it reads each live session's data); the one changing its own password stays signed in.
2. Under a root path that needs percent-encoding (``/my tools``, ``/outils-é``) the cookies were given the decoded
   prefix as their ``Path``: a browser matches it against the path it sends, encoded as ``reverse`` writes every
   link (``/my%20tools/admin/``), so the CSRF cookie never came back and no one could sign in; a prefix not ASCII
   made Django's ASGI handler raise on every answer setting a cookie (the login page: no answer at all). Before
   ``toolhub.cookie_paths`` they were ``Path=/`` and worked. The cookies now get the prefix encoded as in links
   (``cookie_path_of``; a ``;`` is encoded too, so a prefix cannot add a cookie attribute).

Checked and holding (probes on the code as found; tests kept only where marked):

- ``toolhub.session_store`` against Django 5.2's ``db.SessionStore``, line by line: every query of ``session_key``
  (``_get_session_from_db``/async, ``exists``/async, ``create_model_instance``/async, ``delete``/async; ``save`` and
  ``asave`` write the instance ``create_model_instance`` digested, ``force_update`` finding the digested row;
  ``cycle_key``/``acycle_key`` delete the old key through ``delete``); ``clear_expired`` reads no key. A cookie equal
  to a stored digest is digested again and finds nothing (review dn's test); an empty cookie or one under 8
  characters is no key (``_validate_session_key``); keys are lowercase and compared digested, case-sensitively.
- Nothing else reads ``django_session.session_key`` as a key: toolhub has no other reader or writer of the table, no
  admin page for ``Session``, no "log out everywhere"; ``Session.get_decoded`` reads no key. Revoking a user's
  sessions now goes through ``sessions_end``, which finds them by their data, not their key.
- Own password change (``/admin/password_change/``) with the fix: the changer stays signed in (its session saved
  again under a new key by ``update_session_auth_hash``), the account's other session is deleted at once (test
  below); ``changepassword`` and ``loaddata`` go through the same ``post_save``. A superuser clearing their own
  ``is_staff`` on the admin's user form gets the usual redirect (no ``SessionInterrupted``: the page writes nothing
  to the deleted session) and is signed out. A save writing neither the password nor the flags reads no stored row
  (``update_fields=["last_login"]`` at login: no query added).
- Left: expired session rows are cleared by nothing scheduled (``clearsessions`` is not in the beat schedule); they
  sign in no one and ``sessions_end`` reads only live ones. A deleted account's sessions stay until they expire;
  they sign in no one (no user of that id: primary keys are not reused).
- Cookie paths: ``/toolhub`` is not a path-prefix of ``/toolhub2`` for a browser (RFC 6265 5.1.4 needs a ``/`` after
  it), and ``prefix_of`` drops a trailing slash; a request for exactly ``/toolhub`` gets ``Path=/toolhub``, which
  matches it. Logout's ``delete_cookie``, the messages cookie (set and deleted without a path) and a language cookie
  all get the same (now encoded) path as the session's; an explicit ``SESSION_COOKIE_PATH``/``CSRF_COOKIE_PATH``
  other than ``/`` is kept as written. The CSRF failure view sets no cookie; a login redirect's ``next`` is the
  request's full path, prefix included. The prefix comes from the server (``--root-path``, ``SCRIPT_NAME``), never
  from the client.
"""

import asyncio
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.asgi import get_asgi_application
from django.db import connection
from django.test import Client
from django.urls import set_script_prefix
from rest_framework.test import APIClient

from tests.security_review.console_sessions import cookie_after_login

pytestmark = pytest.mark.django_db

PASSWORD = "a long enough password 1"  # noqa: S105 - a test user's


@pytest.fixture
def operator(db: None) -> User:
    return User.objects.create_superuser("op", "op@example.com", PASSWORD)


def _stored_sessions() -> int:
    """How many rows a reader of the database sees in the session table."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_session")
        return int(cursor.fetchone()[0])


def _answers(cookie: str) -> tuple[int, int]:
    """What the console's index and the REST API answer a browser sending ``sessionid=<cookie>``."""
    console = Client()
    console.cookies[settings.SESSION_COOKIE_NAME] = cookie
    api = APIClient()
    api.cookies[settings.SESSION_COOKIE_NAME] = cookie
    return console.get("/admin/").status_code, api.get("/api/v1/calls/").status_code


def test_a_session_refused_while_its_account_was_inactive_does_not_come_back_with_the_account(
    operator: User, tenant: Any
) -> None:
    """Found: a deactivated superuser's session was refused (302, 401) but kept; saved active again, the same cookie
    opened the console (200) and the REST API (200). Expect: the deactivation deletes the account's sessions; the
    cookie signs in to nothing after the reactivation."""
    cookie = cookie_after_login(operator, PASSWORD)
    assert _answers(cookie) == (200, 200)
    # when
    operator.is_active = False
    operator.save()
    operator.is_active = True
    operator.save()
    # then
    assert _answers(cookie) == (302, 401)
    assert _stored_sessions() == 0


def test_a_session_refused_while_its_account_was_not_staff_does_not_come_back_with_staff(
    operator: User, tenant: Any
) -> None:
    """Found: the same for staff: ``is_staff`` cleared, the session was refused (302, 401) and kept; set again
    (``update_fields`` as a script would), the old cookie was signed in again. Expect: taking the console away
    deletes the sessions."""
    cookie = cookie_after_login(operator, PASSWORD)
    # when
    operator.is_staff = False
    operator.save(update_fields=["is_staff"])
    operator.is_staff = True
    operator.save(update_fields=["is_staff"])
    # then
    assert _answers(cookie) == (302, 401)
    assert _stored_sessions() == 0


def test_an_own_password_change_keeps_the_changer_and_deletes_the_accounts_other_session(
    operator: User, tenant: Any
) -> None:
    """Found: the account's other session was refused by its password hash but its row kept until that browser
    came back (a restore of the old hash by ``loaddata`` would have signed it in again). Expect: the row is deleted
    with the change; the changer stays signed in (``update_session_auth_hash``), the other browser is signed out."""
    other = cookie_after_login(operator, PASSWORD)
    changer = Client()
    assert changer.login(username="op", password=PASSWORD)
    # when
    changed = changer.post(
        "/admin/password_change/",
        {
            "old_password": PASSWORD,
            "new_password1": "another long password 2",
            "new_password2": "another long password 2",
        },
    )
    # then
    assert changed.status_code == 302, changed.status_code
    assert _stored_sessions() == 1
    assert changer.get("/admin/").status_code == 200
    assert _answers(other) == (302, 401)


def test_a_save_that_keeps_the_console_ends_no_session(operator: User, tenant: Any) -> None:
    """Holds with the fix (regression): a save writing neither another password nor the flags away (a login's
    ``last_login``, an e-mail) keeps the sessions."""
    cookie = cookie_after_login(operator, PASSWORD)
    # when
    operator.email = "new@example.com"
    operator.save()
    # then
    assert _answers(cookie) == (200, 200)


def _path_matches(request_path: str, cookie_path: str) -> bool:
    """RFC 6265 5.1.4: whether a browser sends a cookie of ``cookie_path`` with a request for ``request_path``."""
    if request_path == cookie_path:
        return True
    return request_path.startswith(cookie_path) and (cookie_path.endswith("/") or request_path[len(cookie_path)] == "/")


def test_under_a_root_path_that_needs_encoding_the_login_cookies_come_back(operator: User) -> None:
    """Found: under ``SCRIPT_NAME`` ``/my tools`` the login page linked ``/my%20tools/admin/login/`` (as a browser
    sends it) but set ``csrftoken`` with ``Path=/my tools``, which that path does not match: the browser never sent
    it back and the login failed its CSRF check. Expect: ``Path=/my%20tools``, matching the login form's path."""
    client = Client(enforce_csrf_checks=True, SCRIPT_NAME="/my tools")
    # when
    page = client.get("/admin/login/")
    # then
    form_path = urlsplit(page.wsgi_request.build_absolute_uri(page.wsgi_request.get_full_path())).path
    csrf = page.cookies[settings.CSRF_COOKIE_NAME]
    assert form_path == "/my%20tools/admin/login/", form_path
    assert _path_matches(form_path, csrf["path"]), csrf.OutputString()


def test_under_a_root_path_not_ascii_the_asgi_login_page_answers(operator: User) -> None:
    """Found: under ``uvicorn --root-path /outils-é`` every answer setting a cookie (the login page's ``csrftoken``)
    made Django's ASGI handler raise (``UnicodeEncodeError``: the ``Path`` was the decoded prefix), so the login page
    never answered. Expect: 200, the cookie's ``Path`` the prefix as a browser sends it, ``/outils-%C3%A9``."""
    prefix = "/outils-é"
    sent: list[dict[str, Any]] = []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": f"{prefix}/admin/login/",
        "root_path": prefix,
        "query_string": b"",
        "headers": [(b"host", b"testserver")],
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 40000),
    }

    requests = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await asyncio.Event().wait()  # the client stays connected: the handler stops listening once it answered
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    # when
    try:
        asyncio.run(get_asgi_application()(scope, receive, send))
    except UnicodeEncodeError as error:
        raise AssertionError(f"the ASGI handler raised: {error}") from error
    finally:
        set_script_prefix("/")
    # then
    (start,) = [message for message in sent if message["type"] == "http.response.start"]
    cookies = [value.decode() for name, value in start["headers"] if name.lower() == b"set-cookie"]
    assert start["status"] == 200, start["status"]
    assert cookies and all("Path=/outils-%C3%A9;" in cookie for cookie in cookies), cookies
