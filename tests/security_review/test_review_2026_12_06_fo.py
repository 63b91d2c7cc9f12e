"""Review of 2026-12-06 (fo): rights re-read after waits on every channel (``toolhub.rights_recheck``).

Seen by alice, a member of tenant acme with an API key, and olga, an operator of acme in the console. Each finding's
test fails on the reviewed code (main at 3fc511b) and passes after the fix.

Findings:

1. The re-read after a wait (``tenant_scope_now``, behind ``RightsRecheck``) read the account's rights but not the
   credential the request came with. An administrator who reset alice's password because her account was feared
   taken (``token_revocation`` deletes every key) or deleted her key alone (the admin's Tokens) did not stop a
   request already waiting on that key: a call that ran in the request was answered its result (REST 200, MCP the
   tool's text), ``GET /api/v1/calls/{id}/?wait=`` answered the call's detail, ``toolhub_call_status`` with ``wait``
   the result, and a followed MCP call kept sending the tool's progress (``notifications/progress``) to the end.
2. The console's exports (calls CSV, audit trail) re-read their reader's rights between chunks but not the session:
   a password reset ends the account's sessions (``sessions_end``), yet the download of an operator whose password
   was reset mid-download streamed to its end (the trail's recorded ``audit.exported``, taken whole).

   Fix (one mechanism): the credential a request authenticated with travels with its user (``toolhub.credentials``:
   the key, marked by ``token_owner`` for REST and MCP; the console session, marked by ``SessionCredentialMiddleware``);
   ``tenant_scope_now`` asks it again with the rights, and a credential no longer good reads as an account no
   longer active, so every waiter (``answering_principal``, ``RightsRecheck``'s streams and follows, the status tool,
   the runs views) answers it nothing, as a deactivation.

Checked and holding:

- The control: a key kept through the wait is answered as before (``test_a_kept_key_is_answered_after_the_wait``).
- A listing's cursor taken before a removal reads with the rights of its own request: the next page of
  ``GET /api/v1/calls/`` shows nothing of the tenant left (``test_a_cursor_taken_before_a_removal_reads_nothing``).
- MCP has no resources, prompts or subscriptions: ``resources/list`` is answered "method not found", nothing of any
  tenant (``test_mcp_resources_are_not_served``); no ``list_changed`` notification is ever sent (stateless server,
  ``GET /mcp`` answered 405, tested in tests/mcp); there is no SSE or run-resume endpoint. Exports are not stored for
  a later fetch: each is streamed in the request that made it (``while_permitted``), so there is no download link
  to fetch after a removal.
"""

import threading
import uuid
from typing import Any

import anyio
import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client as ConsoleClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.mcp.conftest import live_asgi, token  # noqa: F401 - live_asgi is a fixture
from tests.security_review.while_running import WHILE_RUNNING
from toolhub import mcp_status
from toolhub.api import governed
from toolhub.audit import audit_append
from toolhub.models import AuditEvent, CallStatus, TenantMembership, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

#: What a caller whose standing ended while the request waited is told (a deactivation's answer).
NO_LONGER_A_MEMBER = "You are no longer a member of the tenant this call was made in; its outcome is not shown."


def _api_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _new_password(user: User) -> None:
    """An administrator resets the password of an account feared taken: its keys and sessions end."""
    fresh = User.objects.get(pk=user.pk)
    fresh.set_password("a-new-password-0")
    fresh.save()


def _key_deleted(user: User) -> None:
    """An administrator deletes the key alone (the admin's Tokens): the account keeps its rights."""
    Token.objects.filter(user_id=user.pk).delete()


async def _mcp(base: str, key: str, body: Any) -> Any:
    headers = {"Authorization": f"Bearer {key}", "X-Toolhub-Tenant": "acme"}
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            await client.list_tools()  # as a client does first (its output schemas are then known)
            try:
                return await body(client)
            except MCPError as refused:  # a refusal is the answer under test
                return refused


def test_a_call_run_in_the_request_whose_key_a_new_password_revoked_answers_nothing(
    alice: User, report_tool: None
) -> None:
    """Found: alice's ``POST /api/v1/calls/`` ran in the request (eager); while the tool ran her password was reset
    (her keys deleted: the account was feared taken); the answer was 200 with the tool's result, to the revoked key.
    Expect: the answer after any wait is asked of the credential too: a key revoked meanwhile is answered nothing
    (403, as a deactivation); the row keeps the truth.
    """
    key = token(alice)
    WHILE_RUNNING.append(lambda: _new_password(alice))

    answer = _api_client(key).post(
        "/api/v1/calls/", {"tool": "acme_report", "arguments": {"note": "q4"}, "tenant": "acme"}, format="json"
    )

    assert ToolCall.objects.get(user=alice).status == CallStatus.SUCCEEDED
    assert not Token.objects.filter(user=alice).exists()
    assert answer.status_code == 403, answer.content
    assert answer.json() == {"detail": NO_LONGER_A_MEMBER}


