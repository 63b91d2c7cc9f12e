"""Checkpoint signatures without Django: the HMAC itself, and the text a tenant's export header is signed over.

``toolhub.checkpoint_signature`` signs and checks stored checkpoints with these functions (the key read from the
variable the settings name). An export's header is signed over ``export_header_text`` with an Ed25519 key derived
from the same key (``toolhub.audit_export_key``), so an auditor checks it with a public key, never this secret.
"""

import hashlib
import hmac
from typing import Any

from toolhub.audit_hash_core import canonical_json

__all__ = ["EXPORT_HEADER_PURPOSE", "export_header_text", "hmac_hex", "hmac_matches"]

#: What an export's header is signed as. The signed text starts with it, never with ``{`` as a stored checkpoint's
#: body does: an export's signature can never pass for a checkpoint's (or the reverse).
EXPORT_HEADER_PURPOSE = "toolhub-audit-export-header/1"


def hmac_hex(key: bytes, text: str) -> str:
    """HMAC-SHA256 of ``text`` under ``key``, in hex: the signature of a checkpoint (or a section)."""
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def hmac_matches(key: bytes, text: str, signature: Any) -> bool:
    """Whether ``signature`` is ``text``'s under ``key``, compared in constant time.

    Compared as bytes: ``hmac.compare_digest`` raises on a ``str`` with a non-ASCII character, and a planted
    signature must read as forged, not stop the verification with a ``TypeError``.
    """
    given = signature.encode("utf-8", "surrogatepass") if isinstance(signature, str) else b""
    return hmac.compare_digest(hmac_hex(key, text).encode(), given)


def export_header_text(header: dict[str, Any]) -> str:
    """The text an export's header is signed over: its purpose, then the header without its signature.

    A stored checkpoint's signature covers every tenant's heads, so it cannot leave with one tenant's file; toolhub
    checks it at export time and signs the header, which holds the tenant's part of it (its own chains' heads) and
    the heads the export ends at, with the key derived from it (``toolhub.audit_export_key``).
    """
    body = {key: value for key, value in header.items() if key != "signature"}
    return EXPORT_HEADER_PURPOSE + "\n" + canonical_json(body)
