"""An API token older than ``TOOLHUB["API_TOKEN_MAX_AGE_SECONDS"]`` authenticates no one, over REST and MCP alike.

A bearer token outlives the laptop, CI job or person that held it; the refusal says what to do (get a new one),
and nothing the expired token asked for is done.
"""

from datetime import timedelta
from typing import Any

import httpx2
import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.mcp.conftest import live_asgi, token  # noqa: F401 - the live server fixture
from toolhub.api.keys import key_digest
from toolhub.models import ToolCall

DAY = 24 * 3600


def _aged(user: User, days: float) -> str:
    key = token(user)
    Token.objects.filter(key=key_digest(key)).update(created=timezone.now() - timedelta(days=days))
    return key


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.mark.django_db
def test_a_token_past_its_age_is_refused_by_the_api_with_what_to_do(settings: Any, alice: User) -> None:
    # given tokens expire after 30 days, and alice's is 31 days old
    settings.TOOLHUB = {**settings.TOOLHUB, "API_TOKEN_MAX_AGE_SECONDS": 30 * DAY}
    key = _aged(alice, 31)

    # when she lists her calls and asks for one
    listed = _client(key).get("/api/v1/calls/")
    asked = _client(key).post("/api/v1/calls/", {"tool": "calculate", "arguments": {}}, format="json")

    # then both are 401, saying the token expired and where a new one comes from; nothing was called
    for response in (listed, asked):
        assert response.status_code == 401
        assert "expired" in response.json()["detail"]
        assert "new one" in response.json()["detail"]
    assert not ToolCall.objects.exists()


@pytest.mark.django_db
def test_a_token_within_its_age_or_with_no_limit_is_taken(settings: Any, alice: User) -> None:
    # given a 29-day-old token under a 30-day limit, and a 10-year-old one where tokens never expire
    settings.TOOLHUB = {**settings.TOOLHUB, "API_TOKEN_MAX_AGE_SECONDS": 30 * DAY}
    assert _client(_aged(alice, 29)).get("/api/v1/calls/").status_code == 200

    settings.TOOLHUB = {**settings.TOOLHUB, "API_TOKEN_MAX_AGE_SECONDS": None}
    assert _client(_aged(alice, 3650)).get("/api/v1/calls/").status_code == 200


@pytest.mark.django_db
def test_by_default_a_token_lasts_ninety_days(alice: User) -> None:
    assert _client(_aged(alice, 89)).get("/api/v1/calls/").status_code == 200
    assert _client(_aged(alice, 91)).get("/api/v1/calls/").status_code == 401


@pytest.mark.django_db(transaction=True)
def test_mcp_refuses_an_expired_token_as_the_api_does(settings: Any, live_asgi: str, alice: User) -> None:  # noqa: F811
    # given alice's token is older than the limit
    settings.TOOLHUB = {**settings.TOOLHUB, "API_TOKEN_MAX_AGE_SECONDS": 30 * DAY}
    key = _aged(alice, 31)

    # when an MCP client lists tools with it
    raw = httpx2.post(
        f"{live_asgi}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"},
    )

    # then it is refused before the MCP app sees it, saying the token expired
    assert raw.status_code == 401
    assert raw.headers["www-authenticate"].startswith("Bearer")
    assert "expired" in raw.json()["error"]["message"]
