"""Review 2026-12-06 dp: four eyes and delegation, a review of what landed today (reviews cv, db, de, di, ct).

Each finding's test failed on the reviewed code (main at dc76274) and passes now.

Findings:

1. A child run recorded its ancestors' agents' names (``AgentRun.delegated_by``) from a read that did not wait for
   an agent's rename in flight: the rename's save renames the agent in the chains of the runs below its runs it
   finds (``agents_app.delegation``), a child started meanwhile was not among them (not committed yet) and took the
   old name (the rename not committed yet either). Once both committed, a deny to the parent's agent under its new
   name did not hold in the child (and one to another agent taking the old name did). A child's start now takes a
   share lock on its ancestors' agents before its parent's row (``agents_app.delegation.delegators_held``):
   a rename in flight is waited for and its name read, a rename that comes after waits for the child and finds it
   (``test_a_child_started_while_its_parents_agent_is_renamed_records_the_new_name``; the other order,
   ``test_a_rename_arriving_while_a_child_starts_waits_for_it_and_renames_it``, checks the fix). The lock is taken by
   name (the chain holds names), so a rename of a grandparent's agent in flight is waited for as well.

Checked and holding (read in the code, and by the suites named):
- self-approval through delegation: a child run is created for its parent's user (``_start_child``), so its calls'
  requester is the user who started the root run, refused as a decider (``approval_may_decide``) and left out of
  ``approvers_of``; nobody can start a run for someone else (``run_start`` takes the request's user); an operator's
  rollback of a parent run passes ``by`` to its children's sagas, so they are askers of those compensations too;
- the same approver twice: every decider (desk, bulk action, REST; there is no e-mail link that decides) goes through
  ``_decide``, which locks the request and reads its decisions after the lock: a second approval of a version by the
  same person is a confirmation that counts nothing new (cv's PostgreSQL races; ``tests/approvals/test_four_eyes.py``);
- an approver who lost the approver group between two approvals: ``ApproverStanding`` drops their approval from the
  count at the next decision (``_approvers_counted``, ``_approval``'s confirmation check); the edit's rule (the
  editor's approval counts once in the new round, every other required approval is given again, an edit judged by
  the rules now) holds as the README states it (``test_four_eyes.py``, reviews af, s);
- ``required_approvals_now`` and ``governing_groups`` read rules that match on tool, group, risk, arguments and
  tenant only, so the principal it rebuilds (user and tenant) loses nothing a rule reads;
- ``delegated_by`` is not writable: ``editable=False``, the run admin is read-only, no serializer takes it,
  ``run_start`` refuses reserved context keys; depth is bounded (``SubagentLimits.max_depth`` up to 32) and a run
  cannot be its own ancestor (``parent_run`` is set once, at creation, to a run that exists; PROTECT);
- a compensation of a subagent's step names no agent (``compensation_request``), so neither its run's agent's nor its
  ancestors' denies bind it, as the README's design says (the user's grants and the approval policy do);
- a parent cancelled while its child's call is held: the child is cancelled with it and its held call and request
  withdrawn in the same transaction (``run_cancel_locked``; ``tests/subagents``).
"""

import threading
import time
import uuid
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import transaction

from agents_app.loop import run_principal
from agents_app.models import AgentRun, RunStatus
from agents_app.services import agent_create, agent_update
from tests.security_review.pg_races import dsn, in_thread, wait_for_lock_waiter
from tests.testapp.tools import ask_researcher
from toolhub import registry
from toolhub.authorization import authorization_denial
from toolhub.exceptions import ToolSuspend
from toolhub.models import Grant, GrantEffect
from toolhub.tools.context import ToolContext


def _done_or_waiting_on_a_lock(thread: threading.Thread, timeout: float = 10) -> None:
    """Until ``thread`` ended or a session of this database waits on a lock (the code as found never waits)."""
    with psycopg.connect(**dsn(), autocommit=True) as watcher:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and thread.is_alive():
            waiting = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            if waiting and waiting[0]:
                return
            time.sleep(0.02)


