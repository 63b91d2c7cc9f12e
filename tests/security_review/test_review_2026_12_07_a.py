"""Review 2026-12-07 (a): the API key's and the session's binding to their account, from every side a deployment has.

Read first: reviews gd, gi, gj and ga (2026-12-06); ``ApiTokenBinding`` (migration 0052), ``token_owner``, the
re-read's one statement (``toolhub.tenancy._rights_sql``), the rehash rebind and the ``update_fields`` rule
(``toolhub.api.token_revocation``), ``SessionCredentialMiddleware``, W015/W016. Each finding's test fails on the
reviewed code (main at 8711560).

Findings:

1. An account deactivated by ``QuerySet.update`` (or ``bulk_update``, or SQL: an incident script's or a DBA's way to
   lock out accounts feared taken) and reactivated the same way got its API key back: 200 over REST, MCP's
   ``token_owner`` took it, a request waiting across both answered its user, a dump of the token and its binding
   loaded working, and a login's rehash of an md5 hash rebound it. The README promises a deactivation ends the
   account's tokens ("a reactivated account gets a new one from the admin's Tokens"); gd's and gi's "Left" item.
   Nothing but the row's state was read, and ``update(False)`` then ``update(True)`` leaves it as it was. Fix: a
   trigger on the user table (``toolhub.api.token_binding.binding_triggers_install``; migration 0055 installs it,
   reverse drops it before 0052's table goes, and ``post_migrate`` installs it again as the governance triggers,
   since a SQLite rebuild of the table drops it) binds the account's tokens to ``DEACTIVATED`` (no password's
   fingerprint) when ``is_active`` goes from true to false, in the writing statement's transaction. The token's
   check, the re-read (still one statement: the binding's column it already read) and ``tokens_rebind`` (which
   matches a hash's fingerprint) all refuse it from then on; a key made afterwards holds. Tests:
   ``test_a_key_stays_ended_after_a_deactivation_and_reactivation_by_update``,
   ``test_a_key_stays_ended_after_a_deactivation_by_sql_or_bulk_update``,
   ``test_a_waiting_key_request_reads_no_one_after_a_deactivation_and_reactivation_by_update``,
   ``test_a_dump_of_a_key_ended_by_a_deactivation_loads_ended``,
   ``test_a_key_ended_by_a_deactivation_stays_ended_through_a_rehash_and_a_new_key_holds``.

Checked and holding:

- Password changes by every Django path: ``set_password`` + save, the admin's ``AdminPasswordChangeForm`` and
  ``SetPasswordForm`` (the reset views' form; toolhub wires no reset views) end the key
  (``test_holding_the_admin_password_form_ends_the_key``); ``changepassword`` and ``createsuperuser`` go through
  ``set_password`` + save (read); ``update``, ``bulk_update`` and SQL: gd's and gj's tests.
- A deactivation by save then a reactivation by ``update``: the save deleted the key (audited), nothing comes back
  (``test_holding_a_deactivation_by_save_then_a_reactivation_by_update_leaves_no_key``).
- The trigger fires only on ``is_active`` true to false (a login's ``last_login`` save, a save keeping the flag: no
  change, the new key holds); installed twice it is replaced; dropped (before 0055) the old behaviour is back
  (``test_holding_the_trigger_is_dropped_and_installed_again``). The query-count pins hold (a trigger's statement
  is no Django query): token authentication one statement, the re-read one, POST /api/v1/calls/ 11 (fw).
- Two keys of one user: impossible (DRF's ``Token.user`` is one-to-one). Token regeneration (delete, issue): bound
  to the password as stored. User deleted and re-created with the same id: the token and binding went by cascade;
  a raw ``DELETE`` of a user holding a token is refused by the foreign key (read, not tested).
- The ``update_fields`` rule: only ``save(update_fields=["password"])`` over a hash Django upgrades, written in the
  preferred hasher, reads as a rehash; a full save after ``check_password`` reads as a new password (fails closed).
- A login's rehash racing a reset by ``update``: Django's rehash is a blind write of the old password's new hash,
  so the reset is lost (Django's own lost update) and the key holds with the password it was bound to: the key is
  consistent with the password, not a binding defect (left below).

Left: a console session of an account deactivated and reactivated both by ``QuerySet.update`` signs in again (the
session table names no user, so no trigger finds it; a reactivating save deletes it, as the README says). A new
password written by ``save(update_fields=["password"])`` over an upgradable hash still reads as a rehash (gi).
"""

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.forms import AdminPasswordChangeForm, SetPasswordForm
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User
from django.core import serializers
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from toolhub.api.keys import api_key_issue
from toolhub.api.token_use import TokenChannel
from toolhub.api.tokens import TokenRefused, token_owner
from toolhub.credentials import password_fingerprint
from toolhub.models import ApiTokenBinding
from toolhub.tenancy import tenant_scope_now

