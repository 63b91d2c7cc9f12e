"""Review fu (2026-12-06): rollback wake-ups and in-request re-reads (review fk), remote MCP listing bound (aae2718).

Seen by alice (acme, API key) and acme's operator. Each finding's test failed on the reviewed code (main at fe8d6ff)
and passes now ("Found: ...", "Expect: ...").

Findings:

1. Wake storm from one bulk resolution: resolving every compensation of a finished rollback in one action
   (``compensations_resolve``, the Sagas/Compensations *Resolve by hand*) reopened and finished the rollback once per
   row, each reopen sending ``rollback_reopened`` after commit: one ``advance_run_task`` per compensation for one run
   (eager: the run's step that many times in the operator's request), all but the first finding nothing. Now one
   wake-up per run and rollback per transaction (``toolhub.commit_once.on_commit_once``).
2. Approval decisions answered without the re-read: ``POST /api/v1/approvals/{id}/approve/`` (``reject/``) released
   (or settled) the call, and eager the call and its run's next turns ran in the request; a decider removed from the
   tenant meanwhile was answered 200 with the request (tenant, tool, arguments, deciders) that reading back refuses
   (404). Now ``still_visible_after_running_here`` answers 403, the decision standing.
3. The same for ``POST /api/v1/calls/{id}/result/`` and ``.../cancel/``: settling the call woke its run, whose next
   turns ran in the request; a user removed meanwhile was answered the call. Now 403 with a direct call's text.
4. The same for ``POST /api/v1/runs/{id}/cancel/`` of a subagent's run: its end settled the parent's call and the
   parent's next turns ran in the request; the child was answered to a user removed meanwhile. Now the run views'
   ``_proceeded`` (403). And MCP's ``toolhub_cancel_call``, which answered the tool's name and the call cancelled:
   now the error result with a direct call's text.

Checked and holding:
- A reopen's wake-up follows the saga's ``run_id``, never its key: globex's direct saga keyed by acme's run id, its
  rollback reopened by globex's operator, wakes no acme run and tells its conversation nothing (tested).
- A saga whose run row is gone: the wake-up finds no run (idle), the resolution stands, chains verify (tested).
- Retrying a failing compensation of an ended run five times, a request each: one note per retry (the rollback as it
  stands), at most two wake-ups per retry (the reopen's finds it under way; the retry's call's tells), nothing after.
- ``still_visible_after_running_here`` with workers answers without a re-read: the views only queue (``pipeline``
  dispatches when ``runs_in_this_process`` is false; ``inline_worker`` is set only inside an agentic tool's worker),
  so nothing was waited for (read in code). ``POST /api/v1/sagas/`` (open) runs nothing. Direct calls re-read through
  ``direct_call_request``; run start/retry/rollback and saga rollback through the shared re-read (fk).
- Remote MCP listings (``MAX_LISTING_PAGES``): one cursor repeated for ever, empty pages for ever, and 101 pages are
  asked for 100 pages and refused whole with a fixed message naming the server by name (no URL, no secret of the URL
  or credential, < 300 characters); exactly 100 pages are read whole; a 30,000-byte cursor is cut by the use's bytes
  bound on the third page, the message naming the setting and quoting nothing of it (tested). A sync keeps the
  message scrubbed and cut to 2,000 characters as its last error (read in code: ``remote_server_sync``).
- Not fixed: the per-call wake-ups of a cancellation withdrawing many calls of one run (``call_settled``, one each)
  are the bulk pattern of finding 1, outside this review's scope (a cancelled run's wake-ups find it ended).
"""

import json
from typing import Any

import mcp_types as types
import pytest
from django.contrib.auth.models import User
from mcp.server import Server
from rest_framework.test import APIClient

import agents_app.tasks as tasks
from agents_app.models import AgentRun
from approvals.models import ApprovalRequest
from tests.helpers import assert_audit_intact
from tests.mcp.conftest import token
from tests.mcpclient.fake_server import FakeCrm, serving
from tests.sagas.sample_tools import RELEASE_FAILS
from tests.testapp.tools import ask_researcher
from toolhub import Risk, Tool, ToolContext, tool
from toolhub.authorization import CallPrincipal
from toolhub.mcp_cancel import cancel_call
from toolhub.mcp_client.remote import MAX_LISTING_PAGES, RemoteServerError, remote_tools
from toolhub.models import AuditEvent, CallStatus, TenantMembership, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.sagas.models import CompensationStatus, Saga
from toolhub.sagas.recovery import compensation_retry, compensations_resolve
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)


