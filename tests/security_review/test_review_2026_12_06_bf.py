"""Review of 2026-12-06 (bf): subagents and the blackboard, as a member of tenant A whose model is hostile.

Findings:

1. A subagent call a worker had already claimed (``running``) when its parent run was cancelled still created and
   started its child: cancelling withdraws only calls that have not started, and ``_start_child`` never looked at
   the parent's status, so the child ran (model turns, tool calls, side effects) in the user's name for a run its
   user had stopped. A child is now started only for a parent still going; otherwise the call fails, saying why.
2. The blackboard tools read every value the run sees to answer with names, a count or one entry
   (``blackboard_list``, ``blackboard_count``, ``blackboard_last``, ``blackboard_get`` by index): up to 200 values of
   64 KiB per run on the path from the root, loaded at each call the model makes. They now read names and kinds
   (``blackboard_headers``), and the one value they answer with.

Checked and found holding (tests of tests/subagents hold most of these):

- Principal: the child's user, tenant and context are the parent run's (a ``tenant`` argument is ignored); the agent
  is looked up among the parent's tenant's agents and the global ones; the calling run is found by the boundary's run
  id and tenant, never arguments; an agentic tool's inner call of a subagent tool is refused.
- Budget: depth, calls and tokens are carved from the parent's remaining budget under its row lock; a child's own
  children spend from its budget; its agent's ``max_tool_calls`` still applies.
- Blackboard: every read goes through ``blackboard_entries`` (the run and its ancestors, filtered by the run's tenant);
  the model names entries only by name or by index into that list, never by run id; values are bounded
  (64 KiB, 200 entries per run, names 200 characters); the admin shows names, kinds and sizes, not values.
- Cancel and rollback walk the whole subtree; ``parent_run`` is ``PROTECT`` (no orphaned child); a child's settlement
  of the parent's call is audited in the run's tenant with actor ``agent:<name> run:<id>``; the child's answer reaches
  the parent model through the same ``model_text`` path as any result, cut to a bounded length.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from agents_app.blackboard import blackboard_put
from agents_app.models import AgentRun, BlackboardEntry, RunStatus
from agents_app.subagents import Subagent
from tests.subagents.conftest import MakeAgent, StartRun
from tests.testapp.models import SideEffect
from tests.testapp.tools import ResearchTask
from toolhub import ToolContext, registry
from toolhub.execution import tool_call_run_claimed
from toolhub.models import CallStatus, ToolCall

pytestmark = pytest.mark.django_db

#: A subagent tool held for approval, so its call exists before any child does.
ASK_HELD = Subagent.of("researcher", "Ask the researcher.", ResearchTask, name="ask_held", needs_approval=True)


def test_a_subagent_call_claimed_before_its_parent_was_cancelled_starts_no_child(
    make_agent: MakeAgent, start: StartRun, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: the child was created and run to its end (a side effect recorded) for a cancelled parent.

    Expect: the call fails telling the parent's run ended; no child run exists, nothing was done.
    """
    with registry.temporarily(ASK_HELD):
        make_agent(
            name="researcher",
            tools=["record_effect"],
            script=[
                {"content": "", "tool_calls": [{"name": "record_effect", "arguments": {"note": "child"}}]},
                {"content": "done"},
            ],
        )
        parent = start(
            make_agent(
                tools=["ask_held"],
                script=[{"content": "", "tool_calls": [{"name": "ask_held", "arguments": {"task": "x"}}]}],
            ),
            alice,
        )
        call = ToolCall.objects.get(run_id=parent.id)
        assert call.status == CallStatus.PENDING_APPROVAL
        # An operator approved it and a worker claimed it (running): a cancellation does not withdraw it now.
        ToolCall.objects.filter(pk=call.pk).update(status=CallStatus.RUNNING, attempts=1)
        client = APIClient()
        client.force_authenticate(alice)
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(f"/api/v1/runs/{parent.id}/cancel/", {"reason": "stop"}, format="json")
        assert response.status_code == 200, response.content
        call.refresh_from_db()
        assert call.status == CallStatus.RUNNING
        with django_capture_on_commit_callbacks(execute=True):
            tool_call_run_claimed(call=call, tool=ASK_HELD, arguments={"task": "x"}, worker="w1")
    call.refresh_from_db()
    assert not AgentRun.objects.filter(parent_run=parent).exists()
    assert not SideEffect.objects.exists()
    assert call.status == CallStatus.FAILED and "cancelled" in call.error
    parent.refresh_from_db()
    assert parent.status == RunStatus.CANCELLED


def _value_reads(queries: list[dict[str, Any]]) -> list[str]:
    """The SELECTs of the captured queries that read blackboard values."""
    column = f"{connection.ops.quote_name(BlackboardEntry._meta.db_table)}.{connection.ops.quote_name('value')}"
    return [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith("SELECT") and column in q["sql"]]


def test_blackboard_tools_read_no_value_they_do_not_answer_with(
    make_agent: MakeAgent, start: StartRun, alice: User
) -> None:
    """Found: blackboard_list, blackboard_count and blackboard_last (and blackboard_get by index) loaded every value
    the run sees (its own and its ancestors' boards, up to 200 entries of 64 KiB each per run) to answer with names,
    a count, or one value: tens of megabytes read per call, however often the model asks.

    Expect: a listing and a count read no value; a lookup of one entry reads that entry's value only.
    """
    run = start(make_agent(tools=[], script=[{"content": "done"}]), alice)
    for number in range(5):
        blackboard_put(run, f"page-{number}", "x" * 60_000, kind="doc.Page")
    ctx = ToolContext({"run_id": str(run.id), "tenant": run.tenant})
    answers: dict[str, Any] = {}
    reads: dict[str, list[str]] = {}
    for name, arguments in (
        ("blackboard_list", {}),
        ("blackboard_count", {"kind": "Page"}),
        ("blackboard_last", {"kind": "Page"}),
        ("blackboard_get", {"index": 1}),
    ):
        tool = registry.get(name)
        assert tool is not None
        with CaptureQueriesContext(connection) as captured:
            answers[name] = tool.invoke(arguments, ctx)
        reads[name] = _value_reads(captured.captured_queries)
    assert answers["blackboard_list"]["total"] == 5 and answers["blackboard_count"]["count"] == 5
    assert answers["blackboard_last"]["name"] == "page-4" and answers["blackboard_get"] == "x" * 60_000
    assert reads["blackboard_list"] == [] and reads["blackboard_count"] == []
    for name in ("blackboard_last", "blackboard_get"):
        assert len(reads[name]) == 1, reads[name]
