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
2. The users' list of tenant staff holding ``auth.view_user`` filtered by ``?auth_token__key__startswith=`` (Django's
   admin counts a lookup on a related row's primary key as local), so a colleague's API token (a superuser's, if
   a member) was spelled out character by character. Now no admin list filters through a reverse relation unless
   a declared list filter does (``toolhub.admin_helpers.GuardedLookups``).

Checked and found holding (no test here): the membership admin lets a tenant's staff pick only users of their
tenants or newcomers (never a superuser), and a tenant only among theirs; user, group and token pages change nothing
for tenant staff (password, history and delete doors included); Django refuses ``password`` lookups; a deleted
requester's direct saga id stays unavailable to colleagues; four eyes compares ids (SET_NULL on deletion frees no
one); a decider is judged as they stand now, inside the request's tenant; calls are requested only in an existing
tenant (REST, listings); a tenant's slug is fixed and retired on deletion through the model, bulk or cascade.

Not fixed (seen): a slug deleted by raw SQL (no ``post_delete`` signal) is not retired; a trigger retiring it
also fires on SQLite's ``flush`` (``DELETE FROM``), retiring the test suite's tenants, so it needs more care.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.security_review.conftest import client_for
from tests.testapp.models import SideEffect
from toolhub.api.keys import api_key_issue
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


@pytest.mark.parametrize("lookup", ["auth_token__key__startswith", "auth_token__key", "auth_token__pk__startswith"])
def test_tenant_staff_cannot_read_a_colleagues_api_token_through_the_user_list(lookup: str, tenant: Tenant) -> None:
    """Found: the users' list of tenant staff holding ``auth.view_user`` filtered by ``?auth_token__key__startswith=``
    (Django's admin counts a lookup on a related row's primary key as a local one), so whether a colleague was listed
    spelled out their API token character by character (a superuser's, if a member): their token, and their powers,
    were the staff member's. API tokens are for people who cross the boundary only. Expect: 400, nothing listed."""
    from django.contrib.auth.models import Permission
    from django.test import Client

    from tests.tenancy.conftest import make_user

    staff = make_user("acme-people", tenant=tenant, staff=True, permissions=("auth.view_user",))
    boss = make_user("acme-boss", tenant=tenant)
    boss.is_superuser = True
    boss.save()
    key = api_key_issue(boss)
    assert Permission.objects.filter(codename="view_user").exists()
    client = Client()
    client.force_login(staff)

    value = key[:1] if lookup.endswith("startswith") else key
    response = client.get("/admin/auth/user/", {lookup: value})

    assert response.status_code == 400
    assert b"acme-boss" not in response.content
