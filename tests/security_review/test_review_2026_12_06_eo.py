"""Review of 2026-12-06 (eo): rights re-read after waits (``tenant_scope_now``, ``answering_principal``,
``rights_recheck``), and the unreviewed 98885c5 ("Rights are re-read by whoever waited, once").

Seen by alice, a member of tenant acme with an API key. Each test fails on the reviewed code (main at 98885c5) and
states what was found ("Found: ...") and what is expected ("Expect: ...").

Findings:

1. 98885c5 made ``toolhub.direct.answering_principal`` answer with the scope memoized on the request's user, relying
   on "whoever waited" (REST ``_follow``, MCP ``_followed_sync``) to have read it again. But a request also waits
   when the call runs in its own process (eager tasks, the embedded default): the pipeline writes it claimed and
   runs it at commit, inside ``direct_call_request``, for as long as the tool takes. Nobody re-read the rights after
   that wait: alice, who named her tenant (``tenant``, ``X-Toolhub-Tenant``: the scope is memoized when it is
   checked), removed from acme while her tool ran, was answered its result (REST 200, MCP the tool's text), where
   reading the call back answers 404. Now ``direct_call_request`` is a waiter too: when the call ran in this process
   it reads the rights again (``tenant_scope_now``), once; REST's ``_follow`` follows (and re-reads after) only a
   call that still waits, so a call that ran here and was asked ``?wait=`` is not re-read twice.
2. The same wait, for a run: ``POST /api/v1/runs/`` (and ``runs/{id}/retry/``) in eager mode runs the agent loop in
   the request (model turns, tools) and then answered the whole run (messages, every call's result) without asking
   whether its starter may still read it: alice, removed from acme while her run's tool ran, was answered 201 with
   the tool's result, where ``GET /api/v1/runs/{id}/`` answers 404. Now a run view that proceeded the run in this
   process reads the starter's rights again and answers a run she may no longer read with the direct calls' refusal
   (403, nothing of the run).
3. A deactivated (or deleted) user's own calls made without a tenant stayed readable after a wait: ``visible_rows``
   let an inactive user read their own tenant-less rows (the scope of an inactive user is empty, but the owner
   clause kept ``tenant=""`` rows), and ``answering_principal`` only asked about the call's tenant. Now an inactive
   user reads no rows and is answered nothing.
4. MCP ``tools/call`` streams a long tool's progress (``notifications/progress``: the tool's own messages) while it
   follows the call (in the request, or up to ``MCP_CALL_WAIT_SECONDS`` on a worker) without asking again who
   follows: a caller removed from the tenant kept receiving it to the end. Now the follower asks the console
   exports' question (``toolhub.rights_recheck.RightsRecheck``, shared with ``while_permitted``: the rights read
   again at most every ``STREAM_RIGHTS_RECHECK_SECONDS``) before it sends updates; refused, it sends nothing more and
   stops following, and the answer is the refusal.

Checked and found holding (no test here unless named):

- The waits of the product: REST ``?wait=`` (``_follow``), MCP ``tools/call``'s follow (``_followed_sync(waited=)``)
  and MCP ``toolhub_call_status`` (``_status_answer(waited=)``) re-read once after a wait; without a free wait slot
  nothing waits and nothing is re-read. ``test_a_call_run_here_and_asked_to_wait_reads_the_rights_once``.
- There is no SSE, long-poll, run streaming or webhook replay endpoint; approvals, sagas, the runs list, search and
  the audit API answer at once. The console's two exports re-read through ``while_permitted`` between chunks
  (review ek); a superuser demoted, a cross-tenant permission withdrawn, a group's permission removed are all seen
  (``tenant_scope_now`` drops the auth backend's three permission caches and refreshes the status flags).
- Caches: the governance cache is stamped by triggers on memberships, groups, user groups and permissions and the
  user's ``is_active``/``is_superuser`` (so grants and visible tools are read fresh after a wait); the per-request
  ``CallerView`` (``caller_view_for``) is made after the wait in ``GET /calls/{id}/?wait=``; MCP loads the user once
  per HTTP request (stateless); no thread-local or ``lru_cache`` holds a principal.
- Left as it is (noted): ``POST /api/v1/runs/{id}/rollback/`` and ``sagas/{id}/rollback/`` in eager mode run the
  compensations in the request and answer the saga (statuses, sanitized last errors; no results) without a re-read.
  Closed by review fk (``rights_recheck.still_visible_after_running_here``: 403 for a saga or run no longer visible).
- API key revocation during a wait: the key was valid when the request was authenticated; a revocation that comes
  with a deactivation or a new password (``token_revocation``) is seen as the deactivation; a key deleted alone
  while its holder's rights hold ends at the next request (not changed here). Since review fo the re-read asks the
  key (and a console session) again too (``toolhub.credentials``): a new password or a deleted key is answered
  nothing after the wait.
"""

