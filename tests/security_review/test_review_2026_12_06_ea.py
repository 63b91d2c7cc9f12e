"""Review of 2026-12-06 (ea): the REST/MCP leftovers of review du (a tenant left while a call is followed; the
unthrottled external-result write).

Seen by alice, a member of tenant acme with an API key. Each test fails on the reviewed code (main at c47168e) and
states what was found ("Found: ...") and what is expected ("Expect: ...").

Findings:

1. alice's call was made in acme; while it was followed (REST ``POST /api/v1/calls/?wait=``, MCP ``tools/call``),
   her membership was removed and the worker refused the call (she is out of the tenant). The answer was then
   built by ``caller_principal(user, tenant=call.tenant)``, which raised: REST answered 400 "You are not a member
   of tenant 'acme'; give the slug of one of yours." (as if her request had named a wrong tenant; it named none),
   MCP a generic "Internal server error" (the middleware's answer to an unexpected exception, logged as a
   failure). Now both answer through one check made after the follow (``toolhub.direct.answering_principal``):
   the caller must still belong to the call's tenant, else the refusal "You are no longer a member of the tenant
   this call was made in; its outcome is not shown." (REST 403, MCP invalid params): it names no tenant, no call
   id, no status or result, the same text on both channels, as reading the call back answers nothing
   (``GET /api/v1/calls/{id}/`` is a 404 for her now). The row keeps the truth for operators and auditors.
2. ``GET /api/v1/calls/{id}/?wait=`` read the call after the wait through the tenant scope memoized on the
   request's user before it (``toolhub.tenancy.tenant_scope``): alice, removed from acme while she waited, was
   answered 200 with the call's detail (status, error, audit events) where the same read a moment later is a 404.
   Now ``_follow`` (``toolhub.api.governed``, shared by ``POST`` and ``GET``) reads the caller's tenants again
   after a wait (``toolhub.tenancy.tenant_scope_now``), as ``answering_principal`` does.
3. ``POST /api/v1/calls/{id}/result/`` (an external tool's result or error, which settles the call and resumes
   the run waiting on it: a write the caller repeats for each call that awaits a result) had no throttle scope,
   where ``POST /api/v1/calls/`` and ``.../cancel/`` (and MCP's ``tools/call`` and ``toolhub_cancel_call``) count
   against the per-user ``calls`` rate. Now it counts against that rate too (``throttle_scope = "calls"``,
   DRF's throttle, before the view reads anything): past the rate 429, nothing written.

Checked and found holding (no test here):

- The other REST writes and their rates: ``POST /runs/``, ``runs/{id}/retry|cancel|rollback/`` and
  ``sagas/{id}/rollback/`` (``runs``); ``approvals/{id}/approve|reject/`` (``decisions``); ``POST /calls/`` and
  ``calls/{id}/cancel/`` (``calls``). MCP: ``tools/call`` and ``toolhub_cancel_call`` count against ``calls``;
  ``toolhub_call_status``, ``toolhub_find_tools``, ``toolhub_describe_tool`` and ``tools/list`` write nothing.
- Writes without a throttle, left as they are: ``POST /api/v1/agents/`` and ``PATCH /api/v1/agents/{id}/`` are
  platform configuration for agent managers (``ManagesAgents``), as the admin's configuration pages are, which
  are not throttled either. ``POST /api/v1/sagas/`` (opening a direct saga) writes one saga row per request and
  is not throttled: listed for the integrator, not changed here (a saga opened is inert until a call names it,
  and each such call counts against ``calls``).
- A caller still in the call's tenant is answered as before (the unknown-tool answer for a hidden tool, the
  outcome otherwise); the worker's standing check (``toolhub.authorization``) refuses the call of a user who
  left, so nothing ran in her name.
"""

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from mcp import Client
from mcp.shared.exceptions import MCPError
from rest_framework.test import APIClient

from tests.helpers import for_a_worker
from tests.integration.workers import wait_for
from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - live_asgi is a fixture
from tests.tools.test_external_and_loop import LOOKUP
from toolhub import pipeline, registry
from toolhub.api import governed
from toolhub.direct import direct_call_request
from toolhub.models import AuditEvent, CallKind, CallStatus, Grant, TenantMembership, ToolCall
from toolhub.tasks import execute_tool_call_task

pytestmark = pytest.mark.django_db(transaction=True)

#: What a caller who left the call's tenant while it was followed is told, over REST and MCP alike.
NO_LONGER_A_MEMBER = "You are no longer a member of the tenant this call was made in; its outcome is not shown."


def _leave_when_queued(alice: User) -> None:
    """As it happens while alice's call waits for a worker: her membership is removed, then the worker runs it."""
    try:
        wait_for(lambda: ToolCall.objects.filter(user=alice, status=CallStatus.QUEUED).exists(), timeout=20, what="q")
        TenantMembership.objects.filter(user=alice).delete()
        call = ToolCall.objects.get(user=alice)
        execute_tool_call_task.apply(args=[str(call.pk)])
    finally:
        connection.close()


