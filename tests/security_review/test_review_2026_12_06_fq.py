"""Review of 2026-12-06 (fq): the credential a request came with, asked again after a wait (``toolhub.credentials``).

Seen by alice, a member of tenant acme with an API key, and olga (``operator``), an operator of acme in the console.

Findings:

1. A console session that expired while its request waited still read as good: the session's check asked only
   whether its row was still in the table (``SessionStore.exists``), and an expired row stays there until beat's sweep
   deletes it (every 15 minutes). A calls export went on streaming, and a ``?wait=`` of the REST API through the
   console's session answered the call, after the session had stopped signing anyone in, while an API key grown too
   old meanwhile is cut off. ``exists`` is also no question of a session's life on other stores (Django's signed
   cookies answer it ``False`` always). Fix: the session is asked as a request would be signed in by it now
   (:func:`toolhub.credentials._session_lives` loads it through its store: live, unexpired, signed in as this user).

Checked and holding:

- The REST API through the console's session (DRF's ``SessionAuthentication``): DRF's ``Request`` takes
  ``request._request.user``, the middleware's lazy user, so its views' ``request.user`` carries the session's check;
  a session ended during ``?wait=`` answers 404, a kept one the call.
- The user's own password change: the request that changed it keeps its session under the new key and holds; a
  request still carrying the old key (another tab, or a thief's copy of the cookie: they cannot be told apart) reads
  as ended, as the README says of the account's other sessions.
- ``login()`` in a request puts a fresh user object on the request with no mark (nothing to ask: it just signed in);
  ``logout()`` leaves the anonymous user; neither keeps the previous object's check.
- A key exactly at ``API_TOKEN_MAX_AGE_SECONDS`` is good both at authentication and after the wait (one
  ``_expired``); one second past, it reads as revoked.
- Marks stay on the request's own object: ``token_owner`` marks the user row it just read for this request, the
  session's user is Django's fresh ``get_user``; ``decider_as_now``'s per-process instance and ``_user_facts`` are read
  apart from any request's user and never marked, so no request's check reaches another's.
- No statement is added to a normal request: a console page issues as many queries with the middleware as without.
- ASGI: the MCP server authenticates with ``token_owner`` in a worker thread and asks after waits in threads
  (``in_thread``); toolhub has no async Django view (nothing calls ``request.auser``); a console export's chunks run
  on the request's thread under ASGI (``StreamedResponse``), so the session's read is never made in the event loop.
- Session stores: ``SESSION_ENGINE`` is set to ``toolhub.session_store`` and not read from the environment; the check
  now loads through the store's own ``load``, which each of Django's stores answers for its kind.

Left (documented unsupported paths, not findings): a password or staff flag written by ``QuerySet.update`` or SQL
leaves the session rows (the README says to change them with a save, which ends the sessions); a request waiting
through such a session is not told by its check, as an API key's waiter is not (the README: the token stays).
"""

from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.contrib.auth import login, logout, update_session_auth_hash
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.test import Client as ConsoleClient
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from approvals.deciders import decider_as_now
from tests.mcp.conftest import live_asgi, token  # noqa: F401 - live_asgi is a fixture
from tests.security_review.console_sessions import session_signed_in
from toolhub.api import governed
from toolhub.api.token_use import TokenChannel
from toolhub.api.tokens import token_owner
from toolhub.credentials import SessionCredentialMiddleware, credential_rows
from toolhub.models import CallStatus, ToolCall
from toolhub.session_store import SessionStore, sessions_end
from toolhub.tenancy import tenant_scope_now

pytestmark = pytest.mark.django_db


def _expire_sessions() -> None:
    """Every session's life ends now (its row stays until beat's sweep deletes it)."""
    Session.objects.update(expire_date=timezone.now() - timedelta(seconds=1))


def _stream_after_first_chunk(response: Any, change: Any) -> tuple[bytes, BaseException | None]:
    """The first chunk is read, then ``change`` happens, then the rest: what else left, and how."""
    chunks = iter(response.streaming_content)
    next(chunks)
    change()
    rest: list[bytes] = []
    try:
        rest.extend(chunks)
    except Exception as exc:  # the stream is cut off: the transfer breaks
        return b"".join(rest), exc
    return b"".join(rest), None


def _session_api_client(user: User) -> APIClient:
    client = APIClient()
    client.force_login(user)  # the console's login: a session, as the browsable API is used
    return client


