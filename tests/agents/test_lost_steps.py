"""Lost steps: a run whose worker dies while the model answers is stepped again, a bounded number of times in a row.

A worker that dies mid-step leaves the run as ``_take_lease`` wrote it: its lease and step token set, no answer.
The model here is a stand-in asked outside a transaction (as a network model is), which can "kill its worker":
it raises ``_WorkerDied``, a ``BaseException`` nothing in the loop or Celery's eager runner catches, so the
step's process ends with the lease committed. Tests then let the lease lapse (set it in the past, as time would)
and run the real runs sweep (``sweep_runs_task``), whose woken runs are advanced by eager ``advance_run_task``.
"""

from collections.abc import Callable
from contextlib import suppress
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from agents_app.models import Agent, AgentRun, RunStatus, StopReason
from agents_app.models_adapters.base import ModelToolCall, ModelTurn, PartialSink
from agents_app.services import agent_create
from agents_app.tasks import sweep_runs_task
from toolhub.models import CallStatus, ToolCall

pytestmark = pytest.mark.django_db

CALC = ModelToolCall(id="call_1", name="calculate", arguments='{"a": 6, "op": "*", "b": 7}')
DIE = "die"


class _WorkerDied(BaseException):
    """The step's worker process ended while the model answered (out of memory, a native crash)."""


class _Model:
    """A model asked outside a transaction that plays ``plan``: ``DIE`` kills the step's worker, a turn answers.

    ``partial``: text it streams before each move (agents with ``stream``). ``during``: called while asked,
    before the move (another worker taking the run over meanwhile).
    """

    answers_in_process = False

    def __init__(self, plan: list[Any], partial: str = "") -> None:
        self.plan = list(plan)
        self.partial = partial
        self.asked = 0
        self.during: Callable[[], None] | None = None

    def adapter_for(self, agent: Agent) -> "_Model":
        return self

    def complete(self, *, messages: Any, tools: Any, on_partial: PartialSink | None = None) -> ModelTurn:
        self.asked += 1
        move = self.plan.pop(0) if self.plan else DIE
        if on_partial is not None and self.partial:
            on_partial(self.partial)
        if self.during is not None:
            during, self.during = self.during, None
            during()
        if move == DIE:
            raise _WorkerDied
        assert isinstance(move, ModelTurn)
        return move


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Callable[..., _Model]:
    """Make the stand-in every agent's model for the test."""

    def make(plan: list[Any], partial: str = "") -> _Model:
        stand_in = _Model(plan, partial)
        monkeypatch.setattr("agents_app.loop.adapter_for", stand_in.adapter_for)
        return stand_in

    return make


@pytest.fixture
def start(alice_client: APIClient, django_capture_on_commit_callbacks: Any) -> Callable[..., AgentRun]:
    """Start a run over the API; its first step runs here, after the commit, and may kill its worker."""

    def begin(*, stream: bool = False) -> AgentRun:
        agent = agent_create(name="fragile", tenant="acme", script=[], tools=["calculate"], stream=stream)
        with suppress(_WorkerDied), django_capture_on_commit_callbacks(execute=True):
            response = alice_client.post("/api/v1/runs/", {"agent_id": agent.pk, "input": "hi"}, format="json")
            assert response.status_code == 201, response.content
        return AgentRun.objects.get()

    return begin


@pytest.fixture
def sweep(django_capture_on_commit_callbacks: Any) -> Callable[..., AgentRun]:
    """Let the run's lease lapse (as time would after its worker died), then run the runs sweep once."""

    def once(run: AgentRun, *, lapse: bool = True) -> AgentRun:
        now = timezone.now()
        if lapse:
            AgentRun.objects.filter(pk=run.pk, step_lease_until__isnull=False).update(
                step_lease_until=now - timedelta(seconds=1)
            )
        AgentRun.objects.filter(pk=run.pk).update(updated_at=now - timedelta(minutes=5))
        with suppress(_WorkerDied), django_capture_on_commit_callbacks(execute=True):
            sweep_runs_task(idle_seconds=60)
        return AgentRun.objects.get(pk=run.pk)

    return once


