"""The credential a request came with travels with its user, so a re-read after a wait asks it again too.

A request that waits (``?wait=``, MCP's follows and status waits, a call or run that ran in the request, a console
export streaming for minutes) reads its user's rights again afterwards (``toolhub.tenancy.tenant_scope_now``). The
rights of the account are not all: a password reset because the account was feared taken deletes its API keys and
its console sessions (``toolhub.api.token_revocation``), an administrator deletes one key alone (the admin's Tokens),
a key grows too old; the account keeps its flags and memberships. So authentication marks the user object with a
check of the credential it used (:func:`credential_carried`: ``token_owner`` for the REST API and MCP, the
:class:`SessionCredentialMiddleware` for the console's session), and the re-read asks it (:func:`credential_rows`):
one no longer good reads as an account no longer active, answered nothing, whatever waited.

A credential is issued under its user's password, and a session signs in active staff only (the console's): a
password or the console taken away without a save (``QuerySet.update``, ``bulk_update``, SQL: no signal, so no
revocation deletes the row) leaves the credential's row. So the re-read also reads the password's column, and a
credential authenticated under another :func:`password_fingerprint` than the one read now holds no more (a key: bound
to another, its binding read in the same statement, so Django's rehash at a login, which rebinds it, keeps it); a
session's mark (``console=True``) holds only while the account is staff.

A check answers with the credential's row while it is good (a :class:`CredentialRow`: the key's, the session's in
``toolhub.session_store``), so the re-read asks it as an ``EXISTS`` in the statement that reads the user's row
(``toolhub.tenancy``, its SQL written once per process): an API call run in its request costs no statement, and no
query compiled, more for it. A session store that is no table answers ``True`` or ``False`` instead, asked apart as
the next request would sign it in (its store read, then its account: ``toolhub.W015`` warns of such an engine).
"""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any, Literal

from django.contrib.auth.hashers import is_password_usable
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject

__all__ = [
    "CredentialRow",
    "SessionCredentialMiddleware",
    "credential_carried",
    "credential_console",
    "credential_rows",
    "password_fingerprint",
]


@dataclass(frozen=True)
class CredentialRow:
    """A credential's row while it authenticates, asked as an ``EXISTS`` in its user's re-read.

    ``model``'s row whose ``field`` is ``value`` (and, given ``at_least``, whose ``bound_field`` is at or after it,
    or strictly after it with ``bound_lookup="gt"``: a key made no longer ago than allowed, a session expiring later
    than now, as Django's store loads one).

    ``fingerprint``: the model and field (its primary key the credential's) holding the
    :func:`password_fingerprint` the credential is bound to now, read instead of the row's existence: a key rebound at
    a rehash of the same password (``toolhub.api.token_binding``) holds under the new hash, as its next request does.
    Without it the credential holds under the password its request authenticated with only.
    """

    model: type[Model]
    field: str
    value: Any
    bound_field: str = ""
    at_least: datetime | None = None
    bound_lookup: Literal["gte", "gt"] = "gte"
    fingerprint: tuple[type[Model], str] | None = None


#: A credential's check: its row while it authenticates, or, where no table keeps it, whether it does.
CredentialCheck = Callable[[], "CredentialRow | bool"]

#: Where a user object keeps the check of the credential its request authenticated with.
_CHECK_ATTRIBUTE = "_toolhub_credential_holds"


#: Where a user object keeps whether its credential is the console's (holds only while its account is staff).
_CONSOLE_ATTRIBUTE = "_toolhub_credential_console"


def password_fingerprint(password: str | None) -> str:
    """What a credential remembers of the password it was issued under: the stored hash's SHA-256, ``""`` if unusable.

    Not the hash itself (a copy of it in another table would be one more place to read it from), and no key to it: the
    hash is salted, so its digest verifies no guess, and a ``SECRET_KEY`` rotation ends no credential. Every unusable
    password is one (``set_unusable_password`` draws a new random one each time, none a password: no change).
    """
    if password is None or not is_password_usable(password):
        return ""
    return hashlib.sha256(password.encode()).hexdigest()


