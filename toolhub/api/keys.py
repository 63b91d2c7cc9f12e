"""API keys stored as digests: a reader of the database (a backup, a read role, a dump) holds no working key.

DRF's ``Token`` keeps its key in ``authtoken_token.key``; toolhub stores there the first 40 hex characters of the
key's SHA-256 (160 bits, the column's width), so DRF's model, its admin and the Tokens page stay as they are. A key is
160 random bits, so a plain digest cannot be reversed or guessed: no salt, and no pepper (a ``SECRET_KEY`` rotation
must not end every key). The key itself is returned once, by :func:`api_key_issue`, to be shown to its holder; the
authentication (:func:`toolhub.api.tokens.token_owner`, REST and MCP) digests the presented key and looks it up.

A token saved by a path that does not go through here (DRF's ``Token.save`` draws a key and stores it as is) fails
closed: its stored value is no digest of any key anyone holds, so nothing authenticates with it.
"""

import hashlib
from typing import Any

__all__ = ["api_key_assign", "api_key_issue", "key_digest"]

#: The width of ``authtoken_token.key``: 40 hex characters, 160 bits of the SHA-256.
DIGEST_LENGTH = 40


def key_digest(key: str) -> str:
    """What the token and session tables (``toolhub.session_store``) store for ``key``: 40 hex of its SHA-256."""
    return hashlib.sha256(key.encode()).hexdigest()[:DIGEST_LENGTH]


def api_key_assign(token: Any) -> str:
    """Draw a new key for an unsaved ``token``, set its digest as the stored key, and return the key (once)."""
    from rest_framework.authtoken.models import Token

    key: str = Token.generate_key()
    token.key = key_digest(key)
    return key


def api_key_issue(user: Any, *, using: str = "default") -> str:
    """A new API token for ``user`` (who has none: one token a user), its digest stored; the key, shown once."""
    from rest_framework.authtoken.models import Token

    token = Token(user=user)
    key = api_key_assign(token)
    token.save(using=using, force_insert=True)
    return key
