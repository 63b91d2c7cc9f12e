"""Review 2026-12-06 (bw): the bounds of an agent run (review bk's ``MAX_TOOL_CALLS_LIMIT``, conversation size,
``dropped_calls``), and the subagent and blackboard paths that grow or hang a run.

Each test fails on the reviewed code (main at 864332f) and states what was found and what is expected.

Findings:

1. ``TOOLHUB["DEFAULT_MAX_TOOL_CALLS"]`` above ``MAX_TOOL_CALLS_LIMIT`` (1000) passed startup silently: every agent
   created without a budget got a default its own field refuses (the admin's form) and the loop never grants.
   ``manage.py check`` now reports it (``agents_app.E001``, with a hint).
2. A run cancelled between its subagent's child run being created and the subagent call being parked (the worker
   still in the tool) left that call ``awaiting_result`` for ever: the child's end found the call ``running`` and
   settled nothing, the cancellation withdraws only calls not started, and a subagent call never expires. The
   suspension's receiver now settles the call from its child's end when the child has already ended.
3. The blackboard's 200-entry cap was counted, then inserted, with nothing held between: two puts at once (children
   ending together each copy up to 200 entries to their parent's board) both found room; on PostgreSQL a board
   reached 201 from 199. Puts to one board now take turns on its run's row (FOR NO KEY UPDATE, so the entries'
   foreign keys and readers do not wait), and a child's end copies to its parent's board last, after its audited
   writes, so it holds that turn while locking nothing more.

Checked and holds:
- a ``conversation_size`` failure on a turn's results keeps the calls and their results on their rows: the run's
  transcript (admin) shows each executed call, its status and its result beside the turn that asked for it, though
  the results were not appended to the messages;
- a turn's calls are bounded (the agent's limit, at most 1000, and a parent's budget) before anything is requested;
  a child's budget is carved from its parent's under the parent's lock; nesting depth is bounded
  (``SubagentLimits.max_depth``); lost model steps are bounded (``RUN_MAX_LOST_STEPS``); tokens are bounded by a
  parent's budget; each result and turn by ``MAX_EXTERNAL_RESULT_BYTES``; the whole conversation by
  ``RUN_MAX_CONVERSATION_BYTES`` measured as the row stores it (JSON framing included);
- a run failed for good clears ``deferred_calls`` and names them in ``run.failed``; a retryable one keeps them.
"""

from typing import Any
from unittest import mock

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core import checks

from agents_app import subagents
from agents_app.blackboard import MAX_ENTRIES_PER_RUN, BlackboardError, blackboard_put
from agents_app.cancelling import run_cancel
from agents_app.models import MAX_TOOL_CALLS_LIMIT, AgentRun, BlackboardEntry, RunStatus
from agents_app.models_adapters import ModelToolCall, ModelTurn
from agents_app.services import agent_create
from agents_app.transcript import run_transcript
from tests.helpers import assert_audit_intact
from tests.security_review.pg_races import dsn, in_thread, wait_for_lock_waiter
from tests.security_review.test_review_2026_12_06_bk import _run, review_bk_echo
from tests.subagents.conftest import MakeAgent, StartRun
from tests.testapp.tools import ask_researcher
from toolhub import ToolSuspend, registry
from toolhub.models import CallStatus, ToolCall

pytestmark = pytest.mark.django_db


