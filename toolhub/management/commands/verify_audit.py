"""``manage.py verify_audit``: recompute every audit hash chain and compare it with the newest checkpoint.

``--tenant SLUG`` verifies that tenant's own chains only: a proof its auditors may read in full (the
console shows them its count and problems), made without reading another tenant's events.
"""

import json
import os
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from toolhub.audit_console import audit_verification_record
from toolhub.audit_hash import TENANT_SHARDS, tenant_chains
from toolhub.audit_verify import verify_audit_chains
from toolhub.checkpoints import (
    CheckpointKeyError,
    audit_checkpoint_problems,
    audit_stored_checkpoint_problems,
    audit_stored_file_problems,
)
from toolhub.models import AuditChainHead, AuditEvent, Tenant


def _tenant_chains_or_error(slug: str) -> range:
    """The chains of tenant ``slug``; a ``CommandError`` naming some known tenants when there is none."""
    if not Tenant.objects.filter(slug=slug).exists():
        known = list(Tenant.objects.order_by("slug").values_list("slug", flat=True)[:10])
        hint = f" Known tenants: {', '.join(known)}{', ...' if len(known) == 10 else ''}." if known else ""
        raise CommandError(f"There is no tenant {slug!r}; nothing was verified.{hint}")
    return tenant_chains(slug)


class Command(BaseCommand):
    help = (
        "Recompute the audit trail's hash chains and check them against the newest stored checkpoint; "
        "exit non-zero naming the first bad event of each chain and every chain that shrank or vanished."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--no-progress", action="store_true", help="Do not draw the progress counter.")
        parser.add_argument(
            "--workers",
            type=int,
            default=min(os.cpu_count() or 1, 8),
            help="Verify this many chains at once, each in its own process and connection (default: the CPUs).",
        )
        parser.add_argument(
            "--checkpoint", help="Also a file from `audit_checkpoint --output`; detects a truncated tail since then."
        )
        parser.add_argument(
            "--tenant",
            help="Verify only this tenant's own chains (its events since chains are kept per tenant), "
            "and only their heads against the checkpoints.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        show = not options["no_progress"] and sys.stderr.isatty()
        workers = options["workers"]
        if workers < 1:
            raise CommandError("--workers must be at least 1.")

        tenant = options["tenant"]
        chains = _tenant_chains_or_error(tenant) if tenant is not None else None
        heads = AuditChainHead.objects.all()
        if chains is not None:
            heads = heads.filter(chain__gte=chains.start, chain__lt=chains.stop)
        # The chain heads give the total without a COUNT(*) over a table that may hold millions of rows.
        total = sum(heads.values_list("seq", flat=True)) or 1

        def progress(count: int) -> None:
            # In parallel the count moves a whole chain at a time: draw every step.
            if show and (count % 1000 == 0 or count == total or workers > 1):
                done = min(1.0, count / total)
                bar = "#" * int(done * 40)
                sys.stderr.write(f"\r[{bar:<40}] {done:6.1%} {count}/{total} events")
                sys.stderr.flush()

        started_at = timezone.now()
        checked, problems = verify_audit_chains(progress=progress, workers=workers, tenant=tenant)
        if show:
            sys.stderr.write("\n")
        messages = [str(problem) for problem in problems]
        compared: list[str] = []
        stored = stored_file = None
        try:
            stored, found = audit_stored_checkpoint_problems(chains)
            messages += found
            stored_file, found = audit_stored_file_problems(chains)
            messages += found
        except CheckpointKeyError as exc:
            messages.append(f"the stored checkpoints cannot be checked, so a truncated tail would go unseen: {exc}")
        if stored is not None:
            compared.append(f"stored checkpoint #{stored.seq} of {stored.created_at.isoformat()}")
        if stored_file is not None:
            compared.append(f"checkpoint file {stored_file.name}")
        if options["checkpoint"]:
            messages += self._checkpoint_problems(options["checkpoint"], chains)
            compared.append("the checkpoint")
        # The console shows when the trail was last proven intact (or not), without running this again.
        audit_verification_record(
            started_at=started_at,
            events_checked=checked,
            problems=messages,
            checkpoint_seq=stored.seq if stored is not None else None,
            tenant=tenant or "",
        )
        if messages:
            for problem in messages:
                self.stderr.write(f"TAMPERED {problem}")
            raise CommandError(f"Audit trail does not verify: {len(messages)} problem(s), first: {messages[0]}")
        suffix = f" and matches {' and '.join(compared)}" if compared else ""
        whose = f"{tenant}'s chains" if tenant else "Audit trail"
        self.stdout.write(self.style.SUCCESS(f"{whose} verified: {checked} events, every chain intact{suffix}."))
        if tenant and AuditEvent.objects.filter(tenant=tenant, chain__lt=TENANT_SHARDS).exists():
            self.stdout.write(
                f"Some of {tenant}'s events were written before its chains were its own: they are in the "
                "platform's shared chains, which `verify_audit` without --tenant verifies."
            )
        if stored is None:
            self.stdout.write(
                "No stored checkpoint yet: a truncated tail is detected once beat or `audit_checkpoint` stored one."
            )

    def _checkpoint_problems(self, path: str, chains: range | None) -> list[str]:
        try:
            checkpoint = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise CommandError(f"Cannot read checkpoint {path}: {exc}") from exc
        if not isinstance(checkpoint, dict):
            raise CommandError(f"Cannot read checkpoint {path}: it is not a checkpoint from `audit_checkpoint`.")
        try:
            return audit_checkpoint_problems(checkpoint, chains=chains)
        except CheckpointKeyError as exc:
            raise CommandError(str(exc)) from exc