def _reserve_many(count: int) -> list[dict[str, Any]]:
    """A script reserving ``count`` seats in one turn, then answering."""
    calls = [{"name": "reserve", "arguments": {"item": f"seat-{n}"}} for n in range(count)]
    return [{"content": "", "tool_calls": calls}, {"content": "reserved"}]


def _notes(run: Any) -> list[str]:
    run.refresh_from_db()
    return [m["content"] for m in run.messages if m["role"] == "system"]


@pytest.mark.usefixtures("saga_tools")
def test_resolving_every_compensation_of_a_rollback_at_once_wakes_its_run_once(
    alice: User, acme_operator: User, make_agent: Any, start: Any, settings: Any, monkeypatch: Any
) -> None:
    """Found: an ended run's rollback had six failed compensations; an operator resolved them by hand in one action
    (the Sagas or Compensations page's *Resolve by hand*: ``compensations_resolve``, one transaction). Each resolution
    reopened the rollback and finished it again at once, and each reopen sent ``rollback_reopened`` after commit: six
    ``advance_run_task`` messages for one run (eager, the embedded default: six runs of the run's step in the operator's
    request), one per row acted on, where the first told the conversation and five found nothing to do.
    Expect: one wake-up per run and rollback per transaction (``toolhub.commit_once.on_commit_once``), told once."""
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 1}
    run = start(make_agent(tools=["reserve"], script=_reserve_many(6)), alice)
    RELEASE_FAILS["on"] = True
    saga_rollback_on_demand(saga_key=str(run.id), run_id=run.id, tenant="acme", actor="alice")
    RELEASE_FAILS["on"] = False
    saga = Saga.objects.get(run_id=run.id)
    assert list(saga.compensations.values_list("status", flat=True)) == [CompensationStatus.FAILED] * 6
    assert len(_notes(run)) == 1
    woken = _woken(monkeypatch)

    resolved = compensations_resolve(
        scope=saga.compensations.all(), actor=f"user:{acme_operator.username}", note="by phone", by=acme_operator
    )

    assert resolved == (6, [])
    assert AuditEvent.objects.filter(event_type="saga.rollback_reopened").count() == 6  # each row's, in the trail
    assert woken == [str(run.id)]
    notes = _notes(run)
    assert len(notes) == 2 and notes[1].count("resolved by an operator (by phone)") == 6, notes
    assert saga.rollbacks.get().told_at is not None
    assert_audit_intact()


def _woken(monkeypatch: Any) -> list[str]:
    """The runs ``advance_run_task`` is asked to advance from now on (each wake-up: one message, or eager one run)."""
    woken: list[str] = []
    real = tasks.run_advance

    def counted(**kwargs: Any) -> Any:
        woken.append(str(kwargs["run_id"]))
        return real(**kwargs)

    monkeypatch.setattr(tasks, "run_advance", counted)
    return woken


def _globex_call(name: str, arguments: dict[str, Any], *, saga: str, user: User) -> ToolCall:
    """``user``'s direct call of ``name`` in globex's saga ``saga``, executed in process."""
    principal = CallPrincipal(user_id=user.pk, username=user.username, tenant="globex")
    call = tool_call_request(
        request=CallRequest(
            tool_name=name, arguments=arguments, principal=principal, context=ToolContext(tenant="globex"), saga_id=saga
        )
    )
    call.refresh_from_db()
    return call


@pytest.mark.usefixtures("saga_tools")
def test_a_reopened_rollback_of_another_tenants_saga_named_as_a_run_wakes_no_run(
    alice: User, globex_user: User, globex_operator: User, make_agent: Any, start: Any, settings: Any, monkeypatch: Any
) -> None:
    """Holding: globex's direct saga keyed by acme's run id (a saga id is per tenant, so the key is free there); its
    step's compensation failed and globex's operator resolves it by hand, reopening and finishing its rollback again.
    The wake-up follows the saga's own ``run_id`` (none for a direct saga), never its key: acme's run is not woken and
    its conversation hears nothing of globex."""
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 1}
    run = start(make_agent(tools=["reserve"], script=_reserve_many(1)), alice)
    key = str(run.id)
    _globex_call("reserve", {"item": "globex-seat"}, saga=key, user=globex_user)
    RELEASE_FAILS["on"] = True
    _globex_call("explode", {"reason": "boom"}, saga=key, user=globex_user)
    RELEASE_FAILS["on"] = False
    saga = Saga.objects.get(key=key, tenant="globex")
    assert saga.run_id is None and saga.rollbacks.get().finished_at is not None
    woken = _woken(monkeypatch)
    before = _notes(run)

    compensations_resolve(
        scope=saga.compensations.all(), actor=f"user:{globex_operator.username}", note="done", by=globex_operator
    )

    assert AuditEvent.objects.filter(event_type="saga.rollback_reopened", tenant="globex").count() == 1
    assert woken == []
    assert _notes(run) == before
    assert "globex-seat" not in json.dumps(AgentRun.objects.get(pk=run.id).messages)


