"""Review 2026-12-06 (gj): ga's session re-read and deploy checks, gd's console mark, read again.

Seen by alice (a member of acme, signing in by API key) and olga (``operator``, acme's operator in the console).

Findings:

1. ``toolhub.W016`` looked for ``SessionCredentialMiddleware`` and Django's ``AuthenticationMiddleware`` by their
   exact dotted paths. A deployment replacing Django's with its own subclass (an SSO's, a tenant header's) and
   listing it after toolhub's credential middleware, or adding one more after both, had ``request.user`` set again,
   unmarked: a console session ended while its request waited (an export, a ``?wait=``) went on answering its user,
   and ``check --deploy`` said nothing (false negative on the fail-open it exists for). The other way round, a
   subclass of ``SessionCredentialMiddleware`` in its place was warned of though it marks the user (false positive,
   where W015 takes a subclass of toolhub's store). Fix: the check resolves the entries' classes and asks that a
   credential middleware (or subclass) come after every authentication middleware (or subclass).

2. A key's request waiting (``?wait=``, an MCP follow) while its owner signed in to the console elsewhere and Django
   rehashed the password (``check_password``'s save, after a hasher change or an upgrade's iterations): review gd's
   re-read compared the stored hash with the one the request authenticated under and answered the request nothing,
   though ``token_binding`` had rebound the key to the new hash and its next request was answered (a refusal the
   credential's own check does not make). Fix: a ``CredentialRow`` may name the fingerprint its credential is bound
   to (``fingerprint``: the key's ``ApiTokenBinding``), read in the re-read's one statement instead of the row's
   ``EXISTS`` and compared with the password now; a session, bound to no row, is still compared with the password
   its request authenticated under.

Checked and holding:

- ``_signs_in``'s ``get_user`` on a copy (``_AsLoaded``): sends no signal (``user_logged_in`` and
  ``update_last_login`` are ``login``'s, not ``get_user``'s), writes no session (a refused one's ``flush`` and a
  retired secret's ``cycle_key`` touch the copy; ga's tests), and the store's ``load()`` writes nothing a request
  would not: ``cache`` and ``signed_cookies`` read only (a bad or expired signed cookie's ``create()`` marks the copy
  modified, never saved), ``cached_db`` on a cache miss sets the cache to the row's data, as the next request would.
  Under ``signed_cookies`` the copy's key is the cookie itself, so ``load()`` reads the data signed when the request
  began (a password reset is refused by its hash; nothing can end such a session: W015 says so). Cost per re-read
  under another engine: the store's read, the user's ``SELECT`` (``ModelBackend.get_user``) and the rights'
  statement; toolhub's store keeps its one statement (ga, gd, fw pin it).
- A session after a rehash at a login elsewhere reads as no one at the re-read, as the next request through its
  cookie does (Django's hash check):
  ``test_holding_a_waiting_session_after_a_rehash_elsewhere_reads_as_its_next_request``.
  A password written by ``update`` still ends a waiting key's request, in one statement
  (``test_holding_a_waiting_token_request_after_a_bulk_password_reset_reads_no_one``).
- A superuser's session unstaffed meanwhile reads as no one (read, not tested: the console mark asks ``is_staff``, as
  ``admin.site.has_permission`` and ``ConsoleSessionAuthentication`` do); a superuser's key is no console mark.
- Every path a session's user takes is the marked one: DRF's ``SessionAuthentication`` (through
  ``ConsoleSessionAuthentication``) returns ``request._request.user``, the middleware's lazy object, and DRF sets it
  back as is; the console's views and exports read ``request.user``; MCP takes keys only. ``login`` replaces
  ``request.user`` with an unmarked object, but only in the sign-in's own request, which waits for nothing; no view
  of toolhub uses ``request.auser`` (Django's async path, unmarked).
- W015 takes a subclass of toolhub's store and names any other engine (bounded to 200 characters, id, hint); an
  engine that does not import is warned of as another engine.
"""

from typing import Any

import pytest
from django.contrib.auth.hashers import make_password
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.security_review.console_sessions import (
    console_user,
    ended_session_answered,
    session_signed_in,
    upgradable_password,
    waiting_request_holds,
)
from toolhub.api.keys import api_key_issue
from toolhub.api.token_use import TokenChannel
from toolhub.api.tokens import TokenRefused, token_owner
from toolhub.credentials import SessionCredentialMiddleware
from toolhub.session_store import SessionStore

pytestmark = pytest.mark.django_db

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
CREDENTIAL_MIDDLEWARE = "toolhub.credentials.SessionCredentialMiddleware"
AUTHENTICATION_MIDDLEWARE = "django.contrib.auth.middleware.AuthenticationMiddleware"
HERE = __name__


class SsoAuthenticationMiddleware(AuthenticationMiddleware):
    """A deployment's own authentication middleware (Django's, subclassed): it sets ``request.user`` as Django's."""


class AuditedSessionCredentialMiddleware(SessionCredentialMiddleware):
    """A deployment's own credential middleware (toolhub's, subclassed): it marks the session's user as toolhub's."""


