"""Signed checkpoints of the audit chains: an HMAC over every chain's head, with a key kept outside the database.

A chain verifies on its own against alteration and deletion inside it; someone who can write the
database could still cut the newest events and rewrite the chain head. A checkpoint exported
earlier names each chain's head at that time, so such a truncation is detected.
"""

import hashlib
import hmac
import os
from typing import Any

from django.utils import timezone

from toolhub.audit import canonical_json
from toolhub.conf import toolhub_setting
from toolhub.exceptions import ToolhubError
from toolhub.models import AuditChainHead, AuditEvent

__all__ = ["audit_checkpoint_create", "audit_checkpoint_problems", "CheckpointKeyError"]


class CheckpointKeyError(ToolhubError):
    """The signing key is not configured."""


def _key() -> bytes:
    name = toolhub_setting("AUDIT_KEY_ENV")
    key = os.environ.get(name, "")
    if not key:
        raise CheckpointKeyError(
            f"Set the environment variable {name} to the audit checkpoint key (kept out of the database)."
        )
    return key.encode()


def _signature(body: dict[str, Any]) -> str:
    return hmac.new(_key(), canonical_json(body).encode(), hashlib.sha256).hexdigest()


def audit_checkpoint_create() -> dict[str, Any]:
    """Capture every chain's head and sign it."""
    heads = {str(head.chain): {"seq": head.seq, "hash": head.hash} for head in AuditChainHead.objects.order_by("chain")}
    body = {"created_at": timezone.now().isoformat(), "heads": heads}
    return {**body, "signature": _signature(body)}


def audit_checkpoint_problems(checkpoint: dict[str, Any]) -> list[str]:
    """What in the database contradicts a checkpoint: a bad signature, or a recorded head now missing or changed."""
    body = {"created_at": checkpoint.get("created_at"), "heads": checkpoint.get("heads")}
    if not isinstance(body["heads"], dict) or not hmac.compare_digest(
        _signature(body), str(checkpoint.get("signature", ""))
    ):
        return ["checkpoint signature does not match: the file was altered or signed with another key"]
    problems = []
    for chain, head in sorted(body["heads"].items(), key=lambda item: int(item[0])):
        if not head["seq"]:
            continue
        event = AuditEvent.objects.filter(chain=int(chain), seq=head["seq"]).first()
        if event is None:
            newest = AuditEvent.objects.filter(chain=int(chain)).order_by("-seq").values_list("id", "seq").first()
            after = f"; the newest left is event #{newest[0]} (seq {newest[1]})" if newest else ""
            problems.append(
                f"chain {chain}: the checkpoint's head (seq {head['seq']}) is missing: the tail was truncated{after}"
            )
        elif event.hash != head["hash"]:
            problems.append(
                f"chain {chain}: event #{event.pk} (seq {head['seq']}) differs from the checkpoint: rewritten"
            )
    return problems
