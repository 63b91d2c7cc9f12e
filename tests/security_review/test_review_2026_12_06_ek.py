"""Review of 2026-12-06 (ek): after any wait, the caller's rights are read again, whatever the channel.

Seen by pat (a platform auditor with ``toolhub.cross_tenant``), olga (staff of tenant acme) and alice (a member of
acme), following a call with ``GET /api/v1/calls/{id}/?wait=``, and by an operator of acme downloading an export.
Each test fails on the reviewed code (main at 0fe5faa) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

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

2. The console's exports (``toolhub/admin_audit.py`` calls CSV/JSONL, ``toolhub/admin_audit_export.py`` a tenant's
   audit trail) were authorized, scoped and audited when the request began, then streamed for as long as the rows
   took (minutes for a large tenant) without asking again: a reader removed from the tenant, or stripped of the
   permission, mid-download kept receiving the tenant's rows to the end (and a trail export was recorded as
   ``audit.exported``, taken whole). Now both stream through one wrapper (``toolhub.rights_recheck
   .while_permitted``) that, between chunks and at most every ``STREAM_RIGHTS_RECHECK_SECONDS`` (5), reads the
   reader's rights again through the same ``tenant_scope_now`` and cuts the transfer off (``RightsRevokedError``:
   the client sees a broken download, never a file that looks complete) once the reader is no longer active staff
   with the permission and every tenant the export was scoped to; a trail export is then ``audit.export_failed``.

Checked and found holding (no test here):

- The waits of the product are the three named above (``toolhub.api.wait_slots`` users: REST ``_follow``, MCP
  ``tools/call``'s follow, MCP ``toolhub_call_status``); all three answer through ``tenant_scope_now`` (reviews ea,
  ee), so finding 1's fix covers each (the MCP ones are not tested again here: same function). The runs API
  (``agents_app/api.py``), the approvals API and the operators' desk have no wait or long poll; there is no
  server-sent-events, ``EventSource`` or other streaming response besides the two console exports
  (``StreamedResponse`` has no other user); artifact downloads are whole ``HttpResponse`` bodies read after the
  checks.
"""

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client
from rest_framework.test import APIClient

from toolhub.api import governed
from toolhub.audit import audit_append
from toolhub.models import AuditEvent, CallStatus, Tenant, TenantMembership, ToolCall

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


def _stream_after_first_chunk(response: Any, change: Any) -> tuple[bytes, BaseException | None]:
    """The first chunk is read, then ``change`` happens (rights revoked), then the rest: what else left, and how."""
    chunks = iter(response.streaming_content)
    next(chunks)
    change()
    rest: list[bytes] = []
    try:
        rest.extend(chunks)
    except Exception as exc:  # the stream is cut off: the transfer breaks
        return b"".join(rest), exc
    return b"".join(rest), None


def test_a_calls_export_stops_streaming_once_its_reader_left_the_tenant(
    operator: User, alice: User, settings: Any
) -> None:
    """Found: the console's calls export (CSV) of olga, staff of acme, kept streaming acme's calls after her membership
    was removed mid-download: the rows left with the rights read when the request began, however long it streamed.
    Expect: between chunks the reader's rights are read again; once she is out of acme the stream is cut off (the
    transfer breaks, no further row leaves).
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "STREAM_RIGHTS_RECHECK_SECONDS": 0}
    ToolCall.objects.create(tool_name="ek_secret_lookup", status=CallStatus.SUCCEEDED, tenant="acme", user=alice)
    client = Client()
    client.force_login(operator)
    response = client.post("/admin/toolhub/toolcall/export/csv/")
    assert response.status_code == 200

    rest, cut = _stream_after_first_chunk(response, lambda: TenantMembership.objects.filter(user=operator).delete())

    assert b"ek_secret_lookup" not in rest
    assert cut is not None


def test_a_trail_export_stops_streaming_once_its_reader_lost_the_permission(
    operator: User, alice: User, settings: Any
) -> None:
    """Found: the console's "Export trail" of acme kept streaming acme's audit events after the reader's
    ``view_auditevent`` permission was revoked mid-download.
    Expect: the stream is cut off at the next chunk, and the export is recorded as failed, not as taken whole.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "STREAM_RIGHTS_RECHECK_SECONDS": 0}
    audit_append(event_type="call.requested", actor="a", data={"ek": "secret"}, call_id=uuid.UUID(int=7), tenant="acme")
    client = Client()
    client.force_login(operator)
    response = client.post("/admin/toolhub/toolcall/export-trail/", {"tenant": "acme"})
    assert response.status_code == 200

    rest, cut = _stream_after_first_chunk(response, lambda: Group.objects.get(name="operators").permissions.clear())

    assert b"call.requested" not in rest
    assert cut is not None
    assert not AuditEvent.objects.filter(event_type="audit.exported").exists()
    assert AuditEvent.objects.filter(event_type="audit.export_failed").exists()


def test_a_calls_export_whose_reader_keeps_the_rights_streams_whole(operator: User, alice: User, settings: Any) -> None:
    """Found: (holds) the control: nothing revoked.
    Expect: every row leaves, the stream ends normally.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "STREAM_RIGHTS_RECHECK_SECONDS": 0}
    ToolCall.objects.create(tool_name="ek_secret_lookup", status=CallStatus.SUCCEEDED, tenant="acme", user=alice)
    client = Client()
    client.force_login(operator)
    response = client.post("/admin/toolhub/toolcall/export/csv/")

    rest, cut = _stream_after_first_chunk(response, lambda: None)

    assert b"ek_secret_lookup" in rest
    assert cut is None
