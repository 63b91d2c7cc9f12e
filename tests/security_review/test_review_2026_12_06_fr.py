"""Review 2026-12-06 (fr): review fi's changes to ``toolhub.api.token_revocation`` (sessions ended and audited).

Each finding's test fails on the reviewed code (main at fe8d6ff) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. Deleting many accounts at once read and decoded every live console session once per account: review fi's
   ``pre_delete`` ended each deleted user's sessions through ``sessions_end``, which reads the whole live session
   table (no column names a session's user) in a savepoint of its own. The admin's "delete selected" of 1,000 users
   (in one tenant) with 300 operators signed in ran 4,040 statements and took 22-39 s on PostgreSQL, 2.8 s without
   the hook, holding the deletion's transaction (and its row locks) all along: 300,000 session decodes. Now one
   deletion reads the live sessions once, whatever it deletes (``session_store.sessions_signed_in``, kept on the
   deletion's origin until its first ``post_delete``), and a user with none costs no statement
   (``sessions_revoke`` in the caller's transaction, no savepoint of its own): 1,041 statements, about 5 s.

Checked and holding (tests below marked "holds"):

- A deletion that fails and rolls back leaves the account's sessions and no ``login.sessions_ended`` event (the
  events are appended in the collector's transaction; ``pre_delete`` runs inside it).
- An account in no tenant: its ended sessions are recorded in the platform's trail (tenant ``""``), and every chain
  verifies afterwards (``verify_audit_chains``). An account in tenants A and B: each trail gets the event naming the
  account only (its id, its name, how many); no event names the other tenant, as a token's ``governance.deleted``
  event does not; the tenants' staff already read the member's name on the People page.
- A login's ``last_login`` save (``update_fields``) reads no stored row; no toolhub path saves a user whole on a hot
  path (read in the code: ``load_demo`` only), so the extra read of review fi's full saves costs one indexed SELECT.
- ``changepassword`` (run as ``toolhub.governed_commands``' recorded command) ends the account's sessions with a
  ``revocation:password-changed`` event in the command's transaction, next to its ``governance.changed`` event, the
  chains intact; ``createsuperuser`` on an existing username refuses and ends nothing.
- A reactivation and a token made after it in the same transaction: the new token stays (the save revokes what
  was left before it; the user admin has no token inline, so a form cannot make one before the save).
- Read in the code: the admin's "delete selected" on People (``GovernanceAudited.delete_queryset``) deletes through
  one ``QuerySet.delete()``, one origin for the whole selection (the fix's test deletes the same way).
- Read in the code: the console signs in active staff only (``AdminSite.has_permission``, also asked by
  ``ConsoleSessionAuthentication``), so a superuser who is not staff has no session to end; ``loaddata``'s raw
  saves go through the same ``pre_save``/``post_save`` (review fi's test).
"""

import json
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.management.commands import changepassword
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.db.models.signals import pre_delete
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from tests.helpers import assert_audit_intact
from toolhub import session_store
from toolhub.api.keys import api_key_issue
from toolhub.models import AuditEvent, Tenant, TenantMembership

pytestmark = pytest.mark.django_db

PASSWORD = "a long enough password 1"  # noqa: S105 - a test user's


def _sign_in(user: User) -> Client:
    """A browser signed in to the console as ``user``."""
    browser = Client()
    browser.force_login(user)
    return browser


def _live_sessions() -> int:
    """How many rows the session table holds."""
    return int(session_store.SessionStore.get_model_class().objects.count())


def _ended_events() -> list[AuditEvent]:
    """The ``login.sessions_ended`` events, by tenant."""
    return list(AuditEvent.objects.filter(event_type="login.sessions_ended").order_by("tenant", "seq"))