def _api_client(user: User) -> APIClient:
    """A REST client authenticated by ``user``'s API key: the user is read afresh on every request."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token(user)}")
    return client


def _queued_record_effect(settings: Any, alice: User, monkeypatch: pytest.MonkeyPatch) -> threading.Thread:
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny", "MCP_CALL_WAIT_SECONDS": 15}
    Grant.objects.create(tool_name="record_effect", user=alice)
    monkeypatch.setattr(pipeline, "dispatch_call", lambda call: None)  # the test runs the worker's part itself
    return threading.Thread(target=_leave_when_queued, args=(alice,))


def test_a_rest_wait_whose_caller_left_the_tenant_meanwhile_answers_a_clear_refusal(
    settings: Any, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: alice's ``POST /api/v1/calls/?wait=15`` (no tenant named: her only one, acme) was queued; while it
    was followed her membership was removed and the worker refused the call. The answer was a 400 "You are not a
    member of tenant 'acme'; give the slug of one of yours.": a complaint about a tenant her request never named.
    Expect: 403 with the one refusal for a caller who left the call's tenant meanwhile, naming neither the tenant
    nor the call, its status or its outcome; the row keeps the worker's refusal.
    """
    worker = _queued_record_effect(settings, alice, monkeypatch)
    client = _api_client(alice)
    with for_a_worker():
        worker.start()
        response = client.post(
            "/api/v1/calls/?wait=15", {"tool": "record_effect", "arguments": {"note": "queued"}}, format="json"
        )
    worker.join(20)
    row = ToolCall.objects.get(user=alice)
    assert row.status == CallStatus.DENIED  # the stored truth, for operators and auditors
    assert response.status_code == 403, response.content
    assert response.json() == {"detail": NO_LONGER_A_MEMBER}
    assert client.get(f"/api/v1/calls/{row.pk}/").status_code == 404  # as reading it back answers now


def test_an_mcp_call_whose_caller_left_the_tenant_meanwhile_answers_the_same_refusal(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    settings: Any,
    alice: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: the same over MCP: alice's ``tools/call`` of ``record_effect`` was queued and followed; her membership
    was removed and the worker refused it; the answer was "Internal server error" (``caller_principal`` raised in
    ``_unless_hidden``, an unexpected exception logged as a server failure).
    Expect: an MCP error (invalid params) with the REST API's refusal text, never an internal error.
    """
    worker = _queued_record_effect(settings, alice, monkeypatch)

    async def call(client: Client) -> Any:
        try:
            return await client.call_tool("record_effect", {"note": "queued"})
        except MCPError as refused:  # a refusal is the answer under test
            return refused

    with for_a_worker():
        worker.start()
        answer = with_client(live_asgi, token(alice), call)
    worker.join(20)
    assert ToolCall.objects.get(user=alice).status == CallStatus.DENIED
    assert isinstance(answer, MCPError), answer
    assert answer.message == NO_LONGER_A_MEMBER, answer.message


def test_supplying_external_results_counts_against_the_per_user_rate_of_calls(settings: Any, alice: User) -> None:
    """Found: at a rate of 1 call a minute, alice's second ``POST /api/v1/calls/{id}/result/`` was accepted (and
    would any number more, one per call awaiting a result): each settles a call, writes its audit events and wakes
    the run waiting on it, while every other write of hers counts against the ``calls`` rate.
    Expect: the second result is answered 429 before anything is read or written; its call still awaits a result.
    """
    with registry.temporarily(LOOKUP):
        awaiting = [
            direct_call_request(
                user=alice, tool_name="crm_lookup", arguments={"email": f"{n}@example.com"}, kind=CallKind.API
            ).call
            for n in range(2)
        ]
        assert [call.status for call in awaiting] == [CallStatus.AWAITING_RESULT] * 2
        events_before = AuditEvent.objects.filter(call_id=awaiting[1].pk).count()
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"calls": "1/minute"}}
        cache.clear()
        client = _api_client(alice)
        try:
            answers = [
                client.post(f"/api/v1/calls/{call.pk}/result/", {"result": {"tier": "gold"}}, format="json")
                for call in awaiting
            ]
        finally:
            cache.clear()
    first, second = answers
    assert first.status_code == 200, first.content
    assert second.status_code == 429, second.content
    assert second.has_header("Retry-After")
    late = ToolCall.objects.get(pk=awaiting[1].pk)
    assert late.status == CallStatus.AWAITING_RESULT and late.result is None
    assert AuditEvent.objects.filter(call_id=late.pk).count() == events_before


def test_a_get_wait_whose_caller_left_the_tenant_meanwhile_shows_nothing_of_the_call(
    settings: Any, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: alice's ``GET /api/v1/calls/{id}/?wait=15`` of her queued call: once the wait began her membership
    was removed and the worker refused the call; the answer was the call's detail (its status, error and audit
    events), read through the tenant scope memoized before the wait, where a read after her removal answers 404.
    Expect: 404, as the same read made a moment later answers.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    Grant.objects.create(tool_name="record_effect", user=alice)
    monkeypatch.setattr(pipeline, "dispatch_call", lambda call: None)
    original_wait = governed.call_wait

    def leave_then_wait(*, call: ToolCall, seconds: float) -> ToolCall:
        TenantMembership.objects.filter(user=alice).delete()
        execute_tool_call_task.apply(args=[str(call.pk)])
        return original_wait(call=call, seconds=seconds)

    monkeypatch.setattr(governed, "call_wait", leave_then_wait)
    with for_a_worker():
        made = direct_call_request(user=alice, tool_name="record_effect", arguments={"note": "q"}, kind=CallKind.API)
    assert made.call.status == CallStatus.QUEUED
    client = _api_client(alice)
    response = client.get(f"/api/v1/calls/{made.call.pk}/?wait=15")
    assert ToolCall.objects.get(pk=made.call.pk).status == CallStatus.DENIED
    assert client.get(f"/api/v1/calls/{made.call.pk}/").status_code == 404
    assert response.status_code == 404, response.content
