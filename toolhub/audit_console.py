"""What the audit console shows: one call's timeline re-verified, and the trail's last proof of integrity.

A call's events are checked on the page itself: each event's hash is recomputed from its stored
columns and its links to the events before and after it in its chain are compared. That proves the
call's own entries unaltered and still in place, in a few index lookups; the whole trail's proof is
``verify_audit``, whose newest result the index shows with the newest signed checkpoint.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from toolhub.audit_hash import HASHED_COLUMNS, hash_columns, in_own_chain
from toolhub.audit_problem import UNVERIFIABLE, TrailProblem
from toolhub.models import AuditCheckpoint, AuditEvent, AuditVerification
from toolhub.tenancy import tenant_scope

__all__ = [
    "TimelineEntry",
    "CallTimeline",
    "call_timeline",
    "ChainStatus",
    "TenantTrail",
    "VERIFY_PERMISSION",
    "audit_chain_status",
    "audit_verification_record",
    "own_chain_position",
    "own_positions_shown",
]

#: At most this many problems are kept with a verification record.
_KEPT_PROBLEMS = 20


@dataclass(frozen=True)
class TimelineEntry:
    """One event of a call with what re-verifying it found (empty ``problems``: verified)."""

    event: AuditEvent
    problems: tuple[str, ...]

    @property
    def verified(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class CallTimeline:
    entries: list[TimelineEntry] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return bool(self.entries) and all(entry.verified for entry in self.entries)


def call_timeline(call_id: Any) -> CallTimeline:
    """The call's events in order, each re-verified: its hash, and its links to its chain neighbours.

    Three indexed queries whatever the trail's size: the call's events, then the hashes of the events
    just before and just after each of them in their chains. The problems name no sequence number: the
    page is read by tenant-scoped staff, and older events share the platform's chains with every tenant's
    (``verify_audit`` names them).
    """
    events = list(AuditEvent.objects.filter(call_id=call_id).order_by("created_at", "chain", "seq"))
    if not events:
        return CallTimeline()
    neighbours: dict[tuple[int, int], tuple[str, str]] = {}
    by_chain: dict[int, set[int]] = {}
    for event in events:
        by_chain.setdefault(event.chain, set()).update({event.seq - 1, event.seq + 1})
    for chain, seqs in by_chain.items():
        for seq, prev_hash, stored_hash in AuditEvent.objects.filter(chain=chain, seq__in=sorted(seqs)).values_list(
            "seq", "prev_hash", "hash"
        ):
            neighbours[(chain, seq)] = (prev_hash, stored_hash)
    heads = _head_seqs(by_chain)
    entries = []
    for event in events:
        problems = []
        if hash_columns(*(getattr(event, column) for column in HASHED_COLUMNS)) != event.hash:
            problems.append("hash does not match its content: event was altered")
        before = neighbours.get((event.chain, event.seq - 1))
        if event.seq == 1:
            if event.prev_hash:
                problems.append("first event of its chain names a previous hash")
        elif before is None:
            problems.append("the event before it in its chain is missing")
        elif before[1] != event.prev_hash:
            problems.append("previous hash does not match the event before it: chain was altered")
        after = neighbours.get((event.chain, event.seq + 1))
        if after is None:
            if heads.get(event.chain, 0) > event.seq:
                problems.append("the event after it in its chain is missing")
        elif after[0] != event.hash:
            problems.append("the event after it does not link to it: chain was altered")
        entries.append(TimelineEntry(event, tuple(problems)))
    return CallTimeline(entries)


def own_chain_position(event: AuditEvent) -> str | None:
    """``"chain · seq"`` when ``event`` is in a chain of its own tenant, else None.

    A tenant's chain holds that tenant's events alone; in the platform's shared chains a position would
    count every tenant's events.
    """
    return f"{event.chain} · {event.seq}" if in_own_chain(event.chain, event.tenant) else None


def own_positions_shown() -> bool:
    """Whether every tenant's chains are its alone: no tenant from before chain bases were kept unique lacks one.

    Such a tenant's slug might share another's chains (about one chance in 10^12 a pair); while one
    exists, positions stay hidden from tenant staff altogether.
    """
    from toolhub.models import Tenant

    return not Tenant.objects.filter(audit_chain_base__isnull=True).exists()


def _head_seqs(chains: dict[int, set[int]]) -> dict[int, int]:
    from toolhub.models import AuditChainHead

    return dict(AuditChainHead.objects.filter(chain__in=list(chains)).values_list("chain", "seq"))


@dataclass(frozen=True)
class TenantTrail:
    """One tenant's own chains as its staff see them: the newest verification of them (None: never)."""

    tenant: str
    verification: AuditVerification | None
    #: Whether the viewer may ask a worker to verify them now (``toolhub.audit_proof``).
    may_request: bool = False


