"""What contradicts a checkpoint: the database against stored checkpoints, their files and exported documents.

A delta's heads count only with its full checkpoint and every delta between, each signed; the numbering of
the stored checkpoints has no gap since the newest acknowledged one and reaches the newest one a recorded
verification compared with; every named head event is still there, unchanged, and no head stands behind one
a checkpoint named.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import connection
from django.db.models import F, Subquery, Window
from django.db.models.functions import Coalesce, Lag

from toolhub.checkpoint_files import file_name, numbered_files
from toolhub.checkpoint_signature import (
    CheckpointKeyError,
    builds_on,
    checkpoint_json,
    forged_reason,
    signed_body,
    stored_body,
    trusted_body,
)
from toolhub.conf import toolhub_settings
from toolhub.models import AuditChainHead, AuditCheckpoint, AuditEvent, AuditVerification

__all__ = [
    "CheckpointProblem",
    "audit_checkpoint_problems",
    "audit_stored_checkpoint_problems",
    "audit_stored_file_problems",
    "checkpoint_numbering_problems",
    "behind",
    "named_heads",
    "stored_run",
]

# Recorded events looked up per query when checking a checkpoint's heads.
_HEADS_PER_QUERY = 500


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
    A delta's own heads are compared; ``audit_checkpoint`` exports full checkpoints, which stand alone.
    """
    body = signed_body(checkpoint)
    if body is None:
        return [_forged(source, _unsigned(checkpoint))]
    return _head_problems(named_heads([(source, body)]), chains)


def audit_stored_checkpoint_problems(
    chains: range | None = None,
) -> tuple[AuditCheckpoint | None, list[CheckpointProblem]]:
    """Check the newest stored checkpoint, with those it builds on, (and the numbering of all) against the database.

    Returns the newest checkpoint (None when none was stored yet) and what contradicts it. Raises
    ``CheckpointKeyError`` when checkpoints exist but the key to check them is not configured.
    """
    newest, problems, _ = stored_run(chains)
    return newest, problems


def stored_run(
    chains: range | None = None,
) -> tuple[AuditCheckpoint | None, list[CheckpointProblem], list[tuple[str, dict[str, Any] | None]]]:
    """The newest stored checkpoint, what contradicts it, and the signed documents of its run (oldest first)."""
    newest = AuditCheckpoint.objects.order_by("-seq").first()
    problems = checkpoint_numbering_problems()
    if newest is None:
        return None, problems, []
    source = f"stored checkpoint #{newest.seq}"
    body = trusted_body(newest)
    if body is None:
        return newest, [*problems, _forged(source, stored_body(newest))], []
    documents: list[tuple[str, dict[str, Any] | None]] = []
    if "base" in body:
        # A stored checkpoint missing in between is a gap in the numbering, reported above.
        rows = AuditCheckpoint.objects.filter(seq__gte=body["base"], seq__lt=newest.seq).order_by("seq")
        documents = [(f"stored checkpoint #{row.seq}", trusted_body(row)) for row in rows]
    documents.append((source, body))
    problems += _run_problems(documents, body) + _went_back(documents, chains)
    return newest, problems + _head_problems(named_heads(documents), chains), documents


def _went_back(documents: list[tuple[str, dict[str, Any] | None]], chains: range | None) -> list[CheckpointProblem]:
    """A head a later checkpoint of the run names behind (or beside, with another hash) an earlier one's.

    Heads only move forward; each checkpoint of a run is checked, not only the latest naming of a chain.
    """
    problems, seen = [], {}
    for source, body in documents:
        for chain, head in (body or {}).get("heads", {}).items():
            if chains is not None and int(chain) not in chains:
                continue
            earlier = seen.get(chain)
            if earlier is not None and behind(head, earlier[0]):
                problems.append(
                    CheckpointProblem(
                        f"chain {chain}: {source} names seq {head['seq']}, behind seq {earlier[0]['seq']} of "
                        f"{earlier[1]}: a head went back",
                        chain=int(chain),
                    )
                )
            seen[chain] = (head, source)
    return problems


def behind(head: dict[str, Any], earlier: dict[str, Any]) -> bool:
    """Whether ``head`` stands behind ``earlier`` (a lower seq, or the same seq with another hash)."""
    seq, before = int(head.get("seq", 0)), int(earlier.get("seq", 0))
    return seq < before or (seq == before and head.get("hash") != earlier.get("hash"))


