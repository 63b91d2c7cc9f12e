"""Review of 2026-12-06 (cy): review cu's API token revocation, attacked.

Each test fails on the reviewed code (main at 34ebd3a) and states what was reached ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. "Usable password: no" in the admin's password form (what an administrator picks to lock a taken account out of
   password sign-in) kept the account's API token working: ``set_unusable_password`` does not mark the user as
   ``set_password`` does, and revocation looked only at that mark. Now a save that turns a usable password into an
   unusable one revokes too (``toolhub.api.token_revocation`` reads the stored hash before a save writing one).
2. ``loaddata`` of an account (a restore, a copy from another deployment) saving it inactive or with another password
   hash kept its token, which worked again once the account was reactivated: raw saves were skipped, and a hash not
   written through ``set_password`` was not a new password. Now any save writing another hash than the stored one
   revokes, raw saves included; Django's hash upgrade at a login and one unusable hash for another do not.

Checked and holding: a console session ends when an administrator resets the password (Django's session auth hash;
only the administrator's own session is kept) and the API refuses its cookie; a user deleted and recreated with the
same username and primary key holds none of the old tokens (the token's foreign key cascades); a revocation is in the
trail of each of the user's tenants and no other (a superuser's in the platform's), never naming the key; MCP issues
and reads no ``Mcp-Session-Id`` (stateless: each request authenticates its own token, reviews w, z, dg), so no
session outlives a revoked token; a login's hash upgrade and an e-mail change keep the token. Not a path here:
``QuerySet.update`` of ``password`` or ``is_active`` sends no signal, and nothing in toolhub (admin actions on users
included: Django's ``UserAdmin`` has only "delete", which cascades) changes an account that way.
"""

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User
from django.core import serializers
from django.core.management import call_command
from rest_framework.authtoken.models import Token

from tests.helpers import console
from tests.security_review.test_review_2026_12_06_cu import _api_status, _mcp_user
from toolhub.api.keys import api_key_issue
from toolhub.models import AuditEvent, Tenant

pytestmark = pytest.mark.django_db

PBKDF2 = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]


def test_disabling_the_password_in_the_admin_revokes_the_accounts_api_token(
    alice: User, superuser: User, tenant: Tenant, settings: Any
) -> None:
    """Found: an administrator chose "usable password: no" in the admin's password form for alice (the account
    feared taken); her API token still answered 200 on the REST API and MCP took it as alice. Expect: the token is
    deleted with the save, REST answers 401, MCP refuses the key, the deletion is in acme's trail; an account whose
    password was already unusable (one that signs in by token only) keeps a new token when saved again, and a login
    whose password hash Django upgrades keeps it too."""
    key = api_key_issue(alice)
    assert _api_status(key) == 200

    reset = console(superuser).post(
        f"/admin/auth/user/{alice.pk}/password/", {"usable_password": "false", "unset-password": "1"}
    )
    assert reset.status_code == 302
    alice.refresh_from_db()
    assert not alice.has_usable_password()

    assert _api_status(key) == 401
    assert _mcp_user(key) is None
    (revoked,) = AuditEvent.objects.filter(event_type="governance.deleted", tenant="acme")
    assert revoked.actor == "revocation:password-changed"

    kept = api_key_issue(alice)
    alice.set_unusable_password()
    alice.save()
    assert _api_status(kept) == 200

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *PBKDF2]
    User.objects.filter(pk=alice.pk).update(password=make_password("alice-password", hasher="pbkdf2_sha256"))
    assert _api_status(kept) == 401  # review gd: a password written by ``update`` ends a token made under another
    Token.objects.filter(user=alice).delete()
    rehashed = api_key_issue(alice)
    upgraded = authenticate(username="alice", password="alice-password")
    assert upgraded is not None and upgraded.password.startswith("md5$")  # the hash was upgraded and saved
    assert _api_status(rehashed) == 200


@pytest.mark.parametrize(
    ("restored", "why"),
    [({"is_active": False}, "deactivated"), ({"password": make_password("A-restored-passw0rd!")}, "password-changed")],
    ids=["deactivated", "new-password"],
)
def test_an_account_restored_by_loaddata_loses_its_token_as_one_saved_in_code(
    alice: User, tenant: Tenant, tmp_path: Path, restored: dict[str, Any], why: str
) -> None:
    """Found: ``loaddata`` of alice's account (a restore, a copy from another deployment) saving her inactive or with
    another password hash kept her API token: a raw save was skipped, and a hash written as is (not through
    ``set_password``) was not seen as a new password; reactivated, the old key answered 200 again. Expect: the token
    is deleted with the load, recorded in acme's trail, and stays dead after the account is reactivated."""
    key = api_key_issue(alice)
    (row,) = json.loads(serializers.serialize("json", [alice]))
    row["fields"].update(restored)
    fixture = tmp_path / "alice.json"
    fixture.write_text(json.dumps([row]))

    call_command("loaddata", str(fixture), verbosity=0)
    alice.refresh_from_db()
    alice.is_active = True
    alice.save()

    assert _api_status(key) == 401
    assert _mcp_user(key) is None
    (revoked,) = AuditEvent.objects.filter(event_type="governance.deleted", tenant="acme")
    assert revoked.actor == f"revocation:{why}"
