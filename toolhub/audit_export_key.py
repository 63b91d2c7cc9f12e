"""The export header's public-key signature: an Ed25519 key derived from the audit checkpoint key. Django-free.

Checking an export with the checkpoint key (an HMAC key) would let its auditor sign checkpoints and export headers
too (a verifier who can forge is no independent check) and take the platform's secret away. The header is signed
instead with an Ed25519 key derived deterministically from the checkpoint key (HKDF-SHA256 with its own versioned
info string: no new secret to configure, and a key unrelated to the HMAC's uses); its public key
(``manage.py audit_public_key``, the console's audit page) verifies a header and cannot sign one.

``toolhub.audit_export`` signs with it; ``toolhub.audit_file_verify`` checks with the public key alone, with no
database and no Django settings.
"""

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from toolhub.audit_problem import UNVERIFIABLE, TrailProblem
from toolhub.checkpoint_signature_core import export_header_text

__all__ = [
    "EXPORT_KEY_INFO",
    "SIGNATURE_ALGORITHM",
    "PublicKeyError",
    "PublicKeyText",
    "export_signing_key",
    "header_signature",
    "header_signature_problem",
    "parse_public_key",
    "public_key_file_text",
    "public_key_text",
]

#: The HKDF info string: what the derived key is for, and its version (a new one derives an unrelated key).
EXPORT_KEY_INFO = b"toolhub-audit-export-ed25519/1"
#: The header's ``signature.algorithm``.
SIGNATURE_ALGORITHM = "ed25519"

_RAW_KEY_BYTES = 32
_SIGNATURE_BYTES = 64

_FIELD_PRIME = 2**255 - 19
#: The y coordinates of Ed25519's eight points of small order (RFC 8032's curve has cofactor 8): the identity (1),
#: the point of order 2 (p - 1), those of order 4 (0) and of order 8 (Y, p - Y). Under a public key that is one of
#: them a signature is forged without any secret (R the identity and s = 0 verifies every message under the
#: identity), and a verifier such as OpenSSL's checks none of this; so such a key, in either sign of x, is refused.
_SMALL_ORDER_Y = frozenset(
    {
        1,
        _FIELD_PRIME - 1,
        0,
        0x05FC536D880238B13933C6D305ACDFD5F098EFF289F4C345B027B2C28F95E826,
        _FIELD_PRIME - 0x05FC536D880238B13933C6D305ACDFD5F098EFF289F4C345B027B2C28F95E826,
    }
)


class PublicKeyError(ValueError):
    """A public key given to the verifier that is not one (malformed, the wrong length, an unreadable file)."""


def export_signing_key(checkpoint_key: bytes) -> Ed25519PrivateKey:
    """The Ed25519 key export headers are signed with: the same for the same checkpoint key, in every process."""
    seed = HKDF(algorithm=hashes.SHA256(), length=_RAW_KEY_BYTES, salt=None, info=EXPORT_KEY_INFO).derive(
        checkpoint_key
    )
    return Ed25519PrivateKey.from_private_bytes(seed)


@dataclass(frozen=True)
class PublicKeyText:
    """A public key as it is handed to auditors: raw bytes in base64 and in hex, and a short fingerprint."""

    base64: str
    hex: str
    fingerprint: str


def public_key_text(public: Ed25519PublicKey) -> PublicKeyText:
    raw = public.public_bytes_raw()
    return PublicKeyText(base64.b64encode(raw).decode(), raw.hex(), _fingerprint(raw))


def public_key_file_text(public: Ed25519PublicKey) -> str:
    """What ``audit_public_key`` prints: a file ``--public-key-file`` reads (``#`` lines are comments)."""
    text = public_key_text(public)
    return (
        f"# toolhub audit export public key (Ed25519, raw, base64); fingerprint {text.fingerprint}\n"
        f"# hex: {text.hex}\n"
        f"{text.base64}\n"
    )


