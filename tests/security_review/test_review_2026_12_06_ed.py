"""Review of 2026-12-06 (ed): reviews du (MCP answers), dp (delegation locks) and dt (disclosure guides).

Each finding's test fails on the reviewed code (main at afcc737) and passes after the fix.

Findings:

1. An agentic tool's inner model is offered a playbook among its tools with the playbook's run state in its
   description (``Done so far: ...``, ``InnerState.offered``), read from the outer call's earlier inner calls as
   they are: a done step whose tool was denied to the principal since stayed named there, though review dt cut
   the run model's guide (``visibility._described``) and what people read (``shown_state``). Now the inner status
   line, and the playbook's state in the agentic tool's result (which the run's model reads), are written from the
   entry with its done steps cut to what the call's principal may use now, through the same cut
   (``toolhub.disclosure.state.done_among``); the state replayed for the gate keeps them all.
2. A subagent's agent without runs yet (so not protected) deleted while a run started a child of it: the child's
   insert checks its agent at commit (Django's foreign keys are deferred), waited for the deletion and failed, and
   ``_start_child`` took the ``IntegrityError`` for a retried call's child made first and looked it up:
   ``AgentRun.DoesNotExist`` escaped the tool (an internal error for the call). ``delegators_held`` now share-locks
   the child's agent with its delegators and says whether it is still there: a deletion in flight is waited for and
   answered as a subagent that does not exist; one coming after waits for the child, whose run then protects it.
3. MCP's ``tools/call`` of a call followed while its caller was removed from its tenant (the worker then denied it):
   ``_unless_hidden`` asked for the caller's principal in the call's tenant through ``caller_principal``, which
   refuses a tenant the caller is not in; the exception escaped as the server's generic internal error. Fixed in
   parallel by review ea (``toolhub.direct.answering_principal``): the caller is told, on MCP as on REST, that they
   are no longer a member of the call's tenant, and nothing of the call; ea's
   ``test_an_mcp_call_whose_caller_left_the_tenant_meanwhile_answers_the_same_refusal`` is its test.

Checked and found holding (no test here):

- Review du, per status of a tool hidden after the request: REST's first answer (``_answer``) and MCP's
  (``_unless_hidden``, also of a followed call) both answer ``invalid``/``denied`` as an unknown tool; read back
  (``GET /api/v1/calls/{id}/``, ``toolhub_call_status``) both go through ``CallerView`` (``denied`` masked, an
  ``invalid`` refusal was one of a tool the caller could see, as authorization runs before validation). ``failed``,
  ``succeeded``, ``expired``, ``cancelled``, ``rejected`` and ``needs_attention`` read as stored on both channels:
  the worker re-checks permissions before running, so such a call ran (or was decided) while the caller might use
  the tool; its text is the sanitized error or the operator's reason, meant for the caller.
- MCP ``toolhub_cancel_call`` counts against the ``calls`` rate before its arguments are read (``_cancel_sync``):
  a cancel of an unknown id, or with bad arguments, counts as REST's (DRF throttles before the view).
- Review dp's locks: no path locks a run and then an agent (cancel, budgets, retries, the run admin's actions lock
  runs, calls and approval requests only; the agent admin's save, ``agent_update`` and a rename take the agent, then
  runs), so the share locks (now also on the child's agent) add no lock-order cycle. An agent with runs cannot be
  deleted (``PROTECT``).
- Review dt: a state machine's status line names only its state; the guides' own answers (``_guide``) list only
  granted members; people read the inner entries (``<tool>.<playbook>``) cut by ``shown_state``; MCP's
  ``toolhub_find_tools``/``toolhub_describe_tool`` have no run state and list granted tools only.
"""

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction

from agents_app.models import AgentRun, RunStatus
from agents_app.models_adapters.scripted import ScriptedAdapter
from agents_app.services import agent_create
from tests.agentic import sample_tools
from tests.agentic.conftest import answer, call, make_agent, start_run  # noqa: F401 - fixtures
from tests.mcp.conftest import live_asgi, token, with_client  # noqa: F401 - live_asgi is a fixture
from tests.security_review.pg_races import in_thread, wait_for_lock_waiter
from tests.testapp.tools import ask_researcher
from toolhub.agentic import SimpleAgenticTool
from toolhub.exceptions import ToolError, ToolSuspend
from toolhub.models import CallKind, CallStatus, Grant, GrantEffect, ToolCall
from toolhub.tools import tool
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Risk
from toolhub.tools.registry import registry

#: What ``ed_world_changes`` does when the run's model calls it (set by each test).
CHANGES: list[Callable[[], None]] = []


@tool(risk=Risk.LOW)
def ed_world_changes() -> str:
    """Change the world between two turns of the run (the test says how)."""
    for change in CHANGES:
        change()
    return "changed"


