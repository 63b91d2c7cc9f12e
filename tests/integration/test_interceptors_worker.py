"""An ``after`` interceptor on a real Celery worker process: the result is redacted where the tool ran."""

import json
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User

from tests.helpers import for_a_worker
from tests.integration.conftest import AppRole
from tests.integration.workers import Worker, wait_for
from toolhub.authorization import CallPrincipal
from toolhub.celery import app
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PII = {"class": "toolhub.interceptors.PIIRedaction", "options": {"kinds": ["email"], "replacement": "<{kind}>"}}


@pytest.fixture(scope="module")
def pii_worker(app_database_role: AppRole) -> Iterator[tuple[Worker, str]]:
    """A worker of its own queue (no other worker takes these calls), configured with PII redaction."""
    queue = f"{app.conf.task_default_queue}-pii"
    worker = Worker(
        "pii", concurrency=1, CELERY_TASK_DEFAULT_QUEUE=queue, TOOLHUB_TEST_INTERCEPTORS=json.dumps([PII])
    ).start()
    yield worker, queue
    worker.stop()


def test_the_worker_redacts_the_result_before_storing_it(pii_worker: tuple[Worker, str], alice: User) -> None:
    worker, queue = pii_worker
    principal = CallPrincipal(user_id=alice.pk, username=alice.get_username(), tenant="acme")
    default = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    try:
        with for_a_worker():
            call = tool_call_request(
                request=CallRequest(
                    tool_name="saga_step",
                    arguments={"label": "write to ada@example.org"},
                    principal=principal,
                    context=ToolContext(),
                )
            )
    finally:
        app.conf.task_default_queue = default

    done = wait_for(
        lambda: (c := ToolCall.objects.get(pk=call.pk)).status == CallStatus.SUCCEEDED and c, timeout=30, what="done"
    )
    assert done.worker.startswith(worker.name)
    assert done.result["label"] == "write to <email>"
    assert "ada@example.org" not in done.model_text()
    succeeded = AuditEvent.objects.get(call_id=call.id, event_type="call.succeeded")
    assert succeeded.payload["result_changed_by"] == ["interceptor:pii_redaction"]
