"""Review 2026-12-07 (h): the entrances (REST, MCP) after the credential work, as a client uses them.

Seen by alice (acme's member, an API key) and dana (a member of acme and globex).

Findings:

1. A tenant named where an entrance did not look was not read, and the call ran in the caller's only tenant:
   ``POST /api/v1/calls/?tenant=globex`` (``?tenant=`` is how the tool listing and the saga URLs take a tenant) or
   with ``X-Toolhub-Tenant: globex`` (how MCP takes it) by acme's alice ran ``record_effect`` in acme (200), and
   ``/mcp?tenant=globex`` did the same over MCP; a member of both naming globex in the header and acme in the body
   got acme, silently. So did ``POST /api/v1/sagas/`` and ``POST /api/v1/runs/``. Fix: one reading,
   ``toolhub.direct.tenant_named``, of the body's ``tenant`` (a run's ``context.tenant``), ``?tenant=`` and
   ``X-Toolhub-Tenant`` on every write that takes a tenant (REST's calls, sagas and runs; MCP's auth wrapper): a
   tenant named anywhere is the one asked for (a non-member refused as in the body, 400 / invalid request), two
   places naming different ones are refused saying where, never what; nothing recorded or run.
   ``test_a_call_naming_another_tenant_outside_the_body_runs_nothing``,
   ``test_a_saga_or_run_naming_another_tenant_in_the_query_is_refused``,
   ``test_two_places_naming_different_tenants_are_refused_and_one_place_is_heard``,
   ``test_an_mcp_client_naming_another_tenant_in_the_url_runs_nothing``.

Checked and holding:

- MCP's bad input, over a live server as curl sends it: a JSON-RPC batch (400, -32602: the SDK's validation text
  echoes the sender's own batch, truncated by pydantic), malformed JSON (400, -32700), ``Content-Type: text/plain``
  (400 from the SDK, not 415), an unknown method (-32601 in the stream), a body past 4 MiB (413), no key and a wrong
  key (401, ``WWW-Authenticate``); nothing recorded or run, and neither the answers nor the log hold the key:
  ``test_holding_bad_mcp_requests_are_4xx_run_nothing_and_log_no_key``.
- A tenant header naming a tenant the caller is not in and one that does not exist answer one text
  (``caller_principal``), so the refusal tells nothing of other tenants; the same reading now serves ``?tenant=``.
- Revocation at the decision points (read, and held by gi, gj, eo, ga's tests): MCP is stateless, so an SDK client
  kept open is authenticated again at each POST (a key deleted, grown old, its password reset or its account
  deactivated answers 401 at the next request); a follow (``_followed_sync``), ``toolhub_call_status`` with
  ``wait``, REST's ``?wait=`` and work run in the request re-read the user with the key's row in one statement
  (``tenant_scope_now``); MCP progress re-reads on a ``copy.copy`` of the user, which keeps the credential mark.
  Unstaffing ends no API key (a key is no console session; README).

Not changed (for the next reviewer):

- A call held for approval whose key is revoked afterwards (a password reset) still runs once an operator approves
  it: the README promises the key and waiting requests end, and held calls withdrawn at a deactivation or a removal
  from the tenant, not at a password reset; the operator's decision is the gate. A design question, not fixed here.
- ``POST /api/v1/agents/`` reads the body's ``tenant`` only (``null`` there means a global agent); developers'
  configuration, left as it was.
"""

from typing import Any

import anyio
import pytest
from django.contrib.auth.models import User
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.api.conftest import client_for
from tests.mcp.conftest import live_asgi, token  # noqa: F401 - live_asgi is a fixture
from tests.testapp.models import SideEffect
from toolhub.models import Tenant, TenantMembership, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

EFFECT = {"tool": "record_effect", "arguments": {"note": "meant for globex"}}


@pytest.fixture
def dana(tenant: Tenant, other_tenant: Tenant) -> User:
    """A member of acme and globex."""
    user = User.objects.create_user("dana", "dana@example.com", "dana-password")
    TenantMembership.objects.create(user=user, tenant=tenant)
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    return user


