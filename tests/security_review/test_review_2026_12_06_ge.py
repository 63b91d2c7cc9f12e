"""Review 2026-12-06 (ge): the two robustness items the last note left (review fu's wakes, review ft's catalogue).

Each finding's test fails on the code as found (main at 2c06cf9) and says what was found and what is expected.

Findings:

1. Cancelling a run that withdrew N waiting calls sent N ``advance_run_task`` messages for it (measured: 200 for
   N=200), all for a run that had ended: each withdrawn call's transition registered its own after-commit
   ``call_settled``, and the agents' receiver sent one wake per call. The same held for a subagent tree's cancel
   (six wakes for a parent whose child held five calls) and a failed compensation's withdrawn inner calls. Now
   ``toolhub.calls.settling_together`` (used by ``run_cancel_locked`` and ``withdraw_held_inner``) tells the block's
   settled calls together after commit, and the receiver's wake goes through
   ``toolhub.signals.once_for_calls_settled_together``: one message per run. Each call keeps its own
   ``call.cancelled``/``approval.cancelled`` events and its listeners' per-call notice (the sagas).
2. One registered tool whose schema cannot be built (made at runtime: dynamic, a remote server's; E001 keeps a code
   tool from a deploy) failed every listing for everyone: ``GET /api/v1/tools/`` (non-operators) and every
   ``/api/v1/tools/export/<format>/`` answered 400 with pydantic's builder message; the agent loop's tool list
   (``visible_tool_definitions`` and the step's own) raised, so no run with it could take a step; and every MCP
   request failed (an ASGI exception in ``mcp_headers.header_declaring_tools``, which read each code tool's
   ``json_schema``), ``tools/list`` included. Now ``toolhub.tools.export.buildable`` leaves such a tool out of each
   listing (REST catalogue and exports, MCP ``tools/list`` and ``toolhub_describe_tool``, a run's and an agentic
   tool's tool list, a facade's guidance) and logs it once per process for operators (name, ``toolhub.E001``,
   a bounded reason, a hint); the search documents and MCP header scan read ``known_json_schema``.

Checked and holding:

- Waiters on a withdrawn call (``?wait=`` long-polls, MCP's follow) poll the call's row (``toolhub.direct.call_wait``),
  not a message: batching the notices delays none of them.
- Cancelling one tenant's run withdraws and wakes nothing of another tenant's (its run, held call, request stay).
- The approvals' per-request ``approval.cancelled`` webhook (when ``WEBHOOK_URL`` is set) stays one per request:
  it is the receiver's per-request contract, not a wake; with no webhook configured nothing else goes to the broker.
- The console's call exports with such a tool's calls hold since review ft (``known_json_schema``).
"""

import logging
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from celery import Task
from django.contrib.auth.models import User
from pydantic import Field

from agents_app.cancelling import run_cancel
from agents_app.loop import visible_tool_definitions
from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.services import agent_create
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.agents.conftest import start_run  # noqa: F401 - a fixture, registered by being imported here
from tests.helpers import RequestCall, assert_audit_intact
from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - live_asgi: a fixture
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from tests.testapp.tools import ask_researcher
from toolhub.direct import call_wait
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import AuditEvent, CallStatus, Tenant, ToolCall
from toolhub.tools.definition import Tool
from toolhub.tools.export import EXPORT_FORMATS
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

StartRun = Callable[..., AgentRun]

