"""Review of 2026-12-06 (du): the REST API's and the MCP server's per-caller boundary.

Seen by a logged-in member of tenant acme with an API key while tenant globex exists. Each test fails on the
reviewed code (main at dc76274) and states what was found ("Found: ...") and what is expected ("Expect: ...").

Findings:

1. MCP's ``tools/call`` of a queued call, followed until it settled (``MCP_CALL_WAIT_SECONDS``), answered with the
   row as stored: a call the worker denied because the caller's grant was withdrawn meanwhile (permissions are
   checked when a call executes) came back with the policy's true refusal, naming the grant, where the REST API's
   ``POST /api/v1/calls/?wait=`` (``_answer``) and MCP's own ``toolhub_call_status`` answer a refused call of a
   tool the caller may no longer see as an unknown tool's. Now the followed call goes through the check the first
   answer does (``toolhub.mcp_server._unless_hidden``): the unknown-tool error, as a tool refused at once.
2. MCP's ``toolhub_cancel_call`` was not throttled, where ``POST /api/v1/calls/{id}/cancel/`` counts against the
   per-user ``calls`` rate (``throttle_scope = "calls"``) and MCP's ``tools/call`` counts against it since probe
   04_l: past the rate, alice's REST client was answered 429 while her MCP client went on withdrawing calls (each
   a write: the call, its approval request, audit events, the run woken). Now every MCP write counts against the
   one per-user rate through one check (``toolhub.mcp_server._count_write``) before it is made.

Checked and found holding (no test here):

- ``GET /api/v1/calls/{id}/`` (with and without ``?wait=``), ``.../result/``, ``.../cancel/``,
  ``.../artifacts/{n}/`` and ``/api/v1/sagas/{id}/`` (+ ``rollback/``) with a globex call's or saga's id answer as
  a random id does (404, same body); ``HEAD`` and ``OPTIONS`` run the same lookups (DRF's ``OPTIONS`` metadata
  lists no related choices). MCP's ``toolhub_call_status`` and ``toolhub_cancel_call`` answer "There is no call
  <id> among yours." for globex's id and a random one alike.
- ``?tool=<globex's tool>`` and ``?run=<globex's run>`` on the call list only narrow the caller's own rows; list
  cursors carry a position only (a cursor replayed by another member pages through that member's rows).
- ``Idempotency-Key`` and saga ids are per tenant and user (``CallIdempotencyKey`` is looked up by tenant, user
  and key; a conflict names only the caller's own call).
- Wait slots (``toolhub.api.wait_slots``) are keyed by the waiting user's id: another user's waits, of the same
  tenant or not, never take or free them; MCP's and ``?wait=`` share the cap. Throttles are per user
  (``ScopedRateThrottle`` keys on the user's pk; MCP counts through ``user_throttle_wait``), never per key or IP.
- The MCP server is stateless (no ``Mcp-Session-Id`` is issued or honoured; ``GET``/``DELETE`` answer 405 after
  the Host/Origin check), so no session is reused by another bearer; the user is read from the bearer on every
  request. Progress notifications are sent on the request's own stream for the call id the server generated.
- ``tools/list``, ``toolhub_find_tools``/``toolhub_describe_tool`` and the SDK's ``Mcp-Param-*`` schema lookup give
  only tools the caller may call (``toolhub.mcp_headers``); the OpenAPI schema's enums are static.
"""

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.helpers import for_a_worker
from tests.integration.workers import wait_for
from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - live_asgi is a fixture
from toolhub import pipeline
from toolhub.direct import direct_call_request
from toolhub.models import CallKind, CallStatus, Grant, ToolCall
from toolhub.tasks import execute_tool_call_task

pytestmark = pytest.mark.django_db(transaction=True)


def _deny_when_queued(alice: User) -> None:
    """As a worker would find it: alice's queued call, after her grant was withdrawn, run (and so denied)."""
    try:
        wait_for(lambda: ToolCall.objects.filter(user=alice, status=CallStatus.QUEUED).exists(), timeout=20, what="q")
        Grant.objects.filter(user=alice, tool_name="record_effect").delete()
        call = ToolCall.objects.get(user=alice)
        execute_tool_call_task.apply(args=[str(call.pk)])
    finally:
        connection.close()


def test_a_followed_mcp_call_denied_by_its_worker_reads_as_an_unknown_tool(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    settings: Any,
    alice: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: alice's ``tools/call`` of ``record_effect`` was queued; while the server followed it, her grant was
    withdrawn and the worker denied the call. The answer was the stored refusal (``is_error`` with the policy's
    text about the grant), while ``toolhub_call_status`` of the same call reads it as an unknown tool's, as the
    REST API answers it: the MCP client learnt the tool exists, and why it may not use it.
    Expect: the followed call is refused as an unknown tool (invalid params), with the message the status tool
    gives for that call.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny", "MCP_CALL_WAIT_SECONDS": 15}
    Grant.objects.create(tool_name="record_effect", user=alice)
    monkeypatch.setattr(pipeline, "dispatch_call", lambda call: None)  # the test runs the worker's part itself
    worker = threading.Thread(target=_deny_when_queued, args=(alice,))

    async def call(client: Client) -> Any:
        try:
            return await client.call_tool("record_effect", {"note": "queued"})
        except MCPError as refused:  # a refusal is the answer under test
            return refused

    with for_a_worker():
        worker.start()
        answer = with_client(live_asgi, token(alice), call)
    worker.join(20)
    row = ToolCall.objects.get(user=alice)
    assert row.status == CallStatus.DENIED  # the stored truth, for operators and auditors

    async def status(client: Client) -> Any:
        return await client.call_tool("toolhub_call_status", {"call_id": str(row.pk)})

    read = with_client(live_asgi, token(alice), status)
    assert read.content[0].text.startswith("Unknown tool 'record_effect'."), read.content[0].text
    assert isinstance(answer, MCPError), answer.content[0].text  # as a tool refused at once is answered
    assert answer.message == read.content[0].text, answer.message
    assert "grant" not in answer.message.lower()


def test_cancelling_over_mcp_counts_against_the_per_user_rate_of_calls(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    settings: Any,
    alice: User,
) -> None:
    """Found: at a rate of 1 call a minute, alice's second ``POST /api/v1/calls/{id}/cancel/`` answers 429, but over
    MCP ``toolhub_cancel_call`` withdrew her second held call (and would any number more): the stable tool counted
    nothing against the ``calls`` rate that the REST cancel and MCP's ``tools/call`` count against.
    Expect: the second cancel over MCP is refused ("Too many calls", as ``tools/call`` is) and its call stays held.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    Grant.objects.create(tool_name="risky_effect", user=alice)
    held = [
        direct_call_request(user=alice, tool_name="risky_effect", arguments={"note": f"n{n}"}, kind=CallKind.MCP).call
        for n in range(2)
    ]
    assert [call.status for call in held] == [CallStatus.PENDING_APPROVAL] * 2
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"calls": "1/minute"}}
    cache.clear()

    async def cancel(client: Client, call: ToolCall) -> Any:
        try:
            return await client.call_tool("toolhub_cancel_call", {"call_id": str(call.pk)})
        except MCPError as refused:
            return refused

    try:
        answers = [
            with_client(live_asgi, token(alice), lambda client, call=call: cancel(client, call)) for call in held
        ]
    finally:
        cache.clear()

    first, second = answers
    assert not isinstance(first, MCPError) and first.is_error is False, first
    assert isinstance(second, MCPError), second
    assert second.message.startswith("Too many calls"), second.message
    assert ToolCall.objects.get(pk=held[1].pk).status == CallStatus.PENDING_APPROVAL