@dataclass(frozen=True)
class ChainStatus:
    """The newest signed checkpoint and the newest ``verify_audit`` run, for the console's index."""

    checkpoint: AuditCheckpoint | None
    verification: AuditVerification | None
    #: Whether the viewer may read the platform-wide figures (events checked, problems, checkpoint numbers):
    #: those who cross the tenant boundary; a tenant's staff see the state and the times only.
    detailed: bool = False
    #: For a tenant's staff: each of their tenants' own chains, with the newest verification of them in
    #: full (its count and problems are that tenant's alone).
    tenant_trails: tuple[TenantTrail, ...] = ()

    @property
    def state(self) -> str:
        """``verified``, ``unverifiable``, ``failed`` (found tampered) or ``never verified``."""
        if self.verification is None:
            return "never verified"
        return self.verification.state


def audit_chain_status(user: Any) -> ChainStatus:
    """The trail's state as ``user`` may read it: single-row reads on their ordering indexes.

    A verification of the whole trail covers every tenant's chains, so its count and its problems (which
    name events) are the platform's: shown only to people who cross the tenant boundary. A tenant's staff
    see, in full, the newest verification of their own tenants' chains (at most ``_SHOWN_TENANTS``), and
    those who may view calls may ask for a new one.
    """
    checkpoint = AuditCheckpoint.objects.order_by("-seq").defer("body").first()
    verification = AuditVerification.objects.filter(tenant="").order_by("-finished_at").first()
    scope = tenant_scope(user)
    trails: list[TenantTrail] = []
    if not scope.everything:
        may_request = bool(user) and user.has_perm(VERIFY_PERMISSION)
        shown = sorted(scope.tenants)[:_SHOWN_TENANTS]
        newest = _newest_verifications(shown)
        trails = [TenantTrail(tenant, newest.get(tenant), may_request) for tenant in shown]
    return ChainStatus(checkpoint, verification, detailed=scope.everything, tenant_trails=tuple(trails))


def _newest_verifications(tenants: list[str]) -> dict[str, AuditVerification]:
    """Each tenant's newest verification of its own chains, in one query (one index probe per tenant)."""
    if not tenants:
        return {}
    from django.db.models import OuterRef, Subquery

    from toolhub.models import Tenant

    newest_of_tenant = AuditVerification.objects.filter(tenant=OuterRef("slug")).order_by("-finished_at")
    newest_ids = Tenant.objects.filter(slug__in=tenants).values(pk=Subquery(newest_of_tenant.values("pk")[:1]))
    return {row.tenant: row for row in AuditVerification.objects.filter(pk__in=newest_ids)}


#: Who may ask for a verification of their tenants' chains from the console: those who read their calls.
VERIFY_PERMISSION = "toolhub.view_toolcall"


#: A tenant's staff see their own verifications for at most this many of their tenants.
_SHOWN_TENANTS = 5


def audit_verification_record(
    *,
    started_at: Any,
    events_checked: int,
    problems: Sequence[TrailProblem],
    checkpoint_seq: int | None,
    tenant: str = "",
) -> AuditVerification:
    """Keep the outcome of one ``verify_audit`` run (the first problems only) for the console.

    ``tenant``: the run verified that tenant's chains only (empty: the whole trail). A run whose every problem
    is ``UNVERIFIABLE`` is kept as such, judged on all of them (not the kept few): an auditor reads "unverifiable",
    not "failed", where nothing was found altered.
    """
    return AuditVerification.objects.create(
        tenant=tenant,
        started_at=started_at,
        finished_at=timezone.now(),
        events_checked=events_checked,
        ok=not problems,
        unverifiable=bool(problems) and all(problem.kind == UNVERIFIABLE for problem in problems),
        problems="\n".join(problem.recorded for problem in problems[:_KEPT_PROBLEMS]),
        checkpoint_seq=checkpoint_seq,
    )
