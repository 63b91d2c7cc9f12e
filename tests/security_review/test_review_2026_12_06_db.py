"""Review 2026-12-06 (db): review of review ct (runs waiting on parked calls) and subagent authorization.

Each test fails on the reviewed code (main at 9dc5af6) where it states a finding, and what is expected.

Findings:

1. An operator's explicit deny of a tool to an agent did not carry to the subagents that agent starts: a child run
   authorizes as its own agent for the same user, so a parent agent denied ``X`` had ``X`` called for it by asking a
   child whose agent lists ``X`` (a privilege escalation through delegation). A run's principal now names the agents
   of the runs that started it (``CallPrincipal.delegated_by``), and an explicit deny to any of them refuses the
   tool as one to the run's own agent would; nothing else of theirs carries (the child keeps its own tools, which
   the parent's agent need not list). A child records them at its start (``AgentRun.delegated_by``); the worker's
   re-check reads them with the claim (PostgreSQL) or from the run, so a deny given after the call was asked holds.

Checked and holding:
- a child run keeps its own tools that its parent's agent does not list but its user is granted (the deny carries,
  the parent's tool list does not);
- ``_run_waits`` (the receiver and the sweep) holds one run's row in a transaction of its own (``call_suspended`` is
  sent on commit): it waits for no other lock while holding it, so it makes no cycle with ``locked_run``'s
  parent-first order;
- a run whose step's lease lapsed with a call of its turn parked is moved by the sweep (its condition admits a
  lapsed lease) and ``runs_to_wake`` takes the lost step once it waits;
- the sweep's batch is read after the running filter: 600 older calls awaiting results for runs already waiting
  do not fill it, and a newer parked running run is moved on the first sweep;
- a run cancelled between the sweep's read and its move is left cancelled (the guarded move admits ``running``
  only).
"""

from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User

from agents_app import loop
from agents_app.models import AgentRun, RunStatus
from agents_app.services import agent_create
from agents_app.subagents import _run_waits, runs_waiting_on_parked_calls
from tests.subagents.conftest import MakeAgent, StartRun
from tests.testapp.models import SideEffect
from tests.testapp.tools import ask_researcher
from toolhub import registry
from toolhub.claims import ClaimHint
from toolhub.governance import governance_stamp
from toolhub.models import CallKind, CallStatus, Grant, GrantEffect, ToolCall
from toolhub.tasks import execute_tool_call_task

pytestmark = pytest.mark.django_db

_PARENT_SCRIPT = [
    {"content": "", "tool_calls": [{"name": "ask_researcher", "arguments": {"task": "record it"}}]},
    {"content": "done"},
]
_CHILD_SCRIPT = [
    {"content": "", "tool_calls": [{"name": "record_effect", "arguments": {"note": "through the child"}}]},
    {"content": "child answer"},
]


def _child_of(make_agent: MakeAgent, start: StartRun, alice: User, parent_name: str) -> AgentRun:
    with registry.temporarily(ask_researcher):
        make_agent(name="researcher", tools=["record_effect"], script=_CHILD_SCRIPT)
        parent = start(make_agent(name=parent_name, tools=["ask_researcher"], script=_PARENT_SCRIPT), alice)
    return AgentRun.objects.get(parent_run=parent)


