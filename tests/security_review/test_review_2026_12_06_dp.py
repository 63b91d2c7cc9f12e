"""Review 2026-12-06 dp: four eyes and delegation, a review of what landed today (reviews cv, db, de, di, ct).

Each finding's test failed on the reviewed code (main at dc76274) and passes now.

Findings:

1. A child run recorded its ancestors' agents' names (``AgentRun.delegated_by``) from a read that did not wait for
   an agent's rename in flight: the rename's save renames the agent in the chains of the runs below its runs it
   finds (``agents_app.delegation``), a child started meanwhile was not among them (not committed yet) and took the
   old name (the rename not committed yet either). Once both committed, a deny to the parent's agent under its new
   name did not hold in the child (and one to another agent taking the old name did). A child's start now takes a
   share lock on its ancestors' agents before its parent's row (``agents_app.subagents._ancestors_agents_held``):
   a rename in flight is waited for and its name read, a rename that comes after waits for the child and finds it
   (``test_a_child_started_while_its_parents_agent_is_renamed_records_the_new_name``).
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
from tests.security_review.pg_races import dsn, in_thread
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
