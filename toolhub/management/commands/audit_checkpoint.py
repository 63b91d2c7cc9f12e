"""``manage.py audit_checkpoint``: export a signed checkpoint of every audit chain's head."""

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from toolhub.checkpoints import CheckpointKeyError, audit_checkpoint_create


class Command(BaseCommand):
    help = "Write an HMAC-signed checkpoint of the audit chains' heads (key from TOOLHUB_AUDIT_KEY)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--output", "-o", help="File to write (default: standard output).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            checkpoint = audit_checkpoint_create()
        except CheckpointKeyError as exc:
            raise CommandError(str(exc)) from exc
        text = json.dumps(checkpoint, indent=2, sort_keys=True)
        if options["output"]:
            Path(options["output"]).write_text(text + "\n")
            chains = len(checkpoint["heads"])
            self.stderr.write(self.style.SUCCESS(f"Checkpoint of {chains} chain(s) written to {options['output']}."))
        else:
            sys.stdout.write(text + "\n")
