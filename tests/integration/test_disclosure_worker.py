"""On real workers: a run resumed after a worker restart sees the same tools it saw before."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.services import run_start
from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.integration.workers import Worker, wait_for
from toolhub.celery import app as celery_app
from toolhub.models import CallStatus, ToolCall

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PROVIDER = "tests.disclosure.providers.WordProvider"
SCRIPT = [
    {"tool_calls": [{"name": "tool_search", "arguments": {"query": "record side effect operator"}}]},
    {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]},
    {"content": "done"},
]


@pytest.fixture
def own_queue(app_database_role: object, settings: Any) -> Iterator[str]:
    """This test's tasks go to a queue only its own workers consume; the provider is the test one."""
    settings.TOOLHUB = {**settings.TOOLHUB, "TOOL_SEARCH_PROVIDER": PROVIDER}
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = f"{previous}-disclosure"
    yield celery_app.conf.task_default_queue
    celery_app.control.purge()
    celery_app.conf.task_default_queue = previous


def test_a_run_resumed_on_a_new_worker_sees_the_same_tools(own_queue: str, alice: User, operator: User) -> None:
    # given: a search-mode run whose search found risky_effect, held for approval of its call
    agent = Agent.objects.create(
        name="discloser", script=SCRIPT, tools=["get_time", "calculate", "risky_effect"], tool_search=True
    )
    first = Worker("disclosure-a", concurrency=1, TOOLHUB_TEST_SEARCH_PROVIDER=PROVIDER).start()
    try:
        run = run_start(agent=agent, user=alice, input="record an effect")
        wait_for(lambda: AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING, timeout=60, what="run waiting")
    finally:
        first.kill()  # no chance to clean up: whatever the run sees must be in the database already
    held = AgentRun.objects.get(pk=run.pk)
    assert held.disclosure["hits"] == ["risky_effect"]
    seen_before = held.disclosure["visible"]
    assert seen_before == ["tool_search", "risky_effect"]

    # when: another worker resumes it after the approval
    second = Worker("disclosure-b", concurrency=1, TOOLHUB_TEST_SEARCH_PROVIDER=PROVIDER).start()
    try:
        request = ApprovalRequest.objects.get(call__run_id=run.pk)
        approval_approve(request_id=request.pk, user=operator, comment="fine")
        resumed = wait_for(
            lambda: (r := AgentRun.objects.get(pk=run.pk)).turn == 3 and r.status == RunStatus.COMPLETED and r,
            timeout=60,
            what="run completed",
        )
    finally:
        second.stop()

    # then: the turn taken on the new worker saw the same tools as the one before the restart
    calls = list(ToolCall.objects.filter(run_id=run.pk).order_by("turn", "position"))
    assert [(c.tool_name, c.status) for c in calls] == [
        ("tool_search", CallStatus.SUCCEEDED),
        ("risky_effect", CallStatus.SUCCEEDED),
    ]
    assert resumed.output == "done"
    assert resumed.disclosure["visible"] == seen_before
    assert resumed.disclosure["hits"] == ["risky_effect"]
