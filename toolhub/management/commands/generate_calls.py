"""``manage.py generate_calls N``: synthetic calls with valid audit chains, to measure the console at scale."""

import sys
import time
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db import transaction

from toolhub.audit import audit_append
from toolhub.models import Tenant, ToolDefinition
from toolhub.operator_command import OperatorCommand
from toolhub.synthetic import SyntheticSpec, generate_calls


class Command(OperatorCommand):
    help = (
        "Append N synthetic tool calls of the catalogue's tools, each with its audit events (about four), "
        "chained onto the current chain heads so that verify_audit passes. For benchmarks, never production."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("count", type=int, help="How many calls to write.")
        parser.add_argument("--tenants", help="Comma-separated tenant slugs (created when missing); default: all.")
        parser.add_argument("--days", type=int, default=30, help="Spread the calls over this many days up to now.")
        parser.add_argument("--batch-size", type=int, default=20_000, help="Calls per transaction.")
        parser.add_argument("--seed", type=int, default=1, help="Random seed (ids and choices).")

    def handle(self, *args: Any, **options: Any) -> None:
        if not apps.is_installed("demo"):
            # Backdated calls in real users' names, chained so that verify_audit passes: never on a real trail.
            raise CommandError(
                "generate_calls writes synthetic history into the audit trail; it runs only where the demo is "
                "installed (DJANGO_DEBUG=1, or TOOLHUB_DEMO=1 on a throwaway database), never in production."
            )
        count = options["count"]
        if count < 1:
            raise CommandError("N must be at least 1.")
        if options["batch_size"] < 1 or options["days"] < 1:
            raise CommandError("--batch-size and --days must be at least 1.")
        tools = list(ToolDefinition.objects.filter(present_in_code=True).values_list("name", flat=True))
        if not tools:
            raise CommandError("The catalogue is empty: run `manage.py sync_tools` first.")
        if options["tenants"]:
            slugs = [slug.strip() for slug in options["tenants"].split(",") if slug.strip()]
            for slug in slugs:
                Tenant.objects.get_or_create(slug=slug, defaults={"name": slug})
        else:
            slugs = list(Tenant.objects.values_list("slug", flat=True))
        if not slugs:
            raise CommandError("No tenant: pass --tenants acme,globex (they are created when missing).")
        users = list(get_user_model().objects.filter(is_active=True).values_list("pk", flat=True)[:20]) or [None]
        spec = SyntheticSpec(
            count=count,
            tools=tools,
            tenants=slugs,
            user_ids=users,
            days=options["days"],
            batch_size=options["batch_size"],
            seed=options["seed"],
        )
        started = time.monotonic()
        show = sys.stderr.isatty()

        def progress(done: int) -> None:
            if show:
                sys.stderr.write(f"\r{done}/{count} calls")
                sys.stderr.flush()

        calls, events = generate_calls(spec, progress=progress)
        if show:
            sys.stderr.write("\n")
        _record(slugs, calls=calls, events=events, days=options["days"])
        elapsed = time.monotonic() - started
        self.stdout.write(
            self.style.SUCCESS(
                f"Wrote {calls} calls and {events} audit events in {elapsed:.1f} s ({calls / elapsed:,.0f} calls/s)."
            )
        )


def _record(tenants: list[str], *, calls: int, events: int, days: int) -> None:
    """Say in each tenant's trail that synthetic calls were written into it, by this command (audited)."""
    data = {"calls": calls, "events": events, "days": days, "tenants": tenants}
    with transaction.atomic():
        for slug in tenants:
            audit_append(
                event_type="audit.synthetic_calls_written", actor="command:generate_calls", data=data, tenant=slug
            )
