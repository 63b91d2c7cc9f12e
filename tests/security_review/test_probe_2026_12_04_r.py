"""Probe of 2026-12-04 (r): the agent loop and the model's side of the boundary.

Each test fails on the code as probed; its docstring says what was found ("Found: ...") and what is expected
("Expect: ...").
"""

import json
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from pydantic import BaseModel

from agents_app.models import AgentRun, RunStatus
from agents_app.services import agent_create, run_start
from agents_app.subagents import Subagent, SubagentLimits
from toolhub import Param, registry
from toolhub.models import CallKind, Grant, GrantEffect, ToolCall

pytestmark = pytest.mark.django_db


def _start(agent: Any, user: User, capture: Any, **kwargs: Any) -> AgentRun:
    with capture(execute=True):
        run = run_start(agent=agent, user=user, input=kwargs.pop("input", "go"), **kwargs)
    run.refresh_from_db()
    return run


def _tool_results(run: AgentRun) -> list[str]:
    return [str(m.get("content")) for m in run.messages if m.get("role") == "tool"]


def test_run_history_tells_the_model_a_hidden_tool_exists(alice: User, django_capture_on_commit_callbacks: Any) -> None:
    """Found: the loop answers a call of a tool the run may not see exactly like a call of a missing tool
    (``loop._texts_for_model``: "Unknown tool ..."), so that a denial does not confirm the tool exists. But the
    built-in ``run_history`` tool (agents_app/tools.py) lists the run's calls with their stored status: the
    hidden tool's call reads ``denied`` and the missing one's ``invalid``, so the model (or whoever injects
    into it) tells an existing, denied tool from a name that exists nowhere, one probe call per name.
    Expect: the model reads the same for both (a denied call of a tool the run may not see is listed as a
    missing tool's is).
    """
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", user=alice)
    agent = agent_create(
        name="prober",
        provider="scripted",
        tools=["run_history"],
        script=[
            {
                "tool_calls": [
                    {"name": "record_effect", "arguments": {"note": "x"}},
                    {"name": "no_such_tool_at_all", "arguments": {"note": "x"}},
                ]
            },
            {"tool_calls": [{"name": "run_history", "arguments": {}}]},
            {"content": "{last_tool_result}"},
        ],
    )
    run = _start(agent, alice, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.COMPLETED, run.error
    first, second = _tool_results(run)[:2]
    # the loop itself hides the denial
    assert first.startswith("Unknown tool 'record_effect'")
    assert second.startswith("Unknown tool 'no_such_tool_at_all'")
    history = {row["tool"]: row["status"] for row in json.loads(_tool_results(run)[2])}
    assert history["record_effect"] == history["no_such_tool_at_all"], history


class _Task(BaseModel):
    """What the subagent is asked."""

    task: Annotated[str, Param("The task.")]


def _approve_all(client: Any, capture: Any) -> None:
    from approvals.models import ApprovalRequest, ApprovalStatus

    while True:
        pending = list(ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).order_by("id"))
        if not pending:
            return
        for request in pending:
            with capture(execute=True):
                response = client.post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
            assert response.status_code == 200, response.content


def _descendant_calls(run: AgentRun) -> int:
    """The tool calls (kind ``call``) of every run below ``run``."""
    ids, frontier = [], [run.id]
    while frontier:
        children = list(AgentRun.objects.filter(parent_run_id__in=frontier).values_list("id", flat=True))
        ids += children
        frontier = children
    return ToolCall.objects.filter(run_id__in=ids, kind=CallKind.CALL).count()


