"""Review 2026-12-06 (ct): review of reviews bw, ca and cn (agent runs, subagents and the blackboard).

Each test fails on the reviewed code (main at ea55f42) where it states a finding, and what is expected.

Findings:

1. A worker dying between committing a subagent call's suspension and its ``call_suspended`` receiver left the parent
   ``running`` (only that receiver moved it to ``waiting``): the runs sweep woke the child but never the parent (it
   has an open call), so its pages said running for as long as its child worked. The runs sweep now moves such runs
   to ``waiting`` (``runs_waiting_on_parked_calls``), through the receiver's own guarded move (``_run_waits``): the
   run's row locked first, then moved only while a call of its turn still awaits its result and no step holds it
   (a move that waited for the row would otherwise check the call as it was before a child's end settled it).

Checked and holding:
- a child run's model is never shown, and never gets executed, a tool its user (the parent's principal) is not
  granted, though the child's agent lists it; the denied call runs nothing and the parent still gets the answer;
- an atomic tool of a child putting on its board in its own transaction (the child's row, without its parent's),
  then recording its outcome, meets the parent's cancellation and the sweep with no deadlock (PostgreSQL): the
  cancellation waits for the tool's transaction, which waits on nothing the cancellation holds;
- a child's end that settles the parent's call while the sweep waits on the parent leaves the parent ``running``
  for its wake-up (PostgreSQL, forced interleaving);
- the sweep's repair reads the calls awaiting a result on their status index and each run by its key, no big table
  whole (PostgreSQL, 10 000 ended runs and calls);
- children are created in their parent's tenant for its user (never the model's say); the run page and the admin
  list children through ``run_children`` (filtered by the run's tenant); a board reads only its tenant's entries;
  depth is bounded per subagent tool (at most ``MAX_SUBAGENT_DEPTH``) and fan-out by the budget carved under the
  parent's lock (a going child's whole budget counts as spent); a run whose user lost standing is cancelled at its
  next turn (children too), and every call is re-authorized when it executes.
"""

import threading
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from agents_app import loop, tasks
from agents_app.blackboard import blackboard_put
from agents_app.cancelling import run_cancel
from agents_app.ending import run_finish
from agents_app.models import AgentRun, BlackboardEntry, RunStatus, StopReason
from agents_app.services import agent_create
from agents_app.steprows import locked_run
from agents_app.subagents import runs_waiting_on_parked_calls
from tests.helpers import assert_audit_intact
from tests.security_review.pg_races import in_thread, wait_for_lock_waiter
from tests.security_review.query_plans import analyze, clone, explained, seq_scans, uuid_of
from tests.subagents.conftest import MakeAgent, StartRun
from tests.testapp.models import SideEffect
from tests.testapp.tools import ask_researcher
from toolhub import registry
from toolhub.calls import call_transition
from toolhub.models import CallStatus, Grant, GrantEffect, ToolCall
from toolhub.signals import call_suspended

pytestmark = pytest.mark.django_db


def _parent_whose_suspension_was_unheard(make_agent: MakeAgent, start: StartRun, alice: User) -> AgentRun:
    """A parent whose subagent call parked, its ``call_suspended`` receiver lost (a worker died after the commit)."""
    script = [
        {"content": "", "tool_calls": [{"name": "ask_researcher", "arguments": {"task": "find it"}}]},
        {"content": "done"},
    ]
    with registry.temporarily(ask_researcher), mock.patch.object(call_suspended, "send", return_value=[]):
        make_agent(name="researcher", tools=[], script=[{"content": "child answer"}])
        return start(make_agent(tools=["ask_researcher"], script=script), alice)


