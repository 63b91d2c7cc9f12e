"""Review 2026-12-06 (cn): review ca's run-tree changes checked on PostgreSQL (``locked_run`` locking a child's parent
first, ``subagent_calls_settle_ended`` in the runs sweep, the blackboard's one put for many entries).

Findings:
- ``subagent_calls_settle_ended`` (the runs sweep's first statement, every 60 s) read every run ever ended: its IN
  over the calls awaiting a result became a hash join with a Seq Scan on agents_app_agentrun. It now reads the
  awaiting calls on their status index, each asking for its ended child on the unique ``parent_call_id`` (one
  index probe a call).

Checked and holds:
- ``locked_run`` of a child takes its parent's lock before its own: with the parent held elsewhere, the child's
  statement waits on the parent while the child's row is still free (forced interleaving); the plan evaluates the
  locking sub-select once, as the run's row is filtered, below the run's own LockRows;
- a root run (no parent) pays nothing extra: the sub-select is never executed (EXPLAIN ANALYZE);
- sibling children stepping at once take turns on their parent (FOR NO KEY UPDATE conflicts with itself), each for
  its step's locked transaction only: a sibling's locked read waits while the other's transaction is open and goes
  on once it ends; the model's answer (real providers) is asked outside those transactions (``run_advance``);
- two children ending at once copy to a parent board one at a time: the 200-entry cap stays exact (forced
  interleaving).
"""

import threading
import uuid
from typing import Any
from unittest import mock

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction

from agents_app import subagents
from agents_app.blackboard import MAX_ENTRIES_PER_RUN, blackboard_copy_to_parent, blackboard_put
from agents_app.models import AgentRun, BlackboardEntry, RunStatus
from agents_app.services import agent_create
from agents_app.steprows import _locked_run_sql, locked_run
from tests.security_review.pg_races import dsn, in_thread, wait_for_lock_waiter
from tests.security_review.query_plans import analyze, clone, explained, seq_scans, uuid_of
from toolhub.models import CallStatus, ToolCall

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _tree(alice: User, children: int = 1) -> tuple[AgentRun, list[AgentRun]]:
    agent = agent_create(name=f"cn-{uuid.uuid4().hex[:8]}", tenant="acme", provider="scripted", script=[], tools=[])
    parent = AgentRun.objects.create(agent=agent, user=alice, tenant="acme", status=RunStatus.WAITING)
    kids = [
        AgentRun.objects.create(agent=agent, user=alice, tenant="acme", parent_run=parent, depth=1)
        for _ in range(children)
    ]
    return parent, kids


def _row_free(run_id: uuid.UUID) -> bool:
    """Whether another session could lock the run's row right now (FOR UPDATE NOWAIT)."""
    with psycopg.connect(**dsn(), autocommit=True) as probe:
        try:
            probe.execute("SELECT 1 FROM agents_app_agentrun WHERE id = %s FOR UPDATE NOWAIT", [run_id])
        except psycopg.errors.LockNotAvailable:
            return False
    return True


def _locked_plan(run_id: uuid.UUID) -> str:
    """``locked_run``'s plan with sequential scans priced out: a table of a few rows is read whole when its statistics
    say it is tiny (what earlier tests left decides), so whether an index serves each read is what is asked."""
    key = AgentRun._meta.pk.get_db_prep_value(run_id, connection)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN ANALYZE " + _locked_run_sql(), [str(run_id), key])
        return "\n".join(row[0] for row in cursor.fetchall())


def test_a_childs_locked_read_takes_its_parent_before_its_own_row(alice: User) -> None:
    """Checked (holds): with the parent held by another session, the child's ``locked_run`` waits on the parent and
    has not locked the child yet; once the parent is free it returns the child, locked.
    """
    parent, [child] = _tree(alice)
    holder = psycopg.connect(**dsn())
    holder.execute("SELECT 1 FROM agents_app_agentrun WHERE id = %s FOR UPDATE", [parent.id])
    release = threading.Event()

    def step() -> Any:
        with transaction.atomic():
            run = locked_run(child.id)
            release.wait(15)
            return run and run.id

    try:
        thread, result = in_thread(step, "child-step")
        wait_for_lock_waiter('FROM "sagas_saga" s', 15)
        assert _row_free(child.id), "the child's row was locked before its parent's"
    finally:
        holder.rollback()
        holder.close()
    for _ in range(300):
        if not _row_free(child.id):
            break
        threading.Event().wait(0.02)
    assert not _row_free(child.id), "the child's row is not locked once its parent's lock was had"
    release.set()
    thread.join(30)
    assert result == [child.id], result


def test_a_root_run_pays_nothing_for_the_parent_lock_and_a_child_one_sub_select(alice: User) -> None:
    """Checked (holds): the parent's locking sub-select is never executed for a root run, once for a child, below the
    run's own LockRows (the parent is locked as the run's row is filtered, before the run's lock)."""
    parent, [child] = _tree(alice)

    root_plan, child_plan = _locked_plan(parent.id), _locked_plan(child.id)

    assert "SubPlan" in root_plan and "(never executed)" in root_plan, root_plan
    subplan = child_plan[child_plan.index("SubPlan") :]
    assert "never executed" not in subplan and "LockRows" in subplan, child_plan
    assert child_plan.lstrip().startswith("LockRows"), child_plan
    assert not seq_scans(root_plan) and not seq_scans(child_plan), (root_plan, child_plan)


