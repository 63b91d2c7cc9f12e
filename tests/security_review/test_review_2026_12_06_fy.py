"""Review 2026-12-06 (fy): the rights re-read rewritten as one SQL statement (``tenancy._reload_rights``).

Findings:
- A console session expiring exactly now read as good at the re-read: ``SessionStore.credential_rows`` bounded the
  session's row by ``expire_date >= now`` where Django's store loads it only while ``expire_date > now`` (and
  ``sessions_signed_in`` reads live rows the same way), so at that instant a waiting request was answered as its
  user while the next request through the same cookie signs in no one. ``CredentialRow`` now carries its bound's
  comparison (``bound_lookup``: ``gte`` for a key's age, ``gt`` for a session's expiry) in the SQL.

Checked and holding: the rights' columns read as booleans on SQLite (0/1) and PostgreSQL; a user row deleted
meanwhile reads as no one; a key regenerated (deleted, a new one issued) meanwhile is no longer the request's
credential; ``API_TOKEN_MAX_AGE_SECONDS`` None asks only the key's row; the statement through ``prepared_cursor``
with ``PREPARED_STATEMENTS`` off and on, and ``TRANSACTION_POOLER`` on (no session ``SET``: read in
``toolhub.prepared``), repeated past the prepare threshold; an ``AnonymousUser`` reads nothing; a request's
``SimpleLazyObject`` user is refreshed through; another session engine's session is loaded through its store; only
the rights' columns are refreshed, as ``refresh_from_db(fields=...)`` did (other attributes keep the request's
object, as before). Read, not tested: the SQL cache key holds the model class (a proxy or swapped user model has
its own class and table, so its own statement).
"""

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import AnonymousUser, User
from django.contrib.sessions.backends.db import SessionStore as DjangoDbSessionStore
from django.utils import timezone
from django.utils.functional import SimpleLazyObject
from rest_framework.authtoken.models import Token

from tests.security_review.console_sessions import console_user, session_signed_in
from toolhub.api.keys import api_key_issue, key_digest
from toolhub.api.token_use import TokenChannel
from toolhub.api.tokens import token_owner
from toolhub.session_store import SessionStore
from toolhub.tenancy import tenant_scope_now


def _freeze(monkeypatch: pytest.MonkeyPatch, at: datetime) -> None:
    monkeypatch.setattr(timezone, "now", lambda: at)


@pytest.mark.django_db
def test_a_session_expiring_exactly_now_reads_as_no_one(operator: User, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: a toolhub session whose ``expire_date`` is now read as good at the re-read (``>=``), though Django's
    store loads it as expired (``expire_date > now``): the waiting request was answered as its user.

    Expect: the re-read agrees with the store: expired at its expiry instant, no one.
    """
    key = session_signed_in(operator, SessionStore())
    user = console_user(SessionStore(key))
    assert user.is_active and tenant_scope_now(user).allows("acme")
    at = timezone.now().replace(microsecond=0) + timedelta(seconds=5)
    SessionStore.get_model_class().objects.filter(session_key=key_digest(key)).update(expire_date=at)
    _freeze(monkeypatch, at)
    assert SessionStore(key).load() == {}  # the next request through this cookie signs in no one
    assert not tenant_scope_now(user).allows("acme") and not user.is_active


@pytest.mark.django_db
def test_a_session_expiring_a_moment_later_holds(operator: User, monkeypatch: pytest.MonkeyPatch) -> None:
    """Holding. Expect: a session whose expiry is a microsecond ahead still signs in and reads as its user."""
    key = session_signed_in(operator, SessionStore())
    user = console_user(SessionStore(key))
    at = timezone.now().replace(microsecond=0) + timedelta(seconds=5)
    SessionStore.get_model_class().objects.filter(session_key=key_digest(key)).update(expire_date=at)
    _freeze(monkeypatch, at - timedelta(microseconds=1))
    assert SessionStore(key).load().get(SESSION_KEY) == str(operator.pk)
    assert tenant_scope_now(user).allows("acme") and user.is_active and user.is_staff


@pytest.mark.django_db
def test_rights_columns_read_as_booleans_and_only_they_refresh(alice: User) -> None:
    """Holding. Expect: the rights' columns come back as Python booleans on either database (SQLite's 0/1), revoked
    and granted both seen; other attributes keep the request's object, as ``refresh_from_db(fields=...)`` did."""
    key = api_key_issue(alice)
    user, _ = token_owner(key, channel=TokenChannel.REST)
    User.objects.filter(pk=alice.pk).update(is_staff=True, is_superuser=False, email="changed@example.com")
    tenant_scope_now(user)
    assert (user.is_active, user.is_staff, user.is_superuser) == (True, True, False)
    assert all(type(value) is bool for value in (user.is_active, user.is_staff, user.is_superuser))
    assert user.email == "alice@example.com"
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert not tenant_scope_now(user).allows("acme") and user.is_active is False