from typing import Any

import anyio
import pytest
from django.contrib.auth.models import User
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from rest_framework.test import APIClient

from agents_app.models import AgentRun
from agents_app.services import agent_create
from tests.mcp.conftest import live_asgi, token  # noqa: F401 - live_asgi is a fixture
from tests.security_review.while_running import WHILE_RUNNING
from toolhub import tenancy
from toolhub.models import CallStatus, TenantMembership, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

#: What a caller who left the call's tenant while it was followed (or ran) is told, over REST and MCP alike.
NO_LONGER_A_MEMBER = "You are no longer a member of the tenant this call was made in; its outcome is not shown."


def _api_client(user: User) -> APIClient:
    """A REST client authenticated by ``user``'s API key: the user is read afresh on every request."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token(user)}")
    return client


def _leave(alice: User) -> None:
    WHILE_RUNNING.append(lambda: TenantMembership.objects.filter(user_id=alice.pk).delete())


def test_a_call_run_in_the_request_whose_caller_left_the_tenant_meanwhile_answers_the_refusal(
    alice: User, report_tool: None
) -> None:
    """Found: alice's ``POST /api/v1/calls/`` naming her tenant ran in the request (eager); while the tool ran her
    membership was removed; the answer was 200 with the tool's result, read with the scope memoized before the
    call ran (98885c5 dropped the re-read from ``answering_principal``; nobody who waited re-read it).
    Expect: the refusal given after any wait of the request (403, nothing of the call), as reading it back (404).
    """
    _leave(alice)
    client = _api_client(alice)

    answer = client.post(
        "/api/v1/calls/", {"tool": "acme_report", "arguments": {"note": "q4"}, "tenant": "acme"}, format="json"
    )

    row = ToolCall.objects.get(user=alice)
    assert row.status == CallStatus.SUCCEEDED  # it ran: the truth is kept for operators and auditors
    assert answer.status_code == 403, answer.content
    assert answer.json() == {"detail": NO_LONGER_A_MEMBER}
    assert client.get(f"/api/v1/calls/{row.pk}/").status_code == 404


def test_an_mcp_call_run_in_the_request_whose_caller_left_the_tenant_meanwhile_answers_the_refusal(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
    report_tool: None,
) -> None:
    """Found: the same over MCP: alice (``X-Toolhub-Tenant: acme``) listed the tools, then called one that ran in the
    request; her membership was removed while it ran; the answer was the tool's text.
    Expect: the MCP refusal (invalid params) with the REST API's text, nothing of the result.
    """
    _leave(alice)
    key = token(alice)

    async def main() -> Any:
        headers = {"Authorization": f"Bearer {key}", "X-Toolhub-Tenant": "acme"}
        async with create_mcp_http_client(headers=headers) as http:
            async with Client(streamable_http_client(f"{live_asgi}/mcp", http_client=http)) as client:
                await client.list_tools()  # as a client does first (its output schemas are then known)
                try:
                    return await client.call_tool("acme_report", {"note": "q4"})
                except MCPError as refused:  # the refusal is the answer under test
                    return refused

    answer = anyio.run(main)

    assert ToolCall.objects.get(user=alice).status == CallStatus.SUCCEEDED
    assert isinstance(answer, MCPError), answer
    assert answer.message == NO_LONGER_A_MEMBER


def test_a_run_that_ran_in_the_request_whose_starter_left_the_tenant_meanwhile_shows_nothing(
    alice: User, report_tool: None
) -> None:
    """Found: alice's ``POST /api/v1/runs/`` ran the agent loop in the request (eager); while its tool ran her
    membership was removed; the answer was 201 with the whole run, the tool's result among its calls, where
    ``GET /api/v1/runs/{id}/`` answers 404.
    Expect: 403 with nothing of the run (no result, no messages); the run itself is kept.
    """
    agent_create(
        name="eo-reporter",
        tenant="acme",
        provider="scripted",
        tools=["acme_report"],
        script=[{"tool_calls": [{"name": "acme_report", "arguments": {"note": "q4"}}]}, {"content": "done"}],
    )
    _leave(alice)
    client = _api_client(alice)

    answer = client.post("/api/v1/runs/", {"agent": "eo-reporter", "input": "go"}, format="json")

    run = AgentRun.objects.get(user=alice)
    assert ToolCall.objects.get(run_id=run.pk).result == "acme books: q4"  # it ran
    assert answer.status_code == 403, answer.content
    assert b"acme books" not in answer.content and str(run.pk).encode() not in answer.content
    assert client.get(f"/api/v1/runs/{run.pk}/").status_code == 404


def test_a_user_deactivated_while_her_tenantless_call_ran_is_answered_nothing(report_tool: None) -> None:
    """Found: dana (in no tenant) called a tool that ran in the request (``?wait=`` too); her account was deactivated
    while it ran; the answer was 200 with its result: ``answering_principal`` asks only about the call's tenant, and
    ``visible_rows`` let an inactive user read her own tenant-less rows (after a wait too).
    Expect: nothing of the call for an inactive user: the answer refuses it, and the follow reads no row.
    """
    dana = User.objects.create_user("dana", "dana@example.com", "dana-password")
    client = _api_client(dana)
    WHILE_RUNNING.append(lambda: User.objects.filter(pk=dana.pk).update(is_active=False))

    answer = client.post("/api/v1/calls/?wait=5", {"tool": "acme_report", "arguments": {"note": "q4"}}, format="json")

    assert ToolCall.objects.get(user=dana).status == CallStatus.SUCCEEDED
    assert answer.status_code == 403, answer.content
    assert b"acme books" not in answer.content
    assert not tenancy.visible_rows(ToolCall.objects.all(), User.objects.get(pk=dana.pk), tenant_wide=False).exists()


def test_a_call_run_here_and_asked_to_wait_reads_the_rights_once(
    alice: User, report_tool: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: (holds) the control of 98885c5's "once": a call that ran in the request and was asked ``?wait=``.
    Expect: alice is answered her result (200), her rights read again exactly once.
    """
    reads: list[int] = []
    reload = tenancy._reload_rights
    monkeypatch.setattr(tenancy, "_reload_rights", lambda user: (reads.append(user.pk), reload(user)))

    answer = _api_client(alice).post(
        "/api/v1/calls/?wait=5",
        {"tool": "acme_report", "arguments": {"note": "q4"}, "tenant": "acme"},
        format="json",
    )

    assert answer.status_code == 200, answer.content
    assert answer.json()["result"] == "acme books: q4"
    assert reads == [alice.pk]


