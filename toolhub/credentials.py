"""The credential a request came with travels with its user, so a re-read after a wait asks it again too.

A request that waits (``?wait=``, MCP's follows and status waits, a call or run that ran in the request, a console
export streaming for minutes) reads its user's rights again afterwards (``toolhub.tenancy.tenant_scope_now``). The
rights of the account are not all: a password reset because the account was feared taken deletes its API keys and
its console sessions (``toolhub.api.token_revocation``), an administrator deletes one key alone (the admin's Tokens),
a key grows too old, a session expires (its row stays until beat's sweep); the account keeps its flags and
memberships. So authentication marks the user object with a check of the credential it used
(:func:`credential_carried`: ``token_owner`` for the REST API and MCP, the :class:`SessionCredentialMiddleware` for the
console's session), and the re-read asks it (:func:`credential_holds`): one no longer good reads as an account no
longer active, answered nothing, whatever waited.
"""

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject

__all__ = ["SessionCredentialMiddleware", "credential_carried", "credential_holds"]

#: Where a user object keeps the check of the credential its request authenticated with.
_CHECK_ATTRIBUTE = "_toolhub_credential_holds"


def credential_carried(user: Any, still_good: Callable[[], bool]) -> None:
    """Mark ``user`` (this request's object) as authenticated by a credential ``still_good`` asks about again."""
    setattr(user, _CHECK_ATTRIBUTE, still_good)


def credential_holds(user: Any) -> bool:
    """Whether the credential ``user``'s request authenticated with is still good (one read; none marked: yes)."""
    still_good = getattr(user, _CHECK_ATTRIBUTE, None)
    return still_good is None or bool(still_good())


def _session_user(request: HttpRequest) -> Any:
    """The session's user (Django's lazy ``get_user``), marked with its session when it is signed in by one."""
    from django.contrib.auth.middleware import get_user  # the auth app's models: imported once apps are ready

    user = get_user(request)  # memoized on the request, as ``AuthenticationMiddleware``'s lazy user
    session = request.session
    if getattr(user, "is_authenticated", False) and session.session_key:
        # The key read when asked: a password changed by its own user saves the session under a new key.
        signed_in_as = user._meta.pk.value_to_string(user)
        credential_carried(user, lambda: _session_lives(session, signed_in_as))
    return user


def _session_lives(session: Any, signed_in_as: str) -> bool:
    """Whether ``session``'s key (as it is now) would still sign in ``signed_in_as``; one read of its store.

    Loaded afresh through its store, as the next request would be: a session ended (its row deleted), expired (its
    row left for beat's sweep: ``exists`` would still answer it) or signed in as someone else since signs in no one.
    """
    from django.contrib.auth import SESSION_KEY

    key = session.session_key
    return bool(key) and type(session)(session_key=key).load().get(SESSION_KEY) == signed_in_as


class SessionCredentialMiddleware:
    """After ``AuthenticationMiddleware``: the console session's user carries its session (read lazily, as Django's)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.user = SimpleLazyObject(lambda: _session_user(request))  # type: ignore[assignment]
        return self.get_response(request)
