"""``manage.py audit_public_key``: the public key that checks an audit export's header, for auditors to keep.

It is derived from the audit checkpoint key (``toolhub.audit_export_key``) and cannot sign: hand it out freely, and
give it to ``python -m toolhub.audit_file_verify FILE --public-key KEY`` (or save this output as a file for
``--public-key-file``). The checkpoint key itself never leaves the platform.
"""

from typing import Any

from django.core.management.base import CommandError

from toolhub.audit_export_key import public_key_file_text
from toolhub.checkpoint_signature import CheckpointKeyError, export_public_key
from toolhub.operator_command import OperatorCommand


class Command(OperatorCommand):
    help = (
        "Print the Ed25519 public key (base64 and hex) and its fingerprint that python -m toolhub.audit_file_verify "
        "--public-key checks an export's header with; save the output as a file for --public-key-file."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            public = export_public_key()
        except CheckpointKeyError as exc:
            raise CommandError(f"{exc} Exports are signed with a key derived from it; none is set.") from exc
        self.stdout.write(public_key_file_text(public), ending="")
