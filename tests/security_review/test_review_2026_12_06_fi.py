"""Review 2026-12-06 (fi): how a console session and an API token end when their account loses access.

Each finding's test fails on the reviewed code (main at 3fc511b) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. An account deactivated or unstaffed by ``QuerySet.update`` (a shell, a script, raw SQL: no signal) got its old
   session and API token back when an administrator saved it active (or staff) again. Review en's revocation runs
   on the save that takes the console away; the update made no save, and the reactivating save read the stored row
   as already inactive, so nothing was ended: the cookie opened the console and the REST API again (200, 200) and
   the token answered REST and MCP. Now the save that gives back what was lost revokes what was left: one making an
   inactive account active deletes its tokens (``revocation:deactivated``), one giving the console back deletes its
   sessions (``toolhub.api.token_revocation``).
2. A deleted account's sessions stayed until they expired and signed in again once the account was restored with
   its id and password hash (``loaddata`` of a backup: Django's session check is the user's id and an HMAC of the
   hash): the restored account's old browser sessions, a thief's included, were back (200, 200). Now a user's
   deletion ends its sessions in the deletion's transaction (``pre_delete``; the admin's "delete selected" goes
   through it too); its tokens already went by cascade.

3. Session ends were not audited (a token's revocation is a ``governance.deleted`` event): an operator's sessions
   ended by a password reset, a deactivation or a deletion left no trace an auditor could read. Now each ending that
   deletes any appends one ``login.sessions_ended`` event in each of the account's tenants' chains (the platform's
   when none), naming the account, how many and why (actor ``revocation:password-changed|console-lost|
   account-deleted``), never a cookie or its digest (``token_revocation.sessions_revoke``). An own password change
   counts the changer's session too (deleted, then saved again under a new key by ``update_session_auth_hash``).

Checked and holding (tests below marked "holds"):

- A deleted account's session signs in no one while the account is gone (``ModelBackend.get_user`` finds no user;
  primary keys are not reused by PostgreSQL's sequences nor SQLite's ``AUTOINCREMENT``).
- Removing a tenant membership keeps the session and the token, harmlessly: nothing is cached on the session (toolhub
  writes nothing to ``request.session``; the tenant scope is memoized per request on the user object, authorization's
  per stamp, which the membership table's trigger moves), so the next REST request lists none of the tenant's rows
  and MCP's ``caller_principal`` refuses the tenant's header. Deleting the tenant likewise (its memberships cascade;
  ``caller_principal`` also asks that the tenant exists).
- Permissions taken away by removing the account from its group: the console's next page is refused (403), Django's
  permission caches living on the request's user object only.
- A password written by ``QuerySet.update``: the session is refused and deleted at its next request by Django's
  session-hash check (``get_user`` flushes it), so it does not come back with the old hash either.
- With the fix, an administrator deleting their own account gets the delete page's redirect (the session ended in
  the deletion is not written again) and is signed out.
- Read in the code: toolhub has no password-reset flow (no ``password_reset`` URL); ``changepassword``, the admin's
  password form and ``load_demo`` set a password through ``set_password`` and ``save`` (review cu/en's path); no
  toolhub code deactivates, unstaffs or sets a password by ``QuerySet.update``, and no admin action on users does
  (the user list has only Django's "delete selected", which deletes through the collector: ``pre_delete`` per user).
  Every REST view (``toolhub.api``, ``agents_app``, ``approvals``) authenticates through DRF's classes, so a cookie
  is taken only by ``ConsoleSessionAuthentication`` (active staff now); no other view reads a session; MCP takes API
  tokens only, issues no session and reads the token's user and tenant at each HTTP request.
- Left: a password written by ``QuerySet.update`` keeps the API token (no save sees the change: the stored hash is
  already the new one; the token table holds no trace of the password it was made under).
"""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import Group, Permission, User
from django.core import serializers
from django.core.management import call_command
from django.db import connection
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.helpers import assert_audit_intact, console
from tests.security_review.console_sessions import cookie_after_login
from toolhub.api.keys import api_key_issue
from toolhub.direct import CallerContextError, caller_principal
from toolhub.mcp_caller import token_user
from toolhub.models import AuditEvent, Tenant, TenantMembership, ToolCall
from toolhub.models.calls import CallStatus

