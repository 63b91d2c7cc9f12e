"""On real workers: the worker that settles a run's last call takes the run's next step itself.

Each test has a queue and a worker of its own, so that the worker's log shows every task it received
for this test alone (``Task <name>[<id>] received``) and the test may kill it.
"""

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent, AgentRun, ModelProvider, ProviderKind, RunStatus
from agents_app.selectors import runs_to_wake
from agents_app.services import run_start
from agents_app.tasks import sweep_runs_task
from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.integration.workers import LOG_DIR, Worker, wait_for
from tests.testapp.faults import DIE_AFTER_SETTLE_ENV
from tests.testapp.models import SideEffect
from toolhub.audit_verify import verify_audit_chains
from toolhub.celery import app as celery_app
from toolhub.models import CallStatus, ToolCall

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SCRIPT = [
    {"content": "", "tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]},
    {"content": "done: {last_tool_result}"},
]
ADVANCE = "agents_app.tasks.advance_run_task"
EXECUTE = "toolhub.tasks.execute_tool_call_task"
INLINE = "advanced in the worker that settled its last call"


@pytest.fixture
def own_queue(app_database_role: object) -> Iterator[str]:
    """Route this test's tasks to a queue only its own worker consumes."""
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = f"{previous}-inline"
    yield celery_app.conf.task_default_queue
    celery_app.control.purge()
    celery_app.conf.task_default_queue = previous


class _Log:
    """A worker's log from a point on."""

    def __init__(self, worker: Worker) -> None:
        self.path = Path(LOG_DIR / f"worker-{worker.name}.log")
        self.offset = self.path.stat().st_size

    def received(self, task: str) -> int:
        """How many messages of ``task`` the worker received since."""
        return len(re.findall(rf"Task {re.escape(task)}\[[0-9a-f-]+\] received", self.since()))

    def since(self) -> str:
        with self.path.open("rb") as log:
            log.seek(self.offset)
            return log.read().decode(errors="replace")


def _held_run(agent: Agent, user: User) -> tuple[AgentRun, ApprovalRequest]:
    run = run_start(agent=agent, user=user, input="go")
    wait_for(lambda: AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING, timeout=30, what="run waiting")
    return run, ApprovalRequest.objects.get(call__run_id=run.pk)


def _completed(run: AgentRun) -> AgentRun:
    return wait_for(  # type: ignore[return-value]
        lambda: (r := AgentRun.objects.get(pk=run.pk)).status == RunStatus.COMPLETED and r,
        timeout=30,
        interval=0.05,
        what="run completed",
    )


def test_after_approval_the_run_completes_without_a_second_broker_hop(
    own_queue: str, alice: User, operator: User
) -> None:
    # given a run held for approval, and its worker's log from now on
    worker = Worker("inline", concurrency=1).start()
    try:
        agent = Agent.objects.create(name="inline", script=SCRIPT, tools=["risky_effect"])
        run, request = _held_run(agent, alice)
        log = _Log(worker)

        # when the operator approves
        approval_approve(request_id=request.pk, user=operator, comment="fine")

        # then the call runs once and the run completes, and the worker received only the call's task
        done = _completed(run)
        time.sleep(0.5)  # a stray message would be received by now
        received = log.since()
    finally:
        worker.stop()
    assert done.turn == 2 and done.output.startswith("done: ")
    assert ToolCall.objects.get(run_id=run.pk).status == CallStatus.SUCCEEDED
    assert SideEffect.objects.filter(tool="risky_effect").count() == 1
    assert log.received(EXECUTE) == 1
    assert log.received(ADVANCE) == 0
    assert received.count(INLINE) == 1 and str(run.pk) in received
    assert verify_audit_chains()[1] == []


def test_a_step_that_does_not_fit_the_tool_tasks_time_limit_goes_to_the_agent_task(
    own_queue: str, alice: User, operator: User
) -> None:
    # given a run whose provider may take 900 s a call: beyond what a tool task has left after its tool
    slow = ModelProvider.objects.create(name="patient", kind=ProviderKind.SCRIPTED, deadline_seconds=900)
    worker = Worker("fallback", concurrency=1).start()
    try:
        agent = Agent.objects.create(name="patient", script=SCRIPT, tools=["risky_effect"], provider=slow)
        run, request = _held_run(agent, alice)
        log = _Log(worker)

        # when the operator approves
        approval_approve(request_id=request.pk, user=operator, comment="fine")

        # then the tool worker hands the step to advance_run_task, which completes the run once
        done = _completed(run)
        time.sleep(0.5)
        received = log.since()
    finally:
        worker.stop()
    assert done.turn == 2
    assert log.received(EXECUTE) == 1
    assert log.received(ADVANCE) == 1
    assert "does not fit this tool task's time limit" in received and INLINE not in received
    assert SideEffect.objects.filter(tool="risky_effect").count() == 1


def test_a_worker_killed_between_settling_and_advancing_leaves_the_run_to_the_sweep_which_advances_it_once(
    own_queue: str, alice: User, operator: User, tmp_path: Path
) -> None:
    # given a worker that SIGKILLs itself right after it commits the settled call, before the next step
    flag = tmp_path / "die-once"
    flag.touch()
    agent = Agent.objects.create(name="crash", script=SCRIPT, tools=["risky_effect"])
    doomed = Worker("doomed", concurrency=1, **{DIE_AFTER_SETTLE_ENV: str(flag)}).start()
    try:
        run, request = _held_run(agent, alice)
        approval_approve(request_id=request.pk, user=operator, comment="fine")

        # then the call settled once, the flag is gone (the pool process died), and the run did not move
        wait_for(lambda: not flag.exists(), timeout=30, what="the worker reached the fault point")
        wait_for(lambda: ToolCall.objects.get(run_id=run.pk).status == CallStatus.SUCCEEDED, timeout=30, what="settled")
        time.sleep(2.0)  # the re-delivered call task finds the call settled and does nothing
        stuck = AgentRun.objects.get(pk=run.pk)
        assert (stuck.status, stuck.turn) == (RunStatus.WAITING, 1)
        assert [m["role"] for m in stuck.messages] == ["user", "assistant"]
        assert runs_to_wake(idle_since=stuck.updated_at) == []  # not idle long enough yet

        # when the sweep runs (its idle time passed)
        sweep_runs_task(idle_seconds=0)

        # then the run completes, with exactly one more model turn
        done = _completed(run)
        sweep_runs_task(idle_seconds=0)  # a second sweep finds nothing to wake
        time.sleep(1.0)
    finally:
        doomed.stop()
    done = AgentRun.objects.get(pk=run.pk)
    assert done.status == RunStatus.COMPLETED and done.turn == 2
    assert [m["role"] for m in done.messages] == ["user", "assistant", "tool", "assistant"]
    call = ToolCall.objects.get(run_id=run.pk)
    assert call.attempts == 1
    assert SideEffect.objects.filter(tool="risky_effect").count() == 1
    assert verify_audit_chains()[1] == []
