"""The audit signing keys: the current one and those a rotation retired, each valid for the checkpoints it signed.

The current key is in the variable ``AUDIT_KEY_ENV`` names. A rotation moves the old key to the variable
``AUDIT_RETIRED_KEYS_ENV`` names, as ``N:KEY`` (whitespace between several): valid for the checkpoints numbered up
to ``N``, the last it signed. Checkpoints are numbered after the newest stored one (a trigger refuses a lower
number), so whoever obtains a retired key cannot sign a checkpoint that verifies as one signed after its retirement.
Nothing is re-signed: history stays signed by the key that signed it.

A key is named by its id: the fingerprint of the export public key derived from it (``toolhub.audit_export_key``),
which is public, printed by ``manage.py audit_public_key`` and named in every export header and new checkpoint.
"""

import os
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from toolhub.audit_export_key import export_signing_key, public_key_text
from toolhub.audit_keyring import RETIRED_KEY, UNKNOWN_KEY, checkpoint_number
from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolhubError

__all__ = [
    "CheckpointKeyError",
    "SigningKey",
    "current_key",
    "current_keys",
    "key_id",
    "refuse_overlapping_retirement",
    "retired_keys",
    "signing_key",
    "unknown_key",
]


class CheckpointKeyError(ToolhubError):
    """The signing key is not configured, or a retired key is malformed."""


@dataclass(frozen=True)
class SigningKey:
    """A checkpoint key; ``through``: the last checkpoint a retired key signed (None for the current key)."""

    secret: bytes
    through: int | None = None

    @cached_property
    def id(self) -> str:
        return key_id(self.secret)

    def valid_for(self, seq: Any) -> bool:
        """Whether this key may have signed checkpoint ``seq``: the current one any, a retired one those up to it."""
        return self.through is None or (isinstance(seq, int) and not isinstance(seq, bool) and seq <= self.through)


def key_id(secret: bytes) -> str:
    """A key's public id: its export public key's fingerprint (reveals nothing of the secret)."""
    return public_key_text(export_signing_key(secret).public_key()).fingerprint


def signing_key() -> bytes:
    """The current key, read as a retired one is: without surrounding whitespace (a secret file's newline).

    ``CheckpointKeyError`` when none is set, or when it holds whitespace inside: the retired keys are separated by
    whitespace, so such a key could never be retired (its checkpoints would read as signed by an unknown key).
    Named by its variable, never its text.
    """
    name = toolhub_settings().AUDIT_KEY_ENV
    key = os.environ.get(name, "").strip()
    if not key:
        raise CheckpointKeyError(
            f"Set the environment variable {name} to the audit checkpoint key (kept out of the database)."
        )
    if any(char.isspace() for char in key):
        raise CheckpointKeyError(
            f"{name} holds whitespace inside the key: {toolhub_settings().AUDIT_RETIRED_KEYS_ENV} separates keys by "
            "whitespace, so a rotation could never retire it. Set a key without whitespace (e.g. the output of "
            "`python -c 'import secrets; print(secrets.token_urlsafe(48))'`); the checkpoints signed with this one "
            f"then read as signed by an unknown key [{UNKNOWN_KEY}]: sign over them with "
            'audit_checkpoint --acknowledge "why"'
        )
    return key.encode()


def current_key() -> SigningKey:
    return SigningKey(signing_key())


def current_keys() -> list[SigningKey]:
    """The current key, and its spelling as set when that has surrounding whitespace.

    Before keys were read trimmed, such a key signed with its whitespace: those checkpoints still verify, under the
    current key's holder's word as before (the spelling is the same secret).
    """
    current = current_key()
    as_set = os.environ.get(toolhub_settings().AUDIT_KEY_ENV, "").encode()
    return [current] if as_set == current.secret else [current, SigningKey(as_set)]


def retired_keys() -> list[SigningKey]:
    """The retired keys, oldest retirement first; ``CheckpointKeyError`` naming an entry that is not ``N:KEY``."""
    name = toolhub_settings().AUDIT_RETIRED_KEYS_ENV
    keys = []
    for number, entry in enumerate(os.environ.get(name, "").split(), start=1):
        given, _, secret = entry.partition(":")
        through = checkpoint_number(given)
        if through is None or not secret:  # named by its position: the entry holds a secret
            raise CheckpointKeyError(
                f"{name}: entry {number} is not N:KEY (N the last checkpoint the retired key signed, in digits "
                "0-9, then the key); separate several with spaces"
            )
        keys.append(SigningKey(secret.encode(), through))
    return sorted(keys, key=lambda key: key.through or 0)


def refuse_overlapping_retirement(seq: int) -> None:
    """Refuse to sign checkpoint ``seq`` with the current key while a retired key is configured as valid for it.

    ``N`` is the last checkpoint the retired key signed, so it is below every number the current key signs; one
    set too high (a typo, the wrong checkpoint) would let whoever holds the retired key sign checkpoints up to
    ``N`` that verify, silently. Named by its id, never its text.
    """
    for key in retired_keys():
        if key.valid_for(seq):
            name = toolhub_settings().AUDIT_RETIRED_KEYS_ENV
            raise CheckpointKeyError(
                f"{name}: the retired key {key.id} is set valid through checkpoint #{key.through}, but the "
                f"current key is about to sign #{seq}: set N to the last checkpoint the retired key signed "
                f"(at most #{seq - 1}) [{RETIRED_KEY}]"
            )


def unknown_key(named: Any) -> str:
    """Why no configured key verifies a checkpoint naming key ``named``: actionable, bounded, with an id."""
    current = current_key()
    shown = str(named)[:40]
    retired = next((key for key in retired_keys() if key.id == named), None)
    if retired is not None:
        return (
            f"signed with key {shown}, retired after checkpoint #{retired.through}: a checkpoint numbered after "
            f"that is no longer its to sign (whoever still holds the retired key forged it) [{RETIRED_KEY}]"
        )
    where = toolhub_settings().AUDIT_RETIRED_KEYS_ENV
    if named is None:
        return (
            f"it was altered or signed with another key than the current one ({current.id}) or a retired one "
            f"[{UNKNOWN_KEY}]: if the key was rotated, add the old key to {where} as N:KEY, N the last checkpoint "
            "it signed"
        )
    return (
        f"signed with key {shown}, which is neither the current key ({current.id}) nor a retired one "
        f"[{UNKNOWN_KEY}]: if the key was rotated, add the old key to {where} as N:KEY, N the last checkpoint it signed"
    )
