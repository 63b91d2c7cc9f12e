"""Review 2026-12-06 (ga): the credential re-read reviewed again (``toolhub.credentials``, ``tenancy._reload_rights``).

Seen by alice, a member of tenant acme, and olga (``operator``), an operator of acme in the console.

Findings:

1. A console session of another engine than toolhub's (``cache``, ``cached_db``, ``signed_cookies``) was asked at the
   re-read only whether its data still named the user (``_session_lives``: ``load()[SESSION_KEY]``), not whether it
   would sign the user in: Django's ``get_user`` also checks the session's password hash (and its backend). An
   administrator resetting olga's password (the account feared taken) while her request waited (``?wait=`` through
   the console's session, an export between chunks) did not stop it: the waiting request was answered the call
   (200) while the next request through the same cookie signed in no one. Fail open, on exactly the revocation the
   re-read exists for. Fix: another engine's session is asked as the next request asks it: Django's ``get_user`` on
   the data its store loads (hash, fallbacks, backend, active account), nothing written back to the store.
2. Nothing warned an operator who set another ``SESSION_ENGINE``: toolhub's promises about sessions rest on its
   store (``toolhub.session_store``): keys stored as digests, ``sessions_end`` ending an account's sessions when its
   password changes, its console is taken away or given back, or it is deleted (it reads that store's table), and
   the re-read asked inside the rights' statement. Under ``cache``, ``cached_db`` or ``signed_cookies`` those ends
   end nothing (a session refused while its account was not staff signs in again once staff is given back) and
   ``cached_db`` stores cookies in clear. Fix: ``manage.py check --deploy`` warns (``toolhub.W015``) unless the
   engine is toolhub's store (or a subclass of it).
3. Nor did anything warn of a ``MIDDLEWARE`` (a deployment's own list) without ``SessionCredentialMiddleware`` after
   ``AuthenticationMiddleware``: the console session's user then carries no check, so an export or a ``?wait=``
   through a session ended meanwhile goes on answering its user (fail open, silently). Fix: ``toolhub.W016``.

Checked and holding:

- A session whose user changes in the same browser while a request waits (sign-out, then sign-in as someone else):
  the waiting request reads as no one, never as the new user, on toolhub's store and on the cache engine
  (``test_a_browser_signed_in_as_someone_else_meanwhile_answers_no_one``).
- A new sign-in of the same user in the same browser while a request waits keeps the session's key (Django's
  ``login`` rotates only an anonymous session's): the waiting request holds. The key rotated (``cycle_key``, as
  ``update_session_auth_hash`` does): the waiting request on the old key reads as ended (fail closed; the README says
  so of another tab after a password change).
- The token's age limit read at the re-read, not at authentication: lowered while a request waits, a key now too
  old reads as revoked. The SQL written once per process and shape (a key with and without an age bound, a session:
  the cache key holds the alias, the user model, the columns and the credential's model, field and bound) answers
  each credential its own, whichever shape was written first (``test_the_statement_cache_keeps_each_shape_apart``).
- Expiry at the boundary with ``USE_TZ`` off and a non-UTC ``TIME_ZONE``, on SQLite (text comparison) and
  PostgreSQL (naive ``timestamp`` cast by the session's time zone): expired at its instant, live a microsecond before,
  as Django's store loads it (``test_the_session_boundary_without_time_zones``).
- POST /api/v1/calls/ keeps its 11 statements (tests/security_review/test_review_2026_12_06_fw.py pins it): the
  fix reads the user again only for another engine's session.
- MCP requests carry the API key only (``token_owner`` in ``authenticated``; no cookie is read on ``/mcp``): a
  follow's reader is a ``copy.copy`` of the request's user, so it carries the key's check (review fo's tests).
- Work run in a request: every view that can run work eagerly (``POST /api/v1/calls/`` through
  ``direct_call_request``; runs' create, retry, cancel and rollback; sagas' rollback; approvals' approve and
  reject; calls' result and cancel; MCP's ``tools/call``, ``toolhub_cancel_call`` and status waits) re-reads the
  rights before answering. The console's actions that release work (approve/reject in the admin, compensations
  retried or resolved, runs cancelled, "Verify now") answer a redirect and a message naming only what the page
  already showed (a request's number and tool, counts), never the work's outcome.
"""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import SESSION_KEY, login, logout
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.auth.models import User
from django.contrib.sessions.backends import cache as cache_sessions
from django.contrib.sessions.backends import cached_db, signed_cookies
from django.core.checks import CheckMessage, run_checks
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.security_review.console_sessions import ended_session_answered, session_signed_in, waiting_request_holds
from toolhub import tenancy
from toolhub.api import governed
from toolhub.api.keys import api_key_issue, key_digest
from toolhub.api.token_use import TokenChannel
from toolhub.api.tokens import token_owner
from toolhub.credentials import SessionCredentialMiddleware
from toolhub.models import CallStatus, ToolCall
from toolhub.session_store import SessionStore

