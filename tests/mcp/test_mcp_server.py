"""toolhub's MCP server, driven by the official ``mcp`` SDK client over streamable HTTP against a live uvicorn.

The server runs in this process (a thread) in the embedded mode: calls execute eagerly in the server's
request, so no worker is needed; the database is committed for real so both threads see the rows.
"""

import time
from typing import Any

import httpx2
import pytest
from django.contrib.auth.models import User
from mcp import Client
from mcp.shared.exceptions import MCPError

from approvals.models import ApprovalRequest
from tests.mcp.conftest import token, with_client
from tests.testapp.models import SideEffect
from toolhub.models import AuditEvent, Grant, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def grants(settings: Any, alice: User, bob: User) -> None:
    """Production's default (grants required): alice may use both effects, bob only the low-risk one."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    for name in ("record_effect", "risky_effect", "stepped_work"):
        Grant.objects.create(tool_name=name, user=alice)
    Grant.objects.create(tool_name="record_effect", user=bob)


def test_tools_list_shows_each_user_the_tools_they_are_granted(
    live_asgi: str, grants: None, alice: User, bob: User
) -> None:
    async def names(client: Client) -> list[str]:
        return sorted(tool.name for tool in (await client.list_tools()).tools)

    alices = with_client(live_asgi, token(alice), names)
    bobs = with_client(live_asgi, token(bob), names, scheme="Token")

    stable = ["toolhub_call_status", "toolhub_cancel_call", "toolhub_describe_tool", "toolhub_find_tools"]
    assert alices == sorted(["record_effect", "risky_effect", "stepped_work", *stable])
    assert bobs == sorted(["record_effect", *stable])


def test_listed_tools_carry_their_schemas(live_asgi: str, grants: None, alice: User) -> None:
    async def tools(client: Client) -> dict[str, Any]:
        return {tool.name: tool for tool in (await client.list_tools()).tools}

    listed = with_client(live_asgi, token(alice), tools)

    record = listed["record_effect"]
    assert record.input_schema["required"] == ["note"]
    assert record.input_schema["properties"]["note"]["description"] == "Free text stored with the effect."
    assert listed["risky_effect"].annotations.destructive_hint is True


def test_a_low_risk_call_returns_its_result_and_is_audited(live_asgi: str, grants: None, alice: User) -> None:
    async def call(client: Client) -> Any:
        return await client.call_tool("record_effect", {"note": "over mcp"}, meta={"correlation_id": "c-7"})

    result = with_client(live_asgi, token(alice), call)

    effect = SideEffect.objects.get()
    assert result.is_error is False
    assert result.structured_content == {"effect_id": effect.pk}
    call = ToolCall.objects.get()
    assert (call.kind, call.status, call.user_id, call.tenant) == ("mcp", "succeeded", alice.pk, "acme")
    assert call.context["correlation_id"] == "c-7"
    requested = AuditEvent.objects.get(call_id=call.id, event_type="call.requested")
    assert requested.payload["kind"] == "mcp"
    assert requested.payload["client"]["channel"] == "mcp"
    assert requested.payload["client"]["name"]
    assert AuditEvent.objects.filter(call_id=call.id, event_type="call.succeeded").exists()


def test_a_high_risk_call_answers_at_once_and_its_result_comes_after_approval(
    live_asgi: str, grants: None, alice: User, operator: User
) -> None:
    operator_token = token(operator)

    async def scenario(client: Client) -> tuple[Any, Any, Any]:
        pending = await client.call_tool("risky_effect", {"note": "wire money"})
        call = pending.meta["io.toolhub/call"]
        # an operator approves over the REST API while the client holds nothing open
        async with httpx2.AsyncClient(headers={"Authorization": f"Token {operator_token}"}) as http:
            decided = await http.post(f"{live_asgi}/api/v1/approvals/{call['approval_id']}/approve/", json={})
        done = await client.call_tool("toolhub_call_status", {"call_id": call["id"], "wait": 10})
        return pending, decided, done

    started = time.monotonic()
    pending, decided, done = with_client(live_asgi, token(alice), scenario)

    assert time.monotonic() - started < 30
    assert pending.meta["io.toolhub/call"]["status"] == "pending_approval"
    assert pending.meta["io.toolhub/call"]["approval_id"] == ApprovalRequest.objects.get().pk
    assert "approval" in pending.content[0].text and "toolhub_call_status" in pending.content[0].text
    assert decided.status_code == 200, decided.text
    assert done.is_error is False
    assert done.structured_content["status"] == "succeeded"
    assert done.structured_content["result"] == {"effect_id": SideEffect.objects.get().pk}
    assert ToolCall.objects.get().kind == "mcp"


def test_a_held_call_is_cancelled_by_its_requester_and_no_operator_can_approve_it(
    live_asgi: str, grants: None, alice: User, bob: User, operator: User
) -> None:
    operator_token = token(operator)

    async def scenario(client: Client) -> tuple[Any, ...]:
        pending = await client.call_tool("risky_effect", {"note": "wire money"})
        call_id = pending.meta["io.toolhub/call"]["id"]
        refused = [
            await client.call_tool("toolhub_cancel_call", arguments)
            for arguments in ({"call_id": "not-a-uuid"}, {"call_id": call_id, "reason": "x" * 501}, {"id": call_id})
        ]
        cancelled = await client.call_tool("toolhub_cancel_call", {"call_id": call_id, "reason": "wrong account"})
        again = await client.call_tool("toolhub_cancel_call", {"call_id": call_id})
        async with httpx2.AsyncClient(headers={"Authorization": f"Token {operator_token}"}) as http:
            request_id = pending.meta["io.toolhub/call"]["approval_id"]
            approved = await http.post(f"{live_asgi}/api/v1/approvals/{request_id}/approve/", json={})
        return call_id, refused, cancelled, again, approved

    call_id, refused, cancelled, again, approved = with_client(live_asgi, token(alice), scenario)

    assert all(result.is_error for result in refused)
    assert "call_id" in refused[0].content[0].text and "500" in refused[1].content[0].text
    assert cancelled.is_error is False
    assert cancelled.structured_content == {"call_id": call_id, "status": "cancelled"}
    assert again.is_error and again.content[0].text.startswith("This call is cancelled; only a call that has not")
    assert approved.status_code == 409, approved.text
    call = ToolCall.objects.get()
    assert (call.status, call.error) == ("cancelled", "Not executed: cancelled by user:alice: wrong account")
    assert not SideEffect.objects.exists()

    # someone else's call is not among theirs: answered as a missing one
    async def bobs_try(client: Client) -> Any:
        return await client.call_tool("toolhub_cancel_call", {"call_id": call_id})

    foreign = with_client(live_asgi, token(bob), bobs_try)
    assert foreign.is_error and foreign.content[0].text == f"There is no call {call_id} among yours."


def test_bad_arguments_get_a_clear_error_and_nothing_runs(live_asgi: str, grants: None, alice: User) -> None:
    async def call(client: Client) -> Any:
        try:
            return await client.call_tool("record_effect", {"note": 5})
        except MCPError as error:
            return error

    answer = with_client(live_asgi, token(alice), call)

    text = answer.message if isinstance(answer, MCPError) else answer.content[0].text
    assert isinstance(answer, MCPError) or answer.is_error is True
    assert "note" in text
    assert not SideEffect.objects.exists()


def test_a_tool_not_granted_answers_like_an_unknown_one(live_asgi: str, grants: None, bob: User) -> None:
    async def call(client: Client, name: str) -> MCPError:
        with pytest.raises(MCPError) as raised:
            await client.call_tool(name, {"note": "x"})
        return raised.value

    denied = with_client(live_asgi, token(bob), lambda client: call(client, "risky_effect"))
    unknown = with_client(live_asgi, token(bob), lambda client: call(client, "no_such_tool"))

    assert denied.code == unknown.code
    assert "grant" not in denied.message.lower()
    assert not SideEffect.objects.exists()


def test_reserved_meta_keys_are_refused(live_asgi: str, grants: None, alice: User) -> None:
    async def call(client: Client) -> MCPError:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("record_effect", {"note": "x"}, meta={"tenant": "globex"})
        return raised.value

    error = with_client(live_asgi, token(alice), call)

    assert "tenant" in error.message
    assert not ToolCall.objects.exists()


def test_a_meta_value_no_column_stores_is_refused_naming_the_key(live_asgi: str, grants: None, alice: User) -> None:
    # (a lone surrogate never gets this far: the SDK's JSON parser refuses it)
    async def call(client: Client) -> MCPError:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("record_effect", {"note": "x"}, meta={"correlation_id": "a\x00b"})
        return raised.value

    error = with_client(live_asgi, token(alice), call)

    assert "The context cannot be stored: correlation_id contains" in error.message
    assert not ToolCall.objects.exists()
    assert not SideEffect.objects.exists()


def test_long_tools_send_progress(live_asgi: str, grants: None, alice: User) -> None:
    updates: list[tuple[float, float | None, str | None]] = []

    async def progress(current: float, total: float | None, message: str | None) -> None:
        updates.append((current, total, message))

    async def call(client: Client) -> Any:
        return await client.call_tool("stepped_work", {"steps": 3, "seconds_per_step": 0.7}, progress_callback=progress)

    result = with_client(live_asgi, token(alice), call)

    assert result.content[0].text == "worked 3 steps"
    assert updates and updates[-1][1] == 3
    assert all(message and message.startswith("step ") for _, _, message in updates)


@pytest.mark.parametrize("key", [None, "not-a-token"])
def test_a_client_without_a_valid_token_is_refused(live_asgi: str, grants: None, key: str | None) -> None:
    async def names(client: Client) -> Any:
        return await client.list_tools()

    with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the HTTP 401 as its own error type
        with_client(live_asgi, key, names)
    raw = httpx2.post(
        f"{live_asgi}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Authorization": f"Bearer {key}"} if key else {},
    )
    assert raw.status_code == 401
    assert raw.headers["www-authenticate"].startswith("Bearer")
    assert not ToolCall.objects.exists()


def test_the_status_tool_shows_only_your_own_calls(live_asgi: str, grants: None, alice: User, bob: User) -> None:
    async def pending(client: Client) -> Any:
        return await client.call_tool("risky_effect", {"note": "mine"})

    call_id = with_client(live_asgi, token(alice), pending).meta["io.toolhub/call"]["id"]

    async def status(client: Client, arguments: dict[str, Any]) -> Any:
        return await client.call_tool("toolhub_call_status", arguments)

    theirs = with_client(live_asgi, token(bob), lambda client: status(client, {"call_id": call_id}))
    mine = with_client(live_asgi, token(alice), lambda client: status(client, {"call_id": call_id}))
    bad = with_client(live_asgi, token(alice), lambda client: status(client, {"call_id": "nope"}))

    assert theirs.is_error is True and "no call" in theirs.content[0].text
    assert mine.is_error is False
    assert mine.structured_content["status"] == "pending_approval"
    assert mine.structured_content["approval_id"] == ApprovalRequest.objects.get().pk
    assert bad.is_error is True and "call_id" in bad.content[0].text


def test_the_status_tool_reads_a_refused_call_of_a_tool_you_may_not_see_as_an_unknown_tool(
    live_asgi: str, grants: None, bob: User
) -> None:
    """The answer bob got (invalid params: unknown tool) is what the status tool tells him of his row later."""

    async def refused(client: Client) -> MCPError:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("risky_effect", {"note": "not mine"})
        return raised.value

    answer = with_client(live_asgi, token(bob), refused)
    row = ToolCall.objects.get(user=bob, tool_name="risky_effect")
    assert row.status == "denied"  # the stored truth, for operators and auditors

    async def status(client: Client) -> Any:
        return await client.call_tool("toolhub_call_status", {"call_id": str(row.pk)})

    read = with_client(live_asgi, token(bob), status)

    assert answer.message.startswith("Unknown tool 'risky_effect'.")
    assert read.is_error is True and read.structured_content == {"call_id": str(row.pk), "status": "invalid"}
    assert read.content[0].text == answer.message