def test_a_default_tool_call_budget_above_the_limit_is_reported_at_startup(settings: Any) -> None:
    """Found: ``DEFAULT_MAX_TOOL_CALLS`` of 5000 passed ``manage.py check``: agents created without a budget got one
    their field refuses and the loop never grants.

    Expect: an error with an id and a hint naming the setting and the limit; none at the limit.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_MAX_TOOL_CALLS": 5000}
    [error] = [message for message in checks.run_checks() if message.id == "agents_app.E001"]
    assert error.level == checks.ERROR
    assert "DEFAULT_MAX_TOOL_CALLS" in error.msg and "5000" in error.msg
    assert f"at most {MAX_TOOL_CALLS_LIMIT}" in error.hint

    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_MAX_TOOL_CALLS": MAX_TOOL_CALLS_LIMIT}
    assert not [message for message in checks.run_checks() if message.id == "agents_app.E001"]


def test_a_run_cancelled_while_its_subagent_call_parks_does_not_leave_the_call_waiting(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    """Found: cancelling the run after the worker created the child run but before it parked the subagent call
    cancelled the child (whose end found the call still ``running``) and withdrew nothing; the call then parked
    ``awaiting_result`` for ever (a subagent call never expires).

    Expect: the call is settled (failed, naming the cancellation) once it is parked; the child never starts.
    """
    real_start = subagents._start_child

    def start_then_cancel(agent: str, tool_name: str, text: str, ctx: Any, limits: Any) -> Any:
        try:
            return real_start(agent, tool_name, text, ctx, limits)
        except ToolSuspend:
            assert run_cancel(run_id=ctx.run_id, actor="operator:bob", reason="changed my mind")
            raise

    script = [
        {"content": "", "tool_calls": [{"name": "ask_researcher", "arguments": {"task": "find it"}}]},
        {"content": "never asked"},
    ]
    with registry.temporarily(ask_researcher), mock.patch.object(subagents, "_start_child", start_then_cancel):
        make_agent(name="researcher", tools=["record_effect"], script=[{"content": "child answer"}])
        parent = start(make_agent(tools=["ask_researcher"], script=script), alice)

    child = AgentRun.objects.get(parent_run=parent)
    assert (parent.status, child.status) == (RunStatus.CANCELLED, RunStatus.CANCELLED)
    assert child.turn == 0
    call = ToolCall.objects.get(run_id=parent.id)
    assert call.status == CallStatus.FAILED, call.status
    assert "did not finish: Cancelled by operator:bob" in call.error
    assert assert_audit_intact() > 0


def test_a_conversation_size_failure_keeps_the_executed_calls_in_the_transcript(
    alice: User, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    """Checked (holds): results too large for the conversation are not appended to the messages.

    Expect: the transcript still shows the executed call with its status and result, under the turn that asked.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "RUN_MAX_CONVERSATION_BYTES": 6000}
    turns = [
        ModelTurn(tool_calls=(ModelToolCall("c1", "review_bk_echo", '{"text": "abcd", "times": 2000}'),)),
        ModelTurn(content="never asked"),
    ]
    with registry.temporarily(review_bk_echo):
        run = _run(alice, turns, ["review_bk_echo"], django_capture_on_commit_callbacks)

    assert (run.status, run.stop_reason) == (RunStatus.FAILED, "conversation_size")
    transcript = run_transcript(run)
    [asked] = [entry for entry in transcript.entries if entry.role == "assistant"]
    [shown] = asked.calls
    assert shown.call.status == CallStatus.SUCCEEDED
    assert shown.result.startswith('{"echo": "abcdabcd')
    assert transcript.other_calls == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_puts_at_once_never_pass_the_blackboards_cap(alice: User) -> None:
    """Found: ``blackboard_put`` counted the board, then inserted: two writers at once (children ending together,
    each copying up to 200 entries to the parent's board; a turn's tools) each saw room for one more and both put.

    Expect: with one place left, two puts at once leave the board at its cap; the other put is refused.
    """
    agent = agent_create(name="bw", tenant="acme", provider="scripted", script=[], tools=[])
    run = AgentRun.objects.create(agent=agent, user=alice, tenant="acme")
    BlackboardEntry.objects.bulk_create(
        BlackboardEntry(run=run, tenant="acme", name=f"e{n}", kind="Note", value=n, size=1)
        for n in range(MAX_ENTRIES_PER_RUN - 1)
    )
    # Another session holds the run (the loop's step, a cancellation): both puts come to wait on it.
    locker = psycopg.connect(**dsn())
    locker.execute("SELECT id FROM agents_app_agentrun WHERE id = %s FOR UPDATE", [run.id])
    try:
        threads = [in_thread(lambda n=n: blackboard_put(run.id, f"last{n}", n, kind="Note")) for n in range(2)]
        wait_for_lock_waiter("agents_app_", 15, count=2)
    finally:
        locker.rollback()
        locker.close()
    for thread, _ in threads:
        thread.join(30)
    results = [result[0] for _, result in threads]

    assert BlackboardEntry.objects.filter(run=run).count() == MAX_ENTRIES_PER_RUN
    assert sorted(type(r).__name__ for r in results) == ["BlackboardEntry", "BlackboardError"]
    assert any(isinstance(r, BlackboardError) and "full" in str(r) for r in results)
