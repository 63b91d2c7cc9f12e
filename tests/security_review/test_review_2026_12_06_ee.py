"""Review of 2026-12-06 (ee): two leftovers of review ea (MCP's status wait of a caller who left the tenant; the
unthrottled opening of a saga).

Seen by alice, a member of tenant acme with an API key. Each test fails on the reviewed code (main at 3d03487) and
states what was found ("Found: ...") and what is expected ("Expect: ...").

Findings:

1. MCP ``toolhub_call_status`` with ``wait`` read alice's call before the wait and again after it through
   ``tool_calls_visible_to(request_user(ctx))``, with the tenant scope memoized on the request's user before the
   wait (``toolhub.tenancy.tenant_scope``): alice, removed from acme while she waited, was answered with the call's
   status, where the same question a moment later answers "There is no call ... among yours.". Review ea fixed the
   same for REST's ``?wait=`` (``toolhub.api.governed._follow``) only. Now the status tool's answer, when it
   follows a wait, reads the caller's tenants again first (``toolhub.tenancy.tenant_scope_now``), as REST's
   ``_follow`` and MCP ``tools/call``'s follow (``toolhub.direct.answering_principal``) do: after any wait of a
   request, the scope is read again, through the one function.
2. ``POST /api/v1/sagas/`` (opening a direct saga: one row per request) had no throttle scope, where every other
   write a user can repeat counts against a per-user rate. Now it counts against the ``calls`` rate, the one of the
   direct calls that are its steps (``throttle_scope = "calls"``, DRF's throttle, before the view reads anything):
   past the rate 429, nothing written.

Checked and found holding (no test here):

- Without a free wait slot nothing waits, and the answer is read with the scope read when the request began (at
  most the few milliseconds of the request, as for any read).
- MCP ``tools/call``'s follow of a queued call answers through ``toolhub.direct.answering_principal``, which reads
  the memberships as they are now (review ea, tested there).
- The adapters' waits (``toolhub.direct.call_wait`` in LangGraph, OpenAI Agents, pydantic-ai) run in a developer's
  own process for a ``CallPrincipal``, outside any HTTP request's memoized scope: not in this review's scope (the
  worker's standing check refuses a call of a user who left, so nothing runs in her name).
- ``POST /api/v1/sagas/{id}/rollback/`` counts against ``runs`` (unchanged); a saga opened is inert until a call
  names it, and each such call counts against ``calls``.
"""

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from mcp import Client
from rest_framework.test import APIClient

from tests.helpers import for_a_worker
from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - live_asgi is a fixture
from toolhub import mcp_status, pipeline
from toolhub.direct import direct_call_request
from toolhub.models import CallKind, CallStatus, Grant, TenantMembership, ToolCall
from toolhub.sagas.models import Saga
from toolhub.tasks import execute_tool_call_task

pytestmark = pytest.mark.django_db(transaction=True)


def _leave_and_refuse(alice: User, call_id: Any) -> None:
    """As it happens while alice waits: her membership is removed, then the worker refuses her call."""
    try:
        TenantMembership.objects.filter(user=alice).delete()
        execute_tool_call_task.apply(args=[str(call_id)])
    finally:
        connection.close()


def test_an_mcp_status_wait_whose_caller_left_the_tenant_meanwhile_shows_nothing_of_the_call(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    settings: Any,
    alice: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: alice asked ``toolhub_call_status`` with ``wait`` of her queued call; once the wait began her
    membership was removed and the worker refused the call; the answer was the call's status, read through the
    tenant scope memoized before the wait, where the same question a moment later answers that there is no such
    call among hers.
    Expect: the answer of a question asked after her removal: no call of that id among hers, nothing of its status.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    Grant.objects.create(tool_name="record_effect", user=alice)
    monkeypatch.setattr(pipeline, "dispatch_call", lambda call: None)  # the test runs the worker's part itself
    with for_a_worker():
        made = direct_call_request(user=alice, tool_name="record_effect", arguments={"note": "q"}, kind=CallKind.API)
    assert made.call.status == CallStatus.QUEUED
    call_id = str(made.call.pk)
    original_wait = mcp_status.call_wait_async

    async def leave_then_wait(**kwargs: Any) -> None:
        await sync_to_async(_leave_and_refuse, thread_sensitive=False)(alice, made.call.pk)
        await original_wait(**kwargs)

    monkeypatch.setattr(mcp_status, "call_wait_async", leave_then_wait)
    key = token(alice)

    async def status(client: Client) -> Any:
        return await client.call_tool("toolhub_call_status", {"call_id": call_id, "wait": 10})

    async def status_now(client: Client) -> Any:
        return await client.call_tool("toolhub_call_status", {"call_id": call_id})

    waited = with_client(live_asgi, key, status)
    assert ToolCall.objects.get(pk=call_id).status == CallStatus.DENIED  # the stored truth, for operators
    later = with_client(live_asgi, key, status_now)
    assert later.is_error is True and later.content[0].text == f"There is no call {call_id} among yours."
    assert waited.is_error is True, waited
    assert waited.content[0].text == later.content[0].text
    assert waited.structured_content is None and "denied" not in str(waited)


def test_opening_sagas_counts_against_the_per_user_rate_of_calls(settings: Any, alice: User) -> None:
    """Found: at a rate of 1 call a minute, alice's second ``POST /api/v1/sagas/`` was accepted (and would any
    number more): each writes a saga row, while every other write of hers counts against a per-user rate.
    Expect: the second opening is answered 429 with ``Retry-After``; no second saga is written.
    """
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"calls": "1/minute"}}
    cache.clear()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token(alice)}")
    try:
        first, second = (client.post("/api/v1/sagas/", {"saga_id": key}, format="json") for key in ("s-1", "s-2"))
    finally:
        cache.clear()
    assert first.status_code == 201, first.content
    assert second.status_code == 429, second.content
    assert second.has_header("Retry-After")
    assert list(Saga.objects.values_list("key", flat=True)) == ["s-1"]