pytestmark = pytest.mark.django_db

PASSWORD = "a long enough password 1"  # noqa: S105 - a test user's


@pytest.fixture
def staff(tenant: Tenant) -> User:
    """An operator of acme who signs in to the console (viewing calls through a group) and may hold an API token."""
    user = User.objects.create_user("staffer", "staffer@example.com", PASSWORD, is_staff=True)
    group, _ = Group.objects.get_or_create(name="call viewers")
    group.permissions.set(Permission.objects.filter(content_type__app_label="toolhub", codename="view_toolcall"))
    user.groups.add(group)
    TenantMembership.objects.create(user=user, tenant=tenant)
    return user


def _browser(cookie: str) -> tuple[Client, APIClient]:
    """The console and the REST API as a browser holding ``sessionid=<cookie>`` reaches them."""
    page, api = Client(), APIClient()
    page.cookies[settings.SESSION_COOKIE_NAME] = cookie
    api.cookies[settings.SESSION_COOKIE_NAME] = cookie
    return page, api


def _session_answers(cookie: str) -> tuple[int, int]:
    """What the console's index and the REST API answer a browser sending ``sessionid=<cookie>``."""
    page, api = _browser(cookie)
    return page.get("/admin/").status_code, api.get("/api/v1/calls/").status_code


def _token_answers(key: str) -> tuple[int, bool]:
    """What ``/api/v1/calls/`` answers ``Authorization: Token <key>``, and whether MCP's auth wrapper takes the key."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    user, _problem = token_user(f"Bearer {key}")
    return int(client.get("/api/v1/calls/").status_code), user is not None


def _stored_sessions() -> int:
    """How many rows the session table holds."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_session")
        return int(cursor.fetchone()[0])


def test_an_account_deactivated_by_an_update_gets_neither_session_nor_token_back_with_reactivation(
    staff: User,
) -> None:
    """Found: ``User.objects.filter(...).update(is_active=False)`` refused the session (302, 401) and the token
    (401, MCP refused) but kept both; the administrator's save making the account active again brought the cookie
    back on the console and the REST API (200, 200) and the token on REST and MCP. Expect: the reactivating save
    ends the sessions and deletes the token (recorded as a revocation in acme's trail)."""
    cookie = cookie_after_login(staff, PASSWORD)
    key = api_key_issue(staff)
    assert _session_answers(cookie) == (200, 200)
    assert _token_answers(key) == (200, True)
    User.objects.filter(pk=staff.pk).update(is_active=False)
    assert _session_answers(cookie) == (302, 401)
    assert _token_answers(key) == (401, False)
    # when
    staff.refresh_from_db()
    staff.is_active = True
    staff.save()
    # then
    assert _session_answers(cookie) == (302, 401)
    assert _token_answers(key) == (401, False)
    assert _stored_sessions() == 0
    assert not Token.objects.filter(user=staff).exists()
    (revoked,) = AuditEvent.objects.filter(event_type="governance.deleted", tenant="acme")
    assert revoked.actor == "revocation:deactivated"


def test_an_account_unstaffed_by_an_update_gets_no_session_back_with_staff(staff: User) -> None:
    """Found: ``update(is_staff=False)`` refused the session (302, 401) and kept it; a save setting ``is_staff``
    again (``update_fields``, as a script would) signed the old cookie in again (200, 200). Expect: the save giving
    the console back ends the sessions left from before; the API token, which unstaffing does not touch, stays."""
    cookie = cookie_after_login(staff, PASSWORD)
    key = api_key_issue(staff)
    User.objects.filter(pk=staff.pk).update(is_staff=False)
    assert _session_answers(cookie) == (302, 401)
    # when
    staff.refresh_from_db()
    staff.is_staff = True
    staff.save(update_fields=["is_staff"])
    # then
    assert _session_answers(cookie) == (302, 401)
    assert _stored_sessions() == 0
    assert _token_answers(key) == (200, True)


