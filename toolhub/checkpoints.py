"""Signed checkpoints of the audit chains: an HMAC over every chain's head, with a key kept outside the database.

A chain verifies on its own against alteration and deletion inside it; someone who can write the
database could still cut the newest events and rewrite the chain head. A checkpoint taken earlier
names each chain's head at that time, so such a truncation is detected. Beat stores one every
``AUDIT_CHECKPOINT_SECONDS`` in the append-only ``AuditCheckpoint`` table (and, when
``AUDIT_CHECKPOINT_DIR`` is set, as a file there), numbered without gaps, where ``verify_audit``
finds the newest without being told; a file exported by ``audit_checkpoint --output`` is checked the same way.
"""

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Window
from django.db.models.functions import Lag
from django.utils import timezone

from toolhub.audit_hash import canonical_json
from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolhubError
from toolhub.models import AuditChainHead, AuditCheckpoint, AuditEvent

__all__ = [
    "audit_checkpoint_create",
    "CheckpointProblem",
    "audit_checkpoint_problems",
    "audit_stored_checkpoint_problems",
    "CheckpointKeyError",
]

# Serializes numbering of checkpoints between concurrent writers (beat and a manual command).
_NUMBERING_LOCK = 0x746F6F6C6875_0001


class CheckpointKeyError(ToolhubError):
    """The signing key is not configured."""


def _key() -> bytes:
    name = toolhub_settings().AUDIT_KEY_ENV
    key = os.environ.get(name, "")
    if not key:
        raise CheckpointKeyError(
            f"Set the environment variable {name} to the audit checkpoint key (kept out of the database)."
        )
    return key.encode()


def _sign(text: str) -> str:
    return hmac.new(_key(), text.encode(), hashlib.sha256).hexdigest()


def audit_checkpoint_create() -> dict[str, Any]:
    """Sign every chain's head and keep it as the next stored checkpoint; return it as a document.

    Without the key nothing is written (``CheckpointKeyError``).
    """
    _key()
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_NUMBERING_LOCK])
        last = AuditCheckpoint.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
        now = timezone.now()
        heads = {
            str(head.chain): {"seq": head.seq, "hash": head.hash} for head in AuditChainHead.objects.order_by("chain")
        }
        body = {"seq": last + 1, "created_at": now.isoformat(), "heads": heads}
        text = canonical_json(body)
        signature = _sign(text)
        AuditCheckpoint.objects.create(seq=last + 1, created_at=now, body=text, signature=signature)
    document = {**body, "signature": signature}
    directory = toolhub_settings().AUDIT_CHECKPOINT_DIR
    if directory:
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        (path / f"audit-checkpoint-{last + 1:012d}.json").write_text(json.dumps(document, indent=2, sort_keys=True))
    return document


@dataclass(frozen=True)
class CheckpointProblem:
    """What contradicts a checkpoint: about one chain (``chain``), or about the checkpoints themselves (None)."""

    text: str
    chain: int | None = None

    def __str__(self) -> str:
        return self.text


def audit_checkpoint_problems(
    checkpoint: dict[str, Any], *, source: str = "the checkpoint", chains: range | None = None
) -> list[CheckpointProblem]:
    """What in the database contradicts a checkpoint document: a bad signature, a recorded head missing or changed.

    ``chains``: compare only the heads of these chains (one tenant's, ``toolhub.audit_verify.tenant_chains``).
    """
    body = {key: value for key, value in checkpoint.items() if key != "signature"}
    if not isinstance(body.get("heads"), dict) or not hmac.compare_digest(
        _sign(canonical_json(body)), str(checkpoint.get("signature", ""))
    ):
        return [CheckpointProblem(f"{source}: signature does not match: it was altered or signed with another key")]
    return _head_problems(body["heads"], source, chains)


