"""``manage.py verify_audit``: recompute every audit hash chain and name the first broken event."""

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from toolhub.audit import verify_audit_chains


class Command(BaseCommand):
    help = "Recompute the audit trail's hash chains; exit non-zero naming the first bad event of each chain."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--no-progress", action="store_true", help="Do not draw the progress counter.")

    def handle(self, *args: Any, **options: Any) -> None:
        show = not options["no_progress"] and sys.stderr.isatty()

        def progress(count: int) -> None:
            if show and count % 1000 == 0:
                sys.stderr.write(f"\rverified {count} events")
                sys.stderr.flush()

        checked, problems = verify_audit_chains(progress=progress)
        if show:
            sys.stderr.write("\n")
        if problems:
            for problem in problems:
                self.stderr.write(f"TAMPERED {problem}")
            raise CommandError(f"Audit trail does not verify: {len(problems)} chain(s) broken, first: {problems[0]}")
        self.stdout.write(self.style.SUCCESS(f"Audit trail verified: {checked} events, every chain intact."))
