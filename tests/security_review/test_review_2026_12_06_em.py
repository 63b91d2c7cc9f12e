"""Review of 2026-12-06 (em): cookies under a root path (``--root-path``, ``SCRIPT_NAME``), the item review dc left.

Findings (each fails on 0fe5faa, passes with the fix):

1. Under a prefix the session and CSRF cookies (and the messages cookie) were set with ``Path=/``: every other app
   of the host (``/other``) was sent toolhub's ``sessionid`` and ``csrftoken``. They are now set, and deleted (the
   admin's logout), with the path of the prefix (``Path=/toolhub``) by ``toolhub.cookie_paths``, read per request
   from the script prefix (the same one ``reverse`` uses), so nothing else needs configuring; an explicitly set
   ``SESSION_COOKIE_PATH``/``CSRF_COOKIE_PATH`` other than ``/`` is kept.
2. A same-named cookie another app of the host set for ``/`` shadowed toolhub's: browsers send both (the longer path
   first, RFC 6265 5.4) and Django keeps the last of a repeated name, the other app's, so a toolhub operator sending
   ``sessionid=<theirs>; sessionid=<other app's>`` was logged out (and the CSRF check compared the other app's
   token). Below a prefix the first of a repeated name (the most specific path) is read.

Checked and holding (no finding):

- Without a prefix nothing changes: ``Path=/`` and the last of a repeated name (test below).
- After an upgrade a browser may still hold the old ``Path=/`` cookies: sent after the new ``/toolhub`` ones, the
  first (new) is read; the logout flushes the session on the server, so an old ``/`` ``sessionid`` left behind
  names no session. The prefix comes from the server (``--root-path``, ``SCRIPT_NAME``), never from the client.
- Login and logout work end to end under the prefix with Django's test client, CSRF checks on (tests below).
- The language cookie: toolhub sets none (no ``LocaleMiddleware``, no ``set_language`` view); would one be set with
  ``Path=/``, the same middleware gives it the prefix's path. django-axes sets and reads no cookie (grep).
- Links in e-mails, the OpenAPI ``servers``, the root redirect, ``LOGIN_URL`` and the 202 ``Location`` were covered
  by reviews cq and dc and not re-checked. ``/mcp`` (outside Django's middleware) sets no cookie.
"""

import io

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory, override_settings

from toolhub.cookie_paths import PrefixCookiesMiddleware, prefix_of

#: The mount prefix a proxy strips and passes as ``--root-path`` (README): Django's ``SCRIPT_NAME``.
PREFIX = "/toolhub"
PASSWORD = "a long enough password 1"  # noqa: S105 - a test user's


@pytest.fixture
def operator(db: None) -> User:
    return User.objects.create_superuser("op", "op@example.com", PASSWORD)


def _logged_in(client: Client) -> Client:
    client.get("/admin/login/")
    answer = client.post(
        "/admin/login/",
        {"username": "op", "password": PASSWORD, "csrfmiddlewaretoken": client.cookies["csrftoken"].value},
    )
    assert answer.status_code == 302, answer.status_code
    return client


def test_login_under_a_root_path_sets_its_cookies_for_the_prefix_only(operator: User) -> None:
    """Found: under ``--root-path`` the CSRF and session cookies were ``Path=/``, sent to every other app of the
    host. Expect: ``Path=/toolhub`` on both, and the login works end to end below the prefix."""
    client = Client(enforce_csrf_checks=True, SCRIPT_NAME=PREFIX)
    # when
    _logged_in(client)
    index = client.get("/admin/")
    # then
    assert client.cookies[settings.CSRF_COOKIE_NAME]["path"] == PREFIX
    assert client.cookies[settings.SESSION_COOKIE_NAME]["path"] == PREFIX
    assert index.status_code == 200, index.status_code


