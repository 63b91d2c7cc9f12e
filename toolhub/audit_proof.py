"""Proving the audit trail intact: the chains, the checkpoints, and the record the console shows.

One service for ``manage.py verify_audit`` and for the console's "verify now" (a Celery task): it
recomputes the chains (the whole trail's, or one tenant's own), compares their heads with the newest
stored checkpoint, the newest checkpoint file and, when given, an exported one, and records the run.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from toolhub.audit_console import audit_verification_record
from toolhub.audit_hash import owner_chain_base, tenant_chain_base, tenant_chains
from toolhub.audit_problem import TAMPERED, UNVERIFIABLE, TrailProblem
from toolhub.audit_verify import ChainResult, verify_chains
from toolhub.checkpoints import (
    CheckpointKeyError,
    audit_checkpoint_problems,
    audit_stored_checkpoint_problems,
    audit_stored_file_problems,
    checkpoint_base,
    checkpoint_numbering_problems,
)
from toolhub.models import AuditChainHead, AuditVerification, RetiredTenantSlug, Tenant

__all__ = [
    "REQUEST_INTERVAL_SECONDS",
    "TAMPERED",
    "TrailProblem",
    "TrailVerification",
    "UNVERIFIABLE",
    "UnknownTenantError",
    "audit_trail_events",
    "audit_trail_verify",
    "audit_verification_request",
    "known_tenant_chains",
]

#: A tenant's verification may be asked for from the console once in this many seconds.
REQUEST_INTERVAL_SECONDS = 60


class UnknownTenantError(LookupError):
    """No tenant has this slug: nothing is verified."""


@dataclass(frozen=True)
class TrailVerification:
    """What one verification found: events checked, problems (empty: intact), what the heads were compared with."""

    events_checked: int
    problems: list[TrailProblem]
    compared: list[str]
    record: AuditVerification


def _trail_tenants() -> list[str]:
    """The slugs whose trails are verified: living tenants and deleted ones (retired), whose events stay."""
    living = Tenant.objects.values_list("slug", flat=True)
    return sorted({*living, *RetiredTenantSlug.objects.values_list("slug", flat=True)})


def known_tenant_chains(tenant: str) -> range:
    """``tenant``'s own chains, a deleted tenant's too; ``UnknownTenantError`` when no tenant has had this slug."""
    if not Tenant.objects.filter(slug=tenant).exists() and not RetiredTenantSlug.objects.filter(slug=tenant).exists():
        known = list(Tenant.objects.order_by("slug").values_list("slug", flat=True)[:10])
        hint = f" Known tenants: {', '.join(known)}{', ...' if len(known) == 10 else ''}." if known else ""
        raise UnknownTenantError(f"There is no tenant {tenant!r}; nothing was verified.{hint}")
    return tenant_chains(tenant)


def audit_trail_events(tenant: str | None = None) -> int:
    """How many events a verification will check, from the chain heads (no COUNT(*) over the events)."""
    heads = AuditChainHead.objects.all()
    if tenant:
        chains = known_tenant_chains(tenant)
        heads = heads.filter(chain__gte=chains.start, chain__lt=chains.stop)
    return sum(heads.values_list("seq", flat=True))


def audit_trail_verify(
    *,
    tenant: str | None = None,
    workers: int = 1,
    checkpoint: dict[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
) -> TrailVerification:
    """Verify the whole trail, or ``tenant``'s own chains, against the checkpoints; record the run.

    A run over the whole trail also records, for every tenant with chains of its own, what it found in
    them (with the problems of the checkpoints themselves, which concern everyone): the nightly
    verification proves each tenant's trail to its own auditors too.

    Raises ``UnknownTenantError`` for a slug no tenant has, and ``CheckpointKeyError`` when ``checkpoint``
    (an exported document) is given but the key to check it is not configured.
    """
    chains = known_tenant_chains(tenant) if tenant else None
    started_at = timezone.now()
    results = verify_chains(progress=progress, workers=workers, tenant=tenant or None)
    found: list[tuple[int | None, TrailProblem]] = [
        (r.chain, TrailProblem(str(r.problem))) for r in results if r.problem is not None
    ]
    compared: list[str] = []
    stored = stored_file = None
    key_error: CheckpointKeyError | None = None
    # Each source on its own: without the key, what one shows with none (deleted checkpoints, a file that cannot
    # be read) is still evidence of tampering, kept beside "cannot verify" so that the run reads "failed".
    try:
        stored, more = audit_stored_checkpoint_problems(chains)
    except CheckpointKeyError as exc:
        key_error, more = exc, checkpoint_numbering_problems()
    found += [(problem.chain, TrailProblem(str(problem))) for problem in more]
    try:
        stored_file, more = audit_stored_file_problems(chains)
        found += [(problem.chain, TrailProblem(str(problem))) for problem in more]
    except CheckpointKeyError as exc:
        key_error = exc
    if key_error is not None:
        # Nothing else was found altered: this process cannot check the signatures. Not proven, not tampered.
        unseen = (
            "the checkpoint key is not configured here, so the stored checkpoints cannot be checked "
            f"and a truncated tail would go unseen: {key_error}"
        )
        found.append((None, TrailProblem(unseen, UNVERIFIABLE)))
    if stored is not None:
        base = checkpoint_base(stored)
        delta = f" (a delta on full checkpoint #{base})" if base is not None else ""
        compared.append(f"stored checkpoint #{stored.seq} of {stored.created_at.isoformat()}{delta}")
    if stored_file is not None:
        compared.append(f"checkpoint file {stored_file.name}")
    if checkpoint is not None:
        exported = audit_checkpoint_problems(checkpoint, chains=chains)
        found += [(problem.chain, TrailProblem(str(problem))) for problem in exported]
        compared.append("the checkpoint")
    checked = sum(result.events for result in results)
    checkpoint_seq = stored.seq if stored is not None else None
    # A tenant's chain numbers are a hash of its slug: a problem names whose chain it is, so the reader
    # knows whose trail was cut or rewritten (and whose auditors to tell).
    owner = _chain_owner() if chains is None else (lambda chain: tenant if chain in chains else None)
    found = [(chain, TrailProblem(_whose(chain, p.text, owner), p.kind)) for chain, p in found]
    problems = [problem for _, problem in found]
    # The console shows when the trail was last proven intact (or not), without running this again.
    record = audit_verification_record(
        started_at=started_at,
        events_checked=checked,
        problems=problems,
        checkpoint_seq=checkpoint_seq,
        tenant=tenant or "",
    )
    if not tenant:
        _record_each_tenant(results, found, owner, started_at=started_at, checkpoint_seq=checkpoint_seq)
    return TrailVerification(checked, problems, compared, record)


def _chain_owner() -> Callable[[int], str | None]:
    """The tenant a chain is of (the one whose first chain it follows), None for the platform's or a shared one.

    A deleted tenant still owns its chains: its events stay, and its problems are still its auditors' to hear of.
    """
    owners: dict[int, list[str]] = {}
    for slug in _trail_tenants():
        owners.setdefault(tenant_chain_base(slug), []).append(slug)

    def owner(chain: int) -> str | None:
        base = owner_chain_base(chain)
        slugs = owners.get(base, []) if base is not None else []
        return slugs[0] if len(slugs) == 1 else None

    return owner


def _whose(chain: int | None, text: str, owner: Callable[[int], str | None]) -> str:
    """``text`` about ``chain``, saying whose chain it is when a tenant's (``acme's chain 123...: ...``)."""
    slug = owner(chain) if chain is not None else None
    return f"{slug}'s {text}" if slug is not None and text.startswith(f"chain {chain}") else text


def _record_each_tenant(
    results: list[ChainResult],
    found: list[tuple[int | None, TrailProblem]],
    owner: Callable[[int], str | None],
    *,
    started_at: Any,
    checkpoint_seq: int | None,
) -> None:
    """From a whole trail's run, one record per tenant with chains of its own: its events and its problems.

    A chain's tenant is the one whose first chain (``tenant_chain_base``) it follows; the checkpoints' own
    problems (no chain) go to every tenant. Chains two tenants' slugs share (a hash collision) are left
    to the whole trail's record.
    """
    shared = [problem for chain, problem in found if chain is None]
    chain_problems: dict[int, list[TrailProblem]] = {}
    for chain, problem in found:
        if chain is not None:
            chain_problems.setdefault(chain, []).append(problem)

    per_tenant: dict[str, tuple[int, list[TrailProblem]]] = {}
    for result in results:
        if (slug := owner(result.chain)) is not None:
            events, problems = per_tenant.get(slug, (0, []))
            per_tenant[slug] = (events + result.events, problems)
    # Every chain problem goes to its tenant, a chain's that no longer holds a head or an event (wiped) too.
    for chain, texts in sorted(chain_problems.items()):
        if (slug := owner(chain)) is not None:
            events, problems = per_tenant.get(slug, (0, []))
            per_tenant[slug] = (events, problems + texts)
    for slug, (events, problems) in sorted(per_tenant.items()):
        audit_verification_record(
            started_at=started_at,
            events_checked=events,
            problems=[*problems, *shared],
            checkpoint_seq=checkpoint_seq,
            tenant=slug,
        )


def audit_verification_request(*, tenant: str) -> bool:
    """Queue a verification of ``tenant``'s own chains on a worker; False when one was asked for too recently.

    Once per ``REQUEST_INTERVAL_SECONDS`` a tenant (whoever asks), so that a button cannot keep workers busy
    re-reading a large trail. Raises ``UnknownTenantError``.
    """
    from toolhub.tasks import audit_verify_tenant_task

    known_tenant_chains(tenant)
    if not cache.add(f"toolhub:audit-verify:{tenant}", True, timeout=REQUEST_INTERVAL_SECONDS):
        return False
    transaction.on_commit(lambda: audit_verify_tenant_task.delay(tenant))
    return True
