"""Review 2026-12-06 (gd): a credential ends with the password and the console it was issued under, even unsignalled.

Each finding's test fails on the reviewed code (main at 2c06cf9) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A password written without a save (``User.objects.filter(...).update(password=...)``, ``bulk_update`` after
   ``set_unusable_password``, raw SQL: what an incident responder's script or shell does to a set of accounts feared
   taken) left every API token of those accounts working, REST and MCP alike: revocation ran on ``post_save`` only
   (``toolhub.api.token_revocation``), and the token held no trace of the password it was made under. Now a token
   is bound at its creation to a fingerprint of its user's password (``toolhub.api.token_binding``), and
   ``token_owner`` refuses a key whose user's password is no longer the one it was issued under, in the statement
   that reads the key (one join, no statement more).
2. A request waiting (``?wait=``, MCP, a call run in the request, a console export) when such a password was written
   was answered as its user: the rights' re-read (``toolhub.tenancy.tenant_scope_now``) asked the key's or the
   session's row, which the update left, not the password. Now the re-read reads the password's column in the same
   statement and a credential authenticated under another password reads as no one.
3. A console session's waiting request after its account was unstaffed by ``QuerySet.update`` was answered as its
   user (tenant-wide by its group's permissions): the session is the console's and signs in active staff only
   (``ConsoleSessionAuthentication``, the admin), but the re-read asked only its row, which a save would have deleted
   and the update left. Now a session's mark says it needs staff, and the re-read refuses it once the account is not.

Checked and holding (tests below marked "Holding"):

- A waiting request after a bulk deactivation (token or session) answers nothing: the re-read reads ``is_active``.
- Django's rehash of a password at a login (``check_password``'s save of ``password`` alone) keeps the token, as the
  save-side revocation does: the token's binding follows the rehash.
- One unusable password for another by ``update`` keeps a token, as a save does (an account signing in by token only).
- With the fix (tests of finding 1's other paths): a token made by ``Token.objects.create`` (the admin's Tokens page,
  fixtures) is bound too; a token row with no binding (``bulk_create``, SQL) authenticates no one (fails closed, as a
  key stored as no digest does); migration ``0052_api_token_binding`` binds the tokens already there.
- Statement counts: the token's authentication and POST /api/v1/calls/ keep theirs (review fw's pinned 11 on
  PostgreSQL); the re-read is still one statement.
- Read in the code: no toolhub command or admin action writes users' passwords or flags by ``QuerySet.update``
  (``changepassword``, the admin's forms save); Django's ``changepassword`` goes through ``set_password`` + ``save``.

Neighbours' tests changed with the fix: review cy's rehash test set a usable password over an unusable one by
``update`` and kept using the token made before (now refused, as a save would revoke it: it takes a new token first);
review dh's digest-migration test runs 0052's binding after 0047's digests, as the migrations do; review do's delete
page helper reads the list to its end (the token's binding is a nested list now listed under it).

Left: an account deactivated and then reactivated both by ``QuerySet.update`` gets its token back (a fingerprint of
the state cannot tell "active again" from "never deactivated"; a reactivating save revokes the token, as before). A
hash written as is by ``save(update_fields=["password"])`` reads as Django's rehash at a login (as it did for the
save-side revocation), so it rebinds the tokens rather than ending them; ``set_password`` + ``save`` ends them.
A request waiting while a concurrent login rehashes the same password reads as no one (conservative).
"""

from typing import Any

import pytest
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.security_review.console_sessions import console_user, session_signed_in, upgradable_password
from toolhub.api.keys import api_key_issue, key_digest
from toolhub.api.token_use import TokenChannel
from toolhub.api.tokens import TokenRefused, token_owner
from toolhub.session_store import SessionStore
from toolhub.tenancy import tenant_scope_now