def audit_stored_file_problems(chains: range | None = None) -> tuple[Path | None, list[CheckpointProblem]]:
    """Check the newest checkpoint file of ``AUDIT_CHECKPOINT_DIR`` (when that is set), with those it builds on."""
    directory = toolhub_settings().AUDIT_CHECKPOINT_DIR
    files = numbered_files(Path(directory)) if directory else {}
    if not files:
        return None, []
    newest = files[max(files)]
    try:
        document = checkpoint_json(newest.read_text())
    except (OSError, ValueError) as exc:
        return newest, [CheckpointProblem(f"checkpoint file {newest.name}: cannot be read ({type(exc).__name__})")]
    if not isinstance(document, dict):
        return newest, [CheckpointProblem(f"checkpoint file {newest.name}: not a checkpoint")]
    source = f"checkpoint file {newest.name}"
    body = signed_body(document)
    if body is None:
        return newest, [_forged(source, _unsigned(document))]
    problems = _misnamed(newest, body)
    documents: list[tuple[str, dict[str, Any] | None]] = []
    if "base" in body and isinstance(body["base"], int) and isinstance(body.get("seq"), int):
        for seq in range(body["base"], body["seq"]):
            path = newest.parent / file_name(seq)
            try:
                earlier = checkpoint_json(path.read_text())
            except (OSError, ValueError):
                problems.append(
                    CheckpointProblem(
                        f"checkpoint file {path.name}, which {newest.name} builds on, is missing or unreadable"
                    )
                )
                continue
            earlier_body = signed_body(earlier) if isinstance(earlier, dict) else None
            renamed = _misnamed(path, earlier_body) if earlier_body is not None else []
            problems += renamed
            if not renamed:
                documents.append((f"checkpoint file {path.name}", earlier_body))
    documents.append((source, body))
    problems += _run_problems(documents, body)
    return newest, problems + _head_problems(named_heads(documents), chains)


def _misnamed(path: Path, body: dict[str, Any]) -> list[CheckpointProblem]:
    """A file must hold the checkpoint its name numbers: a signed copy under another number would hide heads."""
    seq = body.get("seq")
    if isinstance(seq, int) and path.name == file_name(seq):
        return []
    return [CheckpointProblem(f"checkpoint file {path.name} holds checkpoint #{seq}: it was renamed")]


def _forged(source: str, body: Any = None) -> CheckpointProblem:
    """A checkpoint whose signature does not verify; with its body, which key it names and why that fails."""
    reason = forged_reason(body)
    detail = f" ({reason})" if reason else ""
    return CheckpointProblem(f"{source}: signature does not match: it was altered or signed with another key{detail}")


def _unsigned(document: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key != "signature"}


def _run_problems(
    documents: list[tuple[str, dict[str, Any] | None]], newest: dict[str, Any]
) -> list[CheckpointProblem]:
    """A delta's heads count only with its full checkpoint and every delta between: each signed, each of that run."""
    base = newest.get("base", newest.get("seq"))
    problems = []
    for source, body in documents:
        if body is None:
            problems.append(_forged(source))
        elif not builds_on(body, base):
            problems.append(
                CheckpointProblem(f"{source}: not of full checkpoint #{base} and its deltas, as the newest says")
            )
    return problems


def named_heads(documents: list[tuple[str, dict[str, Any] | None]]) -> dict[int, tuple[dict[str, Any], str]]:
    """Each named chain's head and the checkpoint that named it, a later checkpoint's over an earlier's."""
    named: dict[int, tuple[dict[str, Any], str]] = {}
    for source, body in documents:
        if body is not None:
            named.update((int(chain), (head, source)) for chain, head in body["heads"].items())
    return named


def checkpoint_numbering_problems() -> list[CheckpointProblem]:
    """Stored checkpoints deleted (a gap in their numbering, or the newest ones gone): found with no key.

    Evidence of tampering that stays evidence where the key is not configured (``stored_run`` raises
    ``CheckpointKeyError`` then, at the first signature): a verification keeps it beside "cannot verify".
    """
    gap = _first_numbering_gap()
    return [CheckpointProblem(gap)] if gap is not None else []


def _first_numbering_gap() -> str | None:
    """Checkpoints are numbered 1, 2, 3, ...: name the first number that is missing.

    Since the newest acknowledged checkpoint only: a gap before it was signed over by a person, with the
    reason in the trail (``audit.checkpoint_acknowledged``).
    """
    since = _newest_acknowledged()
    stored = AuditCheckpoint.objects.filter(seq__gte=since)
    first = stored.order_by("seq").values_list("seq", flat=True).first()
    if not since and first is not None and first != 1:
        return f"stored checkpoint #1 is missing (the oldest left is #{first}): checkpoints were deleted"
    numbered = stored.annotate(previous=Window(Lag("seq"), order_by=F("seq").asc()))
    after_gap = numbered.filter(previous__lt=F("seq") - 1).order_by("seq").values_list("seq", "previous").first()
    if after_gap is not None:
        seq, previous = after_gap
        return f"stored checkpoint #{previous + 1} is missing (the next left is #{seq}): checkpoints were deleted"
    return _deleted_newest(since)