@pytest.mark.postgres  # row locks: SQLite has none
@pytest.mark.django_db(transaction=True)
def test_a_child_started_while_its_parents_agent_is_renamed_records_the_new_name(alice: User) -> None:
    """Found: a subagent started while its parent's agent was being renamed recorded the old name in
    ``delegated_by`` (neither saw the other's uncommitted rows), so a deny to the agent's new name did not hold in it.

    Expect: the child waits for the rename and records the new name; a deny to it refuses the child's tool.
    """
    planner = agent_create(name="planner", tenant="acme", provider="scripted", script=[], tools=["ask_researcher"])
    agent_create(name="researcher", tenant="acme", provider="scripted", script=[], tools=["record_effect"])
    parent = AgentRun.objects.create(agent=planner, user=alice, tenant="acme", status=RunStatus.RUNNING)
    renamed, release = threading.Event(), threading.Event()

    def rename() -> None:
        with transaction.atomic():
            agent_update(agent=planner, changes={"name": "planner-v2"}, changed_by=None)
            renamed.set()
            release.wait(10)

    def start_child() -> Any:
        context = ToolContext(run_id=str(parent.id), tenant="acme", call_id=str(uuid.uuid4()))
        return ask_researcher.invoke({"task": "find it"}, context)

    with registry.temporarily(ask_researcher):
        renaming, renamed_result = in_thread(rename, "rename")
        assert renamed.wait(10)
        starting, started = in_thread(start_child, "start child")
        _done_or_waiting_on_a_lock(starting)
        release.set()
        renaming.join(10)
        starting.join(10)
    assert renamed_result == [None] and len(started) == 1 and isinstance(started[0], ToolSuspend), started

    child = AgentRun.objects.get(parent_run=parent)
    assert child.delegated_by == ["planner-v2"]
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", agent_name="planner-v2")
    assert "'planner-v2'" in (authorization_denial("record_effect", run_principal(child)) or "")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_rename_arriving_while_a_child_starts_waits_for_it_and_renames_it(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found (finding 1, the fix's other order): a rename asked while a child starts must find the child once it is
    committed. With the share lock, the rename waits for the child's commit, then renames it; the lock order (agents,
    then runs, in both) leaves no deadlock.

    Expect: the rename queues on the agent's row, both end, the child's chain names the agent's new name.
    """
    from agents_app import subagents

    planner = agent_create(name="planner", tenant="acme", provider="scripted", script=[], tools=["ask_researcher"])
    agent_create(name="researcher", tenant="acme", provider="scripted", script=[], tools=["record_effect"])
    parent = AgentRun.objects.create(agent=planner, user=alice, tenant="acme", status=RunStatus.RUNNING)
    holding, release = threading.Event(), threading.Event()
    budget_left = subagents._budget_left

    def held_budget(*args: Any, **kwargs: Any) -> Any:
        holding.set()
        release.wait(10)
        return budget_left(*args, **kwargs)

    monkeypatch.setattr(subagents, "_budget_left", held_budget)

    def start_child() -> Any:
        context = ToolContext(run_id=str(parent.id), tenant="acme", call_id=str(uuid.uuid4()))
        return ask_researcher.invoke({"task": "find it"}, context)

    with registry.temporarily(ask_researcher):
        starting, started = in_thread(start_child, "start child")
        assert holding.wait(10)
        renaming, renamed = in_thread(
            lambda: agent_update(agent=planner, changes={"name": "planner-v2"}, changed_by=None), "rename"
        )
        wait_for_lock_waiter('SELECT "agents_app_agent"."id"')  # agent_update's locking read of the agent
        release.set()
        starting.join(10)
        renaming.join(10)
    assert isinstance(started[0], ToolSuspend) and not isinstance(renamed[0], BaseException), (started, renamed)
    assert AgentRun.objects.get(parent_run=parent).delegated_by == ["planner-v2"]
