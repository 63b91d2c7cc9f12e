"""Hidden inputs: merged context, typed context objects, presets and secrets, the idempotency key."""

import dataclasses
from typing import Any

import pytest
from django.contrib.auth.models import User
from pydantic import BaseModel

from tests.helpers import RequestCall, audit_text
from toolhub import Secret, ToolContext, register_context_type, registry, tool
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import CallStatus


@register_context_type
@dataclasses.dataclass(frozen=True)
class UserContext:
    user_id: str
    locale: str = "en"


@register_context_type(key="shop")
class ShopContext(BaseModel):
    shop_id: int


class Clock:
    def __init__(self, now: str) -> None:
        self.now = now


register_context_type(Clock, factory=lambda ctx: Clock(ctx.get("now", "noon")))


def test_layered_context_interaction_wins_and_boundary_has_the_last_word() -> None:
    merged = ToolContext.layered(
        {"tenantId": "acme", "feature": "run"},
        {"feature": "interaction", "authToken": "xyz", "tenant": "evil"},
        boundary={"tenant": "acme"},
    )

    assert merged == {"tenantId": "acme", "feature": "interaction", "authToken": "xyz", "tenant": "acme"}


def test_pipeline_merges_interaction_context_over_the_run_context(request_call: RequestCall) -> None:
    seen: dict[str, Any] = {}

    @tool
    def peek(ctx: ToolContext) -> str:
        """Look at the context."""
        seen.update(ctx)
        return "ok"

    with registry.temporarily(peek):
        call = request_call(
            "peek",
            {},
            context={"entity": "run-level", "tenant": "acme", "keep": 1},
            interaction={"entity": "order-7", "tenant": "other", "run_id": "forged"},
        )

    assert call.status == CallStatus.SUCCEEDED
    assert seen["entity"] == "order-7" and seen["keep"] == 1
    assert seen["tenant"] == "acme" and "run_id" not in seen  # reserved keys stay the boundary's
    assert call.context["entity"] == "order-7"


def test_typed_context_objects_are_injected_by_type_and_hidden_from_the_schema(request_call: RequestCall) -> None:
    @tool
    def my_orders(status: str, user: UserContext, shop: ShopContext, clock: Clock) -> str:
        """List my orders."""
        return f"{status}:{user.user_id}:{user.locale}:{shop.shop_id}:{clock.now}"

    assert list(my_orders.tool.json_schema["properties"]) == ["status"]
    with registry.temporarily(my_orders):
        call = request_call(
            "my_orders", {"status": "open"}, context={"user_context": {"user_id": "u-1"}, "shop": {"shop_id": "7"}}
        )

    assert (call.status, call.result) == (CallStatus.SUCCEEDED, "open:u-1:en:7:noon")


def test_missing_context_object_fails_the_call_clearly(request_call: RequestCall) -> None:
    @tool
    def needs_user(user: UserContext) -> str:
        """Needs a user."""
        return user.user_id

    with registry.temporarily(needs_user):
        call = request_call("needs_user", {})

    assert call.status == CallStatus.FAILED
    assert "context it needs is missing" in call.error
    assert "needs UserContext (parameter 'user')" in call.error_detail
    assert "'user_context'" in call.error_detail


def test_context_type_registration_mistakes() -> None:
    with pytest.raises(ToolDefinitionError, match="builtin and toolhub types"):
        register_context_type(str)
    with pytest.raises(ToolDefinitionError, match="registered already"):
        register_context_type(UserContext, key="other")
    assert register_context_type(UserContext) is UserContext  # the same registration again is harmless


def test_presets_are_hidden_resolved_at_call_time_and_never_recorded(
    request_call: RequestCall, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: dict[str, Any] = {}

    @tool(presets={"api_key": Secret("EMAIL_API_KEY"), "region": "eu-west-1", "sender": lambda: "bot@example.com"})
    def send_email(to: str, subject: str, api_key: str, region: str, sender: str) -> str:
        """Send an email."""
        received.update(api_key=api_key, region=region, sender=sender)
        return f"sent to {to}"

    # the model sees neither the secret nor the other presets
    assert list(send_email.tool.json_schema["properties"]) == ["to", "subject"]
    monkeypatch.setenv("EMAIL_API_KEY", "sk-from-environment")
    with registry.temporarily(send_email):
        from_env = request_call("send_email", {"to": "a@example.com", "subject": "Hi"})
        settings.EMAIL_API_KEY = "sk-from-settings"
        from_settings = request_call("send_email", {"to": "b@example.com", "subject": "Hi"})

    assert from_env.status == from_settings.status == CallStatus.SUCCEEDED
    assert received == {"api_key": "sk-from-settings", "region": "eu-west-1", "sender": "bot@example.com"}
    for call in (from_env, from_settings):
        assert "api_key" not in call.arguments
        assert "sk-from" not in audit_text(call) and "sk-from" not in str(call.result)


def test_the_model_cannot_set_a_preset(request_call: RequestCall, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMAIL_API_KEY", "sk-real")

    @tool(presets={"api_key": Secret("EMAIL_API_KEY")})
    def send(to: str, api_key: str) -> str:
        """Send."""
        return api_key

    with registry.temporarily(send):
        call = request_call("send", {"to": "x", "api_key": "sk-guessed-by-model"})

    assert call.status == CallStatus.INVALID
    assert "api_key: Extra inputs are not permitted" in call.error
    assert "sk-guessed-by-model" not in call.error + call.raw_arguments + audit_text(call)


def test_missing_secret_fails_the_call_and_a_leaked_secret_is_scrubbed(
    request_call: RequestCall, monkeypatch: pytest.MonkeyPatch
) -> None:
    @tool(presets={"token": Secret("TOOLHUB_TEST_TOKEN")})
    def leaky(token: str) -> str:
        """Fail quoting the token."""
        raise RuntimeError(f"upstream refused token {token}")

    monkeypatch.delenv("TOOLHUB_TEST_TOKEN", raising=False)
    with registry.temporarily(leaky):
        missing = request_call("leaky", {})
        monkeypatch.setenv("TOOLHUB_TEST_TOKEN", "tok-very-secret")
        leaked = request_call("leaky", {})

    assert missing.status == CallStatus.FAILED
    assert "not configured on this server" in missing.error
    assert "secret 'TOOLHUB_TEST_TOKEN'" in missing.error_detail
    assert leaked.status == CallStatus.FAILED
    assert "tok-very-secret" not in leaked.error_detail and "[secret]" in leaked.error_detail


def test_idempotency_key_is_the_call_id(request_call: RequestCall, alice: User) -> None:
    keys: list[str] = []

    @tool
    def downstream(ctx: ToolContext) -> str:
        """Pass the key on."""
        keys.append(ctx.idempotency_key or "")
        return "ok"

    with registry.temporarily(downstream):
        call = request_call("downstream", {}, user=alice)

    assert keys == [str(call.id)]