def test_a_get_wait_whose_key_was_deleted_meanwhile_shows_nothing(alice: User, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: alice's ``GET /api/v1/calls/{id}/?wait=5`` of her queued call; her key was deleted in the admin while
    it waited; the answer was the call's detail (200).
    Expect: 404, as the account read after the wait has no good credential: nothing of the call.
    """
    call = ToolCall.objects.create(tool_name="acme_report", status=CallStatus.QUEUED, tenant="acme", user=alice)
    key = token(alice)

    def waited(*, call: ToolCall, seconds: float) -> ToolCall:
        _key_deleted(alice)
        call.refresh_from_db()
        return call

    monkeypatch.setattr(governed, "call_wait", waited)

    answer = _api_client(key).get(f"/api/v1/calls/{call.pk}/?wait=5")

    assert answer.status_code == 404, answer.content


def test_a_kept_key_is_answered_after_the_wait(alice: User, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: (holds) the control: nothing revoked during the wait.
    Expect: alice is answered her call (200); asking after the key costs her nothing.
    """
    call = ToolCall.objects.create(tool_name="acme_report", status=CallStatus.QUEUED, tenant="acme", user=alice)
    key = token(alice)

    def waited(*, call: ToolCall, seconds: float) -> ToolCall:
        call.refresh_from_db()
        return call

    monkeypatch.setattr(governed, "call_wait", waited)

    answer = _api_client(key).get(f"/api/v1/calls/{call.pk}/?wait=5")

    assert answer.status_code == 200, answer.content
    assert answer.json()["tool"] == "acme_report"


def test_an_mcp_call_run_in_the_request_whose_key_was_deleted_meanwhile_answers_the_refusal(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
    report_tool: None,
) -> None:
    """Found: the same over MCP: alice's ``tools/call`` ran in the request; her key was deleted while it ran; the
    answer was the tool's text ("acme books: q4").
    Expect: the refusal a deactivated caller gets (invalid params), nothing of the result.
    """
    key = token(alice)
    WHILE_RUNNING.append(lambda: _key_deleted(alice))

    answer = anyio.run(_mcp, live_asgi, key, lambda client: client.call_tool("acme_report", {"note": "q4"}))

    assert ToolCall.objects.get(user=alice).status == CallStatus.SUCCEEDED
    assert isinstance(answer, MCPError), answer
    assert answer.message == NO_LONGER_A_MEMBER


def test_mcp_progress_stops_once_the_callers_key_was_revoked(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
    report_tool: None,
    settings: Any,
) -> None:
    """Found: a followed MCP call's progress went on to a key revoked between two updates (a new password): step 2
    ("acme ledger balance ...") was sent, then the tool's answer.
    Expect: the follower's re-read (``RightsRecheck``) asks after the key too: nothing more is sent, the answer is
    the refusal.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "STREAM_RIGHTS_RECHECK_SECONDS": 0}
    key = token(alice)
    WHILE_RUNNING.append(lambda: _new_password(alice))
    messages: list[str | None] = []

    async def progress(current: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    answer = anyio.run(
        _mcp, live_asgi, key, lambda client: client.call_tool("acme_ledger", {}, progress_callback=progress)
    )

    assert ToolCall.objects.get(user=alice).status == CallStatus.SUCCEEDED
    assert not any("ledger balance" in (message or "") for message in messages), messages
    assert isinstance(answer, MCPError) and answer.message == NO_LONGER_A_MEMBER, answer


def test_the_mcp_status_tools_wait_whose_key_was_deleted_meanwhile_shows_nothing(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: ``toolhub_call_status {"call_id", "wait": 5}`` of alice's queued call; her key was deleted while it
    waited and the call succeeded; the answer was its result ("acme secret total").
    Expect: "There is no call ... among yours.", as for any call not the caller's.
    """
    call = ToolCall.objects.create(tool_name="acme_report", status=CallStatus.QUEUED, tenant="acme", user=alice)
    key = token(alice)

    async def waited(*, call_id: Any, status: str, seconds: float, read: Any) -> None:
        def change() -> None:
            _key_deleted(alice)
            ToolCall.objects.filter(pk=call_id).update(status=CallStatus.SUCCEEDED, result="acme secret total")

        thread = threading.Thread(target=change)
        thread.start()
        thread.join()

    monkeypatch.setattr(mcp_status, "call_wait_async", waited)

    answer = anyio.run(
        _mcp,
        live_asgi,
        key,
        lambda client: client.call_tool(mcp_status.STATUS_TOOL, {"call_id": str(call.pk), "wait": 5}),
    )

    assert not isinstance(answer, MCPError), answer
    text = " ".join(getattr(block, "text", "") for block in answer.content)
    assert "acme secret total" not in text, text
    assert f"There is no call {call.pk} among yours." in text, text


def _stream_after_first_chunk(response: Any, change: Any) -> tuple[bytes, BaseException | None]:
    """The first chunk is read, then ``change`` happens, then the rest: what else left, and how."""
    chunks = iter(response.streaming_content)
    next(chunks)
    change()
    rest: list[bytes] = []
    try:
        rest.extend(chunks)
    except Exception as exc:  # the stream is cut off: the transfer breaks
        return b"".join(rest), exc
    return b"".join(rest), None


def test_a_calls_export_stops_once_its_readers_session_ended(operator: User, alice: User, settings: Any) -> None:
    """Found: olga's console export of acme's calls (CSV) went on streaming to its end after her password was reset
    mid-download (her sessions deleted: the account was feared taken); the re-read between chunks asked only her
    flags, permissions and memberships, which the reset leaves.
    Expect: the session is asked too: the stream is cut off (the transfer breaks, no further row leaves).
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "STREAM_RIGHTS_RECHECK_SECONDS": 0}
    ToolCall.objects.create(tool_name="fo_secret_lookup", status=CallStatus.SUCCEEDED, tenant="acme", user=alice)
    client = ConsoleClient()
    client.force_login(operator)
    response = client.post("/admin/toolhub/toolcall/export/csv/")
    assert response.status_code == 200

    rest, cut = _stream_after_first_chunk(response, lambda: _new_password(operator))

    assert b"fo_secret_lookup" not in rest
    assert cut is not None


def test_a_trail_export_stops_once_its_readers_session_ended(operator: User, settings: Any) -> None:
    """Found: the console's "Export trail" of acme streamed its audit events to the end after the reader's password
    was reset mid-download (her sessions deleted), and was recorded ``audit.exported``, taken whole.
    Expect: the stream is cut off at the next chunk and the export recorded as failed.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "STREAM_RIGHTS_RECHECK_SECONDS": 0}
    with transaction.atomic():
        audit_append(
            event_type="call.requested", actor="a", data={"fo": "secret"}, call_id=uuid.UUID(int=7), tenant="acme"
        )
    client = ConsoleClient()
    client.force_login(operator)
    response = client.post("/admin/toolhub/toolcall/export-trail/", {"tenant": "acme"})
    assert response.status_code == 200

    rest, cut = _stream_after_first_chunk(response, lambda: _new_password(operator))

    assert b"call.requested" not in rest
    assert cut is not None
    assert not AuditEvent.objects.filter(event_type="audit.exported").exists()
    assert AuditEvent.objects.filter(event_type="audit.export_failed").exists()


