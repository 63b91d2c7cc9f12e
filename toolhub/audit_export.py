"""An export of one tenant's own audit chains that verifies without toolhub (``toolhub.audit_file_verify``).

JSON Lines: a header (format version, tenant, range, each exported chain's seq span, the hash it ends at and
its head at export time, and the heads of the newest signed checkpoint that fall in the range), then one line
per event with every hashed column exactly as hashed (``toolhub.audit_hash_core``), its hash and previous hash,
ordered by chain then seq. Only the tenant's own chains are read (``tenant_chains``), and only its events in them: no
other tenant's event, head or checkpoint entry leaves. Rows stream through a server-side cursor a chunk at a
time; each chain is exported up to the head read for the header, so lines and header always agree.
"""

import datetime as dt
import hashlib
import itertools
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max, Min, Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from toolhub import audit_hash_core, audit_proof
from toolhub.audit import audit_append
from toolhub.audit_hash import HASHED_COLUMNS, canonical_json, hashed_timestamp
from toolhub.checkpoint_checks import named_heads, stored_run
from toolhub.checkpoint_signature import CheckpointKeyError, sign_export_header
from toolhub.exceptions import ToolhubError
from toolhub.models import AuditChainHead, AuditEvent, RetiredTenantSlug, Tenant

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "AuditExport",
    "AuditExportError",
    "ExportRange",
    "RecordedExport",
    "UnknownTenantError",
    "audit_export_lines",
    "audit_export_open",
    "audit_export_start",
    "export_range",
]

#: The header's ``format`` and ``version``: what ``toolhub.audit_file_verify`` reads.
EXPORT_FORMAT = "toolhub-audit-export"
EXPORT_VERSION = 1

_CHUNK = 2000
_LINES_PER_WRITE = 500


class AuditExportError(ToolhubError):
    """The export was not made (unknown tenant, malformed range): nothing was written."""


class UnknownTenantError(AuditExportError):
    """No tenant has the slug: the console answers it as one outside the viewer's boundary (404)."""


@dataclass(frozen=True)
class ExportRange:
    """Which events of each chain: a sequence range, or a time range (``since`` included, ``until`` not)."""

    from_seq: int | None = None
    to_seq: int | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None

    def as_header(self) -> dict[str, Any]:
        return {
            "from_seq": self.from_seq,
            "to_seq": self.to_seq,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
        }


def export_range(*, from_seq: Any = None, to_seq: Any = None, since: Any = None, until: Any = None) -> ExportRange:
    """An ``ExportRange`` from text (a form, the command line); ``AuditExportError`` saying what is wrong."""
    seqs = [_seq(name, value) for name, value in (("from-seq", from_seq), ("to-seq", to_seq))]
    times = [_moment(name, value) for name, value in (("since", since), ("until", until))]
    if any(value is not None for value in seqs) and any(value is not None for value in times):
        raise AuditExportError("Give a sequence range or a time range, not both; nothing was exported.")
    if seqs[0] is not None and seqs[1] is not None and seqs[0] > seqs[1]:
        raise AuditExportError(f"from-seq {seqs[0]} is after to-seq {seqs[1]}; nothing was exported.")
    if times[0] is not None and times[1] is not None and times[0] >= times[1]:
        raise AuditExportError("since must be before until; nothing was exported.")
    return ExportRange(seqs[0], seqs[1], times[0], times[1])


def _seq(name: str, value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        raise AuditExportError(
            f"{name} must be a whole number, not {str(value)[:40]!r}; nothing was exported."
        ) from None
    if number < 1:
        raise AuditExportError(f"{name} must be at least 1 (sequence numbers start at 1); nothing was exported.")
    return number


def _moment(name: str, value: Any) -> dt.datetime | None:
    if value is None or value == "":
        return None
    try:
        moment = parse_datetime(str(value).strip())
    except ValueError:
        moment = None
    if moment is None:
        raise AuditExportError(
            f"{name} must be an ISO 8601 date and time (e.g. 2026-12-01T00:00:00Z), not {str(value)[:40]!r}; "
            "nothing was exported."
        )
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, dt.UTC)


@dataclass(frozen=True)
class AuditExport:
    """What an export holds, fixed before its first line: the header and each chain's seq span."""

    tenant: str
    header: dict[str, Any]
    spans: tuple[tuple[int, int, int], ...]  # (chain, first seq, last seq)


