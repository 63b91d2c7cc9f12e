"""On a real Celery worker: a stalled model endpoint is cut at its deadline, and sweeps never call it twice."""

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from agents_app.models import AgentRun, ModelProvider, ProviderKind, RunStatus, StopReason
from agents_app.services import agent_create, run_start
from agents_app.tasks import sweep_runs_task
from tests.integration.workers import Worker, wait_for
from tests.unit.fake_openai import FakeModel, Reply, completion, serve

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_worker_gives_up_on_a_stalled_endpoint_at_the_deadline_and_sweeps_never_call_twice(
    celery_worker: Worker,
    alice: User,
) -> None:
    with serve(FakeModel()) as model:
        # given an endpoint that would answer after 8 s, behind a provider with a deadline of 2 s
        model.queue(Reply(200, completion(content="far too late").body, delay=8.0))
        ModelProvider.objects.create(
            name="stalled",
            kind=ProviderKind.OPENAI,
            base_url=model.base_url,
            model_name="test-model",
            deadline_seconds=2.0,
        )
        agent = agent_create(name="stalled-agent", provider="stalled")

        # when a run starts on the worker, and the sweeper keeps waking it meanwhile
        started = time.monotonic()
        run = run_start(agent=agent, user=alice, input="hello")

        def failed() -> bool:
            AgentRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
                updated_at=timezone.now() - timedelta(minutes=5)
            )
            sweep_runs_task.delay(0)
            return AgentRun.objects.get(pk=run.pk).status == RunStatus.FAILED

        wait_for(failed, timeout=20, interval=0.3, what="run failed at the deadline")
        elapsed = time.monotonic() - started

        # then it failed, retryably, before the endpoint answered, after exactly one request
        run.refresh_from_db()
        assert elapsed < 7.0
        assert (run.stop_reason, run.retryable) == (StopReason.MODEL_ERROR, True)
        assert run.error == "Model provider 'stalled' did not answer within its deadline of 2 s; retry the run later."
        time.sleep(1.0)  # sweeps still in the queue find a failed run
        assert len(model.requests) == 1