#: The research playbook driven by an inner model.
RESEARCH_DESK = SimpleAgenticTool(
    "research_desk", "Research with a playbook.", tools=[sample_tools.RESEARCH], max_iterations=3, agent="rd-brain"
)


@pytest.mark.django_db
def test_an_inner_models_playbook_names_no_done_step_revoked_since(
    make_agent: Any,  # noqa: F811 - the fixture imported above
    start_run: Any,  # noqa: F811
    alice: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: ``research_desk``'s inner model searched in the run's first call of it; ``search`` was then denied to
    alice. In the second call the inner model was offered ``researcher`` described ``Done so far: search.``: the
    status line read the replayed done steps unfiltered, naming a tool alice may no longer use or see, and so did
    the call's result (``{"state": {"researcher": {"done": ["search"]}}}``) the run's model read.
    / Expect: ``Done so far: nothing.``, as the run model's own guide reads (review dt), and ``done: []``.
    """
    offered: list[dict[str, str]] = []
    original = ScriptedAdapter.complete

    def spying(self: Any, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **options: Any) -> Any:
        offered.append({t["function"]["name"]: t["function"]["description"] for t in tools})
        return original(self, messages=messages, tools=tools, **options)

    monkeypatch.setattr(ScriptedAdapter, "complete", spying)
    CHANGES[:] = [lambda: Grant.objects.create(effect=GrantEffect.DENY, tool_name="search", user=alice)]
    agent_create(name="rd-brain", provider="scripted", tools=[], script=[call("search", topic="tides"), answer("ok")])
    script = [call("research_desk", task="a"), call("ed_world_changes"), call("research_desk", task="b"), answer()]
    with registry.temporarily(ed_world_changes, RESEARCH_DESK, *sample_tools.ALL):
        run = start_run(make_agent(script=script, tools=["research_desk", "ed_world_changes"]), alice)

    inner = list(ToolCall.objects.filter(run_id=run.id, kind=CallKind.INNER).order_by("created_at"))
    assert [(c.tool_name, c.status) for c in inner[:1]] == [("search", CallStatus.SUCCEEDED)]
    # Turns in order: the run's, the first call's two inner turns, the run's two, the second call's two, the run's.
    assert [("researcher" in each) for each in offered] == [False, True, True, False, False, True, True, False]
    first_after, second_call = offered[2], offered[5]
    assert "Done so far: search." in first_after["researcher"], first_after
    assert "search" not in second_call
    assert "Done so far: nothing." in second_call["researcher"], second_call
    # The second call's result (what the run's model reads of it) names no revoked step either.
    second = ToolCall.objects.filter(run_id=run.id, kind=CallKind.CALL, tool_name="research_desk").order_by("turn")[1]
    assert second.result["state"] == {"researcher": {"done": []}}, second.result


@pytest.mark.postgres  # row locks: SQLite has none
@pytest.mark.django_db(transaction=True)
def test_a_subagent_deleted_while_its_child_starts_is_answered_as_unavailable(alice: User) -> None:
    """Found: ``researcher`` (no runs yet, so its deletion is not protected) was being deleted while a planner's run
    started a child of it. The child's insert checks its agent at commit (a deferred foreign key), waited for the
    deletion and failed; ``_start_child`` read that ``IntegrityError`` as a retried call's child made first and
    looked that child up: ``AgentRun.DoesNotExist`` escaped the tool, an internal error for the call.
    / Expect: the start waits for the deletion and answers the model as for a subagent that does not exist (a
    ``ToolError`` saying it is not available); no child run is left.
    """
    planner = agent_create(name="planner", tenant="acme", provider="scripted", script=[], tools=["ask_researcher"])
    researcher = agent_create(name="researcher", tenant="acme", provider="scripted", script=[], tools=[])
    parent = AgentRun.objects.create(agent=planner, user=alice, tenant="acme", status=RunStatus.RUNNING)
    deleted, release = threading.Event(), threading.Event()

    def delete() -> None:
        with transaction.atomic():
            researcher.delete()
            deleted.set()
            release.wait(10)

    def start_child() -> Any:
        context = ToolContext(run_id=str(parent.id), tenant="acme", call_id=str(uuid.uuid4()))
        return ask_researcher.invoke({"task": "find it"}, context)

    with registry.temporarily(ask_researcher):
        deleting, deleted_result = in_thread(delete, "delete")
        assert deleted.wait(10)
        starting, started = in_thread(start_child, "start child")
        wait_for_lock_waiter("")  # the child's start, on the agent's row the deletion holds
        release.set()
        deleting.join(10)
        starting.join(10)
    assert deleted_result == [None], deleted_result
    assert len(started) == 1 and not isinstance(started[0], ToolSuspend), started
    assert isinstance(started[0], ToolError) and "is not available" in str(started[0]), repr(started[0])
    assert not AgentRun.objects.filter(parent_run=parent).exists()
