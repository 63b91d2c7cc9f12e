"""``manage.py audit_checkpoint``: sign every audit chain's head, store it, and print or export it.

``--output`` names a new file: one that exists (an earlier checkpoint kept elsewhere), a directory or a file in a
missing folder is refused before anything is signed, and the file is written whole (``toolhub.new_files``).
"""

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from toolhub.checkpoints import CheckpointKeyError, CheckpointRefusedError, audit_checkpoint_create
from toolhub.governance_trail import command_actor
from toolhub.new_files import new_file_refusal, write_new
from toolhub.operator_command import OperatorCommand


class Command(OperatorCommand):
    help = (
        "Store an HMAC-signed checkpoint of the audit chains' heads (key from TOOLHUB_AUDIT_KEY) where "
        "verify_audit finds it, and print it or write it to a file to keep elsewhere."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--output", "-o", help="File to write (default: standard output).")
        parser.add_argument(
            "--acknowledge",
            default="",
            metavar="WHY",
            help="Sign even though the trail contradicts the checkpoints signed before (after investigating it): "
            "the reason and the problems are kept in the audit trail as audit.checkpoint_acknowledged.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        actor = command_actor()
        output = Path(options["output"]) if options["output"] else None
        refusal = output and new_file_refusal(output)
        if refusal:
            raise CommandError(f"{refusal}; no checkpoint was signed.")
        try:
            checkpoint = audit_checkpoint_create(full=True, acknowledge=options["acknowledge"], actor=actor)
        except (CheckpointKeyError, CheckpointRefusedError) as exc:
            raise CommandError(str(exc)) from exc
        text = json.dumps(checkpoint, indent=2, sort_keys=True)
        if output:
            try:
                write_new(output, text + "\n")
            except OSError as exc:
                raise CommandError(
                    f"Checkpoint #{checkpoint['seq']} is stored, but {output} was not written ({exc.strerror}); "
                    "run the command again to keep a copy."
                ) from exc
            chains = len(checkpoint["heads"])
            self.stderr.write(
                self.style.SUCCESS(
                    f"Checkpoint #{checkpoint['seq']} of {chains} chain(s) stored and written to {output}."
                )
            )
        else:
            sys.stdout.write(text + "\n")
