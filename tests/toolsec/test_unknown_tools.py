"""Unknown tool names are answered with the closest names among the tools the caller may see, never the catalogue's."""

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.helpers import RequestCall
from tests.toolsec.conftest import StartRun
from toolhub import registry, tool
from toolhub.models import CallStatus, Grant, GrantEffect, ToolCall

pytestmark = pytest.mark.django_db


@tool
def wire_money(amount: int) -> str:
    """Move money to another bank (nobody in these tests may see it)."""
    return "wired"


@tool
def wire_memo(text: str) -> str:
    """Write a memo about a wire."""
    return "noted"


@pytest.fixture
def deny_by_default(settings: Any) -> None:
    """The production default: a user needs a grant."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}


def test_a_run_is_never_told_of_a_tool_its_agent_does_not_have(start_run: StartRun, alice: User) -> None:
    # given an agent with wire_memo only, while wire_money (the closer name) is in the catalogue
    script = [{"tool_calls": [{"name": "wire_mone", "arguments": {}}]}, {"content": "{last_tool_result}"}]
    with registry.temporarily(wire_money, wire_memo):
        run = start_run(alice, tools=["wire_memo"], script=script)

    # then the model hears of the visible tool only
    [call] = ToolCall.objects.filter(run_id=run.id)
    assert call.status == CallStatus.INVALID
    assert call.error == "Unknown tool 'wire_mone'. Did you mean: wire_memo?"
    told = [m["content"] for m in run.messages if m["role"] == "tool"]
    assert told == [call.error]
    assert "wire_money" not in str(run.messages) + run.output


def test_an_agent_tool_the_user_is_not_granted_is_not_suggested(
    request_call: RequestCall, alice: User, tenant: Any, deny_by_default: None
) -> None:
    # given an agent with both tools, and a user granted wire_memo only
    Grant.objects.create(effect=GrantEffect.ALLOW, tool_name="wire_memo", tenant=tenant)
    with registry.temporarily(wire_money, wire_memo):
        call = request_call(
            "wire_mone",
            {},
            alice,
            tenant="acme",
            agent_name="wirer",
            agent_tools=frozenset({"wire_money", "wire_memo"}),
        )

    assert call.status == CallStatus.INVALID
    assert call.error == "Unknown tool 'wire_mone'. Did you mean: wire_memo?"


def test_a_direct_call_gets_suggestions_among_the_tools_the_principal_may_call(
    request_call: RequestCall, alice: User, tenant: Any, deny_by_default: None
) -> None:
    # given a user granted wire_memo only, calling without an agent
    Grant.objects.create(effect=GrantEffect.ALLOW, tool_name="wire_memo", tenant=tenant)
    with registry.temporarily(wire_money, wire_memo):
        close = request_call("wire_mone", {}, alice, tenant="acme")
        far = request_call("zzzzzzzz", {}, alice, tenant="acme")
        Grant.objects.create(effect=GrantEffect.DENY, tool_name="wire_memo", tenant=tenant)
        nothing = request_call("wire_mone", {}, alice, tenant="acme")

    assert close.error == "Unknown tool 'wire_mone'. Did you mean: wire_memo?"
    # with no close name, the list of tools holds only what the user may call
    assert far.error.startswith("Unknown tool 'zzzzzzzz'. Available tools: ")
    listed = far.error.split("Available tools: ")[1].rstrip(".").split(", ")
    assert listed == ["wire_memo"]
    assert nothing.error == "Unknown tool 'wire_mone'. No tools are available to you here."


def test_a_configured_handler_receives_the_visible_names_only(
    request_call: RequestCall, alice: User, settings: Any
) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "UNKNOWN_TOOL_HANDLER": "tests.toolsec.test_unknown_tools.list_names"}
    with registry.temporarily(wire_money, wire_memo):
        call = request_call(
            "wire_mone", {}, alice, tenant="acme", agent_name="memo-writer", agent_tools=frozenset({"wire_memo"})
        )

    assert call.error == "names: wire_memo"


def list_names(name: str, available: list[str]) -> str:
    return f"names: {', '.join(available)}"