def test_a_save_that_keeps_an_active_staff_account_so_ends_nothing(staff: User) -> None:
    """Holds with the fix (regression): a full save of an account that stays active staff (the admin's user form
    changing an e-mail) neither ends its sessions nor deletes its token."""
    cookie = cookie_after_login(staff, PASSWORD)
    key = api_key_issue(staff)
    # when
    staff.email = "elsewhere@example.com"
    staff.save()
    # then
    assert _session_answers(cookie) == (200, 200)
    assert _token_answers(key) == (200, True)


def test_a_deleted_and_restored_account_gets_no_session_back(staff: User, tmp_path: Path) -> None:
    """Found: the deleted account's session rows stayed; restored from a backup by ``loaddata`` (same id, same
    password hash), the old cookie opened the console and the REST API again (200, 200). Expect: the deletion ends
    the account's sessions; the restored account is signed in nowhere."""
    cookie = cookie_after_login(staff, PASSWORD)
    backup = tmp_path / "staff.json"
    backup.write_text(serializers.serialize("json", [staff]))
    # when
    staff.delete()
    call_command("loaddata", str(backup), verbosity=0)
    # then
    assert _session_answers(cookie) == (302, 401)
    assert _stored_sessions() == 0


def test_the_admins_bulk_delete_ends_the_deleted_accounts_sessions(staff: User, superuser: User) -> None:
    """Found: the admin's "delete selected" on the user list left the deleted accounts' session rows. Expect: they
    are deleted with the accounts (the deleting administrator's own session kept)."""
    cookie = cookie_after_login(staff, PASSWORD)
    admin = console(superuser)
    # when
    deleted = admin.post(
        "/admin/auth/user/", {"action": "delete_selected", "_selected_action": [staff.pk], "post": "yes"}
    )
    # then
    assert deleted.status_code == 302, deleted.status_code
    assert not User.objects.filter(pk=staff.pk).exists()
    assert _session_answers(cookie) == (302, 401)
    assert _stored_sessions() == 1
    assert admin.get("/admin/").status_code == 200