def test_deleting_many_accounts_reads_the_live_sessions_once(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: deleting 40 users (one query) read the whole live session table 40 times and decoded every session 40
    times (one ``sessions_end`` per ``pre_delete``, each in a savepoint): 1,000 users with 300 operators signed in
    held the deletion 22-39 s. Expect: one read of the sessions for the deletion, each live session decoded once, and
    the deleted users' sessions (only theirs) ended and recorded."""
    for number in range(5):
        _sign_in(User.objects.create_user(f"operator{number}", is_staff=True))
    User.objects.bulk_create([User(username=f"gone{number}") for number in range(40)])
    doomed = User.objects.filter(username__startswith="gone")
    TenantMembership.objects.bulk_create([TenantMembership(user=user, tenant=tenant) for user in doomed])
    signed_in = doomed.get(username="gone7")
    signed_in.is_staff = True
    signed_in.save()
    _sign_in(signed_in)
    assert _live_sessions() == 6
    decoded = []
    decode = session_store.SessionStore.decode

    def counted(self: Any, data: str) -> Any:
        decoded.append(data)
        return decode(self, data)

    monkeypatch.setattr(session_store.SessionStore, "decode", counted)
    # when
    with CaptureQueriesContext(connection) as queries:
        doomed.delete()
    # then
    sql = [q["sql"] for q in queries]
    reads = [text for text in sql if 'FROM "django_session"' in text and not text.startswith("DELETE")]
    assert len(reads) == 1
    assert len(decoded) == 6
    assert _live_sessions() == 5
    (event,) = _ended_events()
    assert (event.tenant, event.actor) == ("acme", "revocation:account-deleted")
    assert json.loads(event.data) == {"user_id": signed_in.pk, "username": "gone7", "sessions": 1}
    assert_audit_intact()


def test_a_deletion_retried_after_failing_reads_the_sessions_again(tenant: Tenant) -> None:
    """Holds (with the fix): a deletion's read of the sessions is not kept for the next. Expect: a deletion through a
    ``QuerySet`` that fails after its ``pre_delete`` (another receiver raising), retried through the same ``QuerySet``
    (the same origin) after the user signed in again, ends that new session too."""
    user = User.objects.create_user("twice", is_staff=True)
    TenantMembership.objects.create(user=user, tenant=tenant)
    _sign_in(user)
    doomed = User.objects.filter(username="twice")

    def failing(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("a receiver after the revocation fails")

    pre_delete.connect(failing, sender=User, dispatch_uid="review_fr.failing")
    try:
        with pytest.raises(RuntimeError), transaction.atomic():
            doomed.delete()
    finally:
        pre_delete.disconnect(sender=User, dispatch_uid="review_fr.failing")
    assert _live_sessions() == 1  # rolled back
    _sign_in(user)
    assert _live_sessions() == 2
    # when
    doomed.delete()
    # then
    assert _live_sessions() == 0
    assert [json.loads(event.data)["sessions"] for event in _ended_events()] == [2]


def test_a_deletion_rolled_back_ends_no_session_and_records_nothing(tenant: Tenant) -> None:
    """Holds. Found: the sessions end and their event is appended in the deletion's transaction. Expect: a deletion
    that fails after ``pre_delete`` (here: the caller's transaction raising) leaves the session signing in and no
    ``login.sessions_ended`` event."""
    user = User.objects.create_user("kept", password=PASSWORD, is_staff=True)
    TenantMembership.objects.create(user=user, tenant=tenant)
    browser = _sign_in(user)
    # when
    with pytest.raises(RuntimeError), transaction.atomic():
        user.delete()
        raise RuntimeError("the deletion fails")
    # then
    assert _live_sessions() == 1
    assert browser.get("/admin/").status_code == 200
    assert _ended_events() == []
    assert_audit_intact()


def test_an_account_in_no_tenant_has_its_ended_sessions_in_the_platforms_trail() -> None:
    """Holds. Found: an account of no tenant's sessions ended with a ``login.sessions_ended`` event of tenant ``""``.
    Expect: that event, and every chain verifies after it and after a deletion's."""
    user = User.objects.create_user("platform-op", password=PASSWORD, is_staff=True)
    _sign_in(user)
    user.set_password("another long password 2")
    user.save()
    _sign_in(user)
    user.delete()
    assert [(event.tenant, event.actor) for event in _ended_events()] == [
        ("", "revocation:password-changed"),
        ("", "revocation:account-deleted"),
    ]
    assert assert_audit_intact() >= 2


def test_an_account_of_two_tenants_has_the_event_in_each_naming_the_account_only(
    tenant: Tenant, other_tenant: Tenant
) -> None:
    """Holds. Found: one event in each of the account's tenants' trails. Expect: each names the account, how many and
    why, and neither names the other tenant (as a token's ``governance.deleted`` event names its row only)."""
    user = User.objects.create_user("both", is_staff=True)
    TenantMembership.objects.create(user=user, tenant=tenant)
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    api_key_issue(user)
    _sign_in(user)
    user.is_active = False
    user.save()
    events = _ended_events()
    assert [event.tenant for event in events] == ["acme", "globex"]
    for event in events:
        assert json.loads(event.data) == {"user_id": user.pk, "username": "both", "sessions": 1}
        assert "globex" not in str(event.data) and "acme" not in str(event.data)
    for revoked in AuditEvent.objects.filter(event_type="governance.deleted"):
        assert "globex" not in str(revoked.data) and "acme" not in str(revoked.data)
    assert_audit_intact()


def test_a_logins_last_login_save_reads_no_stored_row(tenant: Tenant) -> None:
    """Holds. Found: review fi's ``pre_save`` reads the stored row at every full save. Expect: a login's save
    (``update_fields=["last_login"]``) reads none and ends nothing."""
    user = User.objects.create_user("returning", password=PASSWORD, is_staff=True)
    _sign_in(user)
    with CaptureQueriesContext(connection) as queries:
        user.save(update_fields=["last_login"])
    assert [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith("SELECT")] == []
    assert _live_sessions() == 1


def test_changepassword_ends_the_sessions_in_the_commands_transaction(
    tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Holds. Found: ``changepassword`` runs recorded (``governance_recording``). Expect: the account's session and
    token end, a ``revocation:password-changed`` event in its tenant's trail beside the ``governance.changed`` one,
    the chains intact."""
    user = User.objects.create_user("changing", password=PASSWORD, is_staff=True)
    TenantMembership.objects.create(user=user, tenant=tenant)
    api_key_issue(user)
    browser = _sign_in(user)
    monkeypatch.setattr(changepassword.Command, "_get_pass", lambda self, prompt="": "a-New-passw0rd-42")
    # when
    call_command("changepassword", "changing", stdout=StringIO())
    # then
    assert browser.get("/admin/").status_code == 302
    assert _live_sessions() == 0
    assert not Token.objects.filter(user=user).exists()
    (event,) = _ended_events()
    assert (event.tenant, event.actor) == ("acme", "revocation:password-changed")
    assert AuditEvent.objects.filter(event_type="governance.changed", tenant="acme").exists()
    assert_audit_intact()


def test_createsuperuser_on_an_existing_username_refuses_and_ends_nothing(
    tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Holds. Found: ``createsuperuser --noinput`` checks the name first. Expect: refused, the account's password,
    session and token kept, nothing recorded."""
    user = User.objects.create_user("taken", password=PASSWORD, is_staff=True)
    api_key_issue(user)
    _sign_in(user)
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "a-Root-passw0rd-42")
    with pytest.raises(CommandError, match="already taken"):
        call_command(
            "createsuperuser", "--noinput", "--username", "taken", "--email", "t@example.com", stdout=StringIO()
        )
    user.refresh_from_db()
    assert user.check_password(PASSWORD) and not user.is_superuser
    assert _live_sessions() == 1
    assert Token.objects.filter(user=user).exists()
    assert _ended_events() == []


def test_a_token_made_after_a_reactivation_in_its_transaction_stays(tenant: Tenant) -> None:
    """Holds. Found: the reactivating save deletes the tokens left. Expect: one made after it (the admin's Tokens
    page, the same request) is the account's new token and stays."""
    user = User.objects.create_user("back", password=PASSWORD, is_staff=True)
    api_key_issue(user)
    User.objects.filter(pk=user.pk).update(is_active=False)
    user.refresh_from_db()
    # when
    with transaction.atomic():
        user.is_active = True
        user.save()
        api_key_issue(user)
    # then
    assert Token.objects.filter(user=user).count() == 1
    assert AuditEvent.objects.filter(event_type="governance.deleted", actor="revocation:deactivated").count() == 1