def audit_export_open(tenant: str, scope: ExportRange | None = None) -> AuditExport:
    """Fix what an export of ``tenant``'s own chains holds: read the heads, the spans, the signed checkpoint.

    Raises ``UnknownTenantError`` for a slug no tenant has had: a deleted tenant's trail (its slug retired) is
    exported as it is verified (``known_tenant_chains``), its auditors needing the proof most once it is offboarded.
    """
    scope = scope or ExportRange()
    try:
        chains = audit_proof.known_tenant_chains(tenant)
    except audit_proof.UnknownTenantError:
        raise UnknownTenantError(f"There is no tenant {tenant!r}; nothing was exported.") from None
    if _shares_chains(tenant, chains.start):
        raise AuditExportError(
            f"{tenant}'s chains may hold another tenant's events (two slugs from before chain bases were kept "
            "unique share them): its heads and gaps would tell of the other's, so it is not exported on its own; "
            "verify_audit covers the whole trail. Nothing was exported."
        )
    heads = {
        chain: (seq, head_hash)
        for chain, seq, head_hash in AuditChainHead.objects.filter(chain__gte=chains.start, chain__lt=chains.stop)
        .order_by("chain")
        .values_list("chain", "seq", "hash")
    }
    spans = [span for chain, (seq, _) in heads.items() if (span := _span(tenant, chain, seq, scope)) is not None]
    exported = {chain: (first, last) for chain, first, last in spans}
    ends = _end_hashes(tenant, spans)
    header = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "tenant": tenant,
        "exported_at": timezone.now().isoformat(),
        "range": scope.as_header(),
        "chains": [
            {"chain": chain, "from_seq": first, "to_seq": last, "to_hash": ends.get(chain, "")}
            for chain, first, last in spans
        ],
        "heads": {str(chain): {"seq": heads[chain][0], "hash": heads[chain][1]} for chain in exported},
        "checkpoint": _checkpoint(chains, exported),
    }
    header["signature"] = _signature(header)
    return AuditExport(tenant, header, tuple(spans))


def _signature(header: dict[str, Any]) -> dict[str, str] | None:
    """The header's Ed25519 signature (``audit_file_verify --public-key`` checks it); None without a checkpoint key."""
    try:
        return sign_export_header(header)
    except CheckpointKeyError:
        return None


def _shares_chains(tenant: str, base: int) -> bool:
    """Whether another tenant's slug derives ``tenant``'s first chain (only tenants without a stored base can).

    A deleted tenant's too: its events stay in the chains its slug derives.
    """
    may_share = Q(audit_chain_base__isnull=True) | Q(audit_chain_base=base)
    slugs = Tenant.objects.exclude(slug=tenant).filter(may_share).values_list("slug", flat=True).iterator()
    retired = RetiredTenantSlug.objects.exclude(slug=tenant).filter(may_share).values_list("slug", flat=True).iterator()
    return any(audit_hash_core.tenant_chain_base(slug) == base for slug in itertools.chain(slugs, retired))


def _span(tenant: str, chain: int, head_seq: int, scope: ExportRange) -> tuple[int, int, int] | None:
    """The seq span of ``chain`` the range selects, up to its head; a time range becomes the span it covers."""
    first, last = max(1, scope.from_seq or 1), min(head_seq, scope.to_seq or head_seq)
    if scope.since is not None or scope.until is not None:
        events = AuditEvent.objects.filter(chain=chain, tenant=tenant, seq__gte=first, seq__lte=last)
        if scope.since is not None:
            events = events.filter(created_at__gte=scope.since)
        if scope.until is not None:
            events = events.filter(created_at__lt=scope.until)
        bounds = events.aggregate(first=Min("seq"), last=Max("seq"))
        if bounds["first"] is None:
            return None
        # Every event between the first and last of the range, so the lines link without a gap.
        first, last = bounds["first"], bounds["last"]
    return (chain, first, last) if first <= last else None


def _end_hashes(tenant: str, spans: list[tuple[int, int, int]]) -> dict[int, str]:
    """The hash of the event each span ends at: signed in the header, it pins every line of the span.

    The chain's head pins a span only when the span reaches it; a range ending before (``--to-seq``, ``--until``)
    would otherwise leave its lines rewritable under a valid signature.
    """
    ends: dict[int, str] = {}
    for start in range(0, len(spans), _CHUNK):
        wanted = Q(pk__in=[])
        for chain, _, last in spans[start : start + _CHUNK]:
            wanted |= Q(chain=chain, seq=last)
        rows = AuditEvent.objects.filter(wanted, tenant=tenant).values_list("chain", "hash")
        ends.update(rows)
    return ends


def _checkpoint(chains: range, exported: dict[int, tuple[int, int]]) -> dict[str, Any] | None:
    """The newest signed checkpoint's heads of the exported chains that fall in their spans, if it holds.

    Its signature covers every chain's head, other tenants' too, so it cannot leave with this file: toolhub
    checks it here, and signs the header that holds this part of it with the key derived from it (``_signature``).
    """
    try:
        newest, problems, documents = stored_run(chains)
    except CheckpointKeyError:
        return None
    if newest is None or problems:
        return None
    heads = {
        str(chain): head
        for chain, (head, _) in sorted(named_heads(documents).items())
        if chain in exported and exported[chain][0] <= head["seq"] <= exported[chain][1]
    }
    if not heads:
        return None
    return {"seq": newest.seq, "created_at": newest.created_at.isoformat(), "heads": heads}


