"""Review of 2026-12-05 (co): the lifecycle of governing objects, deleted or deactivated while work depends on them.

Each test fails on the reviewed code (main at 4cd7ff4) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A deleted tenant's trail could no longer be verified as its own: ``verify_audit --tenant acme`` answered "There
   is no tenant 'acme'; nothing was verified", and the whole trail's run neither recorded acme's result nor named
   acme in a problem of its chains, although its events stay (append-only) and its slug is retired precisely because
   rows still name it. Offboarding a customer is when their auditors most need the proof. Now the tenants whose
   trail is verified (``toolhub.audit_proof``) are the living and the retired ones (``RetiredTenantSlug``).
"""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from tests.audit.conftest import owner_tampering
from tests.audit.test_console import make_call
from toolhub.models import AuditEvent, AuditVerification, Tenant

pytestmark = pytest.mark.django_db


def _verify(*arguments: str) -> str:
    out = io.StringIO()
    call_command("verify_audit", "--no-progress", "--workers", "1", *arguments, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_a_deleted_tenants_trail_is_still_verified_as_its_own() -> None:
    """Found: once acme was deleted, ``verify_audit --tenant acme`` refused ("There is no tenant") and the whole
    trail's run kept no record of acme and named no problem as acme's. Expect: acme's chains verify by its retired
    slug, and a tampered event of acme's is reported as acme's, in acme's own record."""
    # given: acme with events of its own, then deleted (offboarded); its events stay
    for slug in ("acme", "globex"):
        Tenant.objects.create(slug=slug, name=slug)
        for _ in range(3):
            make_call(slug)
    Tenant.objects.filter(slug="acme").delete()
    acme_events = AuditEvent.objects.filter(tenant="acme").count()
    assert acme_events == 6

    # when / then: its own chains verify by the retired slug
    assert f"acme's chains verified: {acme_events} events, every chain intact" in _verify("--tenant", "acme")
    assert AuditVerification.objects.get(tenant="acme").ok

    # and a tampered event of acme's is acme's problem, in acme's record of the whole trail's run
    target = AuditEvent.objects.filter(tenant="acme").order_by("id").last()
    assert target is not None
    with owner_tampering(), connection.cursor() as cursor:
        cursor.execute("UPDATE toolhub_auditevent SET actor = 'someone else' WHERE id = %s", [target.pk])
    with pytest.raises(CommandError, match="does not verify") as failed:
        _verify()
    assert "acme's chain" in str(failed.value)
    newest = AuditVerification.objects.filter(tenant="acme").order_by("-id").first()
    assert newest is not None and not newest.ok and f"event #{target.pk}" in newest.problems
