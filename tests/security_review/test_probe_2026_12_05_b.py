"""Probe of 2026-12-05 (b): subagents, agentic tools and the run's own state, attacked by the model and the run's user.

Each test fails on the code as probed; its docstring says what was found ("Found: ...") and what is expected
("Expect: ..."). All four are one invariant broken four ways: a child run's work stays inside its parent's
budget and lifetime. Tried and found holding (no test here): a child's tenant, user and context (never the
model's, a ``tenant`` argument refused); the depth limit; siblings of one turn sharing what is left; a
grandchild spending from its parent's budget; the blackboard tools reading the calling run and its ancestors
only, within its tenant; ``run_tool_stats`` telling a denied hidden tool from a missing one (it does not); the
disclosure state after calls (unfolds, search hits, ``reset_equipped_tools``) naming only
usable tools, and the agentic gate on the run's own calls; cancelling a parent cancelling its going children;
retry and cancel of another tenant's run (404) or a colleague's (403), read in ``agents_app.api._operable_run``.
"""

from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from pydantic import BaseModel
from rest_framework.test import APIClient

from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.services import agent_create, agent_update, run_start
from agents_app.subagents import Subagent, SubagentLimits
from tests.testapp.models import SideEffect
from toolhub import Param, registry
from toolhub.agentic import SimpleAgenticTool
from toolhub.models import CallKind, ToolCall

pytestmark = pytest.mark.django_db


class _Task(BaseModel):
    """What a subagent is asked to do."""

    task: Annotated[str, Param("The task.")]


def _start(agent: Agent, user: User, capture: Any, **kwargs: Any) -> AgentRun:
    with capture(execute=True):
        run = run_start(agent=agent, user=user, input=kwargs.pop("input", "go"), **kwargs)
    run.refresh_from_db()
    return run


def _effects(note: str, n: int) -> dict[str, Any]:
    return {"tool_calls": [{"name": "record_effect", "arguments": {"note": f"{note}{i}"}} for i in range(n)]}