pytestmark = pytest.mark.django_db

#: Django's session engines that keep no row in toolhub's table, each with its store.
OTHER_ENGINES = [cache_sessions.SessionStore, cached_db.SessionStore, signed_cookies.SessionStore]
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


def _console_request(session: Any) -> HttpRequest:
    """A request carrying ``session``, through the auth middlewares as settings order them."""
    request = RequestFactory().get("/admin/")
    request.session = session
    AuthenticationMiddleware(lambda r: HttpResponse()).process_request(request)
    SessionCredentialMiddleware(lambda r: HttpResponse())(request)
    return request


def _password_reset(user: User) -> None:
    """An administrator resets ``user``'s password (the admin's form: ``set_password`` and a save)."""
    fresh = User.objects.get(pk=user.pk)
    fresh.set_password("a-reset-password-7")
    fresh.save()


# Finding 1: another engine's session asked only whether it named the user


@pytest.mark.parametrize("engine", OTHER_ENGINES, ids=lambda engine: engine.__module__.rpartition(".")[2])
def test_another_engines_session_after_a_password_reset_reads_as_no_one(
    operator: User, engine: Any, settings: Any
) -> None:
    """Found: with ``SESSION_ENGINE`` ``cache``, ``cached_db`` or ``signed_cookies``, olga's password reset while her
    request waited left the re-read answering her (``load()`` still named her id), though the next request through
    the same cookie signs in no one (Django's check of the session's password hash).
    Expect: the waiting request reads as no one, as the next request does.
    """
    settings.SESSION_ENGINE = engine.__module__
    key = session_signed_in(operator, engine())
    user = _console_request(engine(key)).user
    assert waiting_request_holds(user)  # the control: the session signs her in until the reset

    _password_reset(operator)
    waited = waiting_request_holds(user)
    next_request = _console_request(engine(key)).user.is_authenticated  # after: Django's refusal flushes the session

    assert (waited, next_request) == (False, False)


