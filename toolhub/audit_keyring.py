"""The export public keys an auditor holds after key rotations: the current one and the retired ones. Django-free.

``manage.py audit_public_key --all`` prints them as a key file, one key a line, a retired one followed by
``valid-through-checkpoint=N`` (it signed the checkpoints, and the exports naming them, up to #N). The verifier
(``toolhub.audit_file_verify``) picks the key a header names and accepts a retired one only for a header naming a
checkpoint up to its retirement: whoever obtains a retired key cannot make a file that verifies as exported since.
A file of one key, as ``audit_public_key`` printed before, is read as the current key.
"""

import re
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from toolhub.audit_export_key import (
    PublicKeyError,
    header_signature_problem,
    parse_public_key,
    public_key_file_text,
    public_key_text,
)
from toolhub.audit_problem import UNVERIFIABLE, TrailProblem

__all__ = [
    "RETIRED_KEY",
    "UNKNOWN_KEY",
    "ExportKey",
    "checkpoint_number",
    "keyring_file_text",
    "load_keys",
    "parse_keys",
    "verified_by",
]

#: The ids of the key problems (``toolhub.audit_keys`` names a checkpoint's with the same), as ``toolhub.checks``
#: ids its own: K001 a key none of those given or configured, K002 a retired key used past its retirement.
UNKNOWN_KEY = "toolhub.audit.K001"
RETIRED_KEY = "toolhub.audit.K002"
_VALID_THROUGH = "valid-through-checkpoint="
#: The largest key file read: ``audit_public_key --all`` prints ~200 characters a key, so hundreds of rotations.
MAX_KEY_FILE_CHARS = 64 * 1024
# ASCII digits only (``str.isdigit`` takes "²", which ``int`` refuses, and "٣"), few enough for a bigint.
_CHECKPOINT_NUMBER = re.compile(r"[0-9]{1,18}")


def checkpoint_number(text: str) -> int | None:
    """The last checkpoint a retired key is valid for, as written after it (None: not such a number).

    One reading for ``TOOLHUB_AUDIT_RETIRED_KEYS`` and a key file's validity, so neither raises on odd digits.
    """
    return int(text) if _CHECKPOINT_NUMBER.fullmatch(text) else None


@dataclass(frozen=True)
class ExportKey:
    """An export public key; ``through``: the last checkpoint a retired key vouches for (None: the current key)."""

    public: Ed25519PublicKey
    through: int | None = None

    @property
    def fingerprint(self) -> str:
        return public_key_text(self.public).fingerprint


def keyring_file_text(keys: list[ExportKey]) -> str:
    """The key file ``audit_public_key --all`` prints: each key as ``audit_public_key`` prints it, with validity."""
    parts = []
    for key in keys:
        text = public_key_file_text(key.public)
        if key.through is not None:
            validity = f"{_VALID_THROUGH}{key.through}"
            text = f"# retired: valid for checkpoints up to #{key.through}\n{text.rstrip()} {validity}\n"
        parts.append(text)
    return "".join(parts)


def parse_keys(text: str) -> list[ExportKey]:
    """The keys of a key file or a ``--public-key`` value; ``PublicKeyError`` saying what was expected."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    if len(lines) == 1 and _VALID_THROUGH not in lines[0]:
        return [ExportKey(parse_public_key(text))]
    keys = []
    for line in lines:
        given, retired, through = line.partition(_VALID_THROUGH)
        # Written, the validity must be a number: one left empty (a line cut short) would read as the current key.
        number = checkpoint_number(through.strip()) if retired else None
        if retired and number is None:
            raise PublicKeyError(f"{_VALID_THROUGH}{through[:20]!r} is not a checkpoint number")
        keys.append(ExportKey(parse_public_key(given), number))
    if sum(key.through is None for key in keys) > 1:
        raise PublicKeyError(
            f"more than one current key: a retired key is followed by {_VALID_THROUGH}N, "
            "as manage.py audit_public_key --all prints it"
        )
    return keys


def load_keys(given: str | None, path: str | None) -> list[ExportKey] | None:
    """The keys from ``--public-key`` or ``--public-key-file``; ``PublicKeyError`` naming the option."""
    if path is not None:
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read(MAX_KEY_FILE_CHARS + 1)
        except (OSError, UnicodeDecodeError) as exc:
            raise PublicKeyError(f"--public-key-file: cannot read {path}: {exc}") from None
        if len(text) > MAX_KEY_FILE_CHARS:  # never read in part: the keys past a cut would go unseen
            raise PublicKeyError(
                f"--public-key-file {path}: larger than {MAX_KEY_FILE_CHARS // 1024} KiB, more than a key file "
                "holds: give the output of manage.py audit_public_key --all"
            )
        try:
            return parse_keys(text)
        except PublicKeyError as exc:
            raise PublicKeyError(f"--public-key-file {path}: {exc}") from None
    if given is None:
        return None
    try:
        return parse_keys(given)
    except PublicKeyError as exc:
        raise PublicKeyError(f"--public-key: {exc}") from None


def verified_by(keys: list[ExportKey], header: dict[str, Any]) -> tuple[ExportKey | None, TrailProblem | None]:
    """The key the header is signed with, or why it is not signed by one of ``keys`` valid for it."""
    signature = header.get("signature")
    named = signature.get("key") if isinstance(signature, dict) else None
    key = next((key for key in keys if key.fingerprint == named), None)
    if key is None and len(keys) > 1 and isinstance(named, str):
        given = ", ".join(key.fingerprint for key in keys[:10])
        return None, TrailProblem(
            f"the header names the signing key {named[:40]}, none of the keys given ({given}) [{UNKNOWN_KEY}]: take "
            "them all, with their validity, from manage.py audit_public_key --all, or the header was altered",
            UNVERIFIABLE,
        )
    key = key or next((key for key in keys if key.through is None), keys[0])
    problem = header_signature_problem(key.public, header)
    if problem is not None or key.through is None:
        return (None, problem) if problem is not None else (key, None)
    checkpoint = header.get("checkpoint")
    seq = checkpoint.get("seq") if isinstance(checkpoint, dict) else None
    if not isinstance(seq, int) or isinstance(seq, bool):
        return None, TrailProblem(
            f"the header is signed with the retired key {key.fingerprint} (valid for checkpoints up to "
            f"#{key.through}) and names no checkpoint, so nothing places it before the retirement [{RETIRED_KEY}]",
            UNVERIFIABLE,
        )
    if seq > key.through:
        shown = str(seq) if seq < 10**18 else f"{str(seq)[:18]}... ({len(str(seq))} digits)"  # the signer's word
        return None, TrailProblem(
            f"the header is signed with the key {key.fingerprint}, retired after checkpoint #{key.through}, but names "
            f"checkpoint #{shown}: whoever still holds the retired key made it [{RETIRED_KEY}]"
        )
    return key, None
