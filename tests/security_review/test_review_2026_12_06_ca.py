"""Review 2026-12-06 (ca): review bw's subagent and blackboard changes (the board's row lock, the child's end copying
last, ``_settled_by_ended_child``) and the gaps it left.

Each test fails on the reviewed code (main at 5612690) and states what was found and what is expected.

Findings:

1. Deadlock: a child run ending held its own row, then needed its parent's (the put of its answer on the parent's
   board; before bw, the foreign key check of that insert), while a cancellation held the parent and waited for the
   child: PostgreSQL failed one of them. ``locked_run`` now locks a child run's parent first, in the same statement,
   so every lock on a run tree is taken parent before child.
2. ``SubagentLimits(max_depth=...)`` had no upper bound while the walks over a run's tree (its children's spending,
   a board's ancestors) stop at 32 levels: children deeper spent uncounted against their ancestors' budgets. A
   ``max_depth`` outside 1..``MAX_SUBAGENT_DEPTH`` (32) is refused when the tool is defined, with a clear message.
3. (Performance of bw's lock) each artifact of a turn was put on its own: a savepoint, the board's row lock, a count,
   an insert and a release, 5 statements per artifact under the step's lock (1000 for 200 artifacts), and a child's
   entries copied to its parent the same way (plus a read of the parent per entry). A turn's artifacts and a child's
   entries now go on the board in one put: one lock, one count, one insert, whatever their number.
4. A worker dying between committing a subagent call's suspension and its ``call_suspended`` receiver left the call
   ``awaiting_result`` for ever when its child had already ended (its run cancelled while the call parked): only that
   receiver settled it. The runs sweep (``sweep_runs_task``) now settles such calls (``subagent_calls_settle_ended``).

Checked and holds:
- a child run whose start was lost (no ``call_suspended``) while its parent goes on is woken by the runs sweep
  (``runs_to_wake``: running, no step, no open call); its answer settles the call and wakes the parent;
- a child's entries copied to a nearly full parent board fill it, oldest first, and the rest are logged;
- ``_settled_by_ended_child`` and the sweep may meet on one call: both lock the parent, then the child, then the call,
  and ``subagent_run_ended`` settles only a call still ``awaiting_result``.
"""

import threading
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pydantic import BaseModel

from agents_app import subagents, tasks
from agents_app.blackboard import (
    MAX_ENTRIES_PER_RUN,
    BlackboardError,
    blackboard_capture_calls,
    blackboard_copy_to_parent,
    blackboard_put,
)
from agents_app.budgets import MAX_SUBAGENT_DEPTH
from agents_app.cancelling import run_cancel
from agents_app.ending import run_finish
from agents_app.models import AgentRun, BlackboardEntry, RunStatus, StopReason
from agents_app.services import agent_create
from agents_app.steprows import locked_run
from agents_app.subagents import Subagent, SubagentLimits
from tests.helpers import assert_audit_intact
from tests.security_review.pg_races import in_thread, wait_for_lock_waiter
from tests.subagents.conftest import MakeAgent, StartRun
from tests.testapp.tools import ask_researcher
from toolhub import ToolSuspend, registry
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import CallStatus, ToolCall, ToolCallArtifact
from toolhub.signals import call_suspended

pytestmark = pytest.mark.django_db