def _post(user: User, path: str, body: dict[str, Any], **headers: str) -> Any:
    return client_for(user).post(path, body, format="json", **headers)


def _mcp(base: str, key: str, url: str, headers: dict[str, str] | None = None) -> Any:
    """``record_effect`` called over the SDK client at ``base + url``: its result, or the ``MCPError`` raised."""

    async def main() -> Any:
        sent = {"Authorization": f"Bearer {key}", **(headers or {})}
        async with create_mcp_http_client(headers=sent) as http:
            async with Client(streamable_http_client(f"{base}{url}", http_client=http)) as client:
                try:
                    return await client.call_tool("record_effect", EFFECT["arguments"])
                except MCPError as refused:
                    return refused

    return anyio.run(main)


@pytest.mark.parametrize(
    ("path", "headers"),
    [("/api/v1/calls/?tenant=globex", {}), ("/api/v1/calls/", {"HTTP_X_TOOLHUB_TENANT": "globex"})],
    ids=["query", "header"],
)
def test_a_call_naming_another_tenant_outside_the_body_runs_nothing(
    alice: User, other_tenant: Tenant, path: str, headers: dict[str, str]
) -> None:
    """Found: acme's alice naming globex by ``?tenant=`` or ``X-Toolhub-Tenant`` had ``record_effect`` run in acme
    (200, ``"tenant": "acme"``): the call view read the body's ``tenant`` only.
    Expect: 400 as for the body's ``tenant``, naming no tenant but the one sent; nothing recorded or run.
    """
    response = _post(alice, path, EFFECT, **headers)

    assert response.status_code == 400, response.content
    assert response.json() == {"detail": "You are not a member of tenant 'globex'; give the slug of one of yours."}
    assert not SideEffect.objects.exists() and not ToolCall.objects.exists()


def test_a_saga_or_run_naming_another_tenant_in_the_query_is_refused(alice: User, other_tenant: Tenant) -> None:
    """Found: ``POST /api/v1/sagas/?tenant=globex`` opened alice's saga in acme (201), and ``POST /api/v1/runs/``
    with ``X-Toolhub-Tenant: globex`` looked the agent up in acme.
    Expect: both refused (400) as a body naming globex is; no saga, no run.
    """
    from agents_app.models import AgentRun
    from toolhub.sagas.models import Saga

    saga = _post(alice, "/api/v1/sagas/?tenant=globex", {"saga_id": "trip-7"})
    run = _post(alice, "/api/v1/runs/", {"agent": "anything", "input": "hi"}, HTTP_X_TOOLHUB_TENANT="globex")

    assert saga.status_code == 400 and "not a member of tenant 'globex'" in saga.json()["detail"], saga.content
    assert run.status_code == 400 and "globex" in run.content.decode(), run.content
    assert not Saga.objects.exists() and not AgentRun.objects.exists()


def test_two_places_naming_different_tenants_are_refused_and_one_place_is_heard(dana: User) -> None:
    """Found: dana (acme and globex) sending ``X-Toolhub-Tenant: globex`` with ``"tenant": "acme"`` got a call in
    acme, the header unread. Expect: 400 saying where the tenants differ (not which), nothing run; a tenant named
    once by the query or the header is the one the call is made in.
    """
    both = _post(dana, "/api/v1/calls/", {**EFFECT, "tenant": "acme"}, HTTP_X_TOOLHUB_TENANT="globex")
    repeated = _post(dana, "/api/v1/calls/?tenant=acme&tenant=globex", EFFECT)

    assert both.status_code == 400, both.content
    assert both.json() == {
        "detail": "the body's tenant and the X-Toolhub-Tenant header name different tenants; name one."
    }
    assert repeated.status_code == 400 and "'acme, globex'" in repeated.json()["detail"], repeated.content
    assert not ToolCall.objects.exists()
    by_query = _post(dana, "/api/v1/calls/?tenant=globex", EFFECT)
    by_header = _post(dana, "/api/v1/calls/", {**EFFECT, "tenant": "globex"}, HTTP_X_TOOLHUB_TENANT="globex")
    assert (by_query.status_code, by_header.status_code) == (200, 200), (by_query.content, by_header.content)
    assert list(ToolCall.objects.values_list("tenant", flat=True)) == ["globex", "globex"]


