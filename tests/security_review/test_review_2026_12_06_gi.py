"""Review 2026-12-06 (gi): gd's API token binding (``toolhub.api.token_binding``, migration 0052).

Each finding's test fails on the reviewed code (main at b4a99d8) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A rehash at a login brought back a token a bulk password reset had ended: ``tokens_rebind`` bound every token of
   the user to the rehashed password, whatever password each was bound to. An account reset by ``update`` with a
   hash Django upgrades at the next login (another hasher, fewer iterations than this Django's: every hash after a
   Django upgrade) had its reset password checked at that login, and the token the reset meant to end (issued under
   the old password, perhaps copied by the intruder) answered 200 again. Now a rehash rebinds only the tokens bound
   to the hash it replaces.
2. A new password written as a hash by ``save(update_fields=["password"])`` (a script, a careless form) read as
   Django's rehash at a login: the account's tokens were rebound to it and kept, and its sessions kept, though the
   same hash written by ``QuerySet.update`` ends the tokens. Now a save reads as a rehash only when Django would
   have made it: the stored hash is one it upgrades (``must_update``, or another hasher than the preferred one) and
   the written one is the preferred hasher's.

Checked and holding (tests below marked "Holding"):

- Django's rehash at a login (md5 stored, PBKDF2 preferred) keeps the token (gd's test, and finding 1's with a token
  still bound to the password rehashed).
- A token still bound to the password rehashed keeps working after the rehash, and ends with a bulk reset after.
  (One token per user: DRF's ``Token.user`` is one-to-one, so "two tokens" is one user's token and another's.)
- The admin's Tokens page (DRF's ``TokenProxy``): a token added there is bound by its key (the proxy's ``pk`` is the
  user's id), and ends with a bulk reset; a token deleted (its user deleted) takes its binding with it (cascade).
- ``loaddata`` of a token fixture with its binding keeps the binding loaded (the fixture's fingerprint wins over the
  one bound at the token's raw save); without it the token is bound to the password stored at the load.
- Token authentication is still one statement (gd's test) and the re-read as before.
- Migration 0052: reads tokens and passwords in one joined, chunked read and writes in batches of 2,000 through
  the schema editor's alias (both databases); its reverse drops the table (nothing else to undo).

Left: an account deactivated and then reactivated both by ``QuerySet.update`` keeps its token (no generation counter
on the user row; a reactivating save revokes, as before). A new password written by ``save(update_fields=
["password"])`` over a hash Django would upgrade, in the preferred hasher, still reads as a rehash (no raw password
reaches a signal to tell them apart).
"""

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User
from django.core import serializers
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.security_review.console_sessions import PBKDF2_THEN_MD5, upgradable_password
from toolhub.api.keys import api_key_issue
from toolhub.models import ApiTokenBinding


def _rest_status(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return int(client.get("/api/v1/calls/").status_code)


@pytest.mark.django_db
def test_a_rehash_at_login_does_not_revive_a_token_a_bulk_reset_ended(alice: User, settings: Any) -> None:
    """Found: a token ended by ``update(password=...)`` answered 200 again once the account signed in with the reset
    password and Django upgraded its hash (``tokens_rebind`` rebound every token of the user).

    Expect: the rehash rebinds only tokens bound to the hash it replaces: the ended token stays refused."""
    settings.PASSWORD_HASHERS = PBKDF2_THEN_MD5
    key = api_key_issue(alice)
    assert _rest_status(key) == 200
    User.objects.filter(pk=alice.pk).update(password=make_password("reset-by-the-incident-team", hasher="md5"))
    assert _rest_status(key) == 401
    alice.refresh_from_db()
    assert alice.check_password("reset-by-the-incident-team")  # the login's rehash (saves ``password`` alone)
    assert User.objects.get(pk=alice.pk).password.startswith("pbkdf2_")
    assert _rest_status(key) == 401


@pytest.mark.django_db
def test_holding_a_rehash_keeps_the_token_bound_to_the_rehashed_password(alice: User, settings: Any) -> None:
    """Holding. Expect: a token made under an md5 hash keeps working after the login's upgrade to PBKDF2 (its
    binding follows the hash it was bound to), and a bulk reset after it ends it."""
    upgradable_password(alice, "pw", settings)
    key = api_key_issue(alice)
    assert alice.check_password("pw")
    assert User.objects.get(pk=alice.pk).password.startswith("pbkdf2_")
    assert _rest_status(key) == 200
    User.objects.filter(pk=alice.pk).update(password=make_password("reset"))
    assert _rest_status(key) == 401


@pytest.mark.django_db
def test_a_new_password_saved_as_a_hash_with_update_fields_ends_the_token(alice: User) -> None:
    """Found: ``alice.password = make_password(new); alice.save(update_fields=["password"])`` read as Django's rehash:
    the token was rebound to the new password and answered 200 (``update`` of the same hash ends it).

    Expect: the stored hash was one Django would not upgrade, so this is a new password: the token is refused."""
    key = api_key_issue(alice)
    alice.password = make_password("a-new-password-nobody-checked")
    alice.save(update_fields=["password"])
    assert _rest_status(key) == 401
    assert not Token.objects.filter(user=alice).exists()  # revoked at the save, as ``set_password`` + save does


@pytest.mark.django_db
def test_holding_the_admin_tokens_page_binds_by_key_and_a_deleted_user_takes_the_binding(alice: User) -> None:
    """Holding. Expect: a token added on the admin's Tokens page (DRF's proxy) is bound and ends with a bulk reset;
    deleting the user leaves no binding row."""
    from rest_framework.authtoken.models import TokenProxy

    proxy = TokenProxy.objects.create(user=alice)
    assert ApiTokenBinding.objects.filter(token_id=proxy.key).exists()
    alice.delete()
    assert not ApiTokenBinding.objects.exists()


@pytest.mark.django_db
def test_holding_loaddata_of_a_token_keeps_the_binding_it_carries(alice: User, tmp_path: Path) -> None:
    """Holding. Expect: a token restored by ``loaddata`` with its binding holds only under the password it was bound
    to (the fixture's fingerprint wins over the one bound at the token's raw save): after a reset by ``update`` it is
    refused; loaded without its binding it is bound to the password stored at the load."""
    key = api_key_issue(alice)
    token = Token.objects.get(user=alice)
    with_binding = tmp_path / "with.json"
    with_binding.write_text(serializers.serialize("json", [token, token.binding]))
    alone = tmp_path / "alone.json"
    alone.write_text(serializers.serialize("json", [token]))
    User.objects.filter(pk=alice.pk).update(password=make_password("reset"))
    Token.objects.filter(user=alice).delete()

    call_command("loaddata", str(with_binding), verbosity=0)
    assert _rest_status(key) == 401
    Token.objects.filter(user=alice).delete()
    assert not ApiTokenBinding.objects.exists()
    call_command("loaddata", str(alone), verbosity=0)
    assert _rest_status(key) == 200