@pytest.mark.django_db
def test_a_user_deleted_meanwhile_and_a_key_regenerated_meanwhile(alice: User) -> None:
    """Holding. Expect: a key replaced by a new one (the old row deleted) leaves its request no one; a user deleted
    meanwhile is no one (no error)."""
    key = api_key_issue(alice)
    user, _ = token_owner(key, channel=TokenChannel.REST)
    Token.objects.filter(user=alice).delete()
    api_key_issue(alice)  # the new key: another row
    assert not tenant_scope_now(user).allows("acme") and not user.is_active

    key = Token.objects.get(user=alice)
    other = User.objects.get(pk=alice.pk)
    User.objects.filter(pk=alice.pk).delete()
    assert not tenant_scope_now(other).allows("acme") and not other.is_active
    assert key.key  # the key was the user's; deleted with them


@pytest.mark.django_db
def test_no_key_age_limit_asks_only_the_keys_row(alice: User, settings: Any) -> None:
    """Holding. Expect: with ``API_TOKEN_MAX_AGE_SECONDS`` None a key of any age holds; deleted, it does not."""
    settings.TOOLHUB = {**settings.TOOLHUB, "API_TOKEN_MAX_AGE_SECONDS": None}
    key = api_key_issue(alice)
    Token.objects.filter(key=key_digest(key)).update(created=timezone.now() - timedelta(days=3650))
    user, _ = token_owner(key, channel=TokenChannel.REST)
    assert tenant_scope_now(user).allows("acme") and user.is_active
    Token.objects.filter(key=key_digest(key)).delete()
    assert not tenant_scope_now(user).allows("acme")


@pytest.mark.django_db
@pytest.mark.parametrize("prepared,pooler", [(False, False), (True, False), (True, True)])
def test_the_statement_through_each_cursor_setting(alice: User, settings: Any, prepared: bool, pooler: bool) -> None:
    """Holding. Expect: ``PREPARED_STATEMENTS`` off or on, ``TRANSACTION_POOLER`` on, the statement answers alike,
    repeated past psycopg's prepare threshold, a revoked key seen on the repeat that is prepared."""
    settings.TOOLHUB = {**settings.TOOLHUB, "PREPARED_STATEMENTS": prepared, "TRANSACTION_POOLER": pooler}
    key = api_key_issue(alice)
    user, _ = token_owner(key, channel=TokenChannel.REST)
    for _ in range(4):
        assert tenant_scope_now(user).allows("acme") and user.is_active
    Token.objects.filter(key=key_digest(key)).delete()
    assert not tenant_scope_now(user).allows("acme") and not user.is_active


@pytest.mark.django_db
def test_anonymous_and_lazy_users(alice: User) -> None:
    """Holding. Expect: an ``AnonymousUser`` reads nothing and no statement fails; a ``SimpleLazyObject`` around a
    keyed user is re-read through (the wrapped object's flags)."""
    assert not tenant_scope_now(AnonymousUser()).allows("acme")
    key = api_key_issue(alice)
    lazy = SimpleLazyObject(lambda: token_owner(key, channel=TokenChannel.REST)[0])
    assert tenant_scope_now(lazy).allows("acme")
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert not tenant_scope_now(lazy).allows("acme") and not lazy.is_active


@pytest.mark.django_db
def test_another_session_engine_is_loaded_through_its_store(operator: User) -> None:
    """Holding. Expect: Django's own database store (no ``credential_rows``) is asked by loading the session: good
    while it signs in, no one once expired or ended."""
    key = session_signed_in(operator, DjangoDbSessionStore())
    user = console_user(DjangoDbSessionStore(key))
    assert tenant_scope_now(user).allows("acme") and user.is_active
    DjangoDbSessionStore.get_model_class().objects.filter(session_key=key).update(expire_date=timezone.now())
    assert not tenant_scope_now(user).allows("acme") and not user.is_active