def _deleted_newest(since: int) -> str | None:
    """A checkpoint an earlier verification (of the whole trail or a tenant's) compared with, past every one stored now.

    Deleting the newest checkpoints (with the tail they signed) leaves no gap in the numbering; the records of
    ``verify_audit`` runs, append-only too, still name the newest they saw. Records made before the newest
    acknowledged checkpoint do not count: a person signed over what was lost before it.
    """
    stored = AuditCheckpoint.objects.order_by("-seq").values("seq")[:1]
    # A tenant's run (the console's "verify now") read the same numbering: its record is as good a witness.
    records = AuditVerification.objects.filter(checkpoint_seq__gt=Coalesce(Subquery(stored), 0))
    if since:
        acknowledged = AuditCheckpoint.objects.filter(seq=since).values("created_at")
        records = records.filter(finished_at__gt=Subquery(acknowledged))
    record = records.order_by("-finished_at").values_list("checkpoint_seq", "finished_at").first()
    if record is None:  # one query, on every verification and checkpoint: the usual answer
        return None
    seq, when = record
    newest = AuditCheckpoint.objects.order_by("-seq").values_list("seq", flat=True).first()
    left = f"the newest left is #{newest}" if newest else "none is left"
    return (
        f"stored checkpoint #{seq} is missing (verify_audit compared the trail with it on {when.isoformat()}; "
        f"{left}): checkpoints were deleted"
    )


def _newest_acknowledged() -> int:
    """The number of the newest checkpoint a person signed over problems with (its signed body says so), or 0."""
    candidates = AuditCheckpoint.objects.filter(acknowledged=True).order_by("-seq")
    for row in candidates[:10]:  # a forged row with the marker is not signed: the next one is tried
        try:
            body = trusted_body(row)
        except CheckpointKeyError:
            # Without the key the marker is taken at its word: a gap it may cover is never called tampering.
            return row.seq
        if body is not None and body.get("acknowledged"):
            return row.seq
    return 0


def _head_problems(
    named: dict[int, tuple[dict[str, Any], str]], chains: range | None = None
) -> list[CheckpointProblem]:
    """Each chain a checkpoint named must still hold the named head event, unchanged, and its head row."""
    wanted = {
        chain: (int(head["seq"]), str(head.get("hash", "")), source)
        for chain, (head, source) in named.items()
        if int(head["seq"]) and (chains is None or chain in chains)
    }
    rows = AuditChainHead.objects.all()
    if chains is not None:
        rows = rows.filter(chain__gte=chains.start, chain__lt=chains.stop)
    current = dict(rows.values_list("chain", "seq"))
    recorded = _recorded_events({chain: seq for chain, (seq, _, _) in wanted.items()})
    problems = []
    for chain, (seq, digest, source) in sorted(wanted.items()):
        reasons = []
        head_seq = current.get(chain)
        if head_seq is None:
            reasons.append("its chain head is missing: the chain was wiped")
        elif head_seq < seq:
            reasons.append(f"its chain head went back to seq {head_seq}")
        event = recorded.get(chain)
        if event is None:
            newest = AuditEvent.objects.filter(chain=chain).order_by("-seq").values_list("id", "seq").first()
            left = f"the newest left is event #{newest[0]} (seq {newest[1]})" if newest else "no event of it is left"
            reasons.insert(0, f"the checkpoint's head (seq {seq}) is missing: the tail was truncated; {left}")
        elif event[1] != digest:
            reasons.insert(0, f"event #{event[0]} (seq {seq}) differs from the checkpoint: rewritten")
        if reasons:
            problems.append(CheckpointProblem(f"chain {chain}: {'; '.join(reasons)} (per {source})", chain))
    return problems


def _recorded_events(seqs: dict[int, int]) -> dict[int, tuple[int, str]]:
    """The id and hash of the event at each given chain's seq, by chain; a few hundred chains per query.

    One join against the pairs as a table of values: an ORM filter OR-ing as many (chain, seq) pairs
    costs more to build in Python than the query costs to run.
    """
    events, quote = AuditEvent._meta.db_table, connection.ops.quote_name
    pairs = sorted(seqs.items())
    found: dict[int, tuple[int, str]] = {}
    with connection.cursor() as cursor:
        for start in range(0, len(pairs), _HEADS_PER_QUERY):
            batch = pairs[start : start + _HEADS_PER_QUERY]
            values = ", ".join(["(CAST(%s AS BIGINT), CAST(%s AS BIGINT))"] * len(batch))
            cursor.execute(
                f"WITH wanted (chain, seq) AS (VALUES {values}) "  # placeholders only: values are parameters
                f"SELECT e.id, e.chain, e.hash FROM {quote(events)} e "
                "JOIN wanted ON e.chain = wanted.chain AND e.seq = wanted.seq",
                [number for pair in batch for number in pair],
            )
            for pk, chain, digest in cursor.fetchall():
                found[chain] = (pk, digest)
    return found
