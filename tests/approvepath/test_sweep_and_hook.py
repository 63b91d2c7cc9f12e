"""The pieces of the inline advance without workers: the after-task hook, the time check, the sweep's choice."""

import logging
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from agents_app.loop import STEP_LEASE_MARGIN_SECONDS, Advance, run_advance
from agents_app.models import Agent, AgentRun, ModelProvider, ProviderKind, RunStatus
from agents_app.selectors import runs_to_wake
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.signals import after_task, running_after_task

SCRIPT = [{"content": "hello"}]


def test_after_task_outside_a_task_declines_so_the_caller_sends_its_message() -> None:
    assert after_task(lambda seconds: None) is False


def test_actions_run_after_the_block_in_order_told_the_time_left() -> None:
    seen: list[tuple[str, float]] = []
    with running_after_task(seconds=100.0):
        assert after_task(lambda left: seen.append(("first", left)))
        assert after_task(lambda left: seen.append(("second", left)))
        assert seen == []  # nothing runs inside the task's own work
    assert [name for name, _ in seen] == ["first", "second"]
    assert all(90.0 < left <= 100.0 for _, left in seen)
    assert after_task(lambda seconds: None) is False  # the scope ended


def test_when_the_task_fails_the_actions_are_told_no_time_is_left() -> None:
    seen: list[float] = []
    with pytest.raises(RuntimeError), running_after_task(seconds=100.0):
        after_task(seen.append)
        raise RuntimeError("the tool task broke")
    assert seen == [0.0]


def test_a_failing_action_is_logged_and_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[float] = []

    def broken(left: float) -> None:
        raise ValueError("boom")

    with caplog.at_level(logging.ERROR), running_after_task(seconds=10.0):
        after_task(broken)
        after_task(seen.append)
    assert len(seen) == 1
    assert "an after-task action failed" in caplog.text


@pytest.mark.django_db
def test_a_ready_run_whose_step_does_not_fit_is_left_untouched(alice: User) -> None:
    # given a ready run (its first step) on a provider with a 120 s deadline
    provider = ModelProvider.objects.create(name="scripted-120", kind=ProviderKind.SCRIPTED, deadline_seconds=120)
    agent = Agent.objects.create(name="fit", script=SCRIPT, provider=provider)
    run = AgentRun.objects.create(
        agent=agent, user=alice, tenant="acme", input="hi", messages=[{"role": "user", "content": "hi"}]
    )
    before = AgentRun.objects.get(pk=run.pk)

    # when a caller with 100 s left tries to advance it, then nothing is done
    assert run_advance(run_id=run.pk, seconds_left=100.0) is Advance.NO_TIME
    after = AgentRun.objects.get(pk=run.pk)
    assert (after.step_token, after.step_lease_until, after.messages, after.turn) == (None, None, before.messages, 0)
    assert after.updated_at == before.updated_at

    # and with enough time the step is taken
    assert run_advance(run_id=run.pk, seconds_left=200.0) is Advance.STEPPED
    done = AgentRun.objects.get(pk=run.pk)
    assert done.status == RunStatus.COMPLETED and done.output == "hello"
    assert run_advance(run_id=run.pk, seconds_left=200.0) is Advance.IDLE


@pytest.mark.django_db
def test_the_sweep_wakes_idle_runs_whose_turn_calls_all_settled(alice: User) -> None:
    agent = Agent.objects.create(name="sweep", script=SCRIPT)

    def run_with(status: RunStatus, *call_statuses: CallStatus) -> AgentRun:
        run = AgentRun.objects.create(agent=agent, user=alice, tenant="acme", input="x", status=status, turn=1)
        for position, call_status in enumerate(call_statuses):
            ToolCall.objects.create(
                tool_name="record_effect",
                status=call_status,
                run_id=run.pk,
                turn=1,
                position=position,
                kind=CallKind.CALL,
                tenant="acme",
            )
        return run

    running = run_with(RunStatus.RUNNING, CallStatus.SUCCEEDED)
    # a queued call's lost message is sent again by the calls' sweep (calls_redispatch_stale), not by advancing
    # its run (which does nothing while a call of its turn is open); its settle wakes the run
    running_queued = run_with(RunStatus.RUNNING, CallStatus.QUEUED)
    settled = run_with(RunStatus.WAITING, CallStatus.SUCCEEDED, CallStatus.REJECTED)
    held = run_with(RunStatus.WAITING, CallStatus.SUCCEEDED, CallStatus.PENDING_APPROVAL)
    queued = run_with(RunStatus.WAITING, CallStatus.QUEUED)
    done = run_with(RunStatus.COMPLETED, CallStatus.SUCCEEDED)
    later = timezone.now() + timedelta(seconds=1)

    assert set(runs_to_wake(idle_since=later)) == {running.pk, settled.pk}
    assert runs_to_wake(idle_since=timezone.now() - timedelta(hours=1)) == []
    assert {held.pk, queued.pk, done.pk, running_queued.pk}.isdisjoint(runs_to_wake(idle_since=later))
    assert run_advance(run_id=running_queued.pk) is Advance.IDLE


@pytest.mark.django_db(transaction=True)  # commits for real, so the settle is announced inside the task
@pytest.mark.parametrize(("deadline", "inline"), [(900.0, False), (120.0, True)])
def test_the_tool_task_takes_the_next_step_only_when_it_fits_its_time_limit(
    alice: User, caplog: pytest.LogCaptureFixture, deadline: float, inline: bool
) -> None:
    # given a run waiting for its one queued call, on a provider whose calls may take ``deadline`` seconds
    from toolhub.tasks import execute_tool_call_task

    limit = execute_tool_call_task.soft_time_limit
    assert 120.0 + STEP_LEASE_MARGIN_SECONDS < limit < 900.0  # 120 s fits the tool task's limit, 900 s does not
    provider = ModelProvider.objects.create(
        name="scripted-limits", kind=ProviderKind.SCRIPTED, deadline_seconds=deadline
    )
    asked = {"id": "call_1_1", "type": "function", "function": {"name": "record_effect", "arguments": "{}"}}
    agent = Agent.objects.create(
        name="limits", script=[{"content": "unused"}, {"content": "ok"}], tools=["record_effect"], provider=provider
    )
    run = AgentRun.objects.create(
        agent=agent,
        user=alice,
        tenant="acme",
        input="hi",
        turn=1,
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [asked]}],
    )
    call = ToolCall.objects.create(
        tool_name="record_effect",
        arguments={"note": "a"},
        status=CallStatus.QUEUED,
        run_id=run.pk,
        turn=1,
        model_call_id="call_1_1",
        tenant="acme",
        user_id=alice.pk,
        context={"tenant": "acme", "run_id": str(run.pk)},
    )

    # when a tool task runs the call
    with caplog.at_level(logging.INFO):
        execute_tool_call_task.apply(args=[str(call.pk)])

    # then the run completed: in the tool task when the step fits, else through advance_run_task
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and run.output == "ok"
    assert ("advanced in the worker that settled its last call" in caplog.text) is inline
    assert ("does not fit this tool task's time limit" in caplog.text) is not inline
    assert ("advance_run_task" in caplog.text) is not inline