def test_a_rest_wait_through_a_cache_session_reset_meanwhile_shows_nothing(
    operator: User, alice: User, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: ``SESSION_ENGINE`` the cache; olga's ``GET /api/v1/calls/{id}/?wait=5`` through the console's session;
    her password was reset while it waited; the answer was the call's detail (200).
    Expect: 404, as through toolhub's store: nothing of the call.
    """
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.cache"
    call = ToolCall.objects.create(tool_name="ga_report", status=CallStatus.QUEUED, tenant="acme", user=alice)

    def waited(*, call: ToolCall, seconds: float) -> ToolCall:
        _password_reset(operator)
        call.refresh_from_db()
        return call

    monkeypatch.setattr(governed, "call_wait", waited)
    client = APIClient()  # a new client: its middleware (the session's engine) read as set now
    client.force_login(operator)

    answer = client.get(f"/api/v1/calls/{call.pk}/?wait=5")

    assert answer.status_code == 404, answer.content


@pytest.mark.parametrize("engine", OTHER_ENGINES, ids=lambda engine: engine.__module__.rpartition(".")[2])
def test_another_engines_session_kept_holds_and_is_not_written(operator: User, engine: Any, settings: Any) -> None:
    """Holding (the fix's control). Expect: a session kept through the wait still reads as its user; the re-read
    writes nothing to the store (the next request through the cookie still signs in)."""
    settings.SESSION_ENGINE = engine.__module__
    key = session_signed_in(operator, engine())
    user = _console_request(engine(key)).user

    assert waiting_request_holds(user) and waiting_request_holds(user) and user.is_staff
    assert _console_request(engine(key)).user.pk == operator.pk


@pytest.mark.parametrize("engine", OTHER_ENGINES, ids=lambda engine: engine.__module__.rpartition(".")[2])
def test_another_engines_session_under_a_retired_secret_is_not_rotated(
    operator: User, engine: Any, settings: Any
) -> None:
    """Holding (the fix's side effects). A session hashed under a ``SECRET_KEY`` now in ``SECRET_KEY_FALLBACKS``: the
    next request signs it in and rotates its key (``get_user``'s ``cycle_key``).
    Expect: the re-read reads it as its user and rotates nothing (a key rotated there would reach no browser).
    """
    settings.SESSION_ENGINE = engine.__module__
    key = session_signed_in(operator, engine())
    user = _console_request(engine(key)).user
    assert user.pk == operator.pk  # signed in when the request began
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "ga-" + "r" * 60

    assert waiting_request_holds(user)
    assert engine(key).load().get(SESSION_KEY) == str(operator.pk)  # still under its key


# Finding 2: no check warned of another session engine


@pytest.mark.parametrize(
    ("engine", "warned"),
    [
        ("django.contrib.sessions.backends.cached_db", True),
        ("django.contrib.sessions.backends.cache", True),
        ("django.contrib.sessions.backends.signed_cookies", True),
        ("django.contrib.sessions.backends.db", True),
        ("toolhub.session_store", False),
    ],
)
def test_the_deploy_check_warns_of_another_session_engine(engine: str, warned: bool, settings: Any) -> None:
    """Found: ``manage.py check --deploy`` said nothing of a ``SESSION_ENGINE`` other than toolhub's store, under
    which ``sessions_end`` ends no session (a password change, the console taken away or given back, a deletion),
    cookies are stored in clear (Django's database stores) and the re-read loads each session apart.
    Expect: ``toolhub.W015`` naming the engine and the store to set, for every engine but toolhub's.
    """
    settings.SESSION_ENGINE = engine
    messages = run_checks(include_deployment_checks=True, tags=["toolhub"])
    found: list[CheckMessage] = [message for message in messages if message.id == "toolhub.W015"]

    assert bool(found) is warned
    if warned:
        assert engine in found[0].msg and "toolhub.session_store" in (found[0].hint or "")


CREDENTIAL_MIDDLEWARE = "toolhub.credentials.SessionCredentialMiddleware"
AUTHENTICATION_MIDDLEWARE = "django.contrib.auth.middleware.AuthenticationMiddleware"


def _without_credential_middleware(middleware: list[str]) -> list[str]:
    return [name for name in middleware if name != CREDENTIAL_MIDDLEWARE]


def _credential_middleware_first(middleware: list[str]) -> list[str]:
    rest = _without_credential_middleware(middleware)
    return [CREDENTIAL_MIDDLEWARE, *rest]


@pytest.mark.parametrize(
    ("arranged", "warned"),
    [(_without_credential_middleware, True), (_credential_middleware_first, True), (list, False)],
    ids=["missing", "before-authentication", "as-settings"],
)
def test_the_deploy_check_warns_of_a_session_never_asked_again(
    operator: User, arranged: Any, warned: bool, settings: Any
) -> None:
    """Found: a ``MIDDLEWARE`` without ``SessionCredentialMiddleware`` after ``AuthenticationMiddleware`` (a deployment
    writing its own list) left console sessions' users unmarked: a session ended while its request waited (an
    export, a ``?wait=``) was never asked again, and ``check --deploy`` said nothing.
    Expect: ``toolhub.W016`` when it is missing or before ``AuthenticationMiddleware``; none as toolhub's settings
    order them. (The effect: an unmarked session's user still reads as active after its session ended.)
    """
    settings.MIDDLEWARE = arranged(list(settings.MIDDLEWARE))
    answered = ended_session_answered(operator, settings.MIDDLEWARE)
    messages = run_checks(include_deployment_checks=True, tags=["toolhub"])
    found = [message for message in messages if message.id == "toolhub.W016"]

    assert answered is warned  # the effect the warning names
    assert bool(found) is warned


# Holding


@pytest.mark.parametrize(
    "engine", [SessionStore, cache_sessions.SessionStore], ids=lambda engine: engine.__module__.rpartition(".")[2]
)
def test_a_browser_signed_in_as_someone_else_meanwhile_answers_no_one(
    alice: User, operator: User, engine: Any, settings: Any
) -> None:
    """Holding. alice's request waits; in the same browser she signs out and olga signs in (``logout``, ``login``).
    Expect: the waiting request reads as no one, and is never olga's; olga's own request is hers.
    """
    settings.SESSION_ENGINE = engine.__module__
    key = session_signed_in(alice, engine())
    waiting = _console_request(engine(key)).user
    assert waiting.pk == alice.pk  # signed in when the request began
    browser = _console_request(engine(key))

    logout(browser)
    login(browser, operator, backend=MODEL_BACKEND)
    browser.session.save()  # as SessionMiddleware does after the answer

    assert not waiting_request_holds(waiting) and waiting.pk == alice.pk
    assert _console_request(engine(key)).user.is_authenticated is False
    olga = _console_request(engine(browser.session.session_key)).user
    assert olga.pk == operator.pk and waiting_request_holds(olga)


def test_a_new_sign_in_keeps_the_key_and_a_rotation_ends_the_old_one(operator: User) -> None:
    """Holding. olga's request waits; she signs in again in another tab of the same browser (``login`` of the user
    the session already signs in keeps its key), then the tab's session is rotated (``cycle_key``, as
    ``update_session_auth_hash`` does).
    Expect: after the sign-in the waiting request still reads as olga; after the rotation, on the old key, as ended
    (fail closed); the new key signs her in.
    """
    key = session_signed_in(operator, SessionStore())
    waiting = _console_request(SessionStore(key)).user
    assert waiting.pk == operator.pk  # signed in when the request began
    tab = _console_request(SessionStore(key))

    login(tab, operator, backend=MODEL_BACKEND)
    tab.session.save()
    assert tab.session.session_key == key and waiting_request_holds(waiting)

    tab.session.cycle_key()
    assert tab.session.session_key != key
    assert not waiting_request_holds(waiting)
    assert waiting_request_holds(_console_request(SessionStore(tab.session.session_key)).user)


def test_the_statement_cache_keeps_each_shape_apart(alice: User, operator: User, settings: Any) -> None:
    """Holding. The rights' SQL is written once per process and shape: a key with an age bound, one without, a
    session; the age limit is read at the re-read (lowered while a request waits, an old key reads as revoked).
    Expect: each re-read answers its own credential as it is now, whichever shape was written first.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "API_TOKEN_MAX_AGE_SECONDS": None}
    key = api_key_issue(alice)
    by_key, _ = token_owner(key, channel=TokenChannel.REST)
    by_session = _console_request(SessionStore(session_signed_in(operator, SessionStore()))).user
    assert waiting_request_holds(by_key) and waiting_request_holds(by_session)

    Token.objects.filter(key=key_digest(key)).update(created=timezone.now() - timedelta(hours=2))
    assert waiting_request_holds(by_key)  # no age limit: an old key is good
    settings.TOOLHUB = {**settings.TOOLHUB, "API_TOKEN_MAX_AGE_SECONDS": 3600}  # lowered while it waits
    assert not waiting_request_holds(by_key)
    assert waiting_request_holds(by_session)  # the session's shape unaffected by the key's

    tenancy._rights_sql.cache_clear()  # written again, in another order: the same answers
    assert not waiting_request_holds(by_key) and waiting_request_holds(by_session)


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_the_session_boundary_without_time_zones(
    operator: User, settings: Any, monkeypatch: pytest.MonkeyPatch, zone: str
) -> None:
    """Holding. ``USE_TZ`` off (naive local times), ``TIME_ZONE`` UTC or not, on SQLite and PostgreSQL.
    Expect: a session expiring exactly now reads as no one, as its store loads it; a microsecond before, its user.
    """
    settings.USE_TZ, settings.TIME_ZONE = False, zone
    key = session_signed_in(operator, SessionStore())
    user = _console_request(SessionStore(key)).user
    at = timezone.now().replace(microsecond=250) + timedelta(seconds=5)
    SessionStore.get_model_class().objects.filter(session_key=key_digest(key)).update(expire_date=at)

    monkeypatch.setattr(timezone, "now", lambda: at - timedelta(microseconds=1))
    assert SessionStore(key).load().get(SESSION_KEY) == str(operator.pk)
    assert waiting_request_holds(user)
    monkeypatch.setattr(timezone, "now", lambda: at)
    assert SessionStore(key).load() == {}
    assert not waiting_request_holds(user)