def test_an_mcp_client_naming_another_tenant_in_the_url_runs_nothing(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
    dana: User,
    other_tenant: Tenant,
) -> None:
    """Found: the SDK client at ``/mcp?tenant=globex`` with acme's key ran ``record_effect`` in acme; the MCP server
    read ``X-Toolhub-Tenant`` only. Expect: refused (invalid request), nothing run; a query and a header naming
    different tenants refused saying where; dana naming globex in the URL calls in globex.
    """
    refused = _mcp(live_asgi, token(alice), "/mcp?tenant=globex")
    differ = _mcp(live_asgi, token(dana), "/mcp?tenant=acme", {"X-Toolhub-Tenant": "globex"})

    assert isinstance(refused, MCPError) and "not a member of tenant 'globex'" in str(refused), refused
    assert isinstance(differ, MCPError), differ
    assert str(differ) == "?tenant= and the X-Toolhub-Tenant header name different tenants; name one."
    assert not ToolCall.objects.exists()
    ran = _mcp(live_asgi, token(dana), "/mcp?tenant=globex")
    assert ran.is_error is False, ran
    assert list(ToolCall.objects.values_list("tenant", flat=True)) == ["globex"]


def _raw(base: str, body: bytes, headers: dict[str, str]) -> Any:
    """A POST to ``/mcp`` as curl sends it (the README's example), with ``headers`` over the usual ones."""
    import httpx

    sent = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
        **headers,
    }
    return httpx.post(f"{base}/mcp", content=body, headers=sent, timeout=30)


def test_holding_bad_mcp_requests_are_4xx_run_nothing_and_log_no_key(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Holding: a batch, malformed JSON, a wrong content type, an unknown method, a body past the SDK's 4 MiB, no
    key and a wrong key are each answered 4xx (or a JSON-RPC error), nothing recorded or run, and neither
    the answers nor the log hold the key sent."""
    import json

    key = token(alice)
    auth = {"Authorization": f"Bearer {key}"}
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "record_effect", "arguments": EFFECT["arguments"]},
    }
    answers = {
        "batch": _raw(live_asgi, json.dumps([call, {**call, "id": 2}]).encode(), auth),
        "malformed": _raw(live_asgi, b'{"jsonrpc": "2.0", "id": 1, "method": ', auth),
        "text/plain": _raw(live_asgi, json.dumps(call).encode(), {**auth, "Content-Type": "text/plain"}),
        "unknown method": _raw(live_asgi, json.dumps({**call, "method": "tools/execute"}).encode(), auth),
        "oversized": _raw(live_asgi, json.dumps({**call, "pad": "x" * (4 * 1024 * 1024)}).encode(), auth),
        "no key": _raw(live_asgi, json.dumps(call).encode(), {}),
        "wrong key": _raw(live_asgi, json.dumps(call).encode(), {"Authorization": f"Bearer {key[:-1]}x"}),
    }
    codes = {name: answer.status_code for name, answer in answers.items()}
    assert codes == {
        "batch": 400,
        "malformed": 400,
        "text/plain": 400,
        "unknown method": 200,  # a JSON-RPC error in the stream, as the protocol answers an unknown method
        "oversized": 413,
        "no key": 401,
        "wrong key": 401,
    }, codes
    assert '"code":-32602' in answers["batch"].text and '"code":-32700' in answers["malformed"].text
    assert '"code":-32601' in answers["unknown method"].text, answers["unknown method"].text
    assert answers["wrong key"].headers["www-authenticate"] == 'Bearer realm="toolhub"'
    assert not any(key in answer.text or key[:-1] in answer.text for answer in answers.values())
    assert key not in caplog.text and key[:-1] not in caplog.text
    assert not ToolCall.objects.exists() and not SideEffect.objects.exists()
