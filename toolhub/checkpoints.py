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

import errno
import hashlib
import hmac
import json
import os
import re
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
    "DELTAS_PER_FULL",
    "audit_checkpoint_create",
    "CheckpointRefusedError",
    "CheckpointProblem",
    "audit_checkpoint_problems",
    "audit_stored_checkpoint_problems",
    "checkpoint_base",
    "CheckpointKeyError",
]

# Serializes numbering of checkpoints between concurrent writers (beat and a manual command).
_NUMBERING_LOCK = 0x746F6F6C6875_0001
#: The most deltas a full checkpoint carries: a verification reads at most this many more checkpoints
#: (at the default interval of 300 s, a full checkpoint at least once a day).
DELTAS_PER_FULL = 287
# Recorded events looked up per query when checking a checkpoint's heads.
_HEADS_PER_QUERY = 500

Heads = dict[str, dict[str, Any]]


class CheckpointKeyError(ToolhubError):
    """The signing key is not configured."""


class CheckpointRefusedError(ToolhubError):
    """The trail no longer matches what was signed: nothing is signed over it until someone acknowledges it."""

    def __init__(self, problems: list["CheckpointProblem"]) -> None:
        self.problems = problems
        shown = "; ".join(str(problem) for problem in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(
            f"No checkpoint signed: the audit trail contradicts what was signed before: {shown}{more}. "
            "verify_audit reports it. After investigating, sign over it with "
            'manage.py audit_checkpoint --acknowledge "<why>" (audited with these problems).'
        )


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


def audit_checkpoint_create(*, full: bool = False, acknowledge: str = "", actor: str = "") -> dict[str, Any]:
    """Sign the chains' heads and keep them as the next stored checkpoint; return it as a document.

    A delta (only the heads that moved, and ``base``) unless ``full`` or a full one is due (module doc).
    Without the key nothing is written (``CheckpointKeyError``). When the trail contradicts the checkpoints
    signed before, nothing is written either (``CheckpointRefusedError``), unless ``acknowledge`` says why
    signing over it is right: then a full checkpoint is signed, after an ``audit.checkpoint_acknowledged``
    event holding the reason, ``actor`` and the problems.
    """
    _key()
    directory = toolhub_settings().AUDIT_CHECKPOINT_DIR
    with transaction.atomic():
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
            _acknowledged(problems, reason=acknowledge.strip(), actor=actor)
            full = True
            heads = _current_heads()  # the acknowledgement's own event is covered by the checkpoint it opens
        last = AuditCheckpoint.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
        if directory:
            # Copies numbered beyond the stored checkpoints (those were deleted, or the database restored):
            # never overwritten, the next number follows the newest copy.
            last = max([last, *_numbered_files(Path(directory))])
        now = timezone.now()
        body: dict[str, Any] = {"seq": last + 1, "created_at": now.isoformat(), "heads": heads}
        if problems:
            body["acknowledged"] = acknowledge.strip()[:500]  # signed: earlier gaps no longer count (see above)
        if not full and last:
            delta = _delta(last, heads)
            # The directory's copies must stand without the database: a delta there needs its base's file
            # and every file between (missing when the directory was set after they were stored).
            if not directory or all((Path(directory) / _file_name(seq)).is_file() for seq in _run_seqs(delta, last)):
                body.update(delta)
        text = canonical_json(body)
        signature = _sign(text)
        AuditCheckpoint.objects.create(
            seq=last + 1, created_at=now, body=text, signature=signature, acknowledged=bool(problems)
        )
    document = {**body, "signature": signature}
    if directory:
        _write_copy(Path(directory), _file_name(last + 1), json.dumps(document, indent=2, sort_keys=True))
    return document


def _current_heads() -> Heads:
    return {str(head.chain): {"seq": head.seq, "hash": head.hash} for head in AuditChainHead.objects.order_by("chain")}


def _write_copy(directory: Path, name: str, text: str) -> None:
    """Write a checkpoint's file whole or not at all, and never over an existing one.

    Written and synced under a temporary name, then linked to its own (which fails if it exists): a write
    cut short (a full disk) leaves no half file that would read as tampering.
    """
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / f".{name}.{os.getpid()}.tmp"
    try:
        with temporary.open("w") as copy:
            copy.write(text)
            copy.flush()
            os.fsync(copy.fileno())
        try:
            os.link(temporary, directory / name)
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            _write_exclusively(directory / name, text)  # a share without hard links (SMB, FUSE mounts)
    finally:
        temporary.unlink(missing_ok=True)


#: What a file system without hard links answers to ``os.link``.
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV}


