"""MCP lists no navigation tool; ``toolhub_find_tools`` and ``toolhub_describe_tool`` reach the rest, granted only.

Driven by the official ``mcp`` SDK client over streamable HTTP against a live uvicorn (see ``conftest``),
with the progressive-disclosure sample catalogue (plain tools and facades) registered for the test.
"""

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.disclosure import sample_tools
from tests.mcp.conftest import refused_call, token, with_client
from toolhub.conf import toolhub_settings
from toolhub.disclosure.visibility import is_navigation
from toolhub.models import AuditEvent, Grant, GrantEffect, ToolCall, ToolGroup
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

STABLE = ["toolhub_call_status", "toolhub_cancel_call", "toolhub_describe_tool", "toolhub_find_tools"]
#: What alice is granted: plain tools, a facade with two of its three tools, and every navigation tool.
ALICES = [
    "clock",
    "get_weather",
    "send_email",
    "database_operations",
    "database_operations_context",
    "query_table",
    "insert_record",
    "tool_search",
    "reset_equipped_tools",
]


@pytest.fixture
def catalogue(settings: Any, alice: User, bob: User) -> Iterator[None]:
    """The sample tools and facades; alice holds ``ALICES`` and is denied refunds, bob (another tenant) the weather."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    for name in ALICES:
        Grant.objects.create(tool_name=name, user=alice)
    Grant.objects.create(tool_name="refund_payment", user=alice, effect=GrantEffect.DENY)
    Grant.objects.create(tool_name="get_weather", user=bob)
    with registry.temporarily(*sample_tools.PLAIN, *sample_tools.FACADES):
        yield


async def _names(client: Client) -> list[str]:
    return sorted(tool.name for tool in (await client.list_tools()).tools)


def _call(base: str, user: User, name: str, arguments: dict[str, Any]) -> Any:
    async def body(client: Client) -> Any:
        return await client.call_tool(name, arguments)

    return with_client(base, token(user), body)


def test_navigation_tools_are_never_listed_their_inner_tools_are(
    live_asgi: str, catalogue: None, alice: User, bob: User
) -> None:
    alices = with_client(live_asgi, token(alice), _names)
    bobs = with_client(live_asgi, token(bob), _names)

    assert alices == sorted(["clock", "get_weather", "send_email", "query_table", "insert_record", *STABLE])
    assert bobs == sorted(["get_weather", *STABLE])


def test_nothing_navigational_is_listed_even_when_every_tool_is_allowed(
    live_asgi: str, catalogue: None, settings: Any, alice: User
) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "allow"}

    names = with_client(live_asgi, token(alice), _names)

    assert "delete_record" in names and "create_user" in names  # inner tools, nested ones too
    assert not [name for name in names if is_navigation(name)]
    for hidden in ("tool_search", "reset_equipped_tools", "database_operations", "database_operations_context"):
        assert hidden not in names


def test_a_navigation_tool_called_over_mcp_answers_like_an_unknown_one(
    live_asgi: str, catalogue: None, alice: User
) -> None:
    calls = {
        "tool_search": {"query": "weather"},
        "reset_equipped_tools": {"groups": []},
        "database_operations": {},
        "database_operations_context": {},
        "no_such_tool": {},
    }

    async def body(client: Client) -> dict[str, MCPError]:
        refused = {}
        for name, arguments in calls.items():
            with pytest.raises(MCPError) as raised:
                await client.call_tool(name, arguments)
            refused[name] = raised.value
        return refused

    refused = with_client(live_asgi, token(alice), body)

    for name in calls:
        assert refused[name].code == refused["no_such_tool"].code
        assert refused[name].message.startswith(f"Unknown tool {name!r}.")
    # refused before the pipeline: nothing ran, no run state was touched (the unknown name is recorded as ever)
    assert list(ToolCall.objects.values_list("tool_name", "status")) == [("no_such_tool", "invalid")]


def test_find_returns_granted_tools_with_their_group(live_asgi: str, catalogue: None, alice: User) -> None:
    result = _call(live_asgi, alice, "toolhub_find_tools", {"query": "run a read-only sql query on a table"})

    assert result.is_error is False
    found = {tool["name"]: tool for tool in result.structured_content["tools"]}
    assert found["query_table"] == {
        "name": "query_table",
        "description": "Run a read-only SQL query.",
        "category": "",
        "groups": ["database_operations"],
    }
    assert "delete_record" not in found  # in the facade, not granted
    assert result.structured_content["groups"] == [
        {
            "name": "database_operations",
            "description": "Work with the database. Call to see the operations.",
            "usage_notes": "Query before you insert.",
            "tools": ["insert_record", "query_table"],
        }
    ]
    assert not ToolCall.objects.exists()  # answered by the server, read-only


def test_find_filters_by_category_and_bounds_the_results(live_asgi: str, catalogue: None, alice: User) -> None:
    weather = _call(live_asgi, alice, "toolhub_find_tools", {"query": "weather forecast city", "category": "weather"})
    mail_only = _call(live_asgi, alice, "toolhub_find_tools", {"query": "weather forecast", "category": "mail"})
    one = _call(live_asgi, alice, "toolhub_find_tools", {"query": "record table query email", "max_results": 1})

    assert [tool["name"] for tool in weather.structured_content["tools"]] == ["get_weather"]
    assert weather.structured_content["tools"][0]["category"] == "weather"
    assert mail_only.structured_content["tools"] == []
    assert "Rephrase" in mail_only.structured_content["note"]
    assert len(one.structured_content["tools"]) == 1


def test_find_never_returns_a_denied_or_ungranted_tool(live_asgi: str, catalogue: None, alice: User, bob: User) -> None:
    query = {"query": "refund a customer payment, list payments", "max_results": 20}
    alices = _call(live_asgi, alice, "toolhub_find_tools", query)
    bobs_mail = _call(live_asgi, bob, "toolhub_find_tools", {"query": "send an email message", "max_results": 20})
    bobs_weather = _call(live_asgi, bob, "toolhub_find_tools", {"query": "weather forecast", "max_results": 20})

    assert all(tool["name"] not in ("refund_payment", "list_payments") for tool in alices.structured_content["tools"])
    # bob, of another tenant, finds only what his own grants allow
    assert "send_email" not in [tool["name"] for tool in bobs_mail.structured_content["tools"]]
    assert [tool["name"] for tool in bobs_weather.structured_content["tools"]] == ["get_weather"]
    assert bobs_weather.structured_content["groups"] == []


def test_describe_gives_a_granted_tools_definition(live_asgi: str, catalogue: None, alice: User) -> None:
    result = _call(live_asgi, alice, "toolhub_describe_tool", {"name": "get_weather"})

    assert result.is_error is False
    described = result.structured_content
    assert described["tool"]["name"] == "get_weather"
    assert described["tool"]["description"] == "Current weather and forecast for a city."
    assert described["tool"]["inputSchema"]["required"] == ["city"]
    assert described["tool"]["inputSchema"]["properties"]["city"]["description"] == "The city"
    assert described["category"] == "weather"
    assert not ToolCall.objects.exists()


def test_describe_of_a_facade_gives_its_group(live_asgi: str, catalogue: None, alice: User) -> None:
    result = _call(live_asgi, alice, "toolhub_describe_tool", {"name": "database_operations"})

    assert result.structured_content == {
        "group": {
            "name": "database_operations",
            "description": "Work with the database. Call to see the operations.",
            "usage_notes": "Query before you insert.",
            "tools": ["insert_record", "query_table"],
        }
    }


def test_describe_of_a_tool_you_may_not_use_answers_like_an_unknown_one(
    live_asgi: str, catalogue: None, alice: User
) -> None:
    # denied, not granted, a facade not granted, a meta tool, a context tool: all answered like a missing one
    names = ["refund_payment", "list_payments", "file_operations", "tool_search", "database_operations_context"]
    unknown = "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"

    async def body(client: Client) -> dict[str, Any]:
        return {name: await client.call_tool("toolhub_describe_tool", {"name": name}) for name in [*names, unknown]}

    answers = with_client(live_asgi, token(alice), body)

    ending = "Use toolhub_find_tools to find the tools you may use."
    for name in [*names, unknown]:
        answer = answers[name]
        text = answer.content[0].text
        assert answer.is_error is True and answer.structured_content is None
        assert text.startswith(f"Unknown tool {name!r}.") and text.endswith(ending)
        assert "grant" not in text.lower() and "denied" not in text.lower()
        # the names it suggests are tools alice may call
        suggested = text.removeprefix(f"Unknown tool {name!r}.")
        assert not {"refund_payment", "list_payments", "file_operations", "tool_search"} & set(
            suggested.replace(",", " ").replace("?", " ").replace(".", " ").split()
        )


def test_search_mode_lists_the_same_before_and_after_a_search_and_a_found_tool_is_called(
    live_asgi: str, catalogue: None, settings: Any, alice: User
) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "MCP_TOOL_LISTING": "search"}

    async def scenario(client: Client) -> tuple[list[str], Any, Any, list[str], Any]:
        before = await _names(client)
        found = await client.call_tool("toolhub_find_tools", {"query": "weather forecast"})
        described = await client.call_tool("toolhub_describe_tool", {"name": "get_weather"})
        after = await _names(client)
        called = await client.call_tool("get_weather", {"city": "Paris"})
        return before, found, described, after, called

    before, found, described, after, called = with_client(live_asgi, token(alice), scenario)

    assert before == sorted(["clock", *STABLE])  # only the always-visible tool and the stable ones
    assert after == before
    assert [tool["name"] for tool in found.structured_content["tools"]] == ["get_weather"]
    assert described.structured_content["tool"]["name"] == "get_weather"
    assert called.is_error is False
    assert called.content[0].text == "sunny in Paris"
    call = ToolCall.objects.get()
    assert (call.tool_name, call.kind, call.status, call.user_id, call.tenant) == (
        "get_weather",
        "mcp",
        "succeeded",
        alice.pk,
        "acme",
    )
    events = set(AuditEvent.objects.filter(call_id=call.id).values_list("event_type", flat=True))
    assert {"call.requested", "call.succeeded"} <= events


def test_find_searches_exactly_what_tools_list_shows_run_time_group_rules_aside(
    live_asgi: str, catalogue: None, settings: Any, alice: User
) -> None:
    """A group's activation rules are run-time disclosure: over MCP (no run) they narrow neither list nor search.

    Search used to apply them with an empty context, so a tool of a group active only on the web channel was
    listed and callable but never found; with ``MCP_TOOL_LISTING="search"`` it could not be reached at all.
    """
    ToolGroup.objects.create(
        name="web-only", extra_tools=["get_weather"], activation_rules=[{"context": {"channel": "web"}}]
    )

    async def scenario(client: Client) -> tuple[list[str], Any]:
        return await _names(client), await client.call_tool("toolhub_find_tools", {"query": "weather forecast"})

    listed, found = with_client(live_asgi, token(alice), scenario)
    settings.TOOLHUB = {**settings.TOOLHUB, "MCP_TOOL_LISTING": "search"}
    found_in_search_mode = _call(live_asgi, alice, "toolhub_find_tools", {"query": "weather forecast"})

    assert "get_weather" in listed
    assert [tool["name"] for tool in found.structured_content["tools"]] == ["get_weather"]
    assert [tool["name"] for tool in found_in_search_mode.structured_content["tools"]] == ["get_weather"]


def test_search_mode_still_authorizes_a_call_by_name(
    live_asgi: str, catalogue: None, settings: Any, alice: User
) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "MCP_TOOL_LISTING": "search"}

    denied = refused_call(live_asgi, alice, "refund_payment", {"payment": "p1"})
    unknown = refused_call(live_asgi, alice, "no_such_tool", {"payment": "p1"})

    assert denied.code == unknown.code
    assert "grant" not in denied.message.lower()
    assert not ToolCall.objects.filter(status="succeeded").exists()


BAD_INPUTS = [
    ("toolhub_find_tools", {"query": ""}, "query"),
    ("toolhub_find_tools", {"query": "   "}, "query"),
    ("toolhub_find_tools", {"query": "weather", "max_results": 0}, "max_results"),
    ("toolhub_find_tools", {"query": "weather", "max_results": 1000}, "max_results"),
    ("toolhub_find_tools", {"query": "weather", "max_results": "5"}, "max_results"),
    ("toolhub_find_tools", {"query": "x" * 501}, "query"),
    ("toolhub_find_tools", {"max_results": 3}, "query"),
    ("toolhub_find_tools", {"query": "weather", "tenant": "globex"}, "tenant"),
    ("toolhub_find_tools", {"query": "weather", "category": "c" * 101}, "category"),
    ("toolhub_find_tools", {"query": "weather", "category": "c\x00c"}, "category"),
    ("toolhub_describe_tool", {"name": ""}, "name"),
    ("toolhub_describe_tool", {}, "name"),
    ("toolhub_describe_tool", {"name": 5}, "name"),
    ("toolhub_describe_tool", {"name": "n" * 201}, "name"),
]


def test_bad_inputs_get_a_clear_error(live_asgi: str, catalogue: None, alice: User) -> None:
    async def body(client: Client) -> list[Any]:
        return [await client.call_tool(name, arguments) for name, arguments, _ in BAD_INPUTS]

    results = with_client(live_asgi, token(alice), body)

    for (name, _, field), result in zip(BAD_INPUTS, results, strict=True):
        text = result.content[0].text
        assert result.is_error is True, (name, field)
        assert result.structured_content is None
        assert field in text and name in text, text
        assert "xxxxxxxxxx" not in text and "cccccccccc" not in text  # a value is never repeated back
    assert not ToolCall.objects.exists()


def test_an_unknown_listing_mode_fails_naming_the_key(settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "MCP_TOOL_LISTING": "some"}

    with pytest.raises(ImproperlyConfigured) as raised:
        toolhub_settings()

    assert "TOOLHUB['MCP_TOOL_LISTING']: Input should be 'all' or 'search'" in str(raised.value)
