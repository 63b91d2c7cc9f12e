"""What every framework adapter shares (``toolhub.adapters._common``): the tools it offers, how a pause is answered."""

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User

from tests.disclosure import sample_tools
from toolhub.adapters._common import NOT_RUN_STATUSES, RELEASED_STATUSES, pause_decision
from toolhub.adapters._pydantic_ai_bridge import granted_tools
from toolhub.adapters.langgraph import LangGraphToolhub
from toolhub.adapters.openai_agents import governed_tools
from toolhub.direct import caller_principal
from toolhub.disclosure.meta import META_TOOL_NAMES
from toolhub.disclosure.unfolding import tool_seen_by
from toolhub.disclosure.visibility import is_navigation
from toolhub.mcp_discovery import listed_tools
from toolhub.models import CallStatus, Grant, GrantEffect, ToolCall
from toolhub.pipeline import visible_tool_names
from toolhub.tools.registry import registry


@pytest.mark.parametrize("status", list(CallStatus))
def test_only_a_released_call_is_approved(status: CallStatus) -> None:
    call = ToolCall(tool_name="risky_effect", status=status, error="Not executed: cancelled by user:alice: oops")

    decided = pause_decision(call)

    if status == CallStatus.PENDING_APPROVAL:
        assert decided is None
    elif status in RELEASED_STATUSES:
        assert decided is not None and decided.approve
    else:
        assert decided is not None and not decided.approve
        assert decided.message == "Not executed: cancelled by user:alice: oops"


def test_a_withdrawn_call_is_among_those_that_never_ran() -> None:
    assert CallStatus.CANCELLED in NOT_RUN_STATUSES
    assert NOT_RUN_STATUSES.isdisjoint(RELEASED_STATUSES)


@pytest.fixture
def denied_inner_tools(alice: User) -> Iterator[None]:
    """The disclosure suite's facades; alice is denied every tool of two of them and a category of another."""
    with registry.temporarily(*sample_tools.PLAIN, *sample_tools.FACADES):
        for name in ("insert_record", "delete_record", "create_user", "find_user"):
            Grant.objects.create(effect=GrantEffect.DENY, tool_name=name, user=alice)
        yield


@pytest.mark.django_db
def test_every_adapter_offers_what_the_listing_rule_gives(alice: User, denied_inner_tools: None) -> None:
    """Each adapter lists ``visible_tool_names`` (meta tools aside); MCP lists the same, navigation aside."""
    principal = caller_principal(alice)
    expected = [name for name in visible_tool_names(principal) if name not in META_TOOL_NAMES]

    assert [tool.name for tool in granted_tools(principal)] == expected
    assert [tool.name for tool in LangGraphToolhub(user=alice).tools()] == expected
    assert [tool.name for tool in governed_tools(user=alice)] == expected
    assert {tool.name for tool in listed_tools(principal)} == {name for name in expected if not is_navigation(name)}
    assert "user_management" not in expected and "file_operations" in expected


@pytest.mark.django_db
def test_every_adapter_offers_a_facade_as_the_principal_sees_it(alice: User, denied_inner_tools: None) -> None:
    """A by-category facade's schema is ``tool_seen_by``'s: only the categories holding a tool alice may use."""
    principal = caller_principal(alice)
    facade = registry.get("file_operations")
    assert facade is not None
    seen = tool_seen_by(facade, principal)
    assert seen is not None and seen.json_schema["properties"]["category"]["enum"] == ["read"]

    schemas = [
        {tool.name: tool.json_schema for tool in granted_tools(principal)}["file_operations"],
        {tool.name: tool.args_schema for tool in LangGraphToolhub(user=alice).tools()}["file_operations"],
        {tool.name: tool.params_json_schema for tool in governed_tools(user=alice)}["file_operations"],
    ]

    assert all(schema == seen.json_schema for schema in schemas)
