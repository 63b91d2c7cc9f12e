"""An API token's latest use is kept, so that an administrator can retire the tokens nobody uses.

``token_owner`` stamps a token it accepts (REST and MCP alike) with the time and the channel, writing at most once
per token per ``STAMP_RESOLUTION``; a refused token (unknown, expired, its user inactive) is stamped with nothing.
The admin's Tokens page shows the stamp and filters the tokens unused for 30 days; the stamp goes with its token.
"""

import re
from datetime import timedelta
from typing import Any

import httpx2
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.mcp.conftest import live_asgi, token  # noqa: F401 - the live server fixture
from toolhub.api.keys import api_key_issue, key_digest
from toolhub.api.token_use import STAMP_RESOLUTION
from toolhub.models import ApiTokenUse

DAY = 24 * 3600
USE_TABLE = ApiTokenUse._meta.db_table


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _use_writes(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if USE_TABLE in q["sql"] and "SELECT" not in q["sql"][:10]]


@pytest.mark.django_db
def test_a_rest_request_stamps_its_token_once_per_window(alice: User) -> None:
    # given alice's new token, never used
    key = token(alice)
    digest = key_digest(key)
    assert not ApiTokenUse.objects.exists()

    # when she lists her calls, then lists them again at once
    before = timezone.now()
    assert _client(key).get("/api/v1/calls/").status_code == 200
    with CaptureQueriesContext(connection) as again:
        assert _client(key).get("/api/v1/calls/").status_code == 200

    # then the token is stamped as used over REST, and the second request wrote nothing
    use = ApiTokenUse.objects.get(token_id=digest)
    assert use.channel == "rest"
    assert use.last_used_at >= before
    assert _use_writes(again) == []

    # when the stamp is older than the window, the next request stamps it anew
    stale = timezone.now() - STAMP_RESOLUTION - timedelta(seconds=1)
    ApiTokenUse.objects.filter(token_id=digest).update(last_used_at=stale)
    assert _client(key).get("/api/v1/calls/").status_code == 200
    assert ApiTokenUse.objects.get(token_id=digest).last_used_at > stale


@pytest.mark.django_db
def test_a_refused_token_is_stamped_with_nothing(settings: Any, alice: User) -> None:
    # given alice's token is older than the limit, bob's user is inactive, and a key nobody was given
    settings.TOOLHUB = {**settings.TOOLHUB, "API_TOKEN_MAX_AGE_SECONDS": 30 * DAY}
    expired = token(alice)
    Token.objects.filter(key=key_digest(expired)).update(created=timezone.now() - timedelta(days=31))
    bob = User.objects.create_user("bob", password="pw-bob-123456")
    inactive = api_key_issue(bob)
    User.objects.filter(pk=bob.pk).update(is_active=False)

    # when each is presented
    answers = [_client(key).get("/api/v1/calls/").status_code for key in (expired, inactive, "not-a-key")]

    # then each is refused and no use is recorded
    assert answers == [401, 401, 401]
    assert not ApiTokenUse.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_an_mcp_request_stamps_its_token_as_used_over_mcp(live_asgi: str, alice: User) -> None:  # noqa: F811
    # given alice's token was last used over REST, longer ago than the window
    key = token(alice)
    stale = timezone.now() - STAMP_RESOLUTION - timedelta(minutes=1)
    ApiTokenUse.objects.create(token_id=key_digest(key), last_used_at=stale, channel="rest")

    # when an MCP client lists tools with it
    answer = httpx2.post(
        f"{live_asgi}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"},
    )

    # then the stamp says MCP, now
    assert answer.status_code == 200
    use = ApiTokenUse.objects.get(token_id=key_digest(key))
    assert use.channel == "mcp"
    assert use.last_used_at > stale


def _rows(page: str) -> dict[str, str]:
    """The Tokens list's rows: each token's user, and what its "last used" column says."""
    row = r'class="field-user[^"]*"><a [^>]*>([^<]+)</a></th>.*?class="field-last_used">([^<]*)<'
    return dict(re.findall(row, page))


@pytest.mark.django_db
def test_the_tokens_page_shows_the_latest_use_and_filters_the_unused(alice: User, operator: User) -> None:
    # given three tokens: alice's used today over MCP, the operator's 40 days ago over REST, carol's never
    now = timezone.now()
    used = token(alice)
    ApiTokenUse.objects.create(token_id=key_digest(used), last_used_at=now, channel="mcp")
    stale = api_key_issue(operator)
    ApiTokenUse.objects.create(token_id=key_digest(stale), last_used_at=now - timedelta(days=40), channel="rest")
    carol = User.objects.create_user("carol", password="pw-carol-123456")
    api_key_issue(carol)
    root = User.objects.create_superuser("root", password="pw-root-123456")
    admin = Client()
    admin.force_login(root)

    # when the administrator lists the tokens, then only the unused ones, then only the never used, then the recent
    listing = admin.get("/admin/authtoken/tokenproxy/").content.decode()
    unused = _rows(admin.get("/admin/authtoken/tokenproxy/?used=unused").content.decode())
    never = _rows(admin.get("/admin/authtoken/tokenproxy/?used=never").content.decode())
    recent = _rows(admin.get("/admin/authtoken/tokenproxy/?used=recently").content.decode())

    # then each row says when and where its token was last used, or "never"; no key and no digest are on the page
    rows = _rows(listing)
    assert rows["alice"].endswith("(MCP)") and rows["operator"].endswith("(REST API)") and rows["carol"] == "never"
    assert rows["operator"].startswith(f"{timezone.localtime(now - timedelta(days=40)):%Y-%m-%d}")
    for key in (used, stale):
        assert key not in listing and key_digest(key) not in listing
    # and the filters split them: unused = the operator's and carol's, never = carol's, recently = alice's
    assert set(unused) == {"operator", "carol"}
    assert set(never) == {"carol"}
    assert set(recent) == {"alice"}


@pytest.mark.django_db
def test_a_token_deleted_on_its_page_takes_its_stamp_with_it(alice: User) -> None:
    # given alice's token, used
    key = token(alice)
    assert _client(key).get("/api/v1/calls/").status_code == 200
    root = User.objects.create_superuser("root", password="pw-root-123456")
    admin = Client()
    admin.force_login(root)

    # when the administrator deletes it on its delete page
    answer = admin.post(f"/admin/authtoken/tokenproxy/{alice.pk}/delete/", {"post": "yes"})

    # then the token and its use are gone, and the key authenticates no one
    assert answer.status_code == 302
    assert not Token.objects.exists() and not ApiTokenUse.objects.exists()
    assert _client(key).get("/api/v1/calls/").status_code == 401


@pytest.mark.django_db
def test_the_stamp_goes_with_its_token(alice: User) -> None:
    # given alice's token, used
    key = token(alice)
    assert _client(key).get("/api/v1/calls/").status_code == 200
    assert ApiTokenUse.objects.count() == 1

    # when an administrator resets her password (which revokes her tokens)
    alice.set_password("a-new-password-654321")
    alice.save()

    # then neither the token nor its use is left (found: revocation deleted through DRF's proxy, whose ``pk`` is the
    # user's id, so once a token had a use row the delete matched nothing and the token stayed)
    assert not Token.objects.filter(user=alice).exists()
    assert not ApiTokenUse.objects.exists()
