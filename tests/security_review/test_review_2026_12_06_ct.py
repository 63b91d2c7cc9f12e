"""Review 2026-12-06 (ct): review of reviews bw, ca and cn (agent runs, subagents and the blackboard).

Each test fails on the reviewed code (main at ea55f42) and states what was found and what is expected.

Findings:

1. PLACEHOLDER

Checked and holding:
- PLACEHOLDER
"""

from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User

from agents_app import loop, tasks
from agents_app.models import AgentRun, RunStatus
from tests.subagents.conftest import MakeAgent, StartRun
from tests.testapp.models import SideEffect
from tests.testapp.tools import ask_researcher
from toolhub import registry
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
