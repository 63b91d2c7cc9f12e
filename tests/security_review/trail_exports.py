"""acme's audit trail exported and its public key read as an auditor would (reviews of the export, its verifier)."""

import io
import uuid
from pathlib import Path

from django.core.management import call_command

from toolhub.audit import audit_append
from toolhub.models import Tenant


def acme_trail(events: int) -> None:
    """``events`` of acme's events in one chain, each with a call id and no run id."""
    Tenant.objects.get_or_create(slug="acme", defaults={"name": "acme"})
    for number in range(events):
        audit_append(
            event_type="call.requested", actor="a", data={"n": number}, call_id=uuid.UUID(int=1), tenant="acme"
        )


def export(tmp_path: Path, *options: str, name: str = "out.jsonl") -> Path:
    """acme's trail exported by ``audit_export`` (with ``options``) into ``tmp_path / name``."""
    target = tmp_path / name
    call_command("audit_export", "--tenant", "acme", "-o", str(target), *options, stdout=io.StringIO())
    return target


def public_key() -> str:
    """The base64 key: the one line of ``audit_public_key``'s output that is not a comment."""
    out = io.StringIO()
    call_command("audit_public_key", stdout=out)
    return next(line for line in out.getvalue().splitlines() if line and not line.startswith("#"))
