"""Console sessions as the reviews make them: signed in as the login view leaves one, read as a request reads it.

One place for what six reviews each wrote: a session's data (user, backend, password hash) saved in a store of any
engine, a browser's cookie after a real sign-in, the request's user through the auth middlewares, a password the next
login rehashes, and whether a waiting request is still answered after its session ended.
"""

from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.hashers import make_password
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory
from django.utils.module_loading import import_string

from toolhub.credentials import SessionCredentialMiddleware
from toolhub.session_store import SessionStore
from toolhub.tenancy import tenant_scope_now

__all__ = [
    "MODEL_BACKEND",
    "PBKDF2_THEN_MD5",
    "console_user",
    "cookie_after_login",
    "ended_session_answered",
    "session_signed_in",
    "upgradable_password",
    "waiting_request_holds",
]

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"

#: PBKDF2 preferred, md5 still read: a login with an md5-hashed password saves a PBKDF2 rehash (Django's upgrade).
PBKDF2_THEN_MD5 = ["django.contrib.auth.hashers.PBKDF2PasswordHasher", "django.contrib.auth.hashers.MD5PasswordHasher"]


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


def upgradable_password(user: User, password: str, settings: Any) -> None:
    """Store ``password`` for ``user`` under md5 with PBKDF2 preferred (``settings`` is pytest-django's fixture), so
    that the next login rehashes it; ``user`` is refreshed."""
    settings.PASSWORD_HASHERS = PBKDF2_THEN_MD5
    User.objects.filter(pk=user.pk).update(password=make_password(password, hasher="md5"))
    user.refresh_from_db()


def waiting_request_holds(user: Any) -> bool:
    """Whether ``user``'s waiting request would still be answered: the re-read itself (``tenant_scope_now``)."""
    tenant_scope_now(user)
    return bool(user.is_active)


def ended_session_answered(user: User, middleware: list[str]) -> bool:
    """Whether a request through ``middleware``'s auth middlewares (in their order), its session ended while it
    waited, is still answered."""
    key = session_signed_in(user)
    request = RequestFactory().get("/admin/")
    request.session = SessionStore(key)

    def view(request: HttpRequest) -> HttpResponse:
        assert request.user.pk == user.pk
        SessionStore().delete(key)  # ended while the request waited
        return HttpResponse(str(waiting_request_holds(request.user)))

    chain: Any = view
    for name in reversed(middleware):
        cls = import_string(name)
        if issubclass(cls, (AuthenticationMiddleware, SessionCredentialMiddleware)):
            chain = cls(chain)
    return bool(chain(request).content == b"True")