def test_sibling_children_take_turns_on_their_parent_for_their_locked_transactions_only(alice: User) -> None:
    """Checked (holds): a sibling's locked read waits while the other's locked transaction is open (FOR NO KEY UPDATE
    on the parent conflicts with itself) and goes on as soon as it ends; outside one, siblings do not wait."""
    parent, [first, second] = _tree(alice, 2)
    held, release = threading.Event(), threading.Event()

    def first_step() -> Any:
        with transaction.atomic():
            run = locked_run(first.id)
            held.set()
            release.wait(15)
            return run and run.id

    first_thread, first_result = in_thread(first_step, "first")
    assert held.wait(15)
    second_thread, second_result = in_thread(lambda: _locked_id(second.id), "second")
    wait_for_lock_waiter('FROM "sagas_saga" s', 15)
    assert second_result == [] and _row_free(second.id)
    release.set()
    for thread in (first_thread, second_thread):
        thread.join(30)
    assert (first_result, second_result) == ([first.id], [second.id])
    # Outside a locked transaction, nothing of the parent is held: each sibling's step goes straight on.
    assert _row_free(parent.id) and _locked_id(first.id) == first.id


def _locked_id(run_id: uuid.UUID) -> uuid.UUID | None:
    with transaction.atomic():
        run = locked_run(run_id)
        return run and run.id


ENDED = 10_000


def test_settling_ended_childrens_calls_reads_no_big_table_whole(alice: User) -> None:
    """Found: the runs sweep's first statement (``subagent_calls_settle_ended``, every 60 s) read every run ever ended
    (Seq Scan on agents_app_agentrun, 10 000 rows, hashed against the 500 calls awaiting an outside result): an IN
    over the awaiting calls became a hash join.

    Expect: it reads the calls awaiting a result on their status index, each asking for its ended child on the
    child's unique ``parent_call_id``; no big table read whole. An ended child of an awaiting call is still found.
    """
    parent, [child] = _tree(alice)
    call = ToolCall.objects.create(tool_name="ask", status=CallStatus.SUCCEEDED, tenant="acme", run_id=parent.id)
    clone(ToolCall, call, ENDED, id=uuid_of("cn-call"))
    clone(ToolCall, call, 500, id=uuid_of("cn-wait"), status="'awaiting_result'", tool_name="'webhook'", run_id="NULL")
    AgentRun.objects.filter(id=child.id).update(status=RunStatus.COMPLETED, parent_call_id=call.id)
    clone(AgentRun, child, ENDED, id=uuid_of("cn-run"), parent_call_id=uuid_of("cn-call"))
    analyze()

    assert subagents.subagent_calls_settle_ended() == 0
    plans = explained(subagents.subagent_calls_settle_ended)

    assert len(plans) == 1, plans
    [(sql, plan)] = plans
    assert not seq_scans(plan), plan
    assert "agents_app_agentrun_parent_call_id_key" in plan, plan
    # Still found: an ended child whose call awaits (its suspension's receiver lost).
    ToolCall.objects.filter(id=call.id).update(status=CallStatus.AWAITING_RESULT)
    with mock.patch.object(subagents, "_settled_by_ended_child", return_value=True) as settle:
        assert subagents.subagent_calls_settle_ended() == 1
    settle.assert_called_once_with(str(child.id))


def test_two_children_ending_at_once_keep_the_parents_board_cap_exact(alice: User) -> None:
    """Checked (holds): two children copying 5 entries each to a parent board 7 short of full: one waits its turn on
    the parent's row, then counts what the other put; the board ends with exactly ``MAX_ENTRIES_PER_RUN``."""
    parent, [first, second] = _tree(alice, 2)
    BlackboardEntry.objects.bulk_create(
        BlackboardEntry(run=parent, tenant="acme", name=f"p{n}", kind="Note", value=n, size=1)
        for n in range(MAX_ENTRIES_PER_RUN - 7)
    )
    for child in (first, second):
        for n in range(5):
            blackboard_put(child, f"{child.id}-{n}", n, kind="Note")
    copied, release = threading.Event(), threading.Event()

    def first_end() -> int:
        with transaction.atomic():
            count = blackboard_copy_to_parent(first)
            copied.set()
            release.wait(15)
            return count

    first_thread, first_result = in_thread(first_end, "first")
    assert copied.wait(15)
    second_thread, second_result = in_thread(lambda: blackboard_copy_to_parent(second), "second")
    wait_for_lock_waiter("FOR NO KEY UPDATE", 15)
    release.set()
    for thread in (first_thread, second_thread):
        thread.join(30)

    assert (first_result, second_result) == ([5], [2])
    assert BlackboardEntry.objects.filter(run=parent).count() == MAX_ENTRIES_PER_RUN