def test_admin_logout_under_a_root_path_deletes_the_prefixs_session_cookie(operator: User) -> None:
    """Found: the admin's logout deleted ``sessionid`` at ``Path=/``, the path it was set for then. Expect: the
    deletion names the path the cookie now has (``/toolhub``), so the browser drops it, and the session ends."""
    client = _logged_in(Client(enforce_csrf_checks=True, SCRIPT_NAME=PREFIX))
    # when
    answer = client.post("/admin/logout/", {"csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    # then
    deleted = answer.cookies[settings.SESSION_COOKIE_NAME]
    assert deleted.value == "" and deleted["max-age"] == 0, deleted.OutputString()
    assert deleted["path"] == PREFIX, deleted.OutputString()
    assert client.get("/admin/").status_code == 302


def test_another_apps_same_named_cookie_does_not_shadow_toolhubs_under_a_root_path(operator: User) -> None:
    """Found: a browser sends toolhub's ``sessionid`` (``Path=/toolhub``) and another app's (``Path=/``) in that
    order; Django kept the last, the other app's, and the operator was logged out. Expect: below a prefix the first
    (the most specific path) is read: still logged in."""
    client = _logged_in(Client(SCRIPT_NAME=PREFIX))
    ours = client.cookies[settings.SESSION_COOKIE_NAME].value
    # when
    index = client.get("/admin/", HTTP_COOKIE=f"{settings.SESSION_COOKIE_NAME}={ours}; sessionid=other-apps-session")
    # then
    assert index.status_code == 200, index.status_code


def test_without_a_root_path_cookies_keep_path_root(operator: User) -> None:
    """Holds (no finding): without a prefix the cookies stay ``Path=/``."""
    client = _logged_in(Client(enforce_csrf_checks=True))
    assert client.cookies[settings.CSRF_COOKIE_NAME]["path"] == "/"
    assert client.cookies[settings.SESSION_COOKIE_NAME]["path"] == "/"


@override_settings(SESSION_COOKIE_PATH="/shared")
def test_an_explicit_cookie_path_is_kept_under_a_root_path(operator: User) -> None:
    """Holds with the fix: a deployment's own ``SESSION_COOKIE_PATH`` (not ``/``) is not replaced by the prefix."""
    client = _logged_in(Client(SCRIPT_NAME=PREFIX))
    assert client.cookies[settings.SESSION_COOKIE_NAME]["path"] == "/shared"


def test_the_prefix_is_read_from_an_asgi_request_as_from_a_wsgi_one() -> None:
    """Holds with the fix: under ASGI (``uvicorn --root-path``) the prefix the cookies get is the scope's
    ``root_path``, with the path below it; at the root it is empty."""

    def request(root_path: str, path: str) -> ASGIRequest:
        scope = {"type": "http", "method": "GET", "path": path, "root_path": root_path, "query_string": b""}
        return ASGIRequest(scope, io.BytesIO())

    assert prefix_of(request(PREFIX, f"{PREFIX}/admin/")) == PREFIX
    assert prefix_of(request(PREFIX, f"{PREFIX}/")) == PREFIX
    assert prefix_of(request("", "/admin/")) == ""


def test_the_messages_cookie_and_a_deleted_one_get_the_prefixs_path() -> None:
    """Holds with the fix: the messages cookie (Django's cookie storage sets it without a path, so ``/``) and a
    cookie deleted for ``/`` get the prefix's path, as the session's and CSRF's do."""

    def answer(request: HttpRequest) -> HttpResponse:
        response = HttpResponse()
        response.set_cookie("messages", "x")
        response.delete_cookie(settings.LANGUAGE_COOKIE_NAME)
        return response

    request = RequestFactory().get("/admin/", SCRIPT_NAME=PREFIX)
    # when
    response = PrefixCookiesMiddleware(answer)(request)
    # then
    assert response.cookies["messages"]["path"] == PREFIX
    assert response.cookies[settings.LANGUAGE_COOKIE_NAME]["path"] == PREFIX
