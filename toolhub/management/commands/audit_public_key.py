"""``manage.py audit_public_key``: the public key that checks an audit export's header, for auditors to keep.

It is derived from the audit checkpoint key (``toolhub.audit_export_key``) and cannot sign: hand it out freely, and
give it to ``python -m toolhub.audit_file_verify FILE --public-key KEY`` (or save this output as a file for
``--public-key-file``). The checkpoint key itself never leaves the platform. ``--all`` adds the keys a rotation
retired (``TOOLHUB_AUDIT_RETIRED_KEYS``), each with the last checkpoint it is valid for: one file that verifies
exports from before and after a rotation (``toolhub.audit_keyring``).
"""

from typing import Any

from django.core.management.base import CommandError

from toolhub.audit_export_key import export_signing_key, public_key_file_text
from toolhub.audit_keyring import ExportKey, keyring_file_text
from toolhub.audit_keys import retired_keys
from toolhub.checkpoint_signature import CheckpointKeyError, export_public_key
from toolhub.operator_command import OperatorCommand


class Command(OperatorCommand):
    help = (
        "Print the Ed25519 public key (base64 and hex) and its fingerprint that python -m toolhub.audit_file_verify "
        "--public-key checks an export's header with; save the output as a file for --public-key-file."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--all",
            action="store_true",
            help="also the retired keys, each with the last checkpoint it is valid for (a key file for the verifier)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            public = export_public_key()
            retired = retired_keys() if options["all"] else []
        except CheckpointKeyError as exc:
            raise CommandError(f"{exc} (Exports are signed with a key derived from it.)") from exc
        if not options["all"]:
            self.stdout.write(public_key_file_text(public), ending="")
            return
        keys = [ExportKey(public)]
        keys += [ExportKey(export_signing_key(key.secret).public_key(), key.through) for key in reversed(retired)]
        self.stdout.write(keyring_file_text(keys), ending="")