def _parent_with_a_child_not_started(make_agent: MakeAgent, start: StartRun, alice: User) -> tuple[AgentRun, AgentRun]:
    """A parent run waiting on its subagent call, whose child run exists but was never advanced."""
    real_delay = tasks.advance_run_task.delay

    def delay(run_id: str) -> Any:
        if AgentRun.objects.filter(id=run_id, parent_run__isnull=False).exists():
            return None  # the child's start is lost
        return real_delay(run_id)

    script = [
        {"content": "", "tool_calls": [{"name": "ask_researcher", "arguments": {"task": "find it"}}]},
        {"content": "done"},
    ]
    with registry.temporarily(ask_researcher), mock.patch.object(tasks.advance_run_task, "delay", delay):
        make_agent(name="researcher", tools=[], script=[{"content": "child answer"}])
        parent = start(make_agent(tools=["ask_researcher"], script=script), alice)
    child = AgentRun.objects.get(parent_run=parent)
    return parent, child


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_child_ending_while_its_parent_is_cancelled_does_not_deadlock(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    """Found: a child's end locked the child, then its parent (to put its answer on the parent's board), while a
    cancellation of the parent held the parent and waited for the child: PostgreSQL failed one with a deadlock.

    Expect: both finish; the child's answer settles the parent's call; the parent is cancelled after it.
    """
    parent, child = _parent_with_a_child_not_started(make_agent, start, alice)
    assert (parent.status, child.status) == (RunStatus.WAITING, RunStatus.RUNNING)
    locked = threading.Event()

    def end_child() -> None:
        with transaction.atomic():
            run = locked_run(child.id)
            assert run is not None
            locked.set()
            # The cancellation queued behind this transaction (``locked_run``'s statement: its start, as the
            # server shows it, since ``track_activity_query_size`` cuts the rest).
            wait_for_lock_waiter('FROM "sagas_saga" s', 15)
            run.output = "child answer"
            run_finish(run, status=RunStatus.COMPLETED, stop_reason=StopReason.ANSWERED, now=timezone.now())

    # The settled call's wake-up of the parent is not sent: the parent would go on and end before it is cancelled.
    with mock.patch.object(tasks.advance_run_task, "delay"):
        ending, ended = in_thread(end_child, "end-child")
        assert locked.wait(15)
        cancelling, cancelled = in_thread(lambda: run_cancel(run_id=parent.id, actor="operator:bob", reason="stop"))
        for thread in (ending, cancelling):
            thread.join(60)

    assert ended == [None], ended
    assert cancelled == [True], cancelled
    call = ToolCall.objects.get(run_id=parent.id)
    assert (call.status, call.result) == (CallStatus.SUCCEEDED, "child answer")
    parent.refresh_from_db()
    child.refresh_from_db()
    assert (parent.status, child.status) == (RunStatus.CANCELLED, RunStatus.COMPLETED)
    assert assert_audit_intact() > 0


class _Task(BaseModel):
    task: str


@pytest.mark.parametrize("depth", [MAX_SUBAGENT_DEPTH + 1, 1000, 0, -1])
def test_a_subagent_nesting_deeper_than_the_tree_walks_is_refused_when_defined(depth: int) -> None:
    """Found: ``SubagentLimits(max_depth=1000)`` was accepted, while the walks over a run's tree stop at 32 levels
    (a deeper child's spending goes uncounted against its ancestors' budgets).

    Expect: refused at definition time, naming the value and the range; the bound itself is accepted.
    """
    with pytest.raises(ToolDefinitionError, match=rf"max_depth={depth}\).*1 to {MAX_SUBAGENT_DEPTH} levels"):
        Subagent.of("deep", "Ask deep.", _Task, name="ask_deep_ca", limits=SubagentLimits(max_depth=depth))

    assert SubagentLimits(max_depth=MAX_SUBAGENT_DEPTH).max_depth == MAX_SUBAGENT_DEPTH


def _start_then_cancel(real_start: Any) -> Any:
    """``_start_child`` whose run is cancelled after it created the child, before the call is parked."""

    def start_then_cancel(agent: str, tool_name: str, text: str, ctx: Any, limits: Any) -> Any:
        try:
            return real_start(agent, tool_name, text, ctx, limits)
        except ToolSuspend:
            assert run_cancel(run_id=ctx.run_id, actor="operator:bob", reason="changed my mind")
            raise

    return start_then_cancel


def _call_whose_child_ended_unheard(make_agent: MakeAgent, start: StartRun, alice: User) -> ToolCall:
    """A parent's subagent call awaiting its result, its child cancelled with the parent, the receiver unheard."""
    script = [
        {"content": "", "tool_calls": [{"name": "ask_researcher", "arguments": {"task": "find it"}}]},
        {"content": "never asked"},
    ]
    with (
        registry.temporarily(ask_researcher),
        mock.patch.object(subagents, "_start_child", _start_then_cancel(subagents._start_child)),
        mock.patch.object(call_suspended, "send"),  # the worker died right after the suspension's commit
    ):
        make_agent(name="researcher", tools=[], script=[{"content": "child answer"}])
        parent = start(make_agent(tools=["ask_researcher"], script=script), alice)
    return ToolCall.objects.get(run_id=parent.id)


def test_the_sweep_settles_a_subagent_call_whose_child_ended_while_its_suspension_went_unheard(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    """Found: the worker dying between committing a subagent call's suspension and its ``call_suspended`` receiver
    (sent after the commit) left the call ``awaiting_result`` for ever when its child had already ended (its run
    cancelled meanwhile): only that receiver settled it (``_settled_by_ended_child``), and the call never expires.

    Expect: the periodic runs sweep settles it from the child's end (failed, naming the cancellation), once.
    """
    call = _call_whose_child_ended_unheard(make_agent, start, alice)
    assert call.status == CallStatus.AWAITING_RESULT

    tasks.sweep_runs_task()

    call.refresh_from_db()
    assert call.status == CallStatus.FAILED, call.status
    assert "did not finish: Cancelled by operator:bob" in call.error
    assert subagents.subagent_calls_settle_ended() == 0
    assert assert_audit_intact() > 0


def test_the_sweep_starts_a_child_whose_start_went_unheard_and_its_answer_wakes_the_parent(
    make_agent: MakeAgent, start: StartRun, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Checked (holds): a child run whose start was lost (no ``call_suspended``) is woken by the runs sweep.

    Expect: the child runs, its answer settles the parent's call, and the parent finishes.
    """
    parent, child = _parent_with_a_child_not_started(make_agent, start, alice)
    assert child.turn == 0

    with django_capture_on_commit_callbacks(execute=True):
        tasks.sweep_runs_task(idle_seconds=-60)

    parent.refresh_from_db()
    child.refresh_from_db()
    assert (child.status, parent.status) == (RunStatus.COMPLETED, RunStatus.COMPLETED)
    call = ToolCall.objects.get(run_id=parent.id)
    assert (call.status, call.result) == (CallStatus.SUCCEEDED, "child answer")


def _queries_capturing(alice: User, artifacts: int) -> tuple[int, int]:
    """The statements ``blackboard_capture_calls`` runs for a turn of ``artifacts`` calls each with an artifact."""
    agent = agent_create(name=f"ca-{artifacts}", tenant="acme", provider="scripted", script=[], tools=[])
    run = AgentRun.objects.create(agent=agent, user=alice, tenant="acme")
    calls = []
    for n in range(artifacts):
        call = ToolCall.objects.create(tool_name="ca_tool", status=CallStatus.SUCCEEDED, tenant="acme", run_id=run.id)
        ToolCallArtifact.objects.create(
            call=call, name=f"a{n}.txt", media_type="text/plain", size=1, sha256="0" * 64, content=b"x"
        )
        calls.append(call)
    with CaptureQueriesContext(connection) as queries:
        blackboard_capture_calls(run, calls)
    return len(queries), BlackboardEntry.objects.filter(run=run).count()


def test_capturing_a_turns_artifacts_costs_the_same_statements_however_many_there_are(alice: User) -> None:
    """Found: each artifact of a turn was put on its own (a savepoint, the board's row lock, a count, an insert, a
    release): 5 statements per artifact under the step's lock (review bw's lock added 3), 1000 for 200 artifacts;
    a child's end copied its entries to its parent the same way, after reading the parent's row for each.

    Expect: the same statements for 3 artifacts as for 40, all of them on the board.
    """
    few, few_put = _queries_capturing(alice, 3)
    many, many_put = _queries_capturing(alice, 40)

    assert (few_put, many_put) == (3, 40)
    assert many == few, (few, many)


def test_a_childs_entries_copied_to_a_nearly_full_board_fill_it_and_the_rest_are_logged(
    alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    """Checked (holds, now in one put): a child's entries copied to its parent stop at the parent's cap.

    Expect: the parent's board reaches its cap, oldest entries first; what was not put is logged.
    """
    agent = agent_create(name="ca-copy", tenant="acme", provider="scripted", script=[], tools=[])
    parent = AgentRun.objects.create(agent=agent, user=alice, tenant="acme")
    child = AgentRun.objects.create(agent=agent, user=alice, tenant="acme", parent_run=parent, depth=1)
    BlackboardEntry.objects.bulk_create(
        BlackboardEntry(run=parent, tenant="acme", name=f"p{n}", kind="Note", value=n, size=1)
        for n in range(MAX_ENTRIES_PER_RUN - 2)
    )
    for n in range(5):
        blackboard_put(child, f"c{n}", n, kind="Note")

    assert blackboard_copy_to_parent(child) == 2

    names = list(BlackboardEntry.objects.filter(run=parent, name__startswith="c").values_list("name", flat=True))
    assert sorted(names) == ["c0", "c1"]
    assert BlackboardEntry.objects.filter(run=parent).count() == MAX_ENTRIES_PER_RUN
    assert "blackboard is full" in caplog.text
    with pytest.raises(BlackboardError, match="full"):
        blackboard_put(parent, "more", 1, kind="Note")


def test_a_child_that_cannot_be_settled_now_stops_neither_the_others_nor_the_wakeups(
    make_agent: MakeAgent, start: StartRun, alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    """Found (review cn, fixed by the lead): an error settling one ended child's call (a lock timeout, a deadlock)
    left ``sweep_runs_task`` before it woke any run, on every sweep while it lasted.

    Expect: the error is logged naming the child, the sweep goes on to wake runs, and the next sweep settles it.
    """
    call = _call_whose_child_ended_unheard(make_agent, start, alice)
    woken: list[bool] = []

    def wake(**kwargs: Any) -> list[Any]:
        woken.append(True)
        return []

    with (
        mock.patch.object(subagents, "_settled_by_ended_child", side_effect=RuntimeError("lock timeout")),
        mock.patch.object(tasks, "runs_to_wake", wake),
    ):
        tasks.sweep_runs_task()

    call.refresh_from_db()
    assert call.status == CallStatus.AWAITING_RESULT
    assert woken == [True]
    assert "was not settled; the next sweep tries again" in caplog.text

    tasks.sweep_runs_task()
    call.refresh_from_db()
    assert call.status == CallStatus.FAILED, call.status
