"""The audit checkpoint key and signature: what makes a checkpoint, stored or exported, trusted.

The key is kept outside the database (an environment variable): whoever can write the database cannot
sign a checkpoint over what they changed.
"""

from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from toolhub.audit_export_key import export_signing_key, header_signature
from toolhub.audit_hash import canonical_json
from toolhub.audit_keys import CheckpointKeyError, SigningKey, current_keys, retired_keys, signing_key, unknown_key
from toolhub.checkpoint_signature_core import hmac_hex, hmac_matches
from toolhub.json_intake import json_loads_checked
from toolhub.models import AuditCheckpoint

__all__ = [
    "CheckpointKeyError",
    "builds_on",
    "checkpoint_json",
    "export_public_key",
    "forged_reason",
    "sign",
    "sign_export_header",
    "signed_body",
    "signing_key",
    "stored_body",
    "trusted_body",
]


def sign(text: str) -> str:
    return hmac_hex(signing_key(), text)


def sign_export_header(header: dict[str, Any]) -> dict[str, str]:
    """The export header's Ed25519 signature, with the key derived from the checkpoint key (``audit_export_key``)."""
    return header_signature(signing_key(), header)


def export_public_key() -> Ed25519PublicKey:
    """The public key that checks export headers (``manage.py audit_public_key``); it cannot sign."""
    return export_signing_key(signing_key()).public_key()


def _verifying_keys(body: dict[str, Any]) -> list[SigningKey]:
    """The keys that may have signed ``body``: the one it names, else the current and retired keys.

    A retired key counts only for a checkpoint numbered up to its retirement (``toolhub.audit_keys``); a checkpoint
    from before key ids (none named) is checked with each key valid for it, so history is never re-signed.
    """
    seq, named = body.get("seq"), body.get("key")
    keys = [key for key in [*current_keys(), *retired_keys()] if key.valid_for(seq)]
    return [key for key in keys if key.id == named] if "key" in body else keys


def _signed(text: str, signature: Any, body: dict[str, Any]) -> bool:
    """Whether ``signature`` is ``text``'s under a key valid for ``body``, compared in constant time.

    Compared as bytes: a planted signature reads as forged.
    """
    return any(hmac_matches(key.secret, text, signature) for key in _verifying_keys(body))


def forged_reason(body: Any) -> str:
    """Why a checkpoint's signature does not verify, when the key explains it ("": altered under a valid key)."""
    if not isinstance(body, dict):
        return ""
    named = body.get("key")
    if named is not None and any(key.id == named for key in _verifying_keys(body)):
        return ""
    return unknown_key(named)


#: A checkpoint nests three levels (its body, ``heads``, a head): deeper text is none toolhub signed.
_MAX_NESTING = 8


def checkpoint_json(text: str) -> Any:
    """A checkpoint's text (a stored row, a file) decoded; ``ValueError`` when it is not JSON or nests too deep.

    Its nesting is measured first (``toolhub.json_intake``): a row or file planted thousands deep would end every
    check of the checkpoints in ``RecursionError`` instead of naming it.
    """
    return json_loads_checked(text, max_depth=_MAX_NESTING, storable=False)


def stored_body(row: AuditCheckpoint) -> dict[str, Any] | None:
    """A stored checkpoint's body as JSON (None when it is not an object), its signature not checked."""
    try:
        body = checkpoint_json(row.body)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def trusted_body(row: AuditCheckpoint | None) -> dict[str, Any] | None:
    """A stored checkpoint's body when its signature and number hold (a forged one is never built on)."""
    if row is None:
        return None
    signing_key()  # no key configured: say so (``CheckpointKeyError``), never "forged"
    body = stored_body(row)
    if body is None or not _signed(row.body, row.signature, body):
        return None
    if body.get("seq") != row.seq or not isinstance(body.get("heads"), dict):
        return None
    return body


def builds_on(body: dict[str, Any], base: Any) -> bool:
    """Whether a checkpoint belongs to the full checkpoint ``base``'s run: that full one, or a delta on it."""
    seq = body.get("seq")
    return bool(body.get("base", seq) == base) and (seq == base) == ("base" not in body)


def signed_body(document: dict[str, Any]) -> dict[str, Any] | None:
    """A checkpoint document's body when its signature holds and it names heads; None when it does not."""
    body = {key: value for key, value in document.items() if key != "signature"}
    if not isinstance(body.get("heads"), dict) or not _signed(canonical_json(body), document.get("signature"), body):
        return None
    return body