def test_mcp_progress_stops_once_the_caller_left_the_tenant(
    live_asgi: str,  # noqa: F811 - the fixture imported above
    alice: User,
    report_tool: None,
    settings: Any,
) -> None:
    """Found: MCP ``tools/call`` sends a long tool's progress (``notifications/progress``, the tool's own messages)
    while the request follows the call, for as long as it runs (in the request, or up to ``MCP_CALL_WAIT_SECONDS``
    on a worker), without asking again who follows it: alice, removed from acme after step 1, was still sent step 2
    ("acme ledger balance ..."), though the call's answer is then refused her.
    Expect: progress is a stream like the console's exports: between updates (at most every
    ``STREAM_RIGHTS_RECHECK_SECONDS``, 0 here) the follower's rights are read again and nothing more is sent to a
    caller who lost them; the answer is the refusal.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "STREAM_RIGHTS_RECHECK_SECONDS": 0}
    _leave(alice)
    key = token(alice)
    messages: list[str | None] = []

    async def progress(current: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    async def main() -> Any:
        headers = {"Authorization": f"Bearer {key}", "X-Toolhub-Tenant": "acme"}
        async with create_mcp_http_client(headers=headers) as http:
            async with Client(streamable_http_client(f"{live_asgi}/mcp", http_client=http)) as client:
                await client.list_tools()
                try:
                    return await client.call_tool("acme_ledger", {}, progress_callback=progress)
                except MCPError as refused:  # the refusal is the answer under test
                    return refused

    answer = anyio.run(main)

    assert ToolCall.objects.get(user=alice).status == CallStatus.SUCCEEDED
    assert not any("ledger balance" in (message or "") for message in messages), messages
    assert isinstance(answer, MCPError) and answer.message == NO_LONGER_A_MEMBER, answer
