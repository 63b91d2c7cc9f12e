"""Review of 2026-12-05 (dg): the MCP server and tool search, driven by the official ``mcp`` SDK client.

As a member of acme with few grants (bob holds one tool, alice a few), against the live ASGI app
(``tests/mcp/conftest.py``: uvicorn on a free port, the SDK's ``Client`` over streamable HTTP, and raw 2026-07-28
posts where the SDK client would refuse to send what an attacker sends). Each test fails on the reviewed code
(main at 1b659e1) and states what was found ("Found: ...") and what is expected ("Expect: ...").

Findings:

1. The client's name and version (``clientInfo``, from the 2026 ``_meta`` envelope or ``initialize``) went into the
   ``call.requested`` audit event as sent: one holding a NUL or a lone surrogate made the audit append fail
   (PostgreSQL's driver cannot encode a surrogate, ``jsonb`` takes no NUL), the whole call rolled back and the
   client got "Internal server error" with nothing recorded, so any client could make its calls leave no trace
   in the trail. Now ``toolhub.pipeline._request_data`` stores the client as ``storable_value`` (the rule remote
   definitions are stored by), for every door (REST's user agent too).

Checked and found holding (probes run, no test here; reviews z, cf, am, probe 05 h and k hold most as tests):

- JSON-RPC framing (SDK 2.3): a batch (array) body answers 400 ``-32600`` under 2026-07-28 and a validation error
  under 2025-03-26, running nothing; invalid JSON ``-32700``; a 5 MB body 413 before parsing (after the 401 of the
  token check, so anonymous bodies are never read); an object as request id ``-32600``; a string id (HTML, 100 kB)
  is echoed as JSON to the sender only; an object ``progressToken`` is refused ``-32602`` and nothing runs.
- ``resources/*``, ``prompts/*``, ``completion/complete`` and ``logging/setLevel`` answer ``-32601``; ``tools/list``
  ignores a cursor (forged, or another user's: there is no pagination, the list is built per request from the
  token's principal) and says ``cacheScope: private``; ``Mcp-Method``/``Mcp-Name`` disagreeing with the body and an
  unknown or mismatched protocol version answer 400 ``-32020``; 2025-03-26 ``initialize`` and calls are served
  statelessly.
- Sessions: no ``Mcp-Session-Id`` is issued, a sent one is ignored (the request is the token's), ``DELETE`` answers
  405, ``notifications/cancelled`` is accepted (202) and cancels nothing of anyone's; so no second user inherits a
  session.
- Text no column stores, elsewhere in a request: under 2025-03-26 the SDK's parser refuses a lone surrogate anywhere
  (``-32700``); under 2026-07-28 it reaches toolhub, which refuses it in an argument value or key (the call recorded
  ``invalid``, nothing run), in a ``_meta`` context value (``-32602`` naming the key) or key, and in every argument
  of ``toolhub_find_tools``, ``toolhub_describe_tool``, ``toolhub_call_status`` and ``toolhub_cancel_call``.
- Transport security: a foreign ``Origin`` 403, a foreign ``Host`` 421 (``ALLOWED_HOSTS``); no CORS headers.
- bob's ``tools/call`` of alice's tool and of a near-miss name answer the same ``Unknown tool ... Did you mean:
  record_effect?`` (suggestions only among his tools), recorded as ``denied``/``invalid``.
- Progressive disclosure, probed with a scripted run (tool search on): ``tool_search`` finds ``send_email``, its
  grant is denied to the tenant in the same turn or the next; the next turn shows the model only ``clock`` and
  ``tool_search``, the stored ``disclosure`` keeps no hit, and the model's call of ``send_email`` is ``denied``.
  ``seen_state`` filters a run's stored hits and unfolded facades through ``usable_tools``
  each turn and after each turn's calls; a revoked tool leaves the principal's search index (governance stamp) and
  a call of it is denied at execution (tests/disclosure/test_search.py, test_unfolding.py, probe 04 o).

Not fixed, noted: an authenticated ``GET /mcp`` (the SDK's standalone SSE stream) stays open with nothing to send
in stateless mode; bounding open connections is left to the proxy. ``.example.com`` in ``ALLOWED_HOSTS`` lets
Django serve subdomains but the MCP host check only ``example.com`` (stricter, not a hole).
"""

import json
from typing import Any

import httpx
import mcp_types as types
import pytest
from django.contrib.auth.models import User
from mcp import Client

from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - fixtures
from toolhub.models import AuditEvent, CallStatus, Grant, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

#: The 2026-07-28 envelope every modern request carries in ``_meta`` (what the SDK client sends).
_ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _granted(settings: Any, user: User) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    Grant.objects.create(tool_name="record_effect", user=user)


def _recorded_client(user: User) -> dict[str, Any]:
    made = ToolCall.objects.get()
    assert (made.tool_name, made.status, made.user_id) == ("record_effect", CallStatus.SUCCEEDED, user.pk)
    return AuditEvent.objects.get(call_id=made.pk, event_type="call.requested").payload["client"]  # type: ignore[no-any-return]


def test_a_client_name_holding_a_nul_does_not_erase_the_call_from_the_trail(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    settings: Any,
    alice: User,
) -> None:
    """Found: the SDK client introducing itself with a NUL in its name or version (``clientInfo``) made the audit
    append fail on PostgreSQL (``jsonb`` takes no NUL): the call rolled back, answered "Internal server error" and
    left no row nor event. Expect: the call is made and recorded, the NUL written out."""
    _granted(settings, alice)
    info = types.Implementation(name="probe\x00client", version="1\x00")

    async def call(client: Client) -> Any:
        return await client.call_tool("record_effect", {"note": "n"})

    result = with_client(live_asgi, token(alice), call, client_info=info)

    assert result.is_error is False
    assert _recorded_client(alice) | {"protocol_version": None} == {
        "channel": "mcp",
        "protocol_version": None,
        "name": "probe\\u0000client",
        "version": "1\\u0000",
    }


def test_a_client_name_holding_a_lone_surrogate_does_not_erase_the_call_from_the_trail(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    settings: Any,
    alice: User,
) -> None:
    """Found: a client naming itself with a lone surrogate (``\\ud800`` in the JSON; the SDK's own client cannot send
    one, any other can) crashed the audit append on both backends (the driver cannot encode it): nothing recorded,
    "Internal server error". Expect: the call is made and recorded, the surrogate written out."""
    _granted(settings, alice)
    envelope = {**_ENVELOPE, "io.modelcontextprotocol/clientInfo": {"name": "probe\ud800", "version": "1"}}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "record_effect", "arguments": {"note": "n"}, "_meta": envelope},
    }
    headers = {
        "Authorization": f"Bearer {token(alice)}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "record_effect",
    }

    answer = httpx.post(f"{live_asgi}/mcp", content=json.dumps(body).encode(), headers=headers, timeout=30)

    assert answer.status_code == 200, answer.text
    assert "error" not in answer.json(), answer.text
    assert _recorded_client(alice)["name"] == "probe\\ud800"