def _rest_status(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return int(client.get("/api/v1/calls/").status_code)


@pytest.mark.django_db
def test_a_bulk_password_reset_ends_the_api_token(alice: User) -> None:
    """Found: ``User.objects.filter(...).update(password=...)`` (no signal) left the account's key answering the REST
    API (200) and MCP.

    Expect: the key is refused on both (401, ``TokenRefused``): it was issued under another password.
    """
    key = api_key_issue(alice)
    assert _rest_status(key) == 200
    User.objects.filter(pk__in=[alice.pk]).update(password=make_password("reset-by-the-incident-team"))
    assert _rest_status(key) == 401
    with pytest.raises(TokenRefused):
        token_owner(key, channel=TokenChannel.MCP)


@pytest.mark.django_db
def test_set_unusable_password_and_bulk_update_ends_the_api_token(alice: User) -> None:
    """Found: ``set_unusable_password`` on each account then ``bulk_update(users, ["password"])`` (no signal) left
    the key working.

    Expect: refused: "usable password: no" locks the account out of its tokens too, as the admin form's save does.
    """
    key = api_key_issue(alice)
    users = list(User.objects.filter(pk=alice.pk))
    for user in users:
        user.set_unusable_password()
    User.objects.bulk_update(users, ["password"])
    with pytest.raises(TokenRefused):
        token_owner(key, channel=TokenChannel.REST)
    assert _rest_status(key) == 401


@pytest.mark.django_db
def test_a_waiting_token_request_after_a_bulk_password_reset_reads_no_one(alice: User) -> None:
    """Found: a request authenticated by a key, waiting while the account's password was written by ``update``, was
    answered as its user at the re-read (the key's row still there).

    Expect: the re-read sees the password changed since the key authenticated: no one, nothing answered.
    """
    key = api_key_issue(alice)
    user, _ = token_owner(key, channel=TokenChannel.REST)
    assert tenant_scope_now(user).allows("acme")
    User.objects.filter(pk=alice.pk).update(password=make_password("reset"))
    assert not tenant_scope_now(user).allows("acme") and not user.is_active


@pytest.mark.django_db
def test_a_waiting_session_request_after_a_bulk_password_reset_reads_no_one(operator: User) -> None:
    """Found: a console session's waiting request (an export between chunks, ``?wait=``) after ``update`` wrote the
    account's password was answered as its user: the session's row was left, and Django's hash check runs only at
    the next request.

    Expect: no one at the re-read, as the next request through the cookie is.
    """
    key = session_signed_in(operator)
    user = console_user(SessionStore(key))
    assert tenant_scope_now(user).allows("acme") and user.is_staff
    User.objects.filter(pk=operator.pk).update(password=make_password("reset"))
    assert not tenant_scope_now(user).allows("acme") and not user.is_active
    assert not console_user(SessionStore(key)).is_authenticated  # the next request: Django's own check agrees


@pytest.mark.django_db
def test_a_waiting_session_request_after_a_bulk_unstaffing_reads_no_one(operator: User) -> None:
    """Found: an operator's session waiting while ``update(is_staff=False)`` took the console away was answered as
    the operator (the session's row left; its group's permissions still tenant-wide).

    Expect: a session signs in active staff only: no one at the re-read, as at the session's next request.
    """
    key = session_signed_in(operator)
    user = console_user(SessionStore(key))
    assert tenant_scope_now(user).allows("acme")
    User.objects.filter(pk=operator.pk).update(is_staff=False)
    assert not tenant_scope_now(user).allows("acme") and not user.is_active


@pytest.mark.django_db
def test_holding_a_waiting_request_after_a_bulk_deactivation_reads_no_one(alice: User, operator: User) -> None:
    """Holding. Expect: ``update(is_active=False)`` during the wait leaves a token's and a session's request no one."""
    user, _ = token_owner(api_key_issue(alice), channel=TokenChannel.REST)
    by_session = console_user(SessionStore(session_signed_in(operator)))
    assert tenant_scope_now(user).allows("acme") and tenant_scope_now(by_session).allows("acme")
    User.objects.filter(pk__in=[alice.pk, operator.pk]).update(is_active=False)
    assert not tenant_scope_now(user).allows("acme") and not tenant_scope_now(by_session).allows("acme")


@pytest.mark.django_db
def test_holding_a_rehash_at_login_keeps_the_token(alice: User, settings: Any) -> None:
    """Holding. Expect: Django's upgrade of the stored hash at a login is no new password: the key still works,
    before and after, and the account's password is the same one."""
    upgradable_password(alice, "pw", settings)
    key = api_key_issue(alice)
    assert _rest_status(key) == 200
    assert alice.check_password("pw")  # saves the rehash (``update_fields=["password"]``)
    assert User.objects.get(pk=alice.pk).password.startswith("pbkdf2_")
    assert _rest_status(key) == 200


@pytest.mark.django_db
def test_holding_one_unusable_password_for_another_keeps_the_token(alice: User) -> None:
    """Holding. Expect: an account with no usable password given another unusable one by ``update`` keeps its key,
    as the save-side revocation keeps it (an account signing in by token only)."""
    alice.set_unusable_password()
    alice.save()
    key = api_key_issue(alice)
    assert _rest_status(key) == 200
    User.objects.filter(pk=alice.pk).update(password=make_password(None))
    assert _rest_status(key) == 200


@pytest.mark.django_db
def test_a_token_made_by_any_save_is_bound_and_an_unbound_one_fails_closed(alice: User) -> None:
    """Found (finding 1's other makers): a token carried nothing of its password, however it was made.

    Expect: a token saved by ``Token.objects.create`` (the admin's Tokens, fixtures) authenticates and
    ends with a bulk password reset; a token row written with no binding (``bulk_create``) authenticates no one."""
    key = "k" * 40
    Token.objects.create(user=alice, key=key_digest(key))
    assert _rest_status(key) == 200
    User.objects.filter(pk=alice.pk).update(password=make_password("reset"))
    assert _rest_status(key) == 401

    other = "o" * 40
    Token.objects.filter(user=alice).delete()
    Token.objects.bulk_create([Token(user=alice, key=key_digest(other))])
    with pytest.raises(TokenRefused):
        token_owner(other, channel=TokenChannel.REST)


@pytest.mark.django_db
def test_holding_the_token_authentication_and_the_reread_cost_one_statement_each(alice: User) -> None:
    """Holding. Expect: ``token_owner`` of a key stamped within the window reads one statement (key, user, use and
    binding joined); the re-read of its user as many as of a user no credential marks (the key and the password
    asked inside the user's row)."""
    key = api_key_issue(alice)
    token_owner(key, channel=TokenChannel.REST)  # stamps the use
    with CaptureQueriesContext(connection) as authenticated:
        user, _ = token_owner(key, channel=TokenChannel.REST)
    assert len(authenticated.captured_queries) == 1
    with CaptureQueriesContext(connection) as reread:
        tenant_scope_now(user)
    plain = User.objects.get(pk=alice.pk)
    with CaptureQueriesContext(connection) as unmarked:
        tenant_scope_now(plain)
    assert len(reread.captured_queries) == len(unmarked.captured_queries)


@pytest.mark.django_db
def test_the_migration_binds_the_tokens_already_there(alice: User) -> None:
    """Found (finding 1, at the upgrade): tokens already made carried nothing of their password.

    Expect: a token made before the binding table (no binding row) is bound by the migration to its user's
    password as stored, so it keeps working after the upgrade, and still ends with a bulk password reset."""
    import importlib
    from types import SimpleNamespace

    from django.apps import apps

    from toolhub.models import ApiTokenBinding

    migration = importlib.import_module("toolhub.migrations.0052_api_token_binding")
    key = api_key_issue(alice)
    ApiTokenBinding.objects.all().delete()  # as before the migration
    assert _rest_status(key) == 401
    migration.bind_tokens(apps, SimpleNamespace(connection=connection))
    assert _rest_status(key) == 200
    User.objects.filter(pk=alice.pk).update(password=make_password("reset"))
    assert _rest_status(key) == 401