def _write_exclusively(path: Path, text: str) -> None:
    """Create ``path`` (never over an existing file), write and sync it; remove it if that fails midway."""
    descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        with os.fdopen(descriptor, "w") as copy:
            copy.write(text)
            copy.flush()
            os.fsync(copy.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _standing_problems(heads: Heads) -> list["CheckpointProblem"]:
    """What contradicts the newest stored checkpoint (with its run) or the newest file, or the heads to sign.

    In the database, and in ``heads``, the heads about to be signed: read in another statement (an owner
    could rewind a head for that read and restore it for the check), they are checked apart: none goes back.
    """
    _, stored, documents = _stored_run()
    _, files = audit_stored_file_problems()
    problems = [*stored, *files]
    for chain, (head, source) in sorted(_named(documents).items()):
        now = heads.get(str(chain))
        if now is None or _behind(now, head):
            where = "has no head" if now is None else f"is at seq {now['seq']}"
            problems.append(
                CheckpointProblem(f"chain {chain} {where}, behind seq {head['seq']} of {source}", chain=chain)
            )
    return problems


def _acknowledged(problems: list["CheckpointProblem"], *, reason: str, actor: str) -> None:
    """Keep, in the trail itself, who signed over which contradictions and why."""
    from toolhub.audit import audit_append

    audit_append(
        event_type="audit.checkpoint_acknowledged",
        actor=actor or "system",
        data={"reason": reason[:2000], "problems": [str(problem) for problem in problems[:100]]},
    )


def _numbered_files(directory: Path) -> dict[int, Path]:
    """The checkpoint copies of ``directory`` by number; other files (an export kept beside them) are not copies."""
    numbered = (_FILE_NAME.fullmatch(path.name) for path in directory.glob("audit-checkpoint-*.json"))
    return {int(match.group(1)): directory / match.group(0) for match in numbered if match}


_FILE_NAME = re.compile(r"audit-checkpoint-(\d{12})\.json")


def _run_seqs(delta: dict[str, Any], last: int) -> range:
    """The checkpoints a delta on ``last`` builds on: its base and every one after it (none for a full one)."""
    return range(delta["base"], last + 1) if "base" in delta else range(0)


def _delta(last: int, heads: Heads) -> dict[str, Any]:
    """The fields that make the next checkpoint a delta on the stored ones, or none when a full one is due."""
    latest = _trusted(AuditCheckpoint.objects.filter(seq=last).first())
    if latest is None:
        return {}
    base = latest.get("base", last)
    if last - base >= DELTAS_PER_FULL:
        return {}
    rows = AuditCheckpoint.objects.filter(seq__gte=base, seq__lte=last).order_by("seq")
    bodies = [body for body in map(_trusted, rows) if body is not None and _builds_on(body, base)]
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


def _trusted(row: AuditCheckpoint | None) -> dict[str, Any] | None:
    """A stored checkpoint's body when its signature and number hold (a forged one is never built on)."""
    if row is None or not hmac.compare_digest(_sign(row.body), row.signature):
        return None
    try:
        body = json.loads(row.body)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("seq") != row.seq or not isinstance(body.get("heads"), dict):
        return None
    return body


def _builds_on(body: dict[str, Any], base: Any) -> bool:
    """Whether a checkpoint belongs to the full checkpoint ``base``'s run: that full one, or a delta on it."""
    seq = body.get("seq")
    return bool(body.get("base", seq) == base) and (seq == base) == ("base" not in body)


def checkpoint_base(checkpoint: AuditCheckpoint) -> int | None:
    """The full checkpoint a stored delta builds on (its ``base``); None for a full one."""
    if '"base":' not in checkpoint.body:  # canonical JSON: a full checkpoint's body has no such key
        return None
    try:
        base = json.loads(checkpoint.body).get("base")
    except (ValueError, AttributeError):
        return None
    return base if isinstance(base, int) else None


def _file_name(seq: int) -> str:
    return f"audit-checkpoint-{seq:012d}.json"


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
    body = _signed_body(checkpoint)
    if body is None:
        return [_forged(source)]
    return _head_problems(_named([(source, body)]), chains)


def audit_stored_checkpoint_problems(
    chains: range | None = None,
) -> tuple[AuditCheckpoint | None, list[CheckpointProblem]]:
    """Check the newest stored checkpoint, with those it builds on, (and the numbering of all) against the database.

    Returns the newest checkpoint (None when none was stored yet) and what contradicts it. Raises
    ``CheckpointKeyError`` when checkpoints exist but the key to check them is not configured.
    """
    newest, problems, _ = _stored_run(chains)
    return newest, problems


def _stored_run(
    chains: range | None = None,
) -> tuple[AuditCheckpoint | None, list[CheckpointProblem], list[tuple[str, dict[str, Any] | None]]]:
    """The newest stored checkpoint, what contradicts it, and the signed documents of its run (oldest first)."""
    newest = AuditCheckpoint.objects.order_by("-seq").first()
    problems: list[CheckpointProblem] = []
    gap = _first_numbering_gap()
    if gap is not None:
        problems.append(CheckpointProblem(gap))
    if newest is None:
        return None, problems, []
    source = f"stored checkpoint #{newest.seq}"
    body = _trusted(newest)
    if body is None:
        return newest, [*problems, _forged(source)], []
    documents: list[tuple[str, dict[str, Any] | None]] = []
    if "base" in body:
        # A stored checkpoint missing in between is a gap in the numbering, reported above.
        rows = AuditCheckpoint.objects.filter(seq__gte=body["base"], seq__lt=newest.seq).order_by("seq")
        documents = [(f"stored checkpoint #{row.seq}", _trusted(row)) for row in rows]
    documents.append((source, body))
    problems += _run_problems(documents, body) + _went_back(documents, chains)
    return newest, problems + _head_problems(_named(documents), chains), documents


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
            if earlier is not None and _behind(head, earlier[0]):
                problems.append(
                    CheckpointProblem(
                        f"chain {chain}: {source} names seq {head['seq']}, behind seq {earlier[0]['seq']} of "
                        f"{earlier[1]}: a head went back",
                        chain=int(chain),
                    )
                )
            seen[chain] = (head, source)
    return problems


def _behind(head: dict[str, Any], earlier: dict[str, Any]) -> bool:
    """Whether ``head`` stands behind ``earlier`` (a lower seq, or the same seq with another hash)."""
    seq, before = int(head.get("seq", 0)), int(earlier.get("seq", 0))
    return seq < before or (seq == before and head.get("hash") != earlier.get("hash"))


def audit_stored_file_problems(chains: range | None = None) -> tuple[Path | None, list[CheckpointProblem]]:
    """Check the newest checkpoint file of ``AUDIT_CHECKPOINT_DIR`` (when that is set), with those it builds on."""
    directory = toolhub_settings().AUDIT_CHECKPOINT_DIR
    files = _numbered_files(Path(directory)) if directory else {}
    if not files:
        return None, []
    newest = files[max(files)]
    try:
        document = json.loads(newest.read_text())
    except (OSError, ValueError) as exc:
        return newest, [CheckpointProblem(f"checkpoint file {newest.name}: cannot be read ({type(exc).__name__})")]
    if not isinstance(document, dict):
        return newest, [CheckpointProblem(f"checkpoint file {newest.name}: not a checkpoint")]
    source = f"checkpoint file {newest.name}"
    body = _signed_body(document)
    if body is None:
        return newest, [_forged(source)]
    problems = _misnamed(newest, body)
    documents: list[tuple[str, dict[str, Any] | None]] = []
    if "base" in body and isinstance(body["base"], int) and isinstance(body.get("seq"), int):
        for seq in range(body["base"], body["seq"]):
            path = newest.parent / _file_name(seq)
            try:
                earlier = json.loads(path.read_text())
            except (OSError, ValueError):
                problems.append(
                    CheckpointProblem(
                        f"checkpoint file {path.name}, which {newest.name} builds on, is missing or unreadable"
                    )
                )
                continue
            earlier_body = _signed_body(earlier) if isinstance(earlier, dict) else None
            renamed = _misnamed(path, earlier_body) if earlier_body is not None else []
            problems += renamed
            if not renamed:
                documents.append((f"checkpoint file {path.name}", earlier_body))
    documents.append((source, body))
    problems += _run_problems(documents, body)
    return newest, problems + _head_problems(_named(documents), chains)


def _misnamed(path: Path, body: dict[str, Any]) -> list[CheckpointProblem]:
    """A file must hold the checkpoint its name numbers: a signed copy under another number would hide heads."""
    seq = body.get("seq")
    if isinstance(seq, int) and path.name == _file_name(seq):
        return []
    return [CheckpointProblem(f"checkpoint file {path.name} holds checkpoint #{seq}: it was renamed")]


def _forged(source: str) -> CheckpointProblem:
    return CheckpointProblem(f"{source}: signature does not match: it was altered or signed with another key")


def _signed_body(document: dict[str, Any]) -> dict[str, Any] | None:
    """A checkpoint document's body when its signature holds and it names heads; None when it does not."""
    body = {key: value for key, value in document.items() if key != "signature"}
    if not isinstance(body.get("heads"), dict) or not hmac.compare_digest(
        _sign(canonical_json(body)), str(document.get("signature", ""))
    ):
        return None
    return body


def _run_problems(
    documents: list[tuple[str, dict[str, Any] | None]], newest: dict[str, Any]
) -> list[CheckpointProblem]:
    """A delta's heads count only with its full checkpoint and every delta between: each signed, each of that run."""
    base = newest.get("base", newest.get("seq"))
    problems = []
    for source, body in documents:
        if body is None:
            problems.append(_forged(source))
        elif not _builds_on(body, base):
            problems.append(
                CheckpointProblem(f"{source}: not of full checkpoint #{base} and its deltas, as the newest says")
            )
    return problems


def _named(documents: list[tuple[str, dict[str, Any] | None]]) -> dict[int, tuple[dict[str, Any], str]]:
    """Each named chain's head and the checkpoint that named it, a later checkpoint's over an earlier's."""
    named: dict[int, tuple[dict[str, Any], str]] = {}
    for source, body in documents:
        if body is not None:
            named.update((int(chain), (head, source)) for chain, head in body["heads"].items())
    return named


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
    return None


def _newest_acknowledged() -> int:
    """The number of the newest checkpoint a person signed over problems with (its signed body says so), or 0."""
    candidates = AuditCheckpoint.objects.filter(acknowledged=True).order_by("-seq")
    for row in candidates[:10]:  # a forged row with the marker is not signed: the next one is tried
        body = _trusted(row)
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
