"""Console sessions as the reviews make them: signed in as the login view leaves one, read as a request reads it.

One place for what six reviews each wrote: a session's data (user, backend, password hash) saved in a store of any
engine, a browser's cookie after a real sign-in, and the request's user through the auth middlewares.
"""

from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.test import Client, RequestFactory

from toolhub.credentials import SessionCredentialMiddleware
from toolhub.session_store import SessionStore

__all__ = ["MODEL_BACKEND", "cookie_after_login", "console_user", "session_signed_in"]

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


def session_signed_in(user: User, store: Any = None) -> str:
    """A session of ``store``'s engine (toolhub's by default) signed in as ``user``, as the login view makes one.

    Its key: a new one for a database or cache store, the signed data itself for signed cookies.
    """
    store = SessionStore() if store is None else store
    store[SESSION_KEY] = user._meta.pk.value_to_string(user)
    store[BACKEND_SESSION_KEY] = MODEL_BACKEND
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.save()
    assert store.session_key
    return str(store.session_key)


def cookie_after_login(user: User, password: str) -> str:
    """A browser's session cookie after ``user`` signed in with ``password`` (Django's own login)."""
    browser = Client()
    assert browser.login(username=user.username, password=password)
    return str(browser.cookies[settings.SESSION_COOKIE_NAME].value)


def console_user(session: Any) -> Any:
    """The user of a request carrying ``session``, through the auth middlewares as settings order them (lazy)."""
    request = RequestFactory().get("/admin/")
    request.session = session
    AuthenticationMiddleware(lambda r: HttpResponse()).process_request(request)
    SessionCredentialMiddleware(lambda r: HttpResponse())(request)
    return request.user