def credential_carried(user: Any, still_good: CredentialCheck, *, console: bool = False) -> None:
    """Mark ``user`` (this request's object) as authenticated by a credential ``still_good`` asks about again.

    ``user.password`` is the one the credential was checked under (its object read at the authentication);
    ``console``: a session, good only while the account is staff.
    """
    setattr(user, _CHECK_ATTRIBUTE, still_good)
    setattr(user, _CONSOLE_ATTRIBUTE, console)


def credential_console(user: Any) -> bool:
    """Whether ``user``'s credential is the console's session (asked again only while the account is staff)."""
    return bool(getattr(user, _CONSOLE_ATTRIBUTE, False))


def credential_rows(user: Any) -> "CredentialRow | bool | None":
    """What ``user``'s credential check answers now: its row while good (read it as ``EXISTS``), a bool, or ``None``.

    ``None``: no credential marked (a user authenticated otherwise, a test's forced one), nothing to ask.
    """
    still_good = getattr(user, _CHECK_ATTRIBUTE, None)
    return None if still_good is None else still_good()


def _session_user(request: HttpRequest) -> Any:
    """The session's user (Django's lazy ``get_user``), marked with its session when it is signed in by one."""
    from django.contrib.auth.middleware import get_user  # the auth app's models: imported once apps are ready

    user = get_user(request)  # memoized on the request, as ``AuthenticationMiddleware``'s lazy user
    session = request.session
    if getattr(user, "is_authenticated", False) and session.session_key:
        # The key read when asked: a password changed by its own user saves the session under a new key.
        signed_in_as = user._meta.pk.value_to_string(user)
        credential_carried(user, lambda: _session_lives(session, signed_in_as), console=True)
    return user


def _session_lives(session: Any, signed_in_as: str) -> "CredentialRow | bool":
    """``session``'s row under its key while it signs someone in, or whether it would sign in ``signed_in_as``.

    ``toolhub.session_store``'s sessions answer their row, not expired (an ended session's row is deleted; an expired
    one's waits for beat's sweep, yet signs in no one). Another engine's is loaded afresh through its store and asked
    as the next request would ask it (Django's ``get_user``: the backend, the account, the password's hash), so a
    password reset refuses it here as there; its data naming the user is not enough.
    """
    key = session.session_key
    if not key:
        return False
    rows = getattr(session, "credential_rows", None)
    if rows is not None:
        return rows(key)
    return _signs_in(type(session)(session_key=key).load()) == signed_in_as


class _AsLoaded(dict[str, Any]):
    """A session's data as its store loaded it, read by ``get_user`` as a request's session: nothing written back.

    ``get_user`` flushes a session it refuses and rotates the key of one hashed under a retired ``SECRET_KEY``: here
    that would delete or re-key the browser's session from a re-read, so both only touch this copy.
    """

    def flush(self) -> None:
        self.clear()

    def cycle_key(self) -> None:
        """The key a browser holds stays: its next request rotates it, as Django does."""


def _signs_in(data: dict[str, Any]) -> str | None:
    """Whom a session holding ``data`` signs in now (the user's id as text), as Django's ``get_user`` reads it."""
    from django.contrib.auth import get_user  # the auth app's models: imported once apps are ready

    user = get_user(SimpleNamespace(session=_AsLoaded(data)))  # type: ignore[arg-type]
    if not getattr(user, "is_authenticated", False):
        return None
    return str(user._meta.pk.value_to_string(user))


class SessionCredentialMiddleware:
    """After ``AuthenticationMiddleware``: the console session's user carries its session (read lazily, as Django's)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.user = SimpleLazyObject(lambda: _session_user(request))  # type: ignore[assignment]
        return self.get_response(request)