def test_a_tool_denied_to_the_parents_agent_is_denied_to_its_subagents(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    """Found: an explicit deny of ``record_effect`` to the parent's agent did not apply to its child run (it
    authorizes as its own agent): the parent had the denied tool executed by asking a subagent that lists it.

    Expect: the child's call is denied (nothing executed), the child's model is not shown the tool, the runs end.
    """
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", agent_name="planner")
    shown: dict[str, list[str]] = {}
    real = loop.run_disclosure

    def seen(run: AgentRun, **kwargs: Any) -> Any:
        disclosure = real(run, **kwargs)
        shown[run.agent.name] = sorted(tool.name for tool in disclosure.tools)
        return disclosure

    with mock.patch.object(loop, "run_disclosure", seen):
        child = _child_of(make_agent, start, alice, "planner")

    assert shown == {"planner": ["ask_researcher"], "researcher": []}, shown
    [call] = ToolCall.objects.filter(run_id=child.id)
    assert call.status == CallStatus.DENIED, call.status
    assert "planner" in call.error, call.error
    assert not SideEffect.objects.exists()
    child.refresh_from_db()
    assert child.status == RunStatus.COMPLETED, child.status


def test_a_subagent_keeps_its_own_tools_its_parents_agent_does_not_list(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    """Checked (holds): the child's agent lists ``record_effect``, the parent's does not (nor is it denied to it).

    Expect: the child's call of it runs: only an explicit deny carries down, not the parent's tool list.
    """
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", agent_name="someone-else")
    child = _child_of(make_agent, start, alice, "planner")

    [call] = ToolCall.objects.filter(run_id=child.id)
    assert call.status == CallStatus.SUCCEEDED, (call.status, call.error)
    assert SideEffect.objects.filter(note="through the child").exists()


def _parked_run(alice: User, status: str, **fields: Any) -> AgentRun:
    agent = agent_create(name=f"db-{status}-{AgentRun.objects.count()}", tenant="acme", provider="scripted", script=[])
    run = AgentRun.objects.create(agent=agent, user=alice, tenant="acme", status=status, **fields)
    ToolCall.objects.create(
        tool_name="external", status=CallStatus.AWAITING_RESULT, kind=CallKind.CALL, tenant="acme", run_id=run.id
    )
    return run


def test_waiting_runs_calls_do_not_fill_the_sweeps_batch(alice: User) -> None:
    """Checked (holds): 600 calls awaiting results for a run already waiting, all older than a parked running run's.

    Expect: one sweep (batch of 500) moves the running run to ``waiting``.
    """
    waiting = _parked_run(alice, RunStatus.WAITING)
    [call] = ToolCall.objects.filter(run_id=waiting.id)
    ToolCall.objects.bulk_create(
        ToolCall(tool_name="external", status=CallStatus.AWAITING_RESULT, tenant="acme", run_id=waiting.id)
        for _ in range(599)
    )
    running = _parked_run(alice, RunStatus.RUNNING)

    assert runs_waiting_on_parked_calls() == 1
    running.refresh_from_db()
    assert running.status == RunStatus.WAITING


def test_a_cancelled_run_is_not_moved_and_a_lapsed_lease_is(alice: User) -> None:
    """Checked (holds): the guarded move admits only ``running`` runs with no lease in force.

    Expect: a run cancelled after the read stays cancelled; one whose lease lapsed moves; one leased stays.
    """
    from datetime import timedelta

    from django.utils import timezone

    cancelled = _parked_run(alice, RunStatus.CANCELLED)
    lapsed = _parked_run(alice, RunStatus.RUNNING, step_lease_until=timezone.now() - timedelta(seconds=1))
    leased = _parked_run(alice, RunStatus.RUNNING, step_lease_until=timezone.now() + timedelta(minutes=5))

    assert [_run_waits(run.id) for run in (cancelled, lapsed, leased)] == [False, True, False]
    assert [AgentRun.objects.get(id=run.id).status for run in (cancelled, lapsed, leased)] == [
        RunStatus.CANCELLED,
        RunStatus.WAITING,
        RunStatus.RUNNING,
    ]


def test_a_deny_to_the_parents_agent_given_after_the_childs_call_was_asked_holds_at_the_worker(alice: User) -> None:
    """Found: a worker re-checked a child's queued call as its own agent only: an operator's deny of the tool to the
    parent's agent, given while the call waited in the queue, did not stop it (on PostgreSQL the claim reads the
    agent's tools with the row; the SQLite path reads them after).

    Expect: the worker refuses the call (nothing executed), naming the parent's agent.
    """
    planner = agent_create(name="planner", tenant="acme", provider="scripted", script=[], tools=["ask_researcher"])
    researcher = agent_create(name="researcher", tenant="acme", provider="scripted", script=[], tools=["record_effect"])
    parent = AgentRun.objects.create(agent=planner, user=alice, tenant="acme", status=RunStatus.WAITING)
    child = AgentRun.objects.create(
        agent=researcher, user=alice, tenant="acme", parent_run=parent, depth=1, delegated_by=["planner"]
    )
    call = ToolCall.objects.create(
        tool_name="record_effect",
        arguments={"note": "queued"},
        status=CallStatus.QUEUED,
        kind=CallKind.CALL,
        tenant="acme",
        user=alice,
        agent_name="researcher",
        run_id=child.id,
        context={"tenant": "acme", "user": alice.username, "user_id": alice.pk},
    )
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", agent_name="planner")
    governance_stamp(assume_current=False)  # the process has seen the deny: the claim's first, hinted try holds

    execute_tool_call_task(str(call.id), ClaimHint.of(call).message())

    call.refresh_from_db()
    assert call.status == CallStatus.DENIED, (call.status, call.error)
    assert "planner" in call.error, call.error
    assert not SideEffect.objects.exists()
