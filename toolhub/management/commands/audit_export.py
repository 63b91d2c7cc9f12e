"""``manage.py audit_export --tenant SLUG -o FILE``: a tenant's own audit chains as a file that verifies offline.

The file is written as every command's file is (``toolhub.new_files``): whole or not at all, never over an
existing file, so a refused or failed export leaves nothing behind. The export is itself recorded in the tenant's
chain: its start (in the file), then ``audit.exported`` once the file is in place or ``audit.export_failed``
(``toolhub.audit_export.audit_export_start``). Verify it with ``python -m toolhub.audit_file_verify``.
"""

from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from toolhub.audit_export import (
    AuditExportError,
    audit_export_open,
    audit_export_start,
    export_range,
)
from toolhub.governance_trail import os_user
from toolhub.new_files import write_new
from toolhub.operator_command import OperatorCommand


class Command(OperatorCommand):
    help = "Export a tenant's own audit chains as JSON Lines that python -m toolhub.audit_file_verify checks offline."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tenant", required=True, help="The tenant whose own chains are exported.")
        parser.add_argument("-o", "--output", required=True, help="The file to write (must not exist).")
        parser.add_argument("--from-seq", help="Each chain from this sequence number.")
        parser.add_argument("--to-seq", help="Each chain up to this sequence number.")
        parser.add_argument("--since", help="Events from this moment (ISO 8601), with every event between.")
        parser.add_argument("--until", help="Events before this moment (ISO 8601).")
        parser.add_argument("--actor", default="", help="Who asks for the export (recorded; default: the OS user).")

    def handle(self, *args: Any, **options: Any) -> None:
        target = Path(options["output"])
        if target.exists():
            raise CommandError(f"{target} exists; nothing was exported (an export never overwrites a file).")
        if not target.parent.is_dir():
            raise CommandError(f"{target.parent} is not a directory; nothing was exported.")
        try:
            scope = export_range(
                from_seq=options["from_seq"], to_seq=options["to_seq"], since=options["since"], until=options["until"]
            )
            audit_export_open(options["tenant"], scope)  # refuses an unknown tenant before anything is recorded
        except AuditExportError as exc:
            raise CommandError(str(exc)) from exc
        actor = options["actor"] or f"cli:{os_user()}"
        record = audit_export_start(actor=actor, tenant=options["tenant"], scope=scope)
        try:
            export = audit_export_open(options["tenant"], scope)  # read again: the start is in it
            write_new(target, record.stream(export))
        except OSError as exc:
            record.fail(f"the file could not be written ({exc.strerror or type(exc).__name__})")
            raise CommandError(
                f"{target} could not be written ({exc.strerror or exc}); nothing was exported "
                "(the attempt is recorded as audit.export_failed)."
            ) from exc
        except BaseException as exc:
            record.fail(f"the export stopped ({type(exc).__name__})")
            raise
        record.complete()
        chains = export.header["chains"]
        events = sum(entry["to_seq"] - entry["from_seq"] + 1 for entry in chains)
        signature = export.header["signature"]
        signed = (
            f"header signed with the export key {signature['key']} (its public key: manage.py audit_public_key); "
            f"verify with: python -m toolhub.audit_file_verify {target} --public-key KEY"
            if signature
            else f"the header is NOT signed (no checkpoint key is set); verify with: "
            f"python -m toolhub.audit_file_verify {target}"
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"Exported {events} events in {len(chains)} chain(s) of {options['tenant']} to {target}; {signed}"
            )
        )
