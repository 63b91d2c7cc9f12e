"""Review of 2026-12-06 (ek): after any wait, the caller's rights are read again, whatever the channel.

Seen by pat (a platform auditor with ``toolhub.cross_tenant``), olga (staff of tenant acme) and alice (a member of
acme), each following a call with ``GET /api/v1/calls/{id}/?wait=``. Each test fails on the reviewed code (main at
0fe5faa) and states what was found ("Found: ...") and what is expected ("Expect: ...").

Findings:

1. ``toolhub.tenancy.tenant_scope_now`` (the one re-read after a wait, used by REST's ``_follow``, MCP
   ``toolhub_call_status`` and ``toolhub.direct.answering_principal``) dropped only the memoized scope and read the
   memberships again; the rights that decide the scope and the rows' visibility were still read from the request's
   user object as it was loaded before the wait: ``is_active``, ``is_superuser``, ``is_staff`` and the permission
   cache of the auth backend (``_perm_cache``, ``_user_perm_cache``, ``_group_perm_cache``). So a platform auditor
   whose cross-tenant permission (or superuser status) was revoked while he waited was answered another tenant's
   call; a staff member whose staff status was revoked was answered a colleague's call; a user deactivated while she
   waited was answered her call as if still active. Now ``tenant_scope_now`` reads the user's row again (its status
   flags, its permissions; a deleted user is nobody) before the scope, so every waiter answers with the rights of
   now.

Checked and found holding (no test here):

- The waits of the product are the three named above (``toolhub.api.wait_slots`` users: REST ``_follow``, MCP
  ``tools/call``'s follow, MCP ``toolhub_call_status``); all three answer through ``tenant_scope_now`` (reviews ea,
  ee), so the fix here covers each. The runs API (``agents_app/api.py``), the approvals API and the operators' desk
  have no wait or long poll; there is no server-sent-events or other streaming endpoint besides the two exports.
- The console's exports (``toolhub/admin_audit.py`` calls CSV/JSONL, ``toolhub/admin_audit_export.py`` audit trail)
  stream one server-side-cursor query authorized, scoped and audited when the request began (``calls.exported``,
  ``audit.export_started``): a snapshot of what the exporter could read at that moment, recorded in the trail as
  taken. Noted for the integrator, not changed here: they do not re-check between chunks.
"""

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.test import APIClient

from toolhub.api import governed
from toolhub.models import CallStatus, Tenant, TenantMembership, ToolCall

pytestmark = pytest.mark.django_db


def _follow_while(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    """Every wait of the request: ``change`` happens (rights revoked in the database), then the call is answered."""

    def waited(*, call: ToolCall, seconds: float) -> ToolCall:
        change()
        call.refresh_from_db()
        return call

    monkeypatch.setattr(governed, "call_wait", waited)


def _client(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.get(pk=user.pk))  # the request's own user object, as a login loads it
    return client


def test_a_cross_tenant_permission_revoked_during_a_wait_shows_no_other_tenants_call(
    tenant: Tenant, other_tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: pat, a platform auditor (``toolhub.cross_tenant``) and a member of acme, followed a call of globex
    with ``?wait=``; his cross-tenant permission was revoked while he waited; the answer was globex's call (200 with
    its detail), read with the permission cached on his user object before the wait.
    Expect: the answer of a request made after the revocation: 404, nothing of globex's call.
    """
    pat = User.objects.create_user("pat")
    TenantMembership.objects.create(user=pat, tenant=tenant)
    cross = Permission.objects.get(codename="cross_tenant", content_type__app_label="toolhub")
    pat.user_permissions.add(cross)
    call = ToolCall.objects.create(tool_name="ek_lookup", status=CallStatus.QUEUED, tenant="globex")
    _follow_while(monkeypatch, lambda: User.objects.get(pk=pat.pk).user_permissions.remove(cross))

    answer = _client(pat).get(f"/api/v1/calls/{call.pk}/?wait=5")

    assert answer.status_code == 404, answer.content
    assert "ek_lookup" not in answer.content.decode()


def test_superuser_status_revoked_during_a_wait_shows_no_other_tenants_call(
    tenant: Tenant, other_tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: a superuser in acme followed a call of globex; made an ordinary user while he waited, he was still
    answered globex's call (200), read with ``is_superuser`` as his user object held it before the wait.
    Expect: 404, nothing of globex's call.
    """
    root = User.objects.create_superuser("root", "root@example.com", "pw")
    TenantMembership.objects.create(user=root, tenant=tenant)
    call = ToolCall.objects.create(tool_name="ek_lookup", status=CallStatus.QUEUED, tenant="globex")
    _follow_while(monkeypatch, lambda: User.objects.filter(pk=root.pk).update(is_superuser=False))

    answer = _client(root).get(f"/api/v1/calls/{call.pk}/?wait=5")

    assert answer.status_code == 404, answer.content


def test_staff_status_revoked_during_a_wait_shows_no_colleagues_call(
    tenant: Tenant, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: olga, staff of acme, followed alice's call; her staff status was revoked while she waited (she reads
    only her own calls now); the answer was alice's call (200), read with ``is_staff`` from before the wait.
    Expect: 404, as the same read a moment later answers.
    """
    olga = User.objects.create_user("olga", is_staff=True)
    TenantMembership.objects.create(user=olga, tenant=tenant)
    call = ToolCall.objects.create(tool_name="ek_lookup", status=CallStatus.QUEUED, tenant="acme", user=alice)
    _follow_while(monkeypatch, lambda: User.objects.filter(pk=olga.pk).update(is_staff=False))

    answer = _client(olga).get(f"/api/v1/calls/{call.pk}/?wait=5")

    assert answer.status_code == 404, answer.content
    assert _client(olga).get(f"/api/v1/calls/{call.pk}/").status_code == 404  # the same read, after


def test_a_user_deactivated_during_a_wait_is_answered_nothing_of_the_call(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: alice followed her call; her account was deactivated while she waited (she can no longer sign in or
    use her keys); the answer was the call's detail (200), read with ``is_active`` from before the wait.
    Expect: 404, nothing of the call: an inactive user is nobody's member.
    """
    call = ToolCall.objects.create(tool_name="ek_lookup", status=CallStatus.QUEUED, tenant="acme", user=alice)
    _follow_while(monkeypatch, lambda: User.objects.filter(pk=alice.pk).update(is_active=False))

    answer = _client(alice).get(f"/api/v1/calls/{call.pk}/?wait=5")

    assert answer.status_code == 404, answer.content


def test_a_caller_whose_rights_hold_is_answered_after_the_wait(alice: User, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: (holds) the control: nothing changed during the wait.
    Expect: alice is answered her call (200), re-reading her rights costs her nothing.
    """
    call = ToolCall.objects.create(tool_name="ek_lookup", status=CallStatus.QUEUED, tenant="acme", user=alice)
    _follow_while(monkeypatch, lambda: None)

    answer = _client(alice).get(f"/api/v1/calls/{call.pk}/?wait=5")

    assert answer.status_code == 200, answer.content
    assert answer.json()["tool"] == "ek_lookup"