def test_a_parent_whose_childs_start_was_lost_shows_waiting_once_swept(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    """Found: a worker dying between committing a subagent call's suspension and its receiver left the parent
    ``running`` (only that receiver moves it to ``waiting``): the sweep woke the child but never the parent (it has an
    open call), so the run page and admin showed it running for as long as its child worked or waited on approvals.

    Expect: the runs sweep moves such a parent to ``waiting``; the child is started.
    """
    parent = _parent_whose_suspension_was_unheard(make_agent, start, alice)
    child = AgentRun.objects.get(parent_run=parent)
    call = ToolCall.objects.get(run_id=parent.id)
    assert (parent.status, child.status, call.status) == (
        RunStatus.RUNNING,
        RunStatus.RUNNING,
        CallStatus.AWAITING_RESULT,
    )
    assert child.turn == 0

    started: list[str] = []
    with mock.patch.object(tasks.advance_run_task, "delay", side_effect=lambda run_id: started.append(run_id)):
        tasks.sweep_runs_task(idle_seconds=0)

    parent.refresh_from_db()
    assert parent.status == RunStatus.WAITING, parent.status
    assert str(child.id) in started


def test_a_child_run_never_sees_nor_calls_a_tool_its_user_is_not_granted(
    make_agent: MakeAgent, start: StartRun, alice: User, settings: Any
) -> None:
    """Checked (holds): the child's agent lists a tool its (the parent's) user is not granted.

    Expect: the child's model is never shown it, its call of it is denied and never executes; the parent gets the
    child's answer.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    Grant.objects.create(effect=GrantEffect.ALLOW, tool_name="ask_researcher", user=alice)
    shown: list[list[str]] = []
    real = loop.run_disclosure

    def seen(run: AgentRun, **kwargs: Any) -> Any:
        disclosure = real(run, **kwargs)
        shown.append(sorted(tool.name for tool in disclosure.tools))
        return disclosure

    parent_script = [
        {"content": "", "tool_calls": [{"name": "ask_researcher", "arguments": {"task": "find it"}}]},
        {"content": "done"},
    ]
    child_script = [
        {"content": "", "tool_calls": [{"name": "record_effect", "arguments": {"note": "not granted"}}]},
        {"content": "child answer"},
    ]
    with registry.temporarily(ask_researcher), mock.patch.object(loop, "run_disclosure", seen):
        make_agent(name="researcher", tools=["record_effect"], script=child_script)
        parent = start(make_agent(tools=["ask_researcher"], script=parent_script), alice)

    child = AgentRun.objects.get(parent_run=parent)
    assert (parent.status, child.status) == (RunStatus.COMPLETED, RunStatus.COMPLETED)
    [effect] = ToolCall.objects.filter(run_id=child.id)
    assert effect.status == CallStatus.DENIED, effect.status
    assert not SideEffect.objects.exists()
    assert ["ask_researcher"] in shown and all("record_effect" not in names for names in shown), shown


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_tools_own_put_on_its_childs_board_and_the_parents_cancellation_both_finish(alice: User) -> None:
    """Checked (holds): an atomic tool of a child run puts on its board in its own transaction (the child's row, FOR
    NO KEY UPDATE, without its parent's), then records its outcome (its call's row, its tenant's chain head), while
    the parent is cancelled (the parent, then the child, then the calls it withdraws, then the chain head) and the
    runs sweep moves parked runs (each run's row).

    Expect: no deadlock: the cancellation waits for the tool's transaction, which waits for nothing it holds; the
    tool's call and entry stand, both runs end cancelled, and the trail verifies.
    """
    agent = agent_create(name="ct-put", tenant="acme", provider="scripted", script=[], tools=[])
    parent = AgentRun.objects.create(agent=agent, user=alice, tenant="acme", status=RunStatus.WAITING)
    awaited = ToolCall.objects.create(
        tool_name="ask_researcher", status=CallStatus.AWAITING_RESULT, tenant="acme", run_id=parent.id, turn=0
    )
    child = AgentRun.objects.create(
        agent=agent, user=alice, tenant="acme", parent_run=parent, parent_call_id=awaited.id, depth=1
    )
    own = ToolCall.objects.create(tool_name="ct_note", status=CallStatus.RUNNING, tenant="acme", run_id=child.id)
    put = threading.Event()

    def tool_transaction() -> bool:
        with transaction.atomic():
            blackboard_put(child.id, "note", {"n": 1}, kind="Note", produced_by_call=own.id)
            put.set()
            wait_for_lock_waiter('FROM "sagas_saga" s', 15)  # the cancellation waits on the child's row
            return call_transition(
                own,
                to=CallStatus.SUCCEEDED,
                allowed_from={CallStatus.RUNNING},
                actor="worker:ct",
                result={"ok": True},
                finished_at=timezone.now(),
            )

    tool_thread, recorded = in_thread(tool_transaction, "tool")
    assert put.wait(15)
    cancel_thread, cancelled = in_thread(
        lambda: run_cancel(run_id=parent.id, actor="operator:bob", reason="stop"), "cancel"
    )
    sweep_thread, swept = in_thread(runs_waiting_on_parked_calls, "sweep")
    for thread in (tool_thread, cancel_thread, sweep_thread):
        thread.join(30)

    assert (recorded, cancelled, swept) == ([True], [True], [0]), (recorded, cancelled, swept)
    parent.refresh_from_db()
    child.refresh_from_db()
    own.refresh_from_db()
    assert (parent.status, child.status, own.status) == (RunStatus.CANCELLED, RunStatus.CANCELLED, CallStatus.SUCCEEDED)
    assert BlackboardEntry.objects.filter(run=child, name="note").exists()
    assert assert_audit_intact() > 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_sweep_leaves_running_a_parent_whose_call_was_settled_while_it_waited(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    """Checked (holds, with finding 1's repair): the sweep's move to ``waiting`` meets the child's end, which holds
    the parent (``locked_run``) while it settles the parent's call.

    Expect: the sweep waits for the parent's row and, once the child's end committed, reads the call settled and
    leaves the parent ``running`` for its wake-up.
    """
    parent = _parent_whose_suspension_was_unheard(make_agent, start, alice)
    child = AgentRun.objects.get(parent_run=parent)
    ending = threading.Event()

    def end_child() -> None:
        with transaction.atomic():
            run = locked_run(child.id)
            assert run is not None
            ending.set()
            wait_for_lock_waiter("agents_app_agentrun", 15)  # the sweep waits on the parent's row
            run.output = "child answer"
            run_finish(run, status=RunStatus.COMPLETED, stop_reason=StopReason.ANSWERED, now=timezone.now())

    with mock.patch.object(tasks.advance_run_task, "delay"):  # the parent's wake-up is not what is tested
        child_thread, ended = in_thread(end_child, "child-end")
        assert ending.wait(15)
        sweep_thread, swept = in_thread(runs_waiting_on_parked_calls, "sweep")
        for thread in (child_thread, sweep_thread):
            thread.join(30)

    assert (ended, swept) == ([None], [0]), (ended, swept)
    parent.refresh_from_db()
    assert parent.status == RunStatus.RUNNING, parent.status
    assert ToolCall.objects.get(run_id=parent.id).status == CallStatus.SUCCEEDED


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_sweeps_repair_reads_no_big_table_whole(alice: User) -> None:
    """Checked (holds, finding 1's repair): with 10 000 ended runs and their settled calls beside 500 calls awaiting
    an outside result, the sweep's read of parked running runs uses the calls' status index and each run's key."""
    agent = agent_create(name="ct-plan", tenant="acme", provider="scripted", script=[], tools=[])
    run = AgentRun.objects.create(agent=agent, user=alice, tenant="acme", status=RunStatus.COMPLETED)
    call = ToolCall.objects.create(tool_name="ask", status=CallStatus.SUCCEEDED, tenant="acme", run_id=run.id)
    clone(ToolCall, call, 10_000, id=uuid_of("ct-call"))
    clone(ToolCall, call, 500, id=uuid_of("ct-wait"), status="'awaiting_result'")
    clone(AgentRun, run, 10_000, id=uuid_of("ct-run"))
    analyze()

    assert runs_waiting_on_parked_calls() == 0
    plans = explained(runs_waiting_on_parked_calls)

    assert len(plans) == 1, plans
    [(sql, plan)] = plans
    assert not seq_scans(plan), plan
