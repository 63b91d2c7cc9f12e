"""On real workers: a state machine's state is kept with the run, so a run resumed after a restart continues in it."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.services import run_start
from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.integration.workers import Worker, wait_for
from tests.testapp.models import SideEffect
from toolhub.celery import app as celery_app
from toolhub.models import CallStatus, ToolCall

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SCRIPT = [
    {"tool_calls": [{"name": "record_effect", "arguments": {"note": "first"}}]},
    {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]},
    {"tool_calls": [{"name": "record_effect", "arguments": {"note": "again"}}]},
    {"content": "done"},
]


@pytest.fixture
def own_queue(app_database_role: object) -> Iterator[str]:
    """This test's tasks go to a queue only its own workers consume."""
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = f"{previous}-agentic"
    yield celery_app.conf.task_default_queue
    celery_app.control.purge()
    celery_app.conf.task_default_queue = previous


def test_a_state_machine_continues_in_its_state_after_a_worker_restart(
    own_queue: str, alice: User, operator: User, settings: Any
) -> None:
    # given: a run that moved effect_workflow to 'recorded', then waits for approval of risky_effect
    agent = Agent.objects.create(name="workflow", script=SCRIPT, tools=["effect_workflow"])
    first = Worker("agentic-a", concurrency=1).start()
    try:
        run = run_start(agent=agent, user=alice, input="work")
        wait_for(lambda: AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING, timeout=60, what="run waiting")
    finally:
        first.kill()  # no chance to clean up: the state must be in the database already
    held = AgentRun.objects.get(pk=run.pk)
    assert held.disclosure["agentic"] == {"effect_workflow": {"state": "recorded"}}
    assert held.disclosure["visible"] == ["effect_workflow", "risky_effect"]

    # when: another worker resumes it after the approval
    second = Worker("agentic-b", concurrency=1).start()
    try:
        request = ApprovalRequest.objects.get(call__run_id=run.pk)
        approval_approve(request_id=request.pk, user=operator, comment="fine")
        resumed = wait_for(
            lambda: (r := AgentRun.objects.get(pk=run.pk)).status == RunStatus.COMPLETED and r,
            timeout=60,
            what="run completed",
        )
    finally:
        second.stop()

    # then: the approved call moved the machine on, and a tool of an earlier state was refused, not run
    calls = list(ToolCall.objects.filter(run_id=run.pk).order_by("turn", "position"))
    assert [(c.tool_name, c.status) for c in calls] == [
        ("record_effect", CallStatus.SUCCEEDED),
        ("risky_effect", CallStatus.SUCCEEDED),
        ("record_effect", CallStatus.INVALID),
    ]
    assert "not available in state 'done'" in calls[2].error
    assert resumed.disclosure["agentic"] == {"effect_workflow": {"state": "done"}}
    assert list(
        SideEffect.objects.filter(note__in=["first", "held", "again"]).values_list("note", flat=True).order_by("pk")
    ) == [
        "first",
        "held",
    ]
    assert resumed.output == "done"


def test_an_agentic_tool_runs_its_inner_calls_on_the_worker_each_audited_and_linked(
    celery_worker: Worker, alice: User
) -> None:
    # given an inner model that records an effect, hits a failing tool, then answers
    Agent.objects.create(
        name="effect-brain",
        script=[
            {"tool_calls": [{"name": "record_effect", "arguments": {"note": "inner"}}]},
            {"tool_calls": [{"name": "always_fails", "arguments": {"reason": "boom"}}]},
            {"content": "recorded one"},
        ],
    )
    outer_script = [{"tool_calls": [{"name": "effect_desk", "arguments": {"task": "record"}}]}, {"content": "ok"}]
    agent = Agent.objects.create(name="desk", script=outer_script, tools=["effect_desk"])

    # when a run calls the agentic tool on a real worker
    run = run_start(agent=agent, user=alice, input="work")
    done = wait_for(
        lambda: (r := AgentRun.objects.get(pk=run.pk)).status == RunStatus.COMPLETED and r, timeout=60, what="run done"
    )

    # then its inner calls ran there, once each, as audited calls linked to it
    outer = ToolCall.objects.get(run_id=run.pk, tool_name="effect_desk")
    assert outer.status == CallStatus.SUCCEEDED, outer.error
    assert outer.result["answer"] == "recorded one"
    inner = list(ToolCall.objects.filter(context__parent_call_id=str(outer.id)).order_by("created_at"))
    assert [(c.tool_name, c.status, c.kind) for c in inner] == [
        ("record_effect", CallStatus.SUCCEEDED, "inner"),
        ("always_fails", CallStatus.FAILED, "inner"),
    ]
    assert all(c.worker and c.worker == outer.worker for c in inner)
    assert SideEffect.objects.filter(note="inner").count() == 1
    assert done.output == "ok"