def _session_digests() -> list[str]:
    """The session table's stored keys (digests of the cookies)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT session_key FROM django_session")
        return [row[0] for row in cursor.fetchall()]


def test_ended_sessions_are_in_the_accounts_tenants_trails(staff: User, other_tenant: Tenant) -> None:
    """Found: a deactivation deleted the account's sessions with nothing in the audit trail (its token's revocation
    is a ``governance.deleted`` event). Expect: one ``login.sessions_ended`` event in each of the account's tenants'
    chains, naming the account, how many sessions and why, never the cookie or its stored digest; a deletion too."""
    TenantMembership.objects.create(user=staff, tenant=other_tenant)
    cookies = [cookie_after_login(staff, PASSWORD), cookie_after_login(staff, PASSWORD)]
    digests = _session_digests()
    # when
    staff.is_active = False
    staff.save()
    # then
    ended = AuditEvent.objects.filter(event_type="login.sessions_ended").order_by("tenant")
    assert [(event.tenant, event.actor) for event in ended] == [
        ("acme", "revocation:console-lost"),
        ("globex", "revocation:console-lost"),
    ]
    assert ended[0].payload == {"user_id": staff.pk, "username": "staffer", "sessions": 2}
    for event in AuditEvent.objects.all():
        text = json.dumps(event.payload) + event.actor
        assert not any(secret in text for secret in [*cookies, *digests]), event.event_type
    assert_audit_intact()
    # when
    staff.is_active = True
    staff.save()
    cookie = cookie_after_login(staff, PASSWORD)
    staff.delete()
    # then
    assert _session_answers(cookie) == (302, 401)
    assert AuditEvent.objects.filter(
        event_type="login.sessions_ended", actor="revocation:account-deleted", tenant="acme"
    ).exists()
    assert_audit_intact()


def test_a_save_ending_no_session_records_nothing(staff: User) -> None:
    """Holds with the fix (regression): a deactivation of an account signed in nowhere appends no session event."""
    # when
    staff.is_active = False
    staff.save()
    # then
    assert not AuditEvent.objects.filter(event_type="login.sessions_ended").exists()


def test_a_deleted_accounts_session_signs_in_no_one(staff: User) -> None:
    """Holds (regression): while the account is gone its cookie opens neither the console nor the REST API."""
    cookie = cookie_after_login(staff, PASSWORD)
    # when
    User.objects.filter(pk=staff.pk).delete()
    # then
    assert _session_answers(cookie) == (302, 401)


def test_a_membership_removed_leaves_the_session_nothing_of_the_tenant(staff: User, tenant: Tenant) -> None:
    """Holds (regression): the session and the token outlive the membership, but nothing is cached on either: the
    next REST request lists none of acme's calls, by cookie or token, and MCP refuses acme as the caller's tenant."""
    ToolCall.objects.create(tool_name="t", status=CallStatus.SUCCEEDED, tenant="acme")
    cookie = cookie_after_login(staff, PASSWORD)
    key = api_key_issue(staff)
    _page, api = _browser(cookie)
    token_api = APIClient()
    token_api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert len(api.get("/api/v1/calls/").json()["results"]) == 1
    assert len(token_api.get("/api/v1/calls/").json()["results"]) == 1
    assert caller_principal(staff, tenant="acme").tenant == "acme"
    # when
    TenantMembership.objects.filter(user=staff).delete()
    # then
    assert api.get("/api/v1/calls/").json()["results"] == []
    assert token_api.get("/api/v1/calls/").json()["results"] == []
    mcp_user, _problem = token_user(f"Bearer {key}")
    with pytest.raises(CallerContextError):
        caller_principal(mcp_user, tenant="acme")


def test_a_deleted_tenant_leaves_its_members_sessions_nothing_of_it(staff: User, tenant: Tenant) -> None:
    """Holds (regression): deleting the tenant (memberships cascade) empties the member's next REST answer and MCP
    refuses the slug."""
    ToolCall.objects.create(tool_name="t", status=CallStatus.SUCCEEDED, tenant="acme")
    cookie = cookie_after_login(staff, PASSWORD)
    key = api_key_issue(staff)
    _page, api = _browser(cookie)
    assert len(api.get("/api/v1/calls/").json()["results"]) == 1
    # when
    tenant.delete()
    # then
    assert api.get("/api/v1/calls/").json()["results"] == []
    mcp_user, _problem = token_user(f"Bearer {key}")
    with pytest.raises(CallerContextError):
        caller_principal(mcp_user, tenant="acme")


def test_permissions_taken_with_a_group_are_gone_at_the_next_page(staff: User) -> None:
    """Holds (regression): removed from the group granting ``view_toolcall``, the session's next request for the
    calls' list is refused (403); nothing of the permissions is kept on the session."""
    cookie = cookie_after_login(staff, PASSWORD)
    page, _api = _browser(cookie)
    assert page.get("/admin/toolhub/toolcall/").status_code == 200
    # when
    staff.groups.clear()
    # then
    assert page.get("/admin/toolhub/toolcall/").status_code == 403


def test_a_password_written_by_an_update_ends_the_session_at_its_next_request(staff: User) -> None:
    """Holds (regression): a hash written by ``QuerySet.update`` (no signal) fails Django's session-hash check, which
    deletes the row at the next request; restoring the old hash afterwards brings nothing back."""
    cookie = cookie_after_login(staff, PASSWORD)
    old = staff.password
    # when
    User.objects.filter(pk=staff.pk).update(password=make_password("another long password 2"))
    # then
    assert _session_answers(cookie) == (302, 401)
    assert _stored_sessions() == 0
    User.objects.filter(pk=staff.pk).update(password=old)
    assert _session_answers(cookie) == (302, 401)


def test_an_administrator_deleting_their_own_account_is_answered_and_signed_out(superuser: User) -> None:
    """Holds with the fix (regression): the session ended inside the deletion is the one answering; the delete page
    still redirects (no ``SessionInterrupted``: nothing is written to the deleted session) and the next page asks
    for a login."""
    browser = Client()
    browser.force_login(superuser)
    # when
    deleted = browser.post(f"/admin/auth/user/{superuser.pk}/delete/", {"post": "yes"})
    # then
    assert deleted.status_code == 302, deleted.status_code
    assert not User.objects.filter(pk=superuser.pk).exists()
    assert browser.get("/admin/").status_code == 302
    assert _stored_sessions() == 0
