"""Review of 2026-12-06 (dh): API keys stored as digests, so a reader of the database obtains no working key.

Each test fails on the reviewed code (main at a4ab34f) and states what was reached ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. ``authtoken_token.key`` held every API key in clear: whoever read the table (a backup, the app's read role, a SQL
   console, a dump attached to a ticket) held every user's working credential for REST and /mcp. Now the column holds
   the first 40 hex characters of the key's SHA-256 (``toolhub.api.keys``); ``token_owner`` (REST and MCP) digests
   the presented key; the admin's add form, ``drf_create_token`` and ``api_key_issue`` store the digest and show the
   key once. A token saved by an unconverted path (DRF's ``Token.save`` draws and stores a key as is) fails closed.
2. Existing keys: the migration ``api_token_keys_as_digests`` digests every stored key, so each keeps working; its
   reverse is a no-op that leaves the digests (a key cannot be recovered from one).
3. ``drf_create_token alice`` for a user who already had a token printed the stored value as "Generated token"; with
   digests that is no key, so the command now refuses and says ``-r`` replaces the token.

Checked and holding: expiry (``API_TOKEN_MAX_AGE_SECONDS``) applies to an issued key as before; revocation on a new
password or deactivation deletes the row whatever it holds; the key is shown once on the admin's add answer
(no-store); a digest is no prefix of the key, so the list's hidden ``key`` lookup reveals nothing either.
"""

import importlib
import re
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token

import toolhub.migrations
from tests.helpers import shown_key
from tests.security_review.test_review_2026_12_06_cu import _api_status, _mcp_user
from toolhub.api.keys import api_key_issue, key_digest
from toolhub.mcp_caller import token_user
from toolhub.models import ApiTokenBinding

pytestmark = pytest.mark.django_db


def _stored_keys() -> list[str]:
    """What a reader of the database sees in the token table."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT key FROM authtoken_token")
        return [row[0] for row in cursor.fetchall()]


def _digest_migration() -> Any:
    """The data migration digesting stored keys, found by its name (the integrator may renumber it)."""
    (path,) = Path(toolhub.migrations.__file__).parent.glob("*_api_token_keys_as_digests.py")
    return importlib.import_module(f"toolhub.migrations.{path.stem}")


def test_a_value_read_from_the_token_table_authenticates_no_one(superuser: User, alice: User, tenant: Any) -> None:
    """Found: the key the admin's add form showed was the value stored in ``authtoken_token.key``, and that value
    answered 200 on the REST API and signed in to MCP as alice. Expect: the table holds its digest; the digest is
    refused by REST (401) and MCP, the key shown once works on both."""
    console = Client()
    console.force_login(superuser)
    created = console.post("/admin/authtoken/tokenproxy/add/", {"user": alice.pk})
    assert created.status_code == 200 and "no-store" in created.headers.get("Cache-Control", "")
    key = shown_key(created)

    (stored,) = _stored_keys()
    assert stored != key and stored == key_digest(key)
    assert _api_status(stored) == 401 and _mcp_user(stored) is None
    assert _api_status(key) == 200 and _mcp_user(key) == alice


def test_a_raw_key_saved_by_an_unconverted_path_fails_closed(alice: User, tenant: Any) -> None:
    """Found: a token saved by DRF's own ``Token.objects.create`` (the key drawn and stored as is) authenticated with
    the stored value. Expect: refused, REST and MCP: only a digest's key authenticates."""
    stored = Token.objects.create(user=alice).key

    assert _api_status(stored) == 401
    assert _mcp_user(stored) is None


def test_drf_create_token_prints_a_key_the_table_does_not_hold(alice: User, tenant: Any) -> None:
    """Found: ``drf_create_token`` stored the key it printed; run again without ``-r`` it printed the stored value.
    Expect: the printed key works and only its digest is stored; ``-r`` replaces it (the old key stops); without
    ``-r`` a user's existing token is refused, never printed."""
    out = StringIO()
    call_command("drf_create_token", "alice", stdout=out)
    first = re.fullmatch(r"Generated token (\w+) for user alice\n", out.getvalue())
    assert first is not None
    assert _stored_keys() == [key_digest(first.group(1))]
    assert _api_status(first.group(1)) == 200

    again = StringIO()
    with pytest.raises(CommandError, match="-r"):
        call_command("drf_create_token", "alice", stdout=again)
    assert again.getvalue() == ""

    out = StringIO()
    call_command("drf_create_token", "alice", "-r", stdout=out)
    second = re.fullmatch(r"Generated token (\w+) for user alice\n", out.getvalue())
    assert second is not None
    assert _stored_keys() == [key_digest(second.group(1))]
    assert _api_status(second.group(1)) == 200 and _api_status(first.group(1)) == 401


def test_the_migration_keeps_every_existing_key_working(alice: User, operator: User, tenant: Any) -> None:
    """Found: keys stored in clear before digests. Expect: the migration's function digests each stored key, so
    each one issued before still authenticates (REST and MCP), and the table holds no key any more."""
    keys = [
        Token.objects.create(user=alice, key=Token.generate_key()).key,
        Token.objects.create(user=operator, key=Token.generate_key()).key,
    ]
    assert _api_status(keys[0]) == 401  # stored in clear: not taken as such any more

    # In the migrations' order: no binding yet when the keys are digested (review gd's 0052 binds them after).
    ApiTokenBinding.objects.all().delete()
    _digest_migration().digest_stored_keys(apps, connection.schema_editor())
    importlib.import_module("toolhub.migrations.0052_api_token_binding").bind_tokens(apps, connection.schema_editor())

    assert sorted(_stored_keys()) == sorted(key_digest(key) for key in keys)
    assert _api_status(keys[0]) == 200 and _mcp_user(keys[0]) == alice
    assert _mcp_user(keys[1]) == operator


def test_an_issued_key_still_expires(settings: Any, alice: User, tenant: Any) -> None:
    """Found: (with digests) the expiry must hold as before. Expect: an issued key older than
    ``API_TOKEN_MAX_AGE_SECONDS`` is refused with what to do, on REST and MCP alike."""
    settings.TOOLHUB = {**settings.TOOLHUB, "API_TOKEN_MAX_AGE_SECONDS": 3600}
    key = api_key_issue(alice)
    assert _api_status(key) == 200
    Token.objects.filter(user=alice).update(created=timezone.now() - timedelta(hours=2))

    assert _api_status(key) == 401
    user, problem = token_user(f"Bearer {key}")
    assert user is None and "expired" in problem