def audit_stored_checkpoint_problems(
    chains: range | None = None,
) -> tuple[AuditCheckpoint | None, list[CheckpointProblem]]:
    """Check the newest stored checkpoint (and the numbering of all of them) against the database.

    Returns the newest checkpoint (None when none was stored yet) and what contradicts it. Raises
    ``CheckpointKeyError`` when checkpoints exist but the key to check them is not configured.
    """
    newest = AuditCheckpoint.objects.order_by("-seq").first()
    problems: list[CheckpointProblem] = []
    gap = _first_numbering_gap()
    if gap is not None:
        problems.append(CheckpointProblem(gap))
    if newest is None:
        return None, problems
    source = f"stored checkpoint #{newest.seq}"
    try:
        body = json.loads(newest.body)
    except ValueError:
        body = None
    if (
        not isinstance(body, dict)
        or not hmac.compare_digest(_sign(newest.body), newest.signature)
        or body.get("seq") != newest.seq
        or not isinstance(body.get("heads"), dict)
    ):
        forged = CheckpointProblem(f"{source}: signature does not match: it was altered or signed with another key")
        return newest, [*problems, forged]
    return newest, problems + _head_problems(body["heads"], source, chains)


def audit_stored_file_problems(chains: range | None = None) -> tuple[Path | None, list[CheckpointProblem]]:
    """Check the newest checkpoint file of ``AUDIT_CHECKPOINT_DIR`` (when that is set) against the database."""
    directory = toolhub_settings().AUDIT_CHECKPOINT_DIR
    files = sorted(Path(directory).glob("audit-checkpoint-*.json")) if directory else []
    if not files:
        return None, []
    newest = files[-1]
    try:
        document = json.loads(newest.read_text())
    except (OSError, ValueError) as exc:
        return newest, [CheckpointProblem(f"checkpoint file {newest}: cannot be read ({exc})")]
    if not isinstance(document, dict):
        return newest, [CheckpointProblem(f"checkpoint file {newest}: not a checkpoint")]
    return newest, audit_checkpoint_problems(document, source=f"checkpoint file {newest.name}", chains=chains)


def _first_numbering_gap() -> str | None:
    """Checkpoints are numbered 1, 2, 3, ...: name the first number that is missing."""
    first = AuditCheckpoint.objects.order_by("seq").values_list("seq", flat=True).first()
    if first is not None and first != 1:
        return f"stored checkpoint #1 is missing (the oldest left is #{first}): checkpoints were deleted"
    numbered = AuditCheckpoint.objects.annotate(previous=Window(Lag("seq"), order_by=F("seq").asc()))
    after_gap = numbered.filter(previous__lt=F("seq") - 1).order_by("seq").values_list("seq", "previous").first()
    if after_gap is not None:
        seq, previous = after_gap
        return f"stored checkpoint #{previous + 1} is missing (the next left is #{seq}): checkpoints were deleted"
    return None


def _head_problems(heads: dict[str, Any], source: str, chains: range | None = None) -> list[CheckpointProblem]:
    """Each chain the checkpoint recorded must still hold the recorded head event, unchanged, and its head row."""
    rows = AuditChainHead.objects.all()
    if chains is not None:
        rows = rows.filter(chain__gte=chains.start, chain__lt=chains.stop)
    current = {head.chain: head for head in rows}
    problems = []
    for chain_key, head in sorted(heads.items(), key=lambda item: int(item[0])):
        chain, seq = int(chain_key), int(head["seq"])
        if not seq or (chains is not None and chain not in chains):
            continue
        reasons = []
        row = current.get(chain)
        if row is None:
            reasons.append("its chain head is missing: the chain was wiped")
        elif row.seq < seq:
            reasons.append(f"its chain head went back to seq {row.seq}")
        event = AuditEvent.objects.filter(chain=chain, seq=seq).first()
        if event is None:
            newest = AuditEvent.objects.filter(chain=chain).order_by("-seq").values_list("id", "seq").first()
            left = f"the newest left is event #{newest[0]} (seq {newest[1]})" if newest else "no event of it is left"
            reasons.insert(0, f"the checkpoint's head (seq {seq}) is missing: the tail was truncated; {left}")
        elif event.hash != head["hash"]:
            reasons.insert(0, f"event #{event.pk} (seq {seq}) differs from the checkpoint: rewritten")
        if reasons:
            problems.append(CheckpointProblem(f"chain {chain}: {'; '.join(reasons)} (per {source})", chain))
    return problems