def _bound(settings: Any, value: int) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "RUN_MAX_LOST_STEPS": value}


@pytest.mark.parametrize("bound", [3, 2], ids=["default", "RUN_MAX_LOST_STEPS-2"])
def test_a_step_that_kills_its_worker_every_time_asks_the_model_the_bounded_number_of_times_then_fails(
    model: Callable[..., _Model],
    start: Callable[..., AgentRun],
    sweep: Callable[..., AgentRun],
    alice_client: APIClient,
    settings: Any,
    bound: int,
) -> None:
    """Found: a run's step whose worker died was stepped again by every runs sweep after its lease, with no limit:
    a step that reliably kills its worker repeated its paid model call forever.
    Expect: the model is asked ``RUN_MAX_LOST_STEPS`` times (3 by default); then the run fails (worker_lost,
    retryable) with a reason its user reads over the API, and later sweeps ask nothing more."""
    if bound != 3:
        _bound(settings, bound)
    stand_in = model([DIE] * 10)

    # given a run whose first step killed its worker while the model answered
    run = start()
    assert stand_in.asked == 1
    assert (run.status, run.lost_steps) == (RunStatus.RUNNING, 0)
    assert run.step_lease_until is not None and run.step_token is not None

    # a sweep while the lease still runs leaves the step alone: nothing asked, nothing counted
    run = sweep(run, lapse=False)
    assert (stand_in.asked, run.lost_steps, run.status) == (1, 0, RunStatus.RUNNING)

    # when the lease lapses and the sweep steps the run again, and again, each time killing its worker
    for _ in range(6):
        run = sweep(run)

    # then the model was asked exactly the bounded number of times, and the run failed saying why
    assert stand_in.asked == bound
    assert run.status == RunStatus.FAILED
    assert run.stop_reason == StopReason.WORKER_LOST
    assert run.retryable is True
    assert run.lost_steps == bound
    assert (run.step_lease_until, run.step_token, run.partial_output) == (None, None, "")
    assert [m["role"] for m in run.messages] == ["user"]
    shown = alice_client.get(f"/api/v1/runs/{run.pk}/").json()
    assert (shown["status"], shown["stop_reason"], shown["retryable"]) == ("failed", "worker_lost", True)
    assert shown["error"] == (
        f"Run stopped: its worker stopped {bound} times in a row while the model was answering "
        "(TOOLHUB['RUN_MAX_LOST_STEPS']), so the model was not asked again. Retry the run once the cause is fixed."
    )


def test_a_recorded_answer_resets_the_count(
    model: Callable[..., _Model], start: Callable[..., AgentRun], sweep: Callable[..., AgentRun]
) -> None:
    """Found: (with the bound) lost steps count only in a row, or a long run's occasional crashes would add up.
    Expect: a step whose answer is recorded sets the count back to 0; a run losing two steps before each of its
    two answers (four in all, above the bound of 3, never three in a row) completes."""
    stand_in = model([DIE, DIE, ModelTurn(tool_calls=(CALC,)), DIE, DIE, ModelTurn(content="42")])

    run = start()
    run = sweep(run)
    assert (stand_in.asked, run.lost_steps) == (2, 1)

    # the third ask answers with a tool call: recorded, the count is back to 0; the call runs, the next step dies
    run = sweep(run)
    assert stand_in.asked == 4
    assert ToolCall.objects.get().status == CallStatus.SUCCEEDED
    assert (run.turn, run.lost_steps, run.status) == (1, 0, RunStatus.RUNNING)

    run = sweep(run)
    assert (stand_in.asked, run.lost_steps) == (5, 1)
    run = sweep(run)
    assert (stand_in.asked, run.lost_steps) == (6, 0)
    assert (run.status, run.output, run.turn) == (RunStatus.COMPLETED, "42", 2)