pytestmark = pytest.mark.django_db

PBKDF2_THEN_MD5 = ["django.contrib.auth.hashers.PBKDF2PasswordHasher", "django.contrib.auth.hashers.MD5PasswordHasher"]


def _rest_status(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return int(client.get("/api/v1/calls/").status_code)


def _holds(user: Any) -> bool:
    """Whether ``user``'s waiting request would still be answered: the re-read itself (``tenant_scope_now``)."""
    tenant_scope_now(user)
    return bool(user.is_active)


def test_a_key_stays_ended_after_a_deactivation_and_reactivation_by_update(alice: User) -> None:
    """Found: alice's account feared taken, an incident script deactivated it by ``QuerySet.update`` (no signal), and
    once cleared reactivated it the same way: the key issued before (perhaps copied) answered 200 again, REST and
    MCP alike (``token_owner``), though the README promises a deactivation ends the account's tokens and a
    reactivated account gets a new one.

    Expect: the deactivation ends the key whatever wrote it: refused after the reactivation too."""
    key = api_key_issue(alice)
    assert _rest_status(key) == 200
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert _rest_status(key) == 401
    User.objects.filter(pk=alice.pk).update(is_active=True)
    assert _rest_status(key) == 401
    with pytest.raises(TokenRefused):
        token_owner(key, channel=TokenChannel.MCP)


def test_a_key_stays_ended_after_a_deactivation_by_sql_or_bulk_update(alice: User, operator: User) -> None:
    """Found: the same with the deactivation written in SQL (a DBA's ``UPDATE auth_user``) or by ``bulk_update``:
    the key came back with the reactivation by ``update``.

    Expect: refused after the reactivation."""
    key = api_key_issue(alice)
    other = api_key_issue(operator)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE auth_user SET is_active = %s WHERE id = %s", [False, alice.pk])
    operator.is_active = False
    User.objects.bulk_update([operator], ["is_active"])
    User.objects.filter(pk__in=[alice.pk, operator.pk]).update(is_active=True)
    assert (_rest_status(key), _rest_status(other)) == (401, 401)


def test_a_waiting_key_request_reads_no_one_after_a_deactivation_and_reactivation_by_update(alice: User) -> None:
    """Found: alice's key request waiting (``?wait=``, an MCP follow) while her account was deactivated and then
    reactivated by ``update``: the re-read found her active and her key bound to her password, and answered her.

    Expect: the waiting request reads as no one, as its next request is refused; the re-read is still one
    statement."""
    key = api_key_issue(alice)
    user, _ = token_owner(key, channel=TokenChannel.REST)
    User.objects.filter(pk=alice.pk).update(is_active=False)
    User.objects.filter(pk=alice.pk).update(is_active=True)
    with CaptureQueriesContext(connection) as read:
        assert not _holds(user)
    assert len(read.captured_queries) == 1


def test_a_dump_of_a_key_ended_by_a_deactivation_loads_ended(alice: User, tmp_path: Path) -> None:
    """Found: a ``dumpdata`` of the token and its binding after a deactivation and reactivation by ``update``, loaded
    again (a restore, a copy to another server), answered 200, as the key did before the dump (the binding kept
    its password's fingerprint; a fix deleting the ended binding would have bound the token afresh at the load).

    Expect: the ended binding travels with the token and loads as ended."""
    key = api_key_issue(alice)
    User.objects.filter(pk=alice.pk).update(is_active=False)
    User.objects.filter(pk=alice.pk).update(is_active=True)
    token = Token.objects.get(user=alice)
    dump = tmp_path / "tokens.json"
    dump.write_text(serializers.serialize("json", [token, *ApiTokenBinding.objects.filter(token=token)]))
    Token.objects.filter(user=alice).delete()
    call_command("loaddata", str(dump), verbosity=0)
    assert _rest_status(key) == 401


def test_a_key_ended_by_a_deactivation_stays_ended_through_a_rehash_and_a_new_key_holds(
    alice: User, settings: Any
) -> None:
    """Found: after a deactivation and reactivation by ``update``, alice's login rehashed her md5 hash (Django's
    upgrade, ``tokens_rebind``) and rebound the old key, still bound to that hash, to the new one.

    Expect: the ended key is bound to no hash, so no rehash rebinds it; a key issued after the reactivation holds,
    and a login's saves (``last_login``: the flag not written anew) end it not."""
    settings.PASSWORD_HASHERS = PBKDF2_THEN_MD5
    User.objects.filter(pk=alice.pk).update(password=make_password("pw", hasher="md5"))
    api_key_issue(alice)
    User.objects.filter(pk=alice.pk).update(is_active=False)
    User.objects.filter(pk=alice.pk).update(is_active=True)
    alice.refresh_from_db()
    assert alice.check_password("pw")  # the login's rehash: ``tokens_rebind`` of the md5 hash's bindings
    stored = User.objects.get(pk=alice.pk).password
    assert stored.startswith("pbkdf2_")
    assert ApiTokenBinding.objects.get(token__user=alice).password_fingerprint != password_fingerprint(stored)
    Token.objects.filter(user=alice).delete()  # the admin's Tokens: the ended one deleted, a new one made
    key = api_key_issue(alice)
    assert Client().login(username="alice", password="pw")  # ``last_login`` saved: the flag is not written anew
    assert _rest_status(key) == 200


def test_holding_a_deactivation_by_save_then_a_reactivation_by_update_leaves_no_key(alice: User) -> None:
    """Holding. Expect: the save's revocation deletes the key (a ``governance.deleted`` event, as before); the
    reactivation by ``update`` brings nothing back."""
    key = api_key_issue(alice)
    alice.is_active = False
    alice.save()
    assert not Token.objects.filter(user=alice).exists()
    User.objects.filter(pk=alice.pk).update(is_active=True)
    assert _rest_status(key) == 401


def test_holding_the_admin_password_form_ends_the_key(alice: User) -> None:
    """Holding. Expect: the admin's password form (``AdminPasswordChangeForm``: ``set_password`` + save) and
    "usable password: no" end the key, as the password reset views' ``SetPasswordForm`` does (the same save)."""
    key = api_key_issue(alice)
    form = AdminPasswordChangeForm(alice, {"password1": "Another-long-pw-42", "password2": "Another-long-pw-42"})
    assert form.is_valid(), form.errors
    form.save()
    assert _rest_status(key) == 401 and not Token.objects.filter(user=alice).exists()
    key = api_key_issue(alice)
    form = SetPasswordForm(alice, {"new_password1": "Third-long-pw-4242", "new_password2": "Third-long-pw-4242"})
    assert form.is_valid(), form.errors
    form.save()
    assert _rest_status(key) == 401


def test_holding_the_trigger_is_dropped_and_installed_again(alice: User) -> None:
    """Holding (migration 0055 both ways; ``migrate`` installs it again after every run). Expect: without the
    trigger a deactivation and reactivation by ``update`` leave the key (before 0055); installed again, the next
    deactivation ends it."""
    from toolhub.api.token_binding import binding_triggers_drop, binding_triggers_install

    key = api_key_issue(alice)
    binding_triggers_drop(connection)
    User.objects.filter(pk=alice.pk).update(is_active=False)
    User.objects.filter(pk=alice.pk).update(is_active=True)
    assert _rest_status(key) == 200
    assert binding_triggers_install(connection)
    assert binding_triggers_install(connection)  # replaced, not added twice
    User.objects.filter(pk=alice.pk).update(is_active=False)
    User.objects.filter(pk=alice.pk).update(is_active=True)
    assert _rest_status(key) == 401