@pytest.mark.usefixtures("saga_tools")
def test_a_reopened_rollback_whose_run_row_is_gone_wakes_nothing_and_fails_nothing(
    alice: User, acme_operator: User, make_agent: Any, start: Any, settings: Any, monkeypatch: Any
) -> None:
    """Holding: a run's saga whose run row is gone (deleted by SQL: nothing in toolhub deletes a run) has its failed
    compensation resolved by hand: the rollback reopens and finishes again, the wake-up finds no run (``run_advance``
    idle) and the resolution stands; the trail verifies."""
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 1}
    run = start(make_agent(tools=["reserve"], script=_reserve_many(1)), alice)
    RELEASE_FAILS["on"] = True
    saga_rollback_on_demand(saga_key=str(run.id), run_id=run.id, tenant="acme", actor="alice")
    RELEASE_FAILS["on"] = False
    saga = Saga.objects.get(run_id=run.id)
    AgentRun.objects.filter(pk=run.id).delete()
    woken = _woken(monkeypatch)

    resolve = compensations_resolve(
        scope=saga.compensations.all(), actor=f"user:{acme_operator.username}", note="done", by=acme_operator
    )

    assert resolve == (1, [])
    assert woken == [str(run.id)]
    assert saga.rollbacks.get().finished_at is not None
    assert_audit_intact()


@pytest.mark.usefixtures("saga_tools")
def test_retrying_a_failing_compensation_again_and_again_tells_one_note_per_retry_and_wakes_boundedly(
    alice: User, acme_operator: User, make_agent: Any, start: Any, settings: Any, monkeypatch: Any
) -> None:
    """Holding: an operator retries the failing compensation of an ended run's rollback five times, one retry a
    request. Each retry reopens the rollback (one wake-up, finding it under way: no note) and its call's settling
    finishes it again (one wake-up, one note, the outcome as it stands): two wake-ups and one note a retry, never
    more, nothing left waking the run after the last."""
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 1}
    run = start(make_agent(tools=["reserve"], script=_reserve_many(1)), alice)
    RELEASE_FAILS["on"] = True
    saga_rollback_on_demand(saga_key=str(run.id), run_id=run.id, tenant="acme", actor="alice")
    compensation = Saga.objects.get(run_id=run.id).compensations.get()
    woken = _woken(monkeypatch)

    for _ in range(5):
        compensation_retry(compensation=compensation, actor=f"user:{acme_operator.username}", by=acme_operator)
    RELEASE_FAILS["on"] = False

    compensation.refresh_from_db()
    assert compensation.status == CompensationStatus.FAILED
    notes = _notes(run)
    assert len(notes) == 1 + 5 and all("NOT rolled back" in note for note in notes), notes
    assert len(woken) <= 2 * 5, woken
    assert_audit_intact()


# --- a decision whose released call (and its run) ran in the decider's request --------------------------------------

#: What the operator's request does while the work it set off runs in it (set by each test).
WHILE_RUNNING: list[Any] = []

#: What a decider who left the tenant while the work their decision set off ran in their request is told.
NO_LONGER_A_MEMBER_OF_REQUEST = (
    "You are no longer a member of the tenant this approval request belongs to; your decision was recorded, "
    "its request is not shown."
)


@tool(risk=Risk.HIGH)
def fu_wire(amount: int, ctx: ToolContext) -> dict:
    """Wire money (held for an operator's approval)."""
    for change in WHILE_RUNNING:
        change()
    return {"wired": amount}


@tool
def fu_note(text: str, ctx: ToolContext) -> dict:
    """Write a note."""
    for change in WHILE_RUNNING:
        change()
    return {"noted": text}


WIRE_THEN_NOTE = [
    {"content": "", "tool_calls": [{"name": "fu_wire", "arguments": {"amount": 5}}]},
    {"content": "", "tool_calls": [{"name": "fu_note", "arguments": {"text": "after the wire"}}]},
    {"content": "done"},
]