def audit_export_lines(export: AuditExport) -> Iterator[str]:
    """The export as text, a chunk of lines at a time: the header line, then every event, chain by chain."""
    yield canonical_json(export.header) + "\n"
    buffer: list[str] = []
    # A transaction keeps each server-side cursor streaming (outside one PostgreSQL materializes it whole).
    with transaction.atomic():
        for chain, first, last in export.spans:
            events = AuditEvent.objects.filter(chain=chain, tenant=export.tenant, seq__gte=first, seq__lte=last)
            rows = events.order_by("seq").values_list(*HASHED_COLUMNS, "hash").iterator(chunk_size=_CHUNK)
            with closing(rows):  # a reading stopped midway closes its cursor inside the transaction it lives in
                for row in rows:
                    buffer.append(canonical_json(_line(row)) + "\n")
                    if len(buffer) >= _LINES_PER_WRITE:
                        yield "".join(buffer)
                        buffer.clear()
    if buffer:
        yield "".join(buffer)


def _line(row: tuple[Any, ...]) -> dict[str, Any]:
    """One event as its hash covers it: ids as text, the time as ``hashed_timestamp`` writes it."""
    line = dict(zip((*HASHED_COLUMNS, "hash"), row, strict=True))
    line["created_at"] = hashed_timestamp(line["created_at"])
    for column in ("call_id", "run_id"):
        line[column] = str(line[column]) if line[column] else None
    return line


def audit_export_start(*, actor: str, tenant: str, scope: ExportRange) -> "RecordedExport":
    """Record in ``tenant``'s own chain that ``actor`` starts exporting ``scope`` (before the export is read).

    The start is recorded (``audit.export_started``) before a line is read, so an export that leaves only in part
    (a download cut off) is on record too; its outcome follows as ``audit.exported`` (every line handed over) or
    ``audit.export_failed`` (with the reason). Only ``audit.exported`` says that an export was made.
    """
    export_id = str(uuid.uuid4())
    with transaction.atomic():
        audit_append(
            event_type="audit.export_started",
            actor=actor,
            data={"export": export_id, "format_version": EXPORT_VERSION, "range": scope.as_header()},
            tenant=tenant,
        )
    return RecordedExport(actor=actor, tenant=tenant, export_id=export_id)


class RecordedExport:
    """The lines of one started export, counted and hashed as they pass, and its outcome recorded exactly once.

    ``complete()`` records ``audit.exported`` (the events, bytes and SHA-256 of what left: a file can be matched
    with its record); ``fail(reason)`` records ``audit.export_failed``. As a response's iterator
    (``complete_when_read``) reading the last line completes it, and a close before that (the client went away)
    or an error while reading fails it.
    """

    def __init__(self, *, actor: str, tenant: str, export_id: str) -> None:
        self.actor, self.tenant, self.export_id = actor, tenant, export_id
        self._lines: Iterator[str] | None = None
        self._complete_when_read = False
        self._digest = hashlib.sha256()
        self._bytes = self._newlines = 0
        self.outcome: str | None = None

    def stream(self, export: AuditExport, *, complete_when_read: bool = False) -> "RecordedExport":
        """Read ``export``'s lines through this record (``complete_when_read``: the last line completes it)."""
        self._lines, self._complete_when_read = audit_export_lines(export), complete_when_read
        return self

    def __iter__(self) -> "RecordedExport":
        return self

    def __next__(self) -> str:
        if self._lines is None:
            raise StopIteration
        try:
            piece = next(self._lines)
        except StopIteration:
            if self._complete_when_read:
                self.complete()
            raise
        except Exception as exc:
            self.fail(f"reading the trail failed ({type(exc).__name__})")
            raise
        data = piece.encode()
        self._digest.update(data)
        self._bytes += len(data)
        self._newlines += piece.count("\n")
        return piece

    def close(self) -> None:
        """Stop reading; an export not completed by then is recorded as failed (it left in part, if at all)."""
        self.fail("stopped before its end (the download was cut off or abandoned)")

    def complete(self) -> None:
        """Record that every line was handed over (``audit.exported``)."""
        self._settle(
            "audit.exported",
            {"events": max(self._newlines - 1, 0), "bytes": self._bytes, "sha256": self._digest.hexdigest()},
        )

    def fail(self, reason: str) -> None:
        """Record that the export did not complete, and why (``audit.export_failed``); nothing if already settled.

        The reading is stopped first: its transaction (held open between the pieces it yields) ends before the
        failure is recorded, or the record would be made inside it and rolled back with it.
        """
        lines, self._lines = self._lines, None
        if lines is not None and hasattr(lines, "close"):
            lines.close()
        self._settle("audit.export_failed", {"reason": reason[:200], "bytes": self._bytes})

    def _settle(self, event_type: str, data: dict[str, Any]) -> None:
        if self.outcome is not None:
            return
        self.outcome = event_type
        with transaction.atomic():
            audit_append(
                event_type=event_type, actor=self.actor, data={"export": self.export_id, **data}, tenant=self.tenant
            )
