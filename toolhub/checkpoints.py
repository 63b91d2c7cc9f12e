"""Signed checkpoints of the audit chains: an HMAC over every chain's head, with a key kept outside the database.

A chain verifies on its own against alteration and deletion inside it; someone who can write the
database could still cut the newest events and rewrite the chain head. A checkpoint taken earlier
names each chain's head at that time, so such a truncation is detected. Beat stores one every
``AUDIT_CHECKPOINT_SECONDS`` in the append-only ``AuditCheckpoint`` table (and, when
``AUDIT_CHECKPOINT_DIR`` is set, as a file there), numbered without gaps, where ``verify_audit``
finds the newest without being told; a file exported by ``audit_checkpoint --output`` is checked the same way.

With chains per tenant, most chains stand still between two checkpoints, and a checkpoint naming every
head would grow with the number of tenants. So beat's checkpoint is a *delta* when it can be: it names
only the heads that moved since the checkpoint before it, and the *full* checkpoint it builds on
(``base``). Every head stands in the full one or a later delta, each signed and numbered, so the heads
they name together are those a full checkpoint would. A full one is written first, when the deltas since
the last would together name more heads than there are chains, after ``DELTAS_PER_FULL`` deltas, and
always for ``audit_checkpoint`` (an export stands alone).

A checkpoint vouches only for a trail that still holds: before signing, the newest stored checkpoint (with
those it builds on) and the newest file are checked against the database, and on any problem (a chain cut
short or rewritten, a checkpoint forged or missing) nothing is signed (``CheckpointRefusedError``), so the
next checkpoint never signs tampering away and ``verify_audit`` keeps reporting it. Signing over it takes a
person's acknowledgement (``audit_checkpoint --acknowledge "why"``), itself audited with the problems.
A file is never overwritten.
"""

import json
from pathlib import Path
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from toolhub.audit_hash import canonical_json
from toolhub.audit_keys import key_id, refuse_overlapping_retirement
from toolhub.checkpoint_checks import (
    CheckpointProblem,
    audit_checkpoint_problems,
    audit_stored_checkpoint_problems,
    audit_stored_file_problems,
    behind,
    checkpoint_numbering_problems,
    named_heads,
    stored_run,
)
from toolhub.checkpoint_files import file_name, numbered_files, write_copy
from toolhub.checkpoint_signature import CheckpointKeyError, builds_on, checkpoint_json, signing_key, trusted_body
from toolhub.checkpoint_signature_core import hmac_hex
from toolhub.conf import toolhub_settings
from toolhub.db_timeouts import transaction_statements_unbounded
from toolhub.exceptions import ToolhubError
from toolhub.models import AuditChainHead, AuditCheckpoint, AuditEvent

__all__ = [
    "DELTAS_PER_FULL",
    "audit_checkpoint_create",
    "CheckpointRefusedError",
    "CheckpointProblem",
    "audit_checkpoint_problems",
    "audit_stored_checkpoint_problems",
    "audit_stored_file_problems",
    "checkpoint_base",
    "checkpoint_numbering_problems",
    "CheckpointKeyError",
]

# Serializes numbering of checkpoints between concurrent writers (beat and a manual command).
_NUMBERING_LOCK = 0x746F6F6C6875_0001
#: The most deltas a full checkpoint carries: a verification reads at most this many more checkpoints
#: (at the default interval of 300 s, a full checkpoint at least once a day).
DELTAS_PER_FULL = 287

Heads = dict[str, dict[str, Any]]