def _w016(middleware: list[str], settings: Any) -> bool:
    settings.MIDDLEWARE = middleware
    messages = run_checks(include_deployment_checks=True, tags=["toolhub"])
    return any(message.id == "toolhub.W016" for message in messages)


def _replaced(middleware: list[str], old: str, new: str) -> list[str]:
    return [new if name == old else name for name in middleware]


def test_the_deploy_check_warns_of_an_authentication_middleware_after_the_credential_one(
    operator: User, settings: Any
) -> None:
    """Found: W016 looked for Django's ``AuthenticationMiddleware`` by its exact path: a deployment's own (a subclass,
    replacing it) listed after ``SessionCredentialMiddleware`` sets ``request.user`` again, unmarked, so a session
    ended while its request waited went on answering it, and ``check --deploy`` said nothing.
    Expect: ``toolhub.W016`` whenever a middleware that sets the session's user comes after the credential one.
    """
    own = f"{HERE}.SsoAuthenticationMiddleware"
    listed = list(settings.MIDDLEWARE)
    without = [name for name in listed if name not in (AUTHENTICATION_MIDDLEWARE, CREDENTIAL_MIDDLEWARE)]
    at = listed.index(AUTHENTICATION_MIDDLEWARE)
    replaced = [*without[:at], CREDENTIAL_MIDDLEWARE, own, *without[at:]]  # Django's replaced, after toolhub's
    both = [*listed, own]  # Django's and toolhub's as settings order them, a second one after both

    for middleware in (replaced, both):
        assert ended_session_answered(operator, middleware)  # the effect the warning names
        assert _w016(middleware, settings), middleware


def test_the_deploy_check_takes_a_subclass_of_the_credential_middleware(operator: User, settings: Any) -> None:
    """Found: W016 warned of a ``MIDDLEWARE`` holding a subclass of ``SessionCredentialMiddleware`` in its place
    (after ``AuthenticationMiddleware`` or a subclass of it), though it marks the session's user as toolhub's does.
    Expect: no W016 there (as W015 takes a subclass of toolhub's store); its ended session reads as no one.
    """
    own = f"{HERE}.AuditedSessionCredentialMiddleware"
    sso = f"{HERE}.SsoAuthenticationMiddleware"
    listed = _replaced(list(settings.MIDDLEWARE), CREDENTIAL_MIDDLEWARE, own)
    for middleware in (listed, _replaced(listed, AUTHENTICATION_MIDDLEWARE, sso)):
        assert not ended_session_answered(operator, middleware)
        assert not _w016(middleware, settings), middleware


def test_a_waiting_token_request_holds_after_a_rehash_at_a_console_login(alice: User, settings: Any) -> None:
    """Found: alice's key request waiting (``?wait=``, an MCP follow); she signs in to the console elsewhere and Django
    rehashes her password (``check_password``'s save; ``token_binding`` rebinds her key to the new hash); the re-read
    compared the password now with the one the request authenticated under and answered her nothing, though her key
    holds and its next request is answered.
    Expect: the waiting request holds, as the next one does (the key's binding read at the re-read).
    """
    upgradable_password(alice, "pw", settings)
    key = api_key_issue(alice)
    user, _ = token_owner(key, channel=TokenChannel.REST)
    assert waiting_request_holds(user)

    assert User.objects.get(pk=alice.pk).check_password("pw")  # a console login elsewhere: Django saves the rehash

    assert token_owner(key, channel=TokenChannel.REST)[0].pk == alice.pk  # the next request holds
    assert waiting_request_holds(user)


def test_holding_a_waiting_session_after_a_rehash_elsewhere_reads_as_its_next_request(
    operator: User, settings: Any
) -> None:
    """Holding. A rehash at a login elsewhere changes the session's password hash (Django's ``get_session_auth_hash``).
    Expect: the waiting session reads as no one, as the next request through its cookie signs in no one (Django's
    own refusal), not as a token rebound does."""
    upgradable_password(operator, "pw", settings)
    key = session_signed_in(operator)
    user = console_user(SessionStore(key))
    assert user.pk == operator.pk and waiting_request_holds(user)

    assert User.objects.get(pk=operator.pk).check_password("pw")  # another browser's login saves the rehash

    assert (waiting_request_holds(user), console_user(SessionStore(key)).is_authenticated) == (False, False)


def test_holding_a_waiting_token_request_after_a_bulk_password_reset_reads_no_one(alice: User) -> None:
    """Holding (the binding read at the re-read). Expect: a password written by ``update`` (no signal, no rebind)
    while a key's request waits answers it nothing, as its next request is refused; one statement for the re-read."""
    key = api_key_issue(alice)
    user, _ = token_owner(key, channel=TokenChannel.REST)
    User.objects.filter(pk=alice.pk).update(password=make_password("reset"))

    with CaptureQueriesContext(connection) as read:
        assert not waiting_request_holds(user)
    assert len(read.captured_queries) == 1
    with pytest.raises(TokenRefused):
        token_owner(key, channel=TokenChannel.REST)
