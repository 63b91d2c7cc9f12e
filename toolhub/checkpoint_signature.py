"""The audit checkpoint key and signature: what makes a checkpoint, stored or exported, trusted.

The key is kept outside the database (an environment variable): whoever can write the database cannot
sign a checkpoint over what they changed.
"""

import json
import os
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from toolhub.audit_export_key import export_signing_key, header_signature
from toolhub.audit_hash import canonical_json
from toolhub.checkpoint_signature_core import hmac_hex, hmac_matches
from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolhubError
from toolhub.models import AuditCheckpoint

__all__ = [
    "CheckpointKeyError",
    "builds_on",
    "export_public_key",
    "sign",
    "sign_export_header",
    "signature_matches",
    "signed_body",
    "signing_key",
    "trusted_body",
]


class CheckpointKeyError(ToolhubError):
    """The signing key is not configured."""


def signing_key() -> bytes:
    name = toolhub_settings().AUDIT_KEY_ENV
    key = os.environ.get(name, "")
    if not key:
        raise CheckpointKeyError(
            f"Set the environment variable {name} to the audit checkpoint key (kept out of the database)."
        )
    return key.encode()


def sign(text: str) -> str:
    return hmac_hex(signing_key(), text)


def sign_export_header(header: dict[str, Any]) -> dict[str, str]:
    """The export header's Ed25519 signature, with the key derived from the checkpoint key (``audit_export_key``)."""
    return header_signature(signing_key(), header)


def export_public_key() -> Ed25519PublicKey:
    """The public key that checks export headers (``manage.py audit_public_key``); it cannot sign."""
    return export_signing_key(signing_key()).public_key()


def signature_matches(text: str, signature: Any) -> bool:
    """Whether ``signature`` is ``text``'s, compared in constant time (as bytes: a planted one reads as forged)."""
    return hmac_matches(signing_key(), text, signature)


def trusted_body(row: AuditCheckpoint | None) -> dict[str, Any] | None:
    """A stored checkpoint's body when its signature and number hold (a forged one is never built on)."""
    if row is None or not signature_matches(row.body, row.signature):
        return None
    try:
        body = json.loads(row.body)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("seq") != row.seq or not isinstance(body.get("heads"), dict):
        return None
    return body


def builds_on(body: dict[str, Any], base: Any) -> bool:
    """Whether a checkpoint belongs to the full checkpoint ``base``'s run: that full one, or a delta on it."""
    seq = body.get("seq")
    return bool(body.get("base", seq) == base) and (seq == base) == ("base" not in body)


def signed_body(document: dict[str, Any]) -> dict[str, Any] | None:
    """A checkpoint document's body when its signature holds and it names heads; None when it does not."""
    body = {key: value for key, value in document.items() if key != "signature"}
    if not isinstance(body.get("heads"), dict) or not signature_matches(
        canonical_json(body), document.get("signature")
    ):
        return None
    return body