def _fingerprint(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()[:16]


def parse_public_key(text: str) -> Ed25519PublicKey:
    """A public key as ``audit_public_key`` prints it: 32 raw bytes in base64 or hex, or that command's output.

    Raises ``PublicKeyError`` saying what was expected.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    if len(lines) != 1:
        raise PublicKeyError(
            "give one public key: 32 bytes as base64 (44 characters) or hex (64 digits), "
            "as manage.py audit_public_key prints it"
        )
    given = "".join(lines[0].split())
    try:
        if len(given) == 2 * _RAW_KEY_BYTES:
            raw = bytes.fromhex(given)
        else:
            raw = base64.b64decode(given, validate=True)
    except (ValueError, binascii.Error):
        raw = b""
    if len(raw) != _RAW_KEY_BYTES:
        raise PublicKeyError(
            f"{given[:20]!r}... is not an Ed25519 public key: give its 32 bytes as base64 (44 characters) "
            "or hex (64 digits), as manage.py audit_public_key prints it"
        )
    problem = _degenerate_key_problem(raw)
    if problem is not None:
        raise PublicKeyError(problem)
    return Ed25519PublicKey.from_public_bytes(raw)


def _degenerate_key_problem(raw: bytes) -> str | None:
    """Why ``raw`` is no key a signature under proves anything (None: it may be one): small order, or not canonical.

    toolhub's key, derived from a secret seed, is never either; an encoding of y at or above the field's prime is
    refused too, so no second spelling of a small-order point slips past the list.
    """
    y = int.from_bytes(raw, "little") & ((1 << 255) - 1)
    if y >= _FIELD_PRIME or y in _SMALL_ORDER_Y:
        return (
            f"{raw.hex()[:16]}... is not a usable Ed25519 public key (a point of small order or a non-canonical "
            "encoding, under which anyone can forge a signature): take toolhub's from manage.py audit_public_key"
        )
    return None


def header_signature(checkpoint_key: bytes, header: dict[str, Any]) -> dict[str, str]:
    """The header's signature: over ``export_header_text`` (the header without it), naming the signing key."""
    private = export_signing_key(checkpoint_key)
    value = private.sign(export_header_text(header).encode())
    return {
        "algorithm": SIGNATURE_ALGORITHM,
        "key": _fingerprint(private.public_key().public_bytes_raw()),
        "value": base64.b64encode(value).decode(),
    }


def header_signature_problem(public: Ed25519PublicKey, header: dict[str, Any]) -> TrailProblem | None:
    """Why ``header`` is not signed by ``public``'s key (None: it is), in words an auditor acts on, with its kind.

    ``UNVERIFIABLE`` when the key given cannot check the header (no signature, an older HMAC one, another key named,
    a key no signature proves anything under): not proven, but no evidence of tampering. ``TAMPERED`` when the
    signature is malformed or does not match the header.
    """
    degenerate = _degenerate_key_problem(public.public_bytes_raw())
    if degenerate is not None:
        return TrailProblem(degenerate, UNVERIFIABLE)
    signature = header.get("signature")
    if signature is None:
        return TrailProblem(
            "the header is not signed: it was exported where no checkpoint key was set, or its signature removed",
            UNVERIFIABLE,
        )
    if isinstance(signature, str):
        return TrailProblem(
            "the header carries only an HMAC signature (an export from before public-key signing), which a public "
            "key cannot check: export the trail again",
            UNVERIFIABLE,
        )
    if not isinstance(signature, dict) or signature.get("algorithm") != SIGNATURE_ALGORITHM:
        return TrailProblem(
            f"the header's signature is not an {SIGNATURE_ALGORITHM} signature as toolhub writes it: it was altered"
        )
    value = _signature_bytes(signature.get("value"))
    if value is None:
        return TrailProblem("the header's signature value is malformed: it was altered")
    try:
        public.verify(value, export_header_text(header).encode())
    except InvalidSignature:
        pass
    else:
        return None
    given = public_key_text(public).fingerprint
    # The key it names is not signed (a hint only): it tells a wrong key (a rotated one) from an altered header.
    if signature.get("key") != given:
        return TrailProblem(
            f"the header names the signing key {str(signature.get('key'))[:40]}, not the public key given "
            f"({given}): check that the key is toolhub's (manage.py audit_public_key), or the header was altered",
            UNVERIFIABLE,
        )
    return TrailProblem(
        "the header's signature does not match its content: the header was altered after toolhub signed it"
    )


def _signature_bytes(value: Any) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        return None
    return raw if len(raw) == _SIGNATURE_BYTES else None