def test_a_retried_child_run_spends_beyond_the_budget_its_siblings_share(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a child run whose model failed (``loop._fail_step``: ``retryable=True``) settles its parent's call
    as failed (``subagents.subagent_run_ended``) and stays ``failed``/retryable. Its parent then carves the next
    child's budget out of what the failed child *used* (``budgets.spending_below``: an ended child counts its
    use). But ``services.run_retry`` (``POST /api/v1/runs/<child>/retry/``, open to the run's own user) resumes
    the child with the budget it was first given, after its parent's call was settled, even after the parent
    completed: with ``SubagentLimits(max_calls=4)`` the two children of one parent ran 6 tool calls (alice
    retried both), and the retried child's answer settles nothing (the parent never sees what they did).
    Expect: a child run's end is final for its parent's budget: once its parent's call is settled, retrying it
    is refused (409), so the children of one run never spend more than ``max_calls`` together.
    """
    tool = Subagent.of("pb-pair", "Ask the pair.", _Task, name="ask_pb_pair", limits=SubagentLimits(max_calls=4))
    with registry.temporarily(tool):
        # The child's model answers one turn, then its endpoint fails (a retryable model error).
        child_agent = agent_create(
            name="pb-pair", provider="scripted", tools=["record_effect"], script=[_effects("a", 1)]
        )
        parent_agent = agent_create(
            name="pb-parent",
            provider="scripted",
            tools=["ask_pb_pair"],
            script=[
                {"tool_calls": [{"name": "ask_pb_pair", "arguments": {"task": "one"}}]},
                {"tool_calls": [{"name": "ask_pb_pair", "arguments": {"task": "two"}}]},
                {"content": "parent done"},
            ],
        )
        parent = _start(parent_agent, alice, django_capture_on_commit_callbacks)
        assert parent.status == RunStatus.COMPLETED, parent.error
        first, second = AgentRun.objects.filter(parent_run=parent).order_by("created_at")
        assert (first.limits["max_tool_calls"], second.limits["max_tool_calls"]) == (4, 3)
        assert first.status == second.status == RunStatus.FAILED
        assert not first.retryable and not second.retryable  # a child's end settled its parent's call: final
        assert SideEffect.objects.count() == 2

        # The endpoint is back: the child's model would now ask for two more calls, then answer.
        agent_update(
            agent=child_agent,
            changes={"script": [_effects("a", 1), _effects("b", 2), {"content": "child done"}]},
            changed_by=None,
        )
        client = APIClient()
        client.force_authenticate(alice)
        for child in (first, second):
            with django_capture_on_commit_callbacks(execute=True):
                retried = client.post(f"/api/v1/runs/{child.id}/retry/", {}, format="json")
            assert retried.status_code == 409, retried.content
        # a row that ended retryable before the fix is refused all the same
        AgentRun.objects.filter(pk=first.pk).update(retryable=True)
        refused = client.post(f"/api/v1/runs/{first.id}/retry/", {}, format="json")
        assert refused.status_code == 409 and f"subagent of run {parent.id}" in refused.json()["detail"]

    children_calls = ToolCall.objects.filter(run_id__in=[first.id, second.id], kind=CallKind.CALL).count()
    assert children_calls <= 4 and SideEffect.objects.count() <= 4, (
        f"the children of one run made {children_calls} tool calls ({SideEffect.objects.count()} effects) "
        "beyond the 4 they share"
    )


def test_an_agentic_tools_inner_calls_escape_the_call_budget_a_parent_gave(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: the tool calls a child run may make are counted as its rows of kind ``call`` only
    (``budgets.spending_of``/``spending_below``, ``loop._record_turn``, ``tools.run_budget``). The inner calls an
    agentic tool makes for the run (``SimpleAgenticTool._orchestrate`` -> ``inner.inner_tool_call``: rows of kind
    ``inner`` in the same run, each executing its tool) are counted nowhere, and nothing stops the inner loop when
    the run's budget is spent (the probe-r fix stops the inner *model* on tokens only). A subagent given
    ``max_tool_calls=2`` by its parent (``SubagentLimits(max_calls=2)``) called ``effect_desk`` once and ran
    eight ``record_effect`` calls through it (eight side effects), then completed.
    Expect: every tool call executed for a run (its agentic tools' inner calls too) counts against the budget its
    parent gave it, and the inner loop is stopped once that budget is spent.
    """
    agent_create(
        name="effect-brain",
        provider="scripted",
        tools=[],
        script=[_effects("inner", 4), _effects("more", 4), {"content": "recorded"}],
    )
    tool = Subagent.of("pb-deskworker", "Ask.", _Task, name="ask_pb_desk", limits=SubagentLimits(max_calls=2))
    with registry.temporarily(tool):
        agent_create(
            name="pb-deskworker",
            provider="scripted",
            tools=["effect_desk"],
            script=[{"tool_calls": [{"name": "effect_desk", "arguments": {"task": "record"}}]}, {"content": "done"}],
        )
        root_agent = agent_create(
            name="pb-root-desk",
            provider="scripted",
            tools=["ask_pb_desk"],
            script=[{"tool_calls": [{"name": "ask_pb_desk", "arguments": {"task": "go"}}]}, {"content": "ok"}],
        )
        root = _start(root_agent, alice, django_capture_on_commit_callbacks)
    child = AgentRun.objects.get(parent_run=root)
    assert child.limits["max_tool_calls"] == 2
    executed = ToolCall.objects.filter(run_id=child.id, tool_name="record_effect", status="succeeded").count()
    assert executed <= 2 and SideEffect.objects.count() <= 2, (
        f"a child given 2 tool calls executed {executed} ({SideEffect.objects.count()} effects); "
        f"child status {child.status}"
    )


def test_a_child_started_by_an_agentic_tools_inner_call_outlives_its_finished_parent(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a subagent tool among a ``SimpleAgenticTool``'s tools starts a child run from an inner call
    (``inner.inner_tool_call`` -> ``subagents._start_child``: ``parent_run`` is the calling run), whose call is
    left ``awaiting_result``. But the loop only waits for its turn's calls of kind ``call``
    (``steprows.turn_calls``), and the agentic tool's outer call returns at once: the parent run took its next
    turn and *completed* while its child was still going (here: held for an operator). The child then goes on in
    alice's name after her run ended: cancelling the parent is refused (409, it ended) and nothing that ends a
    run (``ending.run_finish``) stops its children; an operator approving the child's held call later runs it
    for a run that has answered already.
    Expect: a run does not end while a child run it started is going (its turn waits for the suspended inner
    call, or the child is cancelled when the parent ends), so no child outlives its parent.
    Fixed: only a run's own turns start children; the inner call of a subagent tool fails with a clear error
    and no child run exists (``subagents._start_child``).
    """
    tool = Subagent.of("pb-helper", "Ask the helper.", _Task, name="ask_pb_helper")
    desk = SimpleAgenticTool(
        "pb_helper_desk", "Delegate a task to the helper.", tools=[tool], max_iterations=3, agent="pb-desk-brain"
    )
    with registry.temporarily(tool, desk):
        agent_create(
            name="pb-desk-brain",
            provider="scripted",
            tools=[],
            script=[
                {"tool_calls": [{"name": "ask_pb_helper", "arguments": {"task": "do it"}}]},
                {"content": "delegated"},
            ],
        )
        agent_create(
            name="pb-helper",
            provider="scripted",
            tools=["risky_effect"],
            script=[
                {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "from the child"}}]},
                {"content": "helper done"},
            ],
        )
        parent_agent = agent_create(
            name="pb-delegator",
            provider="scripted",
            tools=["pb_helper_desk"],
            script=[
                {"tool_calls": [{"name": "pb_helper_desk", "arguments": {"task": "go"}}]},
                {"content": "parent answered: {last_tool_result}"},
            ],
        )
        parent = _start(parent_agent, alice, django_capture_on_commit_callbacks)
    inner = ToolCall.objects.get(run_id=parent.id, kind=CallKind.INNER, tool_name="ask_pb_helper")
    assert inner.status == "failed" and "cannot be started from inside an agentic tool" in inner.error
    going = (RunStatus.RUNNING, RunStatus.WAITING)
    children = list(AgentRun.objects.filter(parent_run=parent))
    assert not (parent.status not in going and any(child.status in going for child in children)), (
        f"parent run is {parent.status} ({parent.output!r}) while its child runs are "
        f"{[child.status for child in children]}"
    )
    assert children == [] and SideEffect.objects.count() == 0


def test_a_subagent_call_expired_by_the_sweeper_leaves_its_child_running_after_the_parent_ended(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: ``sweeper.calls_expire_awaiting_results`` expires every ``awaiting_result`` call older than
    ``EXTERNAL_RESULT_TIMEOUT_SECONDS`` (24 h), a subagent's too: nothing there knows it waits for a child run. A
    child held a day for an operator (an ordinary wait on the approval desk) thus has its parent's call expired:
    the parent's model is told "the call expired unanswered", the parent goes on and completes, while the child
    stays ``waiting`` with its approval request still pending on the desk; an operator approving it later runs
    the child's tool in alice's name for a run that has ended (and the parent's model, told it expired, may well
    have asked for the same work again). Nobody can post the child's result either (400, naming the child run).
    Expect: a subagent call is settled only by its child run: the sweeper leaves it alone, or expiring it cancels
    the child (withdrawing its held calls), so no child outlives its parent's call.
    """
    from datetime import timedelta

    from django.utils import timezone

    from approvals.models import ApprovalRequest, ApprovalStatus
    from toolhub.models import CallStatus
    from toolhub.sweeper import calls_expire_awaiting_results

    tool = Subagent.of("pb-slow", "Ask the slow helper.", _Task, name="ask_pb_slow")
    with registry.temporarily(tool):
        agent_create(
            name="pb-slow",
            provider="scripted",
            tools=["risky_effect"],
            script=[
                {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "from the child"}}]},
                {"content": "helper done"},
            ],
        )
        parent_agent = agent_create(
            name="pb-waiter",
            provider="scripted",
            tools=["ask_pb_slow"],
            script=[
                {"tool_calls": [{"name": "ask_pb_slow", "arguments": {"task": "do it"}}]},
                {"content": "parent answered: {last_tool_result}"},
            ],
        )
        parent = _start(parent_agent, alice, django_capture_on_commit_callbacks)
        child = AgentRun.objects.get(parent_run=parent)
        call = ToolCall.objects.get(run_id=parent.id, tool_name="ask_pb_slow")
        assert call.status == CallStatus.AWAITING_RESULT and child.status == RunStatus.WAITING

        # a day and a bit later the operator has not decided yet; the periodic sweep runs
        ToolCall.objects.filter(pk=call.pk).update(queued_at=timezone.now() - timedelta(hours=25))
        with django_capture_on_commit_callbacks(execute=True):
            calls_expire_awaiting_results()

    parent.refresh_from_db()
    child.refresh_from_db()
    held = ApprovalRequest.objects.get(call__run_id=child.id)
    going = (RunStatus.RUNNING, RunStatus.WAITING)
    assert not (parent.status not in going and (child.status in going or held.status == ApprovalStatus.PENDING)), (
        f"parent run {parent.status} ({parent.output!r}); its child run {child.status}, "
        f"the child's approval request {held.status}"
    )