class CheckpointRefusedError(ToolhubError):
    """The trail no longer matches what was signed: nothing is signed over it until someone acknowledges it."""

    def __init__(self, problems: list[CheckpointProblem]) -> None:
        self.problems = problems
        shown = "; ".join(str(problem) for problem in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(
            f"No checkpoint signed: the audit trail contradicts what was signed before: {shown}{more}. "
            "verify_audit reports it. After investigating, sign over it with "
            'manage.py audit_checkpoint --acknowledge "<why>" (audited with these problems).'
        )


def audit_checkpoint_create(*, full: bool = False, acknowledge: str = "", actor: str = "") -> dict[str, Any]:
    """Sign the chains' heads and keep them as the next stored checkpoint; return it as a document.

    A delta (only the heads that moved, and ``base``) unless ``full`` or a full one is due (module doc).
    Without the key nothing is written (``CheckpointKeyError``). When the trail contradicts the checkpoints
    signed before, nothing is written either (``CheckpointRefusedError``), unless ``acknowledge`` says why
    signing over it is right: then a full checkpoint is signed, after an ``audit.checkpoint_acknowledged``
    event holding the reason, ``actor`` and the problems.
    """
    key = signing_key()
    directory = toolhub_settings().AUDIT_CHECKPOINT_DIR
    with transaction.atomic():
        # Beat's and an operator's checkpoint take turns, and the check reads the trail since the last one: neither
        # is a request's statement, so neither is cut at the statement bound (``toolhub.db_timeouts``).
        transaction_statements_unbounded()
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_NUMBERING_LOCK])
        # The heads signed are read before the check: a chain cut after this read is not in them (the later
        # verification finds its events missing), and one cut before it is what the check finds.
        heads = _current_heads()
        problems = _standing_problems(heads)
        if problems:
            if not acknowledge.strip():
                raise CheckpointRefusedError(problems)
            event = _acknowledged(problems, reason=acknowledge.strip(), actor=actor)
            full = True
            # The acknowledgement's own event is covered by the checkpoint it opens. Only its chain is read
            # again: every other head stays as read and checked above, so a chain cut meanwhile is not signed.
            heads[str(event.chain)] = {"seq": event.seq, "hash": event.hash}
        last = AuditCheckpoint.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
        if directory:
            # Copies numbered beyond the stored checkpoints (those were deleted, or the database restored):
            # never overwritten, the next number follows the newest copy.
            last = max([last, *numbered_files(Path(directory))])
        refuse_overlapping_retirement(last + 1)
        now = timezone.now()
        # The key's id, signed with the body: a rotation's retired key is told from an altered checkpoint.
        body: dict[str, Any] = {"seq": last + 1, "created_at": now.isoformat(), "key": key_id(key), "heads": heads}
        if problems:
            body["acknowledged"] = acknowledge.strip()[:500]  # signed: earlier gaps no longer count (see above)
        if not full and last:
            delta = _delta(last, heads)
            # The directory's copies must stand without the database: a delta there needs its base's file
            # and every file between (missing when the directory was set after they were stored).
            if not directory or all((Path(directory) / file_name(seq)).is_file() for seq in _run_seqs(delta, last)):
                body.update(delta)
        text = canonical_json(body)
        signature = hmac_hex(key, text)
        AuditCheckpoint.objects.create(
            seq=last + 1, created_at=now, body=text, signature=signature, acknowledged=bool(problems)
        )
    document = {**body, "signature": signature}
    if directory:
        write_copy(Path(directory), file_name(last + 1), json.dumps(document, indent=2, sort_keys=True))
    return document


def _current_heads() -> Heads:
    return {str(head.chain): {"seq": head.seq, "hash": head.hash} for head in AuditChainHead.objects.order_by("chain")}


def _standing_problems(heads: Heads) -> list[CheckpointProblem]:
    """What contradicts the newest stored checkpoint (with its run) or the newest file, or the heads to sign.

    In the database, and in ``heads``, the heads about to be signed: read in another statement (an owner
    could rewind a head for that read and restore it for the check), they are checked apart: none goes back.
    """
    _, stored, documents = stored_run()
    _, files = audit_stored_file_problems()
    problems = [*stored, *files]
    for chain, (head, source) in sorted(named_heads(documents).items()):
        now = heads.get(str(chain))
        if now is None or behind(now, head):
            where = "has no head" if now is None else f"is at seq {now['seq']}"
            problems.append(
                CheckpointProblem(f"chain {chain} {where}, behind seq {head['seq']} of {source}", chain=chain)
            )
    return problems


def _acknowledged(problems: list[CheckpointProblem], *, reason: str, actor: str) -> AuditEvent:
    """Keep, in the trail itself, who signed over which contradictions and why; return that event."""
    from toolhub.audit import audit_append

    return audit_append(
        event_type="audit.checkpoint_acknowledged",
        actor=actor or "system",
        data={"reason": reason[:2000], "problems": [str(problem) for problem in problems[:100]]},
    )


def _run_seqs(delta: dict[str, Any], last: int) -> range:
    """The checkpoints a delta on ``last`` builds on: its base and every one after it (none for a full one)."""
    return range(delta["base"], last + 1) if "base" in delta else range(0)


def _delta(last: int, heads: Heads) -> dict[str, Any]:
    """The fields that make the next checkpoint a delta on the stored ones, or none when a full one is due."""
    latest = trusted_body(AuditCheckpoint.objects.filter(seq=last).first())
    if latest is None:
        return {}
    base = latest.get("base", last)
    if last - base >= DELTAS_PER_FULL:
        return {}
    rows = AuditCheckpoint.objects.filter(seq__gte=base, seq__lte=last).order_by("seq")
    bodies = [body for body in map(trusted_body, rows) if body is not None and builds_on(body, base)]
    if len(bodies) != last - base + 1:  # one is missing, forged or of another run: start afresh
        return {}
    full, deltas = bodies[0], bodies[1:]
    recorded: Heads = dict(full["heads"])
    for delta in deltas:
        recorded.update(delta["heads"])
    moved = {chain: head for chain, head in heads.items() if recorded.get(chain) != head}
    if sum(len(delta["heads"]) for delta in deltas) + len(moved) > len(heads):
        return {}
    return {"heads": moved, "base": base}


def checkpoint_base(checkpoint: AuditCheckpoint) -> int | None:
    """The full checkpoint a stored delta builds on (its ``base``); None for a full one."""
    if '"base":' not in checkpoint.body:  # canonical JSON: a full checkpoint's body has no such key
        return None
    try:
        base = checkpoint_json(checkpoint.body).get("base")
    except (ValueError, AttributeError):
        return None
    return base if isinstance(base, int) else None
