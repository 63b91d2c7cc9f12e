"""The demo's notification tool: its API key comes from the environment and is never shown."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from tests.helpers import RequestCall
from tests.toolsec.leaks import traces_of
from toolhub.models import CallStatus

pytestmark = pytest.mark.django_db

KEY = "ntfy-demo-4f9c2b7e1d"


@pytest.fixture
def demo_alice(settings: Any) -> User:
    """Alice of the demo, with the production default (tools need a grant) and the demo's grants."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    call_command("load_demo", verbosity=0)
    return User.objects.get(username="alice")


def test_the_notification_tool_is_granted_to_acme_and_never_shows_its_key(
    request_call: RequestCall, demo_alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEMO_NOTIFY_API_KEY", KEY)

    sent = request_call("send_notification", {"channel": "#ops", "message": "Deploy done"}, demo_alice, tenant="acme")
    refused = request_call("send_notification", {"channel": "#nope", "message": "Hi"}, demo_alice, tenant="acme")

    assert sent.status == CallStatus.SUCCEEDED
    assert sent.result == {"channel": "#ops", "delivered": True, "notification_id": f"ntf-{sent.id}"}
    assert refused.status == CallStatus.FAILED
    assert "Authorization: Bearer [secret]); use one of #general, #ops, #sales." in refused.error
    for call in (sent, refused):
        assert KEY not in traces_of(call)


def test_without_the_key_the_call_fails_with_a_clear_error(
    request_call: RequestCall, demo_alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEMO_NOTIFY_API_KEY", raising=False)

    call = request_call("send_notification", {"channel": "#ops", "message": "Hi"}, demo_alice, tenant="acme")

    assert call.status == CallStatus.FAILED
    assert call.error.startswith("The tool is not configured on this server")
    assert "environment variable DEMO_NOTIFY_API_KEY" in call.error_detail


def test_the_model_cannot_set_the_key(request_call: RequestCall, demo_alice: User) -> None:
    call = request_call(
        "send_notification",
        {"channel": "#ops", "message": "Hi", "api_key": "guessed-by-model"},
        demo_alice,
        tenant="acme",
    )

    assert call.status == CallStatus.INVALID
    assert "api_key: Extra inputs are not permitted" in call.error
    assert "guessed-by-model" not in traces_of(call)
