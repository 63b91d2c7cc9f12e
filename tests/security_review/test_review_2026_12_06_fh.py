"""Review 2026-12-06 (fh): API tokens' latest use and the admin's Tokens page, read as an attacker and an operator.

Each finding's test fails on the code as found (main at 3fc511b) and states what was found ("Found: ...") and what
is expected ("Expect: ...").

Findings:

1. Every token made before the use table existed read "never" used and was listed under "never" and "not in 30 days,
   or never" (the ones to retire first) from the day of the upgrade: a token a monthly job used last week looked
   abandoned. Now an unstamped token made before uses were recorded (migration ``0050_api_token_use`` applied) says
   since when none was, is never "never", and is "unused" only once recording has run 30 days.
   ``test_a_token_made_before_uses_were_recorded_is_not_called_never_used``.
2. Sorted by "last used", the never-used tokens went where the database puts NULLs: on PostgreSQL after the tokens
   used today when sorted least recently used first (the order to find tokens to retire), and on top, as if just
   used, when sorted most recent first (SQLite the opposite). Now "never" sorts as the oldest on every database
   (``nulls_first`` ascending, reversed descending). ``test_sorting_by_last_use_puts_the_never_used_with_the_oldest``.

Checked and holding:

- The Tokens page is all or nothing (``CrossTenantOnly``): a tenant's staff holding every ``authtoken`` permission
  and ``auth.view_user`` see no module, and its list (filtered, searched), add, change, delete and history pages
  answer 403 for their own tenant's user's token, another tenant's and a superuser's; so no count, filter or
  last-use time crosses tenants. The user list refuses lookups through the token and its use (400).
- The 30-day boundary is in absolute time (``timezone.now()``), so no time zone moves it; "recently" and "unused"
  split every token (30 days less a minute: recent; and a minute: unused).
- No Tokens page (list filtered, searched, sorted by last use, facets; change, delete, history) nor the stamp's name
  shows the key or its digest.
- MCP stamps an accepted key "mcp" and never an expired, inactive-user or unknown one (REST: tests/api).
- Revoke while in use, on PostgreSQL: a user deleted on the user delete page while a request with their key stamps
  it between the deletion's two statements commits, leaves nothing of the token and refuses the request (checked
  to fail with the ``pre_delete`` lock taken out: the deletion's foreign key fails). Password reset: review ev.
- A key presented for a tenant its user is not in is refused (400) in the same words for an existing and an
  unknown tenant, and is stamped: the tenant is the request's, not the token's, and after a leak "was this key
  used?" must answer yes. An expired key over MCP is told what to do, no key in the message, and not stamped.
- A token's life (added on the page, used over REST and MCP, revoked by a password reset, issued again, deleted on
  its page) leaves neither key nor digest in any audit event or admin history entry.
- Probed without a test of its own: every REST view authenticates eagerly through DRF's defaults (no view sets
  ``authentication_classes`` or overrides ``perform_authentication``; the schema, docs, export and artifact views
  included), so each stamps; MCP is stateless, POST only, one ``token_owner`` per HTTP request; websockets are
  refused before any token is read. The stamp's warning names the error's class only, and Django's error reports
  hide ``HTTP_AUTHORIZATION``. A cross-tenant (non-superuser) person may make a token for a superuser: by design,
  as they may also change superuser status (README, People's accounts).
- README's token claims: one token a user (DRF's one-to-one), 90 days by default, ``Token`` (REST) and ``Bearer``
  or ``Token`` (MCP), the list searched by username only, refused keys stamped with nothing.
"""

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.helpers import console
from tests.tenancy.conftest import make_user
from toolhub.api.keys import api_key_issue, key_digest
from toolhub.api.token_use import STAMP_RESOLUTION
from toolhub.mcp_caller import token_user
from toolhub.models import ApiTokenUse, Tenant

TOKENS = "/admin/authtoken/tokenproxy/"


def _rows(page: str) -> dict[str, str]:
    """The Tokens list's rows: each token's user, and what its "last used" column says."""
    row = r'class="field-user[^"]*"><a [^>]*>([^<]+)</a></th>.*?class="field-last_used">([^<]*)<'
    return dict(re.findall(row, page))