@pytest.fixture
def decision_tools() -> Any:
    WHILE_RUNNING.clear()
    with registry.temporarily(fu_wire, fu_note):
        yield
    WHILE_RUNNING.clear()


def _api_client(user: User) -> APIClient:
    """A REST client authenticated by ``user``'s API key: the user is read afresh on every request."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token(user)}")
    return client


@pytest.mark.usefixtures("decision_tools")
@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_decision_whose_work_ran_in_the_request_answers_a_decider_who_left_meanwhile_nothing(
    decision: str, alice: User, acme_operator: User, make_agent: Any, start: Any
) -> None:
    """Found: acme's operator approved (or rejected) alice's run's held ``fu_wire`` with ``POST
    /api/v1/approvals/{id}/approve/`` (``reject/``); eager (the embedded default), the released call and the run's
    next turns (``fu_note``) ran in that request, and meanwhile the operator was removed from acme. The answer was 200
    with the request (tenant, tool, arguments, who decided), read without the rights being read again, where reading
    it back answers 404: the documented rule ("whatever waited ... a call or run that ran in the request ... answers
    one revoked meanwhile nothing more") was kept by the call, run and rollback views, not by the decisions.
    Expect: the decision stands (recorded, the work done) and the answer is 403 naming no tenant, tool or argument,
    through the one re-read of every view that ran work in its request (``still_visible_after_running_here``)."""
    run = start(make_agent(tools=["fu_wire", "fu_note"], script=WIRE_THEN_NOTE), alice)
    request = ApprovalRequest.objects.get(call__run_id=run.id)
    client = _api_client(acme_operator)
    WHILE_RUNNING.append(lambda: TenantMembership.objects.filter(user_id=acme_operator.pk).delete())

    answer = client.post(f"/api/v1/approvals/{request.pk}/{decision}/", {"round": 1}, format="json")

    request.refresh_from_db()
    assert request.status == ("approved" if decision == "approve" else "rejected")
    assert ToolCall.objects.get(run_id=run.id, tool_name="fu_note").status == CallStatus.SUCCEEDED  # ran in it
    assert client.get(f"/api/v1/approvals/{request.pk}/").status_code == 404
    assert answer.status_code == 403, answer.content
    assert answer.json() == {"detail": NO_LONGER_A_MEMBER_OF_REQUEST}


@pytest.mark.usefixtures("decision_tools")
def test_a_decider_who_stays_is_answered_the_decided_request(
    alice: User, acme_operator: User, make_agent: Any, start: Any
) -> None:
    """Holding: the re-read refuses only a decider the wait outlived: acme's operator, still in acme, approves and is
    answered 200 with the request approved, the run having gone on in the request."""
    run = start(make_agent(tools=["fu_wire", "fu_note"], script=WIRE_THEN_NOTE), alice)
    request = ApprovalRequest.objects.get(call__run_id=run.id)

    answer = _api_client(acme_operator).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")

    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == "approved" and answer.json()["tool_name"] == "fu_wire"
    run.refresh_from_db()
    assert run.status == "completed"


FU_LOOKUP = Tool.external(
    "fu_lookup",
    "Look a customer up (answered by a connector).",
    {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]},
)

#: What the user of a call is told when the work their answer set off ran in the request and they left meanwhile.
NO_LONGER_A_MEMBER_OF_CALL = "You are no longer a member of the tenant this call was made in; its outcome is not shown."


@pytest.mark.usefixtures("decision_tools")
@pytest.mark.parametrize("action", ["result", "cancel"])
def test_a_call_answered_or_cancelled_whose_run_went_on_in_the_request_answers_a_user_who_left_nothing(
    action: str, alice: User, make_agent: Any, start: Any
) -> None:
    """Found: alice's run waited on a call (an external ``fu_lookup`` awaiting its result, or a held ``fu_wire``); she
    posted the result (``POST /api/v1/calls/{id}/result/``) or cancelled it (``.../cancel/``); eager, the run woke and
    its next turn (``fu_note``) ran in that request, and meanwhile she was removed from acme. The answer was 200 with
    the call (tenant, tool, arguments, result), where reading it back answers 404. Expect: 403 with the text a direct
    call's answer gives, nothing of the call; the result kept (or the call cancelled) and the run gone on."""
    first = "fu_lookup" if action == "result" else "fu_wire"
    arguments = {"email": "bob@acme.example"} if action == "result" else {"amount": 5}
    script = [
        {"content": "", "tool_calls": [{"name": first, "arguments": arguments}]},
        {"content": "", "tool_calls": [{"name": "fu_note", "arguments": {"text": "after it"}}]},
        {"content": "done"},
    ]
    with registry.temporarily(FU_LOOKUP):
        run = start(make_agent(tools=[first, "fu_note"], script=script), alice)
        call = ToolCall.objects.get(run_id=run.id, tool_name=first)
        client = _api_client(alice)
        WHILE_RUNNING.append(lambda: TenantMembership.objects.filter(user_id=alice.pk).delete())

        body = {"result": {"customer": "Bob"}} if action == "result" else {"reason": "not needed"}
        answer = client.post(f"/api/v1/calls/{call.pk}/{action}/", body, format="json")

    call.refresh_from_db()
    assert call.status == (CallStatus.SUCCEEDED if action == "result" else CallStatus.CANCELLED)
    assert ToolCall.objects.get(run_id=run.id, tool_name="fu_note").status == CallStatus.SUCCEEDED  # ran in it
    assert client.get(f"/api/v1/calls/{call.pk}/").status_code == 404
    assert answer.status_code == 403, answer.content
    assert answer.json() == {"detail": NO_LONGER_A_MEMBER_OF_CALL}


@pytest.mark.usefixtures("decision_tools")
def test_a_subagent_run_cancelled_whose_parent_went_on_in_the_request_answers_a_user_who_left_nothing(
    alice: User, make_agent: Any, start: Any
) -> None:
    """Found: alice's run asked a researcher subagent, whose run waited on a held call; she cancelled the child
    (``POST /api/v1/runs/{child}/cancel/``); its end settled the parent's call, so, eager, the parent woke and its next
    turn (``fu_note``) ran in that request, and meanwhile she was removed from acme. The answer was 200 with the child
    run (messages, calls), where reading it back answers 404. Expect: the run views' answer for a run that proceeded
    in the request: 403 with nothing of it, the child cancelled and the parent gone on all the same."""
    parent_script = [
        {"content": "", "tool_calls": [{"name": "ask_researcher", "arguments": {"task": "find it"}}]},
        {"content": "", "tool_calls": [{"name": "fu_note", "arguments": {"text": "after the child"}}]},
        {"content": "done"},
    ]
    child_script = [
        {"content": "", "tool_calls": [{"name": "fu_wire", "arguments": {"amount": 5}}]},
        {"content": "child done"},
    ]
    with registry.temporarily(ask_researcher):
        make_agent(name="researcher", tools=["fu_wire"], script=child_script)
        parent = start(make_agent(tools=["ask_researcher", "fu_note"], script=parent_script), alice)
        child = AgentRun.objects.get(parent_run=parent)
        client = _api_client(alice)
        WHILE_RUNNING.append(lambda: TenantMembership.objects.filter(user_id=alice.pk).delete())

        answer = client.post(f"/api/v1/runs/{child.id}/cancel/", {"reason": "not needed"}, format="json")

    child.refresh_from_db()
    assert child.status == "cancelled"
    assert ToolCall.objects.get(run_id=parent.id, tool_name="fu_note").status == CallStatus.SUCCEEDED  # ran in it
    assert client.get(f"/api/v1/runs/{child.id}/").status_code == 404
    assert answer.status_code == 403, answer.content
    assert "no longer a member" in answer.json()["detail"] and "fu_wire" not in answer.content.decode()


@pytest.mark.usefixtures("decision_tools")
def test_a_call_cancelled_over_mcp_whose_run_went_on_in_the_request_answers_a_user_who_left_nothing(
    alice: User, make_agent: Any, start: Any
) -> None:
    """Found: MCP's ``toolhub_cancel_call`` (``cancel_call``) of alice's run's held ``fu_wire``: the run woke and its
    next turn (``fu_note``) ran in the request (eager), alice removed from acme meanwhile; the answer named the tool and
    the call cancelled. Expect: as REST's cancel, the error result with a direct call's text, the call cancelled."""
    script = [
        {"content": "", "tool_calls": [{"name": "fu_wire", "arguments": {"amount": 5}}]},
        {"content": "", "tool_calls": [{"name": "fu_note", "arguments": {"text": "after it"}}]},
        {"content": "done"},
    ]
    run = start(make_agent(tools=["fu_wire", "fu_note"], script=script), alice)
    call = ToolCall.objects.get(run_id=run.id, tool_name="fu_wire")
    WHILE_RUNNING.append(lambda: TenantMembership.objects.filter(user_id=alice.pk).delete())

    answer = cancel_call(User.objects.get(pk=alice.pk), {"call_id": str(call.pk), "reason": "not needed"})

    call.refresh_from_db()
    assert call.status == CallStatus.CANCELLED
    assert ToolCall.objects.get(run_id=run.id, tool_name="fu_note").status == CallStatus.SUCCEEDED  # ran in it
    assert answer.is_error and answer.structured_content is None, answer
    assert [block.text for block in answer.content] == [NO_LONGER_A_MEMBER_OF_CALL]


# --- a remote MCP listing that does not end (aae2718) ----------------------------------------------------------------

#: A secret in the server's URL and its credential: neither may reach the error kept, shown or audited.
SECRET_QUERY = "?key=s3cr3t-in-the-url"
CREDENTIAL = "Bearer tok-s3cr3t"


class EndlessCrm(FakeCrm):
    """A server whose listing pages ``tools`` tools a page, each page's next cursor ``cursor(page)``, ``pages`` pages
    (``None``: for ever)."""

    def __init__(self, cursor: Any, tools: int = 1, pages: int | None = None) -> None:
        super().__init__()
        self.cursor, self.tools, self.pages = cursor, tools, pages
        self.served = 0

    def server(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            self.served += 1
            tools = [{"name": f"t{n}", "inputSchema": {"type": "object"}} for n in range(self.tools)]
            more = self.pages is None or self.served < self.pages
            page = {"tools": tools, **({"nextCursor": self.cursor(self.served)} if more else {})}
            return types.ListToolsResult.model_validate(page)

        return Server("endless-crm", on_list_tools=list_tools)


@pytest.mark.parametrize(
    "cursor, tools, pages",
    [
        pytest.param(lambda page: "same", 1, None, id="the-same-cursor-forever"),
        pytest.param(lambda page: f"next-{page}", 0, None, id="empty-pages-forever"),
        pytest.param(lambda page: str(page), 1, MAX_LISTING_PAGES + 1, id="one-page-past-the-bound"),
    ],
)
def test_a_listing_that_does_not_end_within_the_bound_is_refused_after_the_bound_naming_no_secret(
    cursor: Any, tools: int, pages: int | None
) -> None:
    """Holding: a server repeating one cursor (a loop), paging empty pages for ever, or ending on page 101 is asked
    for 100 pages, no more, and refused whole with the fixed message naming the server by its name: no URL, no
    secret of the URL or of the credential."""
    fake = EndlessCrm(cursor, tools, pages)
    with serving(fake) as url, pytest.raises(RemoteServerError) as failed:
        remote_tools(url + SECRET_QUERY, name="crm", headers={"Authorization": CREDENTIAL}, timeout=60)

    assert fake.served == MAX_LISTING_PAGES
    said = str(failed.value)
    assert said.startswith("The MCP server 'crm' listed more than 100 pages of tools without an end"), said
    assert len(said) < 300 and "127.0.0.1" not in said and "s3cr3t" not in said


def test_a_listing_of_exactly_the_bound_is_read_whole() -> None:
    """Holding: 100 pages, the last without a cursor, are read whole (the bound is on pages still paging after it)."""
    fake = EndlessCrm(lambda page: str(page), 1, MAX_LISTING_PAGES)
    with serving(fake) as url:
        listed = remote_tools(url, name="crm", headers={}, timeout=60)

    assert fake.served == MAX_LISTING_PAGES and len(listed) == MAX_LISTING_PAGES


def test_a_huge_cursor_is_cut_by_the_bytes_bound_of_the_use(settings: Any) -> None:
    """Holding: a cursor of 30,000 bytes a page (sent back with each request) is counted with the answers it came in:
    the use's bytes bound (64 x ``MAX_EXTERNAL_RESULT_BYTES``) refuses it on the third page, the message naming the
    setting and not the URL, nothing of the cursor quoted."""
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_EXTERNAL_RESULT_BYTES": 1_000}
    fake = EndlessCrm(lambda page: "c" * 30_000, 0)
    with serving(fake) as url, pytest.raises(RemoteServerError) as failed:
        remote_tools(url + SECRET_QUERY, name="crm", headers={}, timeout=60)

    said = str(failed.value)
    assert fake.served <= 3 and "MAX_EXTERNAL_RESULT_BYTES" in said, said
    assert len(said) < 300 and "ccc" not in said and "127.0.0.1" not in said and "s3cr3t" not in said
