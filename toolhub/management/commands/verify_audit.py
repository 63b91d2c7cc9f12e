"""``manage.py verify_audit``: recompute every audit hash chain and compare it with the newest checkpoint.

``--tenant SLUG`` verifies that tenant's own chains only: a proof its auditors may read in full (the
console shows them its count and problems), made without reading another tenant's events.
"""

import json
import os
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from toolhub.audit_hash import TENANT_SHARDS
from toolhub.audit_proof import UnknownTenantError, audit_trail_events, audit_trail_verify
from toolhub.checkpoints import CheckpointKeyError
from toolhub.models import AuditEvent
from toolhub.operator_command import OperatorCommand


class Command(OperatorCommand):
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
        checkpoint = self._checkpoint(options["checkpoint"]) if options["checkpoint"] else None
        try:
            total = audit_trail_events(tenant) or 1
        except UnknownTenantError as exc:
            raise CommandError(str(exc)) from exc

        def progress(count: int) -> None:
            # In parallel the count moves a whole chain at a time: draw every step.
            if show and (count % 1000 == 0 or count == total or workers > 1):
                done = min(1.0, count / total)
                bar = "#" * int(done * 40)
                sys.stderr.write(f"\r[{bar:<40}] {done:6.1%} {count}/{total} events")
                sys.stderr.flush()

        try:
            verification = audit_trail_verify(tenant=tenant, workers=workers, checkpoint=checkpoint, progress=progress)
        except CheckpointKeyError as exc:
            raise CommandError(str(exc)) from exc
        if show:
            sys.stderr.write("\n")
        problems = verification.problems
        if problems:
            # Each labelled with its kind: what could not be checked here is not called tampered.
            for problem in problems:
                self.stderr.write(f"{problem.kind} {problem}")
            raise CommandError(f"Audit trail does not verify: {len(problems)} problem(s), first: {problems[0]}")
        compared = verification.compared
        suffix = f" and matches {' and '.join(compared)}" if compared else ""
        whose = f"{tenant}'s chains" if tenant else "Audit trail"
        checked = verification.events_checked
        self.stdout.write(self.style.SUCCESS(f"{whose} verified: {checked} events, every chain intact{suffix}."))
        if tenant and AuditEvent.objects.filter(tenant=tenant, chain__lt=TENANT_SHARDS).exists():
            self.stdout.write(
                f"Some of {tenant}'s events were written before its chains were its own: they are in the "
                "platform's shared chains, which `verify_audit` without --tenant verifies."
            )
        if verification.record.checkpoint_seq is None:
            self.stdout.write(
                "No stored checkpoint yet: a truncated tail is detected once beat or `audit_checkpoint` stored one."
            )

    def _checkpoint(self, path: str) -> dict[str, Any]:
        try:
            checkpoint = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise CommandError(f"Cannot read checkpoint {path}: {exc}") from exc
        if not isinstance(checkpoint, dict):
            raise CommandError(f"Cannot read checkpoint {path}: it is not a checkpoint from `audit_checkpoint`.")
        return checkpoint
