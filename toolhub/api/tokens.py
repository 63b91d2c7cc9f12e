"""API tokens that expire: a DRF token older than ``API_TOKEN_MAX_AGE_SECONDS`` authenticates no one.

A token is a bearer secret that outlives the laptop, the CI job or the person that held it; one that never
expires is a standing credential nobody remembers to revoke. One reading of "is this key good" serves the REST
API (``ExpiringTokenAuthentication``) and MCP (``toolhub.mcp_caller``), so neither accepts what the other
refuses. An expired token is refused with what to do (create a new one), never deleted here: an administrator
sees it in the admin's Tokens, with its age, and replaces it.

The key is the credential, so nothing names a token by it: DRF's ``Token.__str__`` returns the key, and Django's
admin names every row by ``str()`` (titles, breadcrumbs, messages, delete pages, ``LogEntry.object_repr`` kept for
years). :func:`install` makes a token's name its :func:`token_handle`, once, for every place that draws one.
"""

from datetime import UTC, timedelta
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from toolhub.api.keys import key_digest
from toolhub.api.token_binding import token_holds
from toolhub.api.token_use import TokenChannel, TokenGone, token_use_stamp
from toolhub.conf import toolhub_settings
from toolhub.credentials import CredentialRow, credential_carried

__all__ = ["ExpiringTokenAuthentication", "TokenExpired", "TokenRefused", "install", "token_handle", "token_owner"]

INVALID = "Invalid token."


class TokenRefused(Exception):
    """A key that authenticates no one; the message says why and what to do."""


class TokenExpired(TokenRefused):
    """A known key older than the deployment allows: its holder is told so (an unknown one is told nothing)."""


def _expired(created: Any) -> bool:
    max_age = toolhub_settings().API_TOKEN_MAX_AGE_SECONDS
    return max_age is not None and created < timezone.now() - timedelta(seconds=max_age)


def token_owner(key: str, *, channel: str) -> tuple[Any, Any]:
    """The active user a token key belongs to, and the token; ``TokenRefused`` for an unknown, idle or old key.

    The key is found by its digest (``toolhub.api.keys``): a value read from the token table is no key. A token
    taken is stamped as used over ``channel`` (``toolhub.api.token_use``); a refused one is not.
    """
    from rest_framework.authtoken.models import Token

    token = Token.objects.select_related("user", "use", "binding").filter(key=key_digest(key)).first()  # digests
    # Refused too under another password than the one it was issued under (even written by ``update``: no signal).
    if token is None or not token.user.is_active or not token_holds(token):
        raise TokenRefused(INVALID)
    if _expired(token.created):
        max_age = toolhub_settings().API_TOKEN_MAX_AGE_SECONDS
        raise TokenExpired(
            f"This API token expired: it is older than TOOLHUB['API_TOKEN_MAX_AGE_SECONDS'] ({max_age:,.0f} s). "
            "Ask an administrator for a new one (the admin's Tokens)."
        )
    try:
        token_use_stamp(token, channel)
    except TokenGone as gone:
        raise TokenRefused(INVALID) from gone
    # Asked again with the user's rights after a wait: a key deleted or grown old meanwhile answers nothing more.
    credential_carried(token.user, lambda: _still_good(token.key))
    return token.user, token


def _still_good(digest: str) -> CredentialRow:
    """The row of the key stored as ``digest`` while it authenticates (not deleted, not older than allowed).

    Asked inside the re-read of its user's row (``toolhub.credentials``), with the password it is bound to now.
    """
    from rest_framework.authtoken.models import Token

    from toolhub.models import ApiTokenBinding

    max_age = toolhub_settings().API_TOKEN_MAX_AGE_SECONDS
    since = None if max_age is None else timezone.now() - timedelta(seconds=max_age)
    return CredentialRow(Token, "key", digest, "created", since, fingerprint=(ApiTokenBinding, "password_fingerprint"))


class ExpiringTokenAuthentication(TokenAuthentication):
    """DRF's ``Authorization: Token <key>``, refused once the token is older than the deployment allows."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        try:
            return token_owner(key, channel=TokenChannel.REST)
        except TokenRefused as refused:
            raise AuthenticationFailed(str(refused)) from refused


def token_handle(token: Any) -> str:
    """A token's name that is no part of its key: whose it is and when it was created.

    Not even a prefix of the key: a user holds one token, so the user tells tokens apart, and a prefix would put
    part of a live credential in records kept for years (a leaked key is matched by ``token_owner``, by its digest).
    """
    owner = "nobody"
    if token.user_id is not None:
        try:
            owner = token.user.get_username()
        except ObjectDoesNotExist:  # a stale copy whose user was deleted since: named by the id it held
            owner = f"a deleted user #{token.user_id}"
    created = f", created {token.created.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if token.created else ""
    return f"API token of {owner}{created}"


def install() -> None:
    """Name DRF's tokens (and its admin's token proxy) by :func:`token_handle` rather than by their key."""
    from rest_framework.authtoken.models import Token

    Token.__str__ = token_handle