#: A held call first (risky_effect waits for an operator), then the answer.
HELD = [{"tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]}, {"content": "done"}]

N = 200


def _agent(name: str, tenant: str) -> Agent:
    return agent_create(name=name, provider="scripted", tools=["risky_effect"], tenant=tenant, script=HELD)


def _held_run(start: StartRun, request_call: RequestCall, user: User, tenant: str, calls: int) -> AgentRun:
    """A run of ``user`` in ``tenant`` waiting on ``calls`` calls held for an operator."""
    run = start(_agent(f"held-{tenant}", tenant), user, context={"tenant": tenant})
    assert run.status == RunStatus.WAITING
    for number in range(calls - 1):
        held = request_call("risky_effect", {"note": f"n{number}"}, user, run.pk, tenant=tenant)
        assert held.status == CallStatus.PENDING_APPROVAL
    assert ToolCall.objects.filter(run_id=run.pk, status=CallStatus.PENDING_APPROVAL).count() == calls
    return run


def test_cancelling_a_run_with_many_waiting_calls_wakes_it_once(
    start_run: StartRun,  # noqa: F811 - the imported fixture
    request_call: RequestCall,
    alice: User,
    other_tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: cancelling a run that withdrew N calls woke it N times: each withdrawn call's ``call_settled`` sent its
    own ``advance_run_task`` message after commit (200 broker messages for one cancelled run, each a worker's run
    lock and read), all for a run that had ended.

    Expect: one wake per run however many calls it withdrew; every call still withdrawn with its own audit events
    and approval request cancelled (a waiter on any of them reads it settled at once); another tenant's run and its
    held call neither woken nor withdrawn.
    """
    run = _held_run(start_run, request_call, alice, "acme", N)
    bob = make_user("bob-ge", tenant=other_tenant)
    theirs = _held_run(start_run, request_call, bob, "globex", 1)
    sent: list[tuple[str, tuple[Any, ...]]] = []

    def apply_async(task: Task, args: Any = None, *more: Any, **options: Any) -> None:
        sent.append((task.name, tuple(args or ())))

    monkeypatch.setattr(Task, "apply_async", apply_async)  # every broker message, none run

    with django_capture_on_commit_callbacks(execute=True):
        assert run_cancel(run_id=run.pk, actor="user:alice", reason="wrong customer")

    assert len(sent) <= 1, f"{len(sent)} broker messages for one cancelled run"
    assert all(args == (str(run.pk),) for _, args in sent)  # nothing of globex woken
    calls = ToolCall.objects.filter(run_id=run.pk)
    assert calls.count() == N and set(calls.values_list("status", flat=True)) == {CallStatus.CANCELLED}
    for each in calls[:3]:  # a waiter on any of them returns at once: it reads the row
        assert call_wait(call=each, seconds=0).status == CallStatus.CANCELLED
    events = AuditEvent.objects.filter(run_id=run.pk)
    assert events.filter(event_type="call.cancelled").count() == N
    assert events.filter(event_type="approval.cancelled").count() == N
    assert not ApprovalRequest.objects.filter(call__run_id=run.pk, status=ApprovalStatus.PENDING).exists()
    assert ToolCall.objects.get(run_id=theirs.pk).status == CallStatus.PENDING_APPROVAL
    assert AgentRun.objects.get(pk=theirs.pk).status == RunStatus.WAITING
    assert ApprovalRequest.objects.get(call__run_id=theirs.pk).status == ApprovalStatus.PENDING
    assert_audit_intact()


def test_cancelling_a_parent_wakes_it_and_its_child_once_each(
    make_agent: Callable[..., Agent],
    start: StartRun,
    alice: User,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: cancelling a parent whose child waited on five held calls sent six wakes (one per withdrawn call of
    the child, one for the parent's call the child's end settled).

    Expect: one wake for each run of the tree; every held call of the child withdrawn, the parent's call settled.
    """
    held = [{"name": "risky_effect", "arguments": {"note": f"n{number}"}} for number in range(5)]
    with registry.temporarily(ask_researcher):
        make_agent(name="researcher", tools=["risky_effect"], script=[{"content": "", "tool_calls": held}])
        parent_script = [{"content": "", "tool_calls": [{"name": "ask_researcher", "arguments": {"task": "find"}}]}]
        parent = start(make_agent(tools=["ask_researcher"], script=parent_script), alice)
        child = AgentRun.objects.get(parent_run=parent)
        assert ToolCall.objects.filter(run_id=child.id, status=CallStatus.PENDING_APPROVAL).count() == 5
        sent: list[tuple[Any, ...]] = []
        monkeypatch.setattr(Task, "apply_async", lambda task, args=None, *more, **options: sent.append(tuple(args)))
        with django_capture_on_commit_callbacks(execute=True):
            assert run_cancel(run_id=parent.pk, actor="user:alice", reason="not needed")

    assert sorted(sent) == sorted([(str(parent.pk),), (str(child.pk),)])
    assert set(ToolCall.objects.filter(run_id=child.id).values_list("status", flat=True)) == {CallStatus.CANCELLED}
    assert ToolCall.objects.get(run_id=parent.id).status == CallStatus.FAILED
    assert_audit_intact()


# --- one unbuildable tool and the listings ------------------------------------------------------------------------

#: A parameter whose pattern Rust's engine refuses (a look-ahead): its schema cannot be built at runtime.
_LOOK_AHEAD = {"pin": (Annotated[str, Field(pattern=r"^a+(?=b)")], "")}
#: What a listing must not show anyone but the operators' log: the builder's internals.
_INTERNALS = ("look-around", "look-ahead", "regex", "pydantic", "ToolDefinitionError", "Traceback")


def _unbuildable(name: str) -> Tool:
    """A tool made at runtime (as a dynamic or remote one is) whose input schema cannot be built (E001 at deploy)."""
    tool = Tool.create(name, "Cannot be described.", _LOOK_AHEAD, lambda pin: None)
    with pytest.raises(ToolDefinitionError):
        tool.json_schema  # noqa: B018 - the premise: building it fails
    return tool


def _reported(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if name in record.getMessage()]


def _assert_reported_to_operators(caplog: pytest.LogCaptureFixture, name: str) -> None:
    reports = _reported(caplog, name)
    assert reports, "the unbuildable tool was left out without a word to operators"
    assert all("toolhub.E001" in report and "Hint:" in report and len(report) <= 800 for report in reports)


@pytest.mark.parametrize("path", ["/api/v1/tools/", *(f"/api/v1/tools/export/{f}/" for f in EXPORT_FORMATS)])
def test_one_unbuildable_tool_leaves_the_others_in_the_rest_catalogue_and_exports(
    alice: User, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Found: one registered tool whose schema cannot be built made ``GET /api/v1/tools/`` (for a non-operator) and
    every ``/api/v1/tools/export/<format>/`` answer 400 with that tool's ``ToolDefinitionError`` (the builder's
    internals) for every caller: nobody's agent could list its tools.

    Expect: 200 with every other tool the caller may use; the broken one left out, named to operators in the log
    with the check's id and a hint, its internals in no answer.
    """
    name = f"ge_unbuildable_{path.strip('/').rsplit('/', 1)[-1].replace('-', '_')}"
    with registry.temporarily(_unbuildable(name)), caplog.at_level(logging.WARNING):
        response = client_for(alice).get(path)
    assert response.status_code == 200, response.content[:300]
    text = response.content.decode()
    assert "record_effect" in text and name not in text
    assert not [word for word in _INTERNALS if word in text]
    _assert_reported_to_operators(caplog, name)


def test_one_unbuildable_tool_leaves_the_rest_of_a_runs_tools(
    alice: User,
    tenant: Tenant,
    start_run: StartRun,  # noqa: F811 - the imported fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found: the agent loop's tool list (``visible_tool_definitions``, and the step's own) raised
    ``ToolDefinitionError`` for a run whose agent holds one tool whose schema cannot be built: none of its model's
    tools could be sent, the run could not take a step.

    Expect: the others sent and used, the broken one left out and named to operators; the model told nothing of it.
    """
    broken = _unbuildable("ge_unbuildable_run")
    script = [{"tool_calls": [{"name": "record_effect", "arguments": {"note": "x"}}]}, {"content": "done"}]
    with registry.temporarily(broken), caplog.at_level(logging.WARNING):
        agent = agent_create(
            name="ge-bot", provider="scripted", tools=["record_effect", broken.name], tenant="acme", script=script
        )
        listed = AgentRun.objects.create(agent=agent, user=alice, tenant="acme", input="hi")
        names = [definition["function"]["name"] for definition in visible_tool_definitions(listed)]
        run = start_run(agent, alice, context={"tenant": "acme"})
    assert names == ["record_effect"]
    assert run.status == RunStatus.COMPLETED, run.error
    assert ToolCall.objects.get(run_id=run.pk).status == CallStatus.SUCCEEDED
    assert broken.name not in str(run.messages)
    _assert_reported_to_operators(caplog, broken.name)


@pytest.mark.django_db(transaction=True)
def test_one_unbuildable_tool_leaves_the_rest_of_mcp_tools_list(
    live_asgi: str,  # noqa: F811 - the imported fixture
    alice: User,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found: MCP ``tools/list`` failed (an internal error) for every client when one listed tool's schema could not
    be built (``tool_definition`` per tool, unguarded).

    Expect: the others listed, the broken one left out and named to operators.
    """
    broken = _unbuildable("ge_unbuildable_mcp_list")

    async def names(client: Any) -> list[str]:
        return sorted(tool.name for tool in (await client.list_tools()).tools)

    with registry.temporarily(broken), caplog.at_level(logging.WARNING):
        listed = with_client(live_asgi, token(alice), names)
    assert "record_effect" in listed and broken.name not in listed
    _assert_reported_to_operators(caplog, broken.name)