def test_subagents_started_in_one_turn_each_get_the_whole_shared_budget(
    alice: User, operator_client: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: ``SubagentLimits.max_calls`` is what "all children together" of a run may spend, but
    ``agents_app.subagents._budget_left`` gives each new child ``max_calls`` minus the calls its siblings have
    *made so far*, not minus what they were *given* and may still spend. A model that asks for several subagent
    calls in one turn (or one after another while the first child waits) starts each child with (nearly) the
    whole budget: with ``max_calls=2``, two children made 3 tool calls here (in production, where a turn's calls
    run on workers before any child has acted, N parallel subagent calls get N times the budget; tokens alike).
    Expect: the children of one run together never make more than ``max_calls`` tool calls (reserve what a
    child is given until it ends, or check every child's turn against the shared pool).
    """
    tool = Subagent.of("busy", "Ask busy.", _Task, name="ask_busy_r", limits=SubagentLimits(max_calls=2))
    with registry.temporarily(tool):
        agent_create(
            name="busy",
            provider="scripted",
            tools=["risky_effect", "record_effect"],
            script=[
                {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]},
                {"tool_calls": [{"name": "record_effect", "arguments": {"note": "more"}}]},
                {"content": "busy done"},
            ],
        )
        parent_agent = agent_create(
            name="boss",
            provider="scripted",
            tools=["ask_busy_r"],
            script=[
                {
                    "tool_calls": [
                        {"name": "ask_busy_r", "arguments": {"task": "one"}},
                        {"name": "ask_busy_r", "arguments": {"task": "two"}},
                    ]
                },
                {"content": "{last_tool_result}"},
            ],
        )
        parent = _start(parent_agent, alice, django_capture_on_commit_callbacks)
        _approve_all(operator_client, django_capture_on_commit_callbacks)
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED, parent.error
    assert _descendant_calls(parent) <= 2, _descendant_calls(parent)


def test_a_subagents_own_subagents_spend_beyond_the_shared_budget(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a child run's own calls are limited by the budget it was given (``AgentRun.limits``), and its
    children get what the child has not spent yet (``_budget_left``: "a child's children share what the child
    itself was given"), but the loop counts only the child's *own* calls against that budget
    (``loop._record_turn``: ``ToolCall.objects.filter(run_id=run.id)``) and the parent's pool only its direct
    children's (``_budget_left``: ``run_id__in=children``). So every level spends its budget again: with
    ``max_calls=4`` and the default depth of 3, a chain of subagents made 6 tool calls.
    Expect: all the runs below a run together make at most its subagents' ``max_calls`` tool calls (count a
    run's descendants' calls, and tokens, against its budget and its parent's pool).
    """
    tool = Subagent.of("nest", "Ask nest.", _Task, name="ask_nest_r", limits=SubagentLimits(max_calls=4))
    with registry.temporarily(tool):
        agent_create(
            name="nest",
            provider="scripted",
            tools=["ask_nest_r", "record_effect"],
            script=[
                {"tool_calls": [{"name": "ask_nest_r", "arguments": {"task": "deeper"}}]},
                {"tool_calls": [{"name": "record_effect", "arguments": {"note": "work"}}]},
                {"content": "nest done"},
            ],
        )
        root_agent = agent_create(
            name="root",
            provider="scripted",
            tools=["ask_nest_r"],
            script=[
                {"tool_calls": [{"name": "ask_nest_r", "arguments": {"task": "go"}}]},
                {"content": "{last_tool_result}"},
            ],
        )
        root = _start(root_agent, alice, django_capture_on_commit_callbacks)
    assert root.status == RunStatus.COMPLETED, root.error
    assert _descendant_calls(root) <= 4, _descendant_calls(root)


def test_an_agentic_tools_model_turns_escape_the_runs_token_budget(
    alice: User, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: a run's tokens are counted from its own model turns only (``loop._record_turn``); the model turns
    of an agentic tool its model calls (``SimpleAgenticTool._orchestrate``: up to ``max_iterations`` turns per
    call, by default on the run's own provider) are counted nowhere. A subagent given ``max_tokens=100`` by its
    parent (``SubagentLimits``, "stops when it is spent") called ``effect_desk`` and spent over ten times that
    through its inner model, then completed; the run API's ``usage`` shows none of it.
    Expect: every model turn taken for a run (its inner models' too) is counted in its usage and against the
    token budget it was given.
    """
    from agents_app.models_adapters.scripted import ScriptedAdapter

    spent: list[int] = []
    original = ScriptedAdapter.complete

    def counting(self: Any, **kwargs: Any) -> Any:
        turn = original(self, **kwargs)
        spent.append(turn.prompt_tokens + turn.completion_tokens)
        return turn

    monkeypatch.setattr(ScriptedAdapter, "complete", counting)
    words = " ".join(["word"] * 150)
    agent_create(
        name="effect-brain",
        provider="scripted",
        tools=[],
        script=[
            {"content": words, "tool_calls": [{"name": "record_effect", "arguments": {"note": "a"}}]},
            {"content": words, "tool_calls": [{"name": "record_effect", "arguments": {"note": "b"}}]},
            {"content": words, "tool_calls": [{"name": "record_effect", "arguments": {"note": "c"}}]},
            {"content": words},
        ],
    )
    tool = Subagent.of("deskworker", "Ask.", _Task, name="ask_desk_r", limits=SubagentLimits(max_tokens=100))
    with registry.temporarily(tool):
        agent_create(
            name="deskworker",
            provider="scripted",
            tools=["effect_desk"],
            script=[
                {"tool_calls": [{"name": "effect_desk", "arguments": {"task": "record"}}]},
                {"content": "desk done"},
            ],
        )
        root_agent = agent_create(
            name="root-desk",
            provider="scripted",
            tools=["ask_desk_r"],
            script=[{"tool_calls": [{"name": "ask_desk_r", "arguments": {"task": "go"}}]}, {"content": "ok"}],
        )
        root = _start(root_agent, alice, django_capture_on_commit_callbacks)
    child = AgentRun.objects.get(parent_run=root)
    assert child.limits["max_tokens"] == 100
    assert ToolCall.objects.filter(run_id=child.id, tool_name="effect_desk").exists()
    assert ToolCall.objects.filter(run_id=child.id, kind=CallKind.INNER).exists()  # its inner model was asked
    recorded = sum(r.prompt_tokens + r.completion_tokens for r in AgentRun.objects.all())
    # every model turn taken (the root's, the child's and the inner model's) is counted on some run
    assert recorded >= sum(spent), (recorded, sum(spent), child.prompt_tokens + child.completion_tokens)


class _VaultTask(BaseModel):
    """A task that carries a secret the parent's model was given."""

    task: Annotated[str, Param("The task.")]
    pin: Annotated[str, Param("The vault PIN.")]


def test_a_subagents_sensitive_argument_is_stored_in_the_clear_in_its_child_run(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a subagent tool is an ordinary tool, so ``sensitive=("pin",)`` redacts the PIN in the parent run's
    messages, its call's arguments, the API and the admin. But ``agents_app.subagents._start_child`` writes the
    call's arguments whole (``canonical_json(arguments)``) into the child run's ``input`` and first user
    message: ``GET /api/v1/runs/<child>/`` (and the admin's run page) shows the PIN to the run's user and to
    every operator and auditor of the tenant.
    Expect: the PIN appears in no run's API representation (the child's input and messages hold it redacted,
    as the parent's do, or the value is kept where only the child's model reads it).
    """
    from tests.security_review.conftest import client_for

    tool = Subagent.of("vault", "Ask the vault keeper.", _VaultTask, name="ask_vault_r", sensitive=("pin",))
    with registry.temporarily(tool):
        agent_create(name="vault", provider="scripted", tools=[], script=[{"content": "opened"}])
        parent_agent = agent_create(
            name="vault-user",
            provider="scripted",
            tools=["ask_vault_r"],
            script=[
                {"tool_calls": [{"name": "ask_vault_r", "arguments": {"task": "open it", "pin": "4921-7730"}}]},
                {"content": "{last_tool_result}"},
            ],
        )
        parent = _start(parent_agent, alice, django_capture_on_commit_callbacks)
    assert parent.status == RunStatus.COMPLETED, parent.error
    child = AgentRun.objects.get(parent_run=parent)
    operator = client_for(acme_operator)
    shown_parent = operator.get(f"/api/v1/runs/{parent.id}/")
    assert shown_parent.status_code == 200 and "4921-7730" not in shown_parent.content.decode()
    shown_child = operator.get(f"/api/v1/runs/{child.id}/")
    assert shown_child.status_code == 200
    assert "4921-7730" not in shown_child.content.decode()