def test_a_streamed_step_that_is_lost_counts_and_one_that_answers_resets(
    model: Callable[..., _Model], start: Callable[..., AgentRun], sweep: Callable[..., AgentRun]
) -> None:
    """Found: (with the bound) a streamed step's worker dying was not counted either.
    Expect: it leaves its partial text and counts as lost; the next step's answer is recorded, clearing the
    partial text and the count."""
    stand_in = model([DIE, DIE, ModelTurn(content="Hello there.")], partial="Hel")

    run = start(stream=True)
    assert (run.partial_output, run.lost_steps) == ("Hel", 0)
    run = sweep(run)
    assert (run.partial_output, run.lost_steps, run.status) == ("Hel", 1, RunStatus.RUNNING)
    run = sweep(run)

    assert stand_in.asked == 3
    assert (run.status, run.output, run.partial_output, run.lost_steps) == (
        RunStatus.COMPLETED,
        "Hello there.",
        "",
        0,
    )


def test_steps_whose_answers_come_are_never_counted(
    model: Callable[..., _Model], start: Callable[..., AgentRun], settings: Any
) -> None:
    """Steps whose answers come are not lost: with a bound of 1, a run asked outside a transaction (under a
    lease) over two turns completes, its count 0."""
    _bound(settings, 1)
    stand_in = model([ModelTurn(tool_calls=(CALC,)), ModelTurn(content="42")])

    run = start()

    assert stand_in.asked == 2
    assert (run.status, run.output, run.lost_steps) == (RunStatus.COMPLETED, "42", 0)


def test_an_in_process_step_is_never_counted(start_run: Callable[..., AgentRun], settings: Any, alice: User) -> None:
    """The scripted model's step takes no lease: with a bound of 1, a scripted run over two turns completes."""
    _bound(settings, 1)
    agent = agent_create(
        name="scripted",
        tenant="acme",
        script=[{"tool_calls": [{"name": "calculate", "arguments": {"a": 6, "op": "*", "b": 7}}]}, {"content": "42"}],
        tools=["calculate"],
    )

    run = start_run(agent, alice)

    assert (run.status, run.output, run.turn, run.lost_steps) == (RunStatus.COMPLETED, "42", 2, 0)


def test_an_answer_after_its_lease_was_taken_over_is_dropped_and_the_new_step_counts_once(
    model: Callable[..., _Model], start: Callable[..., AgentRun], sweep: Callable[..., AgentRun]
) -> None:
    """A slow step whose lease lapsed and was taken over by the sweep counts as lost once; the new step's answer
    is recorded and resets the count; the slow step's answer, arriving after, is dropped (its token) as before."""
    stand_in = model([ModelTurn(content="too late"), ModelTurn(content="on time")])
    taken_over: list[AgentRun] = []
    stand_in.during = lambda: taken_over.append(sweep(AgentRun.objects.get()))

    run = start()

    assert stand_in.asked == 2
    assert (taken_over[0].status, taken_over[0].output, taken_over[0].lost_steps) == (
        RunStatus.COMPLETED,
        "on time",
        0,
    )
    run.refresh_from_db()
    assert (run.status, run.output, run.turn, run.lost_steps) == (RunStatus.COMPLETED, "on time", 1, 0)


def test_retrying_a_run_that_failed_so_starts_a_fresh_count(
    model: Callable[..., _Model],
    start: Callable[..., AgentRun],
    sweep: Callable[..., AgentRun],
    alice_client: APIClient,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: (with the bound) a retried run would inherit the count that failed it and fail at its next sweep.
    Expect: after the retry action (the API's) the run is stepped at once and, its worker dying again, gets the
    full bound of asks (3 more) before failing again."""
    stand_in = model([DIE] * 10)
    run = start()
    for _ in range(3):
        run = sweep(run)
    assert (stand_in.asked, run.status, run.stop_reason) == (3, RunStatus.FAILED, StopReason.WORKER_LOST)

    with suppress(_WorkerDied), django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(f"/api/v1/runs/{run.pk}/retry/")
        assert response.status_code == 200, response.content
    run.refresh_from_db()
    assert (stand_in.asked, run.status, run.lost_steps, run.error) == (4, RunStatus.RUNNING, 0, "")

    for _ in range(5):
        run = sweep(run)
    assert stand_in.asked == 6
    assert (run.status, run.stop_reason, run.lost_steps) == (RunStatus.FAILED, StopReason.WORKER_LOST, 3)