def _wait_doing(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    def waited(*, call: ToolCall, seconds: float) -> ToolCall:
        change()
        call.refresh_from_db()
        return call

    monkeypatch.setattr(governed, "call_wait", waited)


def _console_request(key: str) -> HttpRequest:
    """A console request carrying the session cookie ``key``, through the auth middlewares as settings order them."""
    request = RequestFactory().get("/admin/")
    request.session = SessionStore(key)
    AuthenticationMiddleware(lambda r: HttpResponse()).process_request(request)
    SessionCredentialMiddleware(lambda r: HttpResponse())(request)
    return request


def credential_carried_by(user: Any) -> bool:
    """Whether ``user`` carries a credential's check (``toolhub.credentials``)."""
    from toolhub.credentials import _CHECK_ATTRIBUTE

    return getattr(user, _CHECK_ATTRIBUTE, None) is not None


# Finding 1: a session that expired during the wait


def _holds(user: Any) -> bool:
    """Whether ``user``'s request would still be answered after a wait: the re-read itself (``tenant_scope_now``)."""
    tenant_scope_now(user)
    return bool(user.is_active)


def test_a_calls_export_stops_once_its_readers_session_expired(operator: User, alice: User, settings: Any) -> None:
    """Found: olga's console export of acme's calls went on streaming to its end after her session expired
    mid-download: its row stays until beat's sweep, and the check asked only whether the row was there.
    Expect: an expired session signs in no one: the stream is cut off, no further row leaves.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "STREAM_RIGHTS_RECHECK_SECONDS": 0}
    ToolCall.objects.create(tool_name="fq_secret_lookup", status=CallStatus.SUCCEEDED, tenant="acme", user=alice)
    client = ConsoleClient()
    client.force_login(operator)
    response = client.post("/admin/toolhub/toolcall/export/csv/")
    assert response.status_code == 200

    rest, cut = _stream_after_first_chunk(response, _expire_sessions)

    assert Session.objects.exists()  # the row is still there: only its life ended
    assert b"fq_secret_lookup" not in rest
    assert cut is not None


def test_a_rest_wait_through_a_session_that_expired_meanwhile_shows_nothing(
    operator: User, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: olga's ``GET /api/v1/calls/{id}/?wait=5`` through the console's session; the session expired while it
    waited; the answer was the call's detail (200).
    Expect: 404, as for a session ended: nothing of the call.
    """
    call = ToolCall.objects.create(tool_name="fq_report", status=CallStatus.QUEUED, tenant="acme", user=alice)
    _wait_doing(monkeypatch, _expire_sessions)

    answer = _session_api_client(operator).get(f"/api/v1/calls/{call.pk}/?wait=5")

    assert answer.status_code == 404, answer.content


# Holding


def test_a_rest_wait_through_a_session_ended_meanwhile_shows_nothing(
    operator: User, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: (holds) DRF's session authentication takes the middleware's lazy user, so the ``?wait=`` of a session
    ended meanwhile (a password reset: ``sessions_end``) is asked after it.
    Expect: 404, nothing of the call.
    """
    call = ToolCall.objects.create(tool_name="fq_report", status=CallStatus.QUEUED, tenant="acme", user=alice)
    _wait_doing(monkeypatch, lambda: sessions_end(operator))

    answer = _session_api_client(operator).get(f"/api/v1/calls/{call.pk}/?wait=5")

    assert answer.status_code == 404, answer.content


def test_a_rest_wait_through_a_kept_session_is_answered(
    operator: User, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: (holds) the control: the session kept through the wait.
    Expect: the call's detail (200).
    """
    call = ToolCall.objects.create(tool_name="fq_report", status=CallStatus.QUEUED, tenant="acme", user=alice)
    _wait_doing(monkeypatch, lambda: None)

    answer = _session_api_client(operator).get(f"/api/v1/calls/{call.pk}/?wait=5")

    assert answer.status_code == 200, answer.content
    assert answer.json()["tool"] == "fq_report"


def test_the_request_changing_its_own_password_keeps_its_session(operator: User) -> None:
    """Found: (holds) olga changes her own password (the save ends the account's sessions, then Django saves hers
    under a new key); a second request (another tab) was under way with the same cookie.
    Expect: the changing request's user still holds (its session lives under the new key) and reads as active after
    a re-read; the other request's, on the old key, reads as ended (a copy of the cookie is not told from a tab); a
    request on the new key holds.
    """
    key = session_signed_in(operator)
    changing, other = _console_request(key), _console_request(key)
    assert changing.user.is_authenticated and other.user.is_authenticated

    user = changing.user
    user.set_password("a-new-password-0")
    user.save()
    update_session_auth_hash(changing, user)
    assert _holds(changing.user)  # before its answer saves the session
    changing.session.save()  # as SessionMiddleware does after the response

    assert changing.session.session_key != key
    assert _holds(changing.user)
    tenant_scope_now(changing.user)
    assert changing.user.is_active
    assert not _holds(other.user)
    assert _holds(_console_request(changing.session.session_key).user)


def test_login_and_logout_in_a_request_replace_the_marked_user(operator: User, alice: User) -> None:
    """Found: (holds) ``login()`` and ``logout()`` in a request replace ``request.user``.
    Expect: after ``login()`` the new user is the one signed in now (nothing carried over from the previous object);
    after ``logout()`` the anonymous user, which reads nothing.
    """
    request = _console_request(session_signed_in(operator))
    assert request.user.pk == operator.pk
    login(request, alice, backend="django.contrib.auth.backends.ModelBackend")
    assert request.user.pk == alice.pk and _holds(request.user)
    logout(request)
    assert not request.user.is_authenticated
    assert not tenant_scope_now(request.user).tenants


def test_a_key_at_its_age_limit_holds_and_one_second_past_reads_revoked(
    alice: User, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: (holds) ``API_TOKEN_MAX_AGE_SECONDS`` read once (``_expired``) at authentication and after the wait.
    Expect: a key exactly at the limit authenticates and still holds; once a second past, the waiting request's
    user reads as inactive.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "API_TOKEN_MAX_AGE_SECONDS": 3600}
    key = token(alice)
    now = timezone.now()
    Token.objects.filter(user=alice).update(created=now - timedelta(seconds=3600))
    clock = {"now": now}
    monkeypatch.setattr(timezone, "now", lambda: clock["now"])

    user, _ = token_owner(key, channel=TokenChannel.REST)
    assert _holds(user)
    clock["now"] = now + timedelta(seconds=1)
    tenant_scope_now(user)

    assert not user.is_active


def test_a_requests_mark_stays_on_its_own_user_object(alice: User, operator: User) -> None:
    """Found: (holds) two requests of alice with her key, and the decider instance approvals share per process.
    Expect: each request's user object is its own; the key revoked, both requests read as revoked, while the
    shared decider (never a request's object) carries no check and a fresh session's user is unaffected.
    """
    key = token(alice)
    first, _ = token_owner(key, channel=TokenChannel.REST)
    second, _ = token_owner(key, channel=TokenChannel.MCP)
    assert first is not second
    decider = decider_as_now(operator)
    assert decider is not None and credential_rows(decider) is None  # carries no check
    session_user = _console_request(session_signed_in(operator)).user

    Token.objects.filter(user=alice).delete()

    assert not _holds(first) and not _holds(second)
    assert credential_rows(decider_as_now(operator)) is None
    assert _holds(session_user)


def test_the_middleware_adds_no_statement_to_a_console_page(operator: User, settings: Any) -> None:
    """Found: (holds) the session's user marked lazily, its check only asked after a wait.
    Expect: the console's index issues as many queries with ``SessionCredentialMiddleware`` as without it.
    """
    signed_in = ConsoleClient()
    signed_in.force_login(operator)

    def counted() -> tuple[int, bool]:
        client = ConsoleClient()  # a client loads the middleware once: a new one reads them as set now
        client.cookies = signed_in.cookies
        client.get("/admin/")  # warm: content types, permission caches of the process
        with CaptureQueriesContext(connection) as queries:
            answer = client.get("/admin/")
        assert answer.status_code == 200
        return len(queries), credential_carried_by(answer.wsgi_request.user)

    with_it, marked = counted()
    settings.MIDDLEWARE = [
        name for name in settings.MIDDLEWARE if name != "toolhub.credentials.SessionCredentialMiddleware"
    ]
    without, unmarked = counted()

    assert (marked, unmarked) == (True, False)  # the comparison is of the middleware and its absence
    assert with_it == without


def _asgi_export(base: str, key: str) -> tuple[int, bytes, BaseException | None]:
    """The console's calls export of the session ``key``, under uvicorn: its status, what arrived, how it broke."""
    secret = "fq" * 16  # a CSRF secret of 32 characters, sent as the cookie and the form's token
    headers = {"Cookie": f"sessionid={key}; csrftoken={secret}", "Referer": f"{base}/admin/toolhub/toolcall/"}
    received: list[bytes] = []
    try:
        with httpx.stream(
            "POST",
            f"{base}/admin/toolhub/toolcall/export/csv/",
            data={"csrfmiddlewaretoken": secret},
            headers=headers,
            timeout=20,
        ) as answer:
            status = answer.status_code
            for part in answer.iter_raw():
                received.append(part)
    except httpx.HTTPError as broken:  # the stream is cut off: the transfer breaks
        return status, b"".join(received), broken
    return status, b"".join(received), None


@pytest.mark.django_db(transaction=True)
def test_an_export_under_asgi_asks_the_session_on_the_requests_thread(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    operator: User,
    alice: User,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: (holds) under ASGI (uvicorn) a console export's chunks are taken on the request's thread, where the
    session's check reads its store (a read in the event loop would raise ``SynchronousOnlyOperation``).
    Expect: a kept session's export streams whole (200, the row); the session ended before a chunk, the transfer is
    cut off and the row never leaves.
    """
    from toolhub import rights_recheck

    settings.TOOLHUB = {**settings.TOOLHUB, "STREAM_RIGHTS_RECHECK_SECONDS": 0}
    ToolCall.objects.create(tool_name="fq_secret_lookup", status=CallStatus.SUCCEEDED, tenant="acme", user=alice)

    status, body, broken = _asgi_export(live_asgi, session_signed_in(operator))
    assert (status, broken) == (200, None), body
    assert b"fq_secret_lookup" in body

    reread = rights_recheck.tenant_scope_now

    def ended_first(user: Any) -> Any:
        sessions_end(operator)
        return reread(user)

    monkeypatch.setattr(rights_recheck, "tenant_scope_now", ended_first)
    status, body, broken = _asgi_export(live_asgi, session_signed_in(operator))
    assert b"fq_secret_lookup" not in body
    assert broken is not None or status != 200
