"""Review of 2026-12-05 (bh): the lifecycle of tenants, memberships and accounts.

Each test fails on the reviewed code (main at 9fb563c) and states who reaches what, where ("Found: ...") and what
is expected ("Expect: ...").

Findings:

1. A call is requested only in a tenant that exists (``toolhub.direct.caller_principal``), but a held or queued call
   of someone who acts in every tenant (a superuser, ``toolhub.cross_tenant``) ran when approved after its tenant
   was deleted: the deletion had taken the tenant's deny grants and approval rules with it (CASCADE), and the call
   acted, and wrote audit events, in a tenant that no longer exists, whose slug is retired. Now authorization
   refuses, at request and again where it executes, a call naming a tenant that does not exist
   (``toolhub.authorization._standing_refusal``), for everyone.
2. Only the model's ``post_delete`` receiver retired a deleted tenant's slug: a deletion that sends no signal (raw
   SQL from a console, a script's ``_raw_delete``) left the slug free, and the next tenant given it inherited every
   call, run, audit chain and file naming it. Now a trigger (migration 0032, PostgreSQL and SQLite) retires it on
   any path, as 0029's trigger refuses a rename on any path.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.security_review.conftest import client_for
from tests.testapp.models import SideEffect
from toolhub.models import CallStatus, RetiredTenantSlug, Tenant, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def _approve(user: User, approval_id: int) -> Any:
    return client_for(user).post(f"/api/v1/approvals/{approval_id}/approve/", {"round": 1}, format="json")


def test_a_held_call_of_a_platform_user_does_not_run_after_its_tenant_was_deleted(
    platform_user: User, superuser: User
) -> None:
    """Found: platform's call held in initech ran when a superuser approved it after initech was deleted (its
    rules and grants gone with it), in a tenant that no longer exists. Expect: denied where it executes, with
    the reason; nothing runs."""
    initech = Tenant.objects.create(slug="initech", name="Initech")
    held = client_for(platform_user).post(
        "/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "r"}, "tenant": "initech"}, format="json"
    )
    assert held.status_code == 202, held.content
    initech.delete()
    assert RetiredTenantSlug.objects.filter(slug="initech").exists()

    approved = _approve(superuser, held.json()["approval_id"])

    assert approved.status_code == 200, approved.content
    call = ToolCall.objects.get(pk=held.json()["id"])
    assert call.status == CallStatus.DENIED, (call.status, call.error)
    assert "initech" in call.error and "no longer exists" in call.error
    assert not SideEffect.objects.filter(tool="risky_effect").exists()


def test_a_tenant_deleted_without_the_model_still_retires_its_slug() -> None:
    """Found: only the model's ``post_delete`` receiver retired a deleted tenant's slug, so a deletion that sends no
    signal (raw SQL from a console, a script) left it free, and a new tenant given it inherited every row, audit
    chain and file naming it. Expect: the database retires it on any path (a trigger, as 0029 refuses a rename)."""
    from django.core.exceptions import ValidationError
    from django.db import connection

    hooli = Tenant.objects.create(slug="hooli", name="Hooli")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM toolhub_tenant WHERE id = %s", [hooli.pk])

    retired = RetiredTenantSlug.objects.get(slug="hooli")
    assert retired.audit_chain_base == hooli.audit_chain_base and retired.retired_at is not None
    with pytest.raises(ValidationError):
        Tenant.objects.create(slug="hooli", name="Not Hooli")
    # The model's own deletion still retires the slug once, beside the trigger.
    initech = Tenant.objects.create(slug="initech", name="Initech")
    initech.delete()
    assert RetiredTenantSlug.objects.filter(slug="initech").count() == 1
