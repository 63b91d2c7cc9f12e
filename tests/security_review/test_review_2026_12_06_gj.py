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

Checked and holding:

(filled in below)
"""

from typing import Any

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django.utils.module_loading import import_string

from toolhub.credentials import SessionCredentialMiddleware
from toolhub.session_store import SessionStore
from toolhub.tenancy import tenant_scope_now

pytestmark = pytest.mark.django_db

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
CREDENTIAL_MIDDLEWARE = "toolhub.credentials.SessionCredentialMiddleware"
AUTHENTICATION_MIDDLEWARE = "django.contrib.auth.middleware.AuthenticationMiddleware"
HERE = __name__


class SsoAuthenticationMiddleware(AuthenticationMiddleware):
    """A deployment's own authentication middleware (Django's, subclassed): it sets ``request.user`` as Django's."""


class AuditedSessionCredentialMiddleware(SessionCredentialMiddleware):
    """A deployment's own credential middleware (toolhub's, subclassed): it marks the session's user as toolhub's."""


def _signed_in(user: User) -> str:
    """A console session of toolhub's store signed in as ``user`` (as the admin's login leaves it); its key."""
    store = SessionStore()
    store[SESSION_KEY] = user._meta.pk.value_to_string(user)
    store[BACKEND_SESSION_KEY] = MODEL_BACKEND
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.create()
    return str(store.session_key)


def _holds(user: Any) -> bool:
    """Whether ``user``'s waiting request would still be answered: the re-read itself (``tenant_scope_now``)."""
    tenant_scope_now(user)
    return bool(user.is_active)


def _ended_session_answered(operator: User, middleware: list[str]) -> bool:
    """Whether a request through ``middleware``'s auth middlewares, its session ended while it waited, still holds."""
    key = _signed_in(operator)
    request = RequestFactory().get("/admin/")
    request.session = SessionStore(key)

    def view(request: HttpRequest) -> HttpResponse:
        assert request.user.pk == operator.pk
        SessionStore().delete(key)  # ended while the request waited
        return HttpResponse(str(_holds(request.user)))

    chain: Any = view
    for name in reversed(middleware):
        cls = import_string(name)
        if issubclass(cls, (AuthenticationMiddleware, SessionCredentialMiddleware)):
            chain = cls(chain)
    return bool(chain(request).content == b"True")


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
        assert _ended_session_answered(operator, middleware)  # the effect the warning names
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
        assert not _ended_session_answered(operator, middleware)
        assert not _w016(middleware, settings), middleware