def _rest(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _stamp(key: str, ago: timedelta, channel: str = "rest") -> None:
    ApiTokenUse.objects.update_or_create(
        token_id=key_digest(key), defaults={"last_used_at": timezone.now() - ago, "channel": channel}
    )


@pytest.mark.django_db
def test_tenant_staff_holding_every_token_permission_reach_no_token_page(
    tenant: Tenant, other_tenant: Tenant, alice: User
) -> None:
    """Holding. Found: the Tokens page is for people who cross the boundary only (``CrossTenantOnly``).

    Expect: a tenant's operator holding every ``authtoken`` permission and ``auth.view_user`` sees no Tokens module,
    and its list (filtered or not), add, change, delete and history pages answer 403, for a token of their own
    tenant's user, of another tenant's, and of a superuser.
    """
    globex_user = make_user("globex-user", tenant=other_tenant)
    root = User.objects.create_superuser("root", password="pw-root-123456")
    for user in (alice, globex_user, root):
        api_key_issue(user)
    staff = make_user("acme-staff", tenant=tenant, staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="authtoken"),
        Permission.objects.get(content_type__app_label="auth", codename="view_user"),
    )
    client = console(staff)

    index = client.get("/admin/").content.decode()
    assert TOKENS not in index
    pages = [TOKENS, f"{TOKENS}?used=never", f"{TOKENS}?used=recently", f"{TOKENS}?q=root", f"{TOKENS}add/"]
    for user in (alice, globex_user, root):
        pages += [f"{TOKENS}{user.pk}/change/", f"{TOKENS}{user.pk}/delete/", f"{TOKENS}{user.pk}/history/"]
    assert {page: client.get(page).status_code for page in pages} == dict.fromkeys(pages, 403)
    assert client.post(f"{TOKENS}add/", {"user": globex_user.pk}).status_code == 403
    assert client.post(f"{TOKENS}{root.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Token.objects.count() == 3


@pytest.mark.django_db
def test_tenant_staff_cannot_filter_users_by_their_tokens_use(tenant: Tenant, alice: User) -> None:
    """Holding. Found: the user list refuses lookups through a reverse relation it does not declare.

    Expect: a tenant's operator reading their tenant's users cannot ask the list which of them hold a token, or
    used one since a date (``?auth_token__use__last_used_at__gte=``): 400, nothing listed.
    """
    key = api_key_issue(alice)
    _stamp(key, timedelta(days=1))
    staff = make_user("acme-staff", tenant=tenant, staff=True)
    staff.user_permissions.add(Permission.objects.get(content_type__app_label="auth", codename="view_user"))
    client = console(staff)
    assert client.get("/admin/auth/user/").status_code == 200
    for probe in (
        "auth_token__use__last_used_at__gte=2000-01-01",
        "auth_token__isnull=False",
        "auth_token__use__channel=rest",
        "auth_token__created__gte=2000-01-01",
        "o=auth_token__use__last_used_at",
    ):
        answer = client.get(f"/admin/auth/user/?{probe}")
        # a lookup is refused; ``o=`` takes column numbers only, so a field path there is ignored
        assert answer.status_code == (200 if probe.startswith("o=") else 400), probe


@pytest.mark.django_db
def test_the_thirty_day_boundary_splits_every_token_into_one_choice(alice: User, operator: User) -> None:
    """Holding. Found: "recently" is ``>= now - 30 days``, "unused" its complement or no stamp, in absolute time.

    Expect: a token used 30 days less a minute ago is recent, one used 30 days and a minute ago is unused, one never
    used is unused and never; each token in exactly one of recently / unused.
    """
    near = api_key_issue(alice)
    _stamp(near, timedelta(days=30) - timedelta(minutes=1))
    far = api_key_issue(operator)
    _stamp(far, timedelta(days=30, minutes=1))
    nobody = User.objects.create_user("carol", password="pw-carol-123456")
    api_key_issue(nobody)
    admin = console(User.objects.create_superuser("root", password="pw-root-123456"))

    recent = _rows(admin.get(f"{TOKENS}?used=recently").content.decode())
    unused = _rows(admin.get(f"{TOKENS}?used=unused").content.decode())
    never = _rows(admin.get(f"{TOKENS}?used=never").content.decode())
    assert set(recent) == {"alice"}
    assert set(unused) == {"operator", "carol"}
    assert set(never) == {"carol"}


@pytest.mark.django_db
def test_no_token_page_shows_the_key_or_its_digest(alice: User) -> None:
    """Holding. Found: the Tokens pages name a token by its user and creation time.

    Expect: neither the key nor its digest on the list (filtered, searched, sorted by last use), change, delete or
    history page, nor in the stamp's own name.
    """
    key = api_key_issue(alice)
    assert _rest(key).get("/api/v1/calls/").status_code == 200
    admin = console(User.objects.create_superuser("root", password="pw-root-123456"))
    pages = [TOKENS, f"{TOKENS}?used=recently", f"{TOKENS}?q=alice", f"{TOKENS}?o=2", f"{TOKENS}?_facets=1"]
    pages += [f"{TOKENS}{alice.pk}/change/", f"{TOKENS}{alice.pk}/delete/", f"{TOKENS}{alice.pk}/history/"]
    for page in pages:
        answer = admin.get(page)
        assert answer.status_code == 200, page
        text = answer.content.decode()
        assert key not in text and key_digest(key) not in text, page
    use = ApiTokenUse.objects.get()
    assert key_digest(key) not in str(use) and key not in str(use)


@pytest.mark.django_db
def test_mcp_stamps_an_accepted_token_and_never_a_refused_one(settings: Any, alice: User) -> None:
    """Holding. Found: MCP reads a key through ``token_owner`` as REST does.

    Expect: a key accepted over MCP is stamped "mcp"; an expired one, an inactive user's one (deactivated by a bulk
    update, which revokes nothing) and an unknown one are refused and stamped with nothing.
    """
    key = api_key_issue(alice)
    user, problem = token_user(f"Bearer {key}")
    assert user == alice and problem == ""
    assert ApiTokenUse.objects.get(token_id=key_digest(key)).channel == "mcp"

    settings.TOOLHUB = {**settings.TOOLHUB, "API_TOKEN_MAX_AGE_SECONDS": 3600}
    bob = User.objects.create_user("bob", password="pw-bob-123456")
    old = api_key_issue(bob)
    Token.objects.filter(key=key_digest(old)).update(created=timezone.now() - timedelta(hours=2))
    carol = User.objects.create_user("carol", password="pw-carol-123456")
    idle = api_key_issue(carol)
    User.objects.filter(pk=carol.pk).update(is_active=False)
    for refused in (old, idle, "no-such-key"):
        assert token_user(f"Bearer {refused}")[0] is None
    assert list(ApiTokenUse.objects.values_list("token_id", flat=True)) == [key_digest(key)]
    assert ApiTokenUse.objects.get().last_used_at > timezone.now() - STAMP_RESOLUTION


@pytest.mark.django_db
def test_a_token_made_before_uses_were_recorded_is_not_called_never_used(alice: User, operator: User) -> None:
    """Found: every token made before the use table existed (migration ``0050_api_token_use``) read "never" on the
    Tokens page and was listed under "never" and "not in 30 days, or never", the ones to retire first, the day the
    upgrade went in: a token a monthly job used last week, whose use nobody could record, looked abandoned, and
    retiring it broke the job. README: "never" is for a token nobody presented.

    Expect: an unstamped token made before uses were recorded says since when none was recorded, is not "never",
    and is "unused" only once recording has run for the whole 30 days; one made since, never used, stays "never".
    """
    from django.db.migrations.recorder import MigrationRecorder

    recorded = MigrationRecorder.Migration.objects.filter(app="toolhub", name="0050_api_token_use")
    start = timezone.now() - timedelta(days=3)  # the upgrade went in three days ago
    assert recorded.update(applied=start) == 1
    api_key_issue(alice)
    Token.objects.filter(user=alice).update(created=start - timedelta(days=50))  # made long before, in use since
    api_key_issue(operator)  # made since, never presented
    admin = console(User.objects.create_superuser("root", password="pw-root-123456"))

    rows = _rows(admin.get(TOKENS).content.decode())
    assert rows["operator"] == "never"
    assert rows["alice"] != "never" and f"{timezone.localtime(start):%Y-%m-%d %H:%M}" in rows["alice"], rows
    assert set(_rows(admin.get(f"{TOKENS}?used=never").content.decode())) == {"operator"}
    assert set(_rows(admin.get(f"{TOKENS}?used=unused").content.decode())) == {"operator"}
    assert set(_rows(admin.get(f"{TOKENS}?used=recently").content.decode())) == set()

    # once recording has run for longer than 30 days, an unstamped old token is known unused for 30 days
    recorded.update(applied=timezone.now() - timedelta(days=31))
    assert set(_rows(admin.get(f"{TOKENS}?used=unused").content.decode())) == {"alice", "operator"}
    assert set(_rows(admin.get(f"{TOKENS}?used=never").content.decode())) == {"operator"}

    # a database that does not say when (no row for the migration): every unstamped token is "never", as before
    recorded.delete()
    assert _rows(admin.get(TOKENS).content.decode()) == {"alice": "never", "operator": "never"}
    assert set(_rows(admin.get(f"{TOKENS}?used=never").content.decode())) == {"alice", "operator"}


@pytest.mark.django_db
def test_a_tokens_life_puts_neither_key_nor_digest_in_the_trail_or_the_history(tenant: Tenant, alice: User) -> None:
    """Holding. Found: a token is named by ``token_handle`` and its key field is excluded from governance events.

    Expect: a token added on the Tokens page, used over REST and MCP, then revoked by a password reset and made
    again by ``api_key_issue`` then deleted on its page leaves neither key nor digest in any audit event (type,
    actor, data) or admin history entry.
    """
    from django.contrib.admin.models import LogEntry

    from tests.helpers import shown_key
    from toolhub.models import AuditEvent

    admin = console(User.objects.create_superuser("root", password="pw-root-123456"))
    added = admin.post(f"{TOKENS}add/", {"user": alice.pk})
    first = shown_key(added)
    assert _rest(first).get("/api/v1/calls/").status_code == 200
    assert token_user(f"Bearer {first}")[0] == alice
    alice.set_password("a-new-password-654321")
    alice.save()
    assert _rest(first).get("/api/v1/calls/").status_code == 401
    second = api_key_issue(alice)
    assert _rest(second).get("/api/v1/calls/").status_code == 200
    assert admin.post(f"{TOKENS}{alice.pk}/delete/", {"post": "yes"}).status_code == 302

    events = list(AuditEvent.objects.all())
    assert any("revocation:password-changed" == event.actor for event in events)
    text = " ".join(f"{e.event_type} {e.actor} {e.tool_name} {e.data}" for e in events)
    text += " ".join(f"{e.object_id} {e.object_repr} {e.change_message}" for e in LogEntry.objects.all())
    for secret in (first, second, key_digest(first), key_digest(second)):
        assert secret not in text


def _order(page: str) -> list[str]:
    return list(_rows(page))


@pytest.mark.django_db
def test_sorting_by_last_use_puts_the_never_used_with_the_oldest(alice: User, operator: User) -> None:
    """Found: the "last used" column sorted by ``use__last_used_at`` as the database puts NULLs: PostgreSQL puts them
    last ascending and first descending, so sorted least recently used first (to find the tokens to retire) the
    never-used tokens came after the ones used today, on the last page, and sorted most recent first they topped it
    as if used just now; SQLite did the opposite.

    Expect: "never" sorts as older than any use, on every database: ascending never, 40 days, 1 day; descending the
    reverse.
    """
    _stamp(api_key_issue(alice), timedelta(days=1))
    _stamp(api_key_issue(operator), timedelta(days=40))
    api_key_issue(User.objects.create_user("carol", password="pw-carol-123456"))
    admin = console(User.objects.create_superuser("root", password="pw-root-123456"))

    assert _order(admin.get(f"{TOKENS}?o=2").content.decode()) == ["carol", "operator", "alice"]
    assert _order(admin.get(f"{TOKENS}?o=-2").content.decode()) == ["alice", "operator", "carol"]


@pytest.mark.django_db
def test_a_key_presented_for_a_tenant_not_its_users_is_refused_and_still_counts_as_used(
    settings: Any, alice: User, other_tenant: Tenant
) -> None:
    """Holding (by design). Found: the tenant is a request's parameter, not the token's: ``token_owner`` accepts the
    key, stamps it, and the request is refused for the tenant it names.

    Expect: naming another tenant is refused (400) in the same words whether it exists or not, and the key is
    stamped: after a leak, "was this key used?" must answer yes for an intruder trying tenants with it. An expired
    key is refused over MCP with what to do and no key in the message, and stamped with nothing.
    """
    key = api_key_issue(alice)
    answers = {
        slug: _rest(key).post(
            "/api/v1/calls/", {"tool": "lookup_order", "arguments": {}, "tenant": slug}, format="json"
        )
        for slug in (other_tenant.slug, "no-such-tenant")
    }
    assert {answer.status_code for answer in answers.values()} == {400}
    # the same words for a tenant that exists and one that does not: no oracle of the tenants
    said = {answer.json()["detail"].replace(repr(slug), "<tenant>") for slug, answer in answers.items()}
    assert len(said) == 1, said
    assert ApiTokenUse.objects.filter(token_id=key_digest(key)).exists()

    settings.TOOLHUB = {**settings.TOOLHUB, "API_TOKEN_MAX_AGE_SECONDS": 3600}
    bob = User.objects.create_user("bob", password="pw-bob-123456")
    old = api_key_issue(bob)
    Token.objects.filter(key=key_digest(old)).update(created=timezone.now() - timedelta(hours=2))
    user, problem = token_user(f"Bearer {old}")
    assert user is None and "expired" in problem and "Tokens" in problem and old not in problem
    assert not ApiTokenUse.objects.filter(token_id=key_digest(old)).exists()


@pytest.mark.postgres  # row locks and a deferred foreign key: SQLite has neither
@pytest.mark.django_db(transaction=True)
def test_a_user_deleted_while_their_key_is_in_use_is_deleted(alice: User) -> None:
    """Holding. Found: every token deletion locks its token first (``pre_delete``), whatever path deletes it.

    Expect: an administrator deleting alice on the user delete page while a request with her key stamps it between
    the deletion's two statements (its use rows, then the token): the deletion commits, nothing of her token is
    left, and the request is refused.
    """
    import threading

    from django.db import connection

    from tests.security_review.pg_races import in_thread
    from tests.security_review.test_review_2026_12_06_ev import _after_statement, _until_done_or_waiting
    from toolhub.api.token_use import TokenChannel
    from toolhub.api.tokens import TokenRefused, token_owner

    key = api_key_issue(alice)
    root = User.objects.create_superuser("root", password="pw-root-123456")
    reached, release = threading.Event(), threading.Event()
    use_table = ApiTokenUse._meta.db_table

    def delete() -> int:
        with connection.execute_wrapper(_after_statement(f'DELETE FROM "{use_table}"', reached, release)):
            return console(root).post(f"/admin/auth/user/{alice.pk}/delete/", {"post": "yes"}).status_code

    def request() -> Any:
        try:
            return token_owner(key, channel=TokenChannel.REST)[0].pk
        except TokenRefused as refused:
            return refused

    deleting, deleted = in_thread(delete, "delete")
    try:
        assert reached.wait(10), deleted
        requesting, requested = in_thread(request, "request")
        _until_done_or_waiting(requesting)
    finally:
        release.set()
        deleting.join(10)
    requesting.join(10)

    assert deleted == [302], deleted
    assert not User.objects.filter(pk=alice.pk).exists()
    assert not Token.objects.exists() and not ApiTokenUse.objects.exists()
    assert len(requested) == 1 and isinstance(requested[0], TokenRefused), requested