def test_a_calls_export_whose_session_holds_streams_whole(operator: User, alice: User, settings: Any) -> None:
    """Found: (holds) the control: the session kept.
    Expect: every row leaves; asking after the session costs the reader nothing.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "STREAM_RIGHTS_RECHECK_SECONDS": 0}
    ToolCall.objects.create(tool_name="fo_secret_lookup", status=CallStatus.SUCCEEDED, tenant="acme", user=alice)
    client = ConsoleClient()
    client.force_login(operator)
    response = client.post("/admin/toolhub/toolcall/export/csv/")

    rest, cut = _stream_after_first_chunk(response, lambda: None)

    assert b"fo_secret_lookup" in rest
    assert cut is None


def test_a_cursor_taken_before_a_removal_reads_nothing(alice: User) -> None:
    """Found: (holds) alice listed her calls a page at a time, then was removed from acme; the next page's cursor
    (taken before) was followed.
    Expect: the page is read with the rights of its own request: nothing of acme.
    """
    for n in range(3):
        ToolCall.objects.create(tool_name=f"fo_call_{n}", status=CallStatus.SUCCEEDED, tenant="acme", user=alice)
    client = _api_client(token(alice))
    first = client.get("/api/v1/calls/?page_size=1")
    assert first.status_code == 200 and len(first.json()["results"]) == 1
    TenantMembership.objects.filter(user=alice).delete()

    following = client.get(first.json()["next"])

    assert following.status_code == 200, following.content
    assert following.json()["results"] == []


def test_mcp_resources_are_not_served(live_asgi: str, alice: User) -> None:  # noqa: F811
    """Found: (holds) ``resources/list`` over MCP.
    Expect: a protocol error (the server serves no resources), nothing of any tenant.
    """
    answer = anyio.run(_mcp, live_asgi, token(alice), lambda client: client.list_resources())

    assert isinstance(answer, MCPError), answer
