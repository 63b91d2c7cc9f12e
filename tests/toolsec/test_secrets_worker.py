"""On a real Celery worker process: the secret reaches neither the database nor the worker's log."""

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User

from tests.integration.conftest import _require_services
from tests.integration.workers import LOG_DIR, Worker, wait_for
from tests.toolsec.leakapp.tools import SECRET_ENV, leaky
from tests.toolsec.leaks import SECRET, assert_no_secret, traces_of
from toolhub import registry
from toolhub.authorization import CallPrincipal
from toolhub.celery import app as celery_app
from toolhub.models import CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CHANNELS = {
    "exception": CallStatus.FAILED,
    "tool_error": CallStatus.FAILED,
    "error_result": CallStatus.FAILED,
    "result": CallStatus.SUCCEEDED,
    "text": CallStatus.SUCCEEDED,
    "progress": CallStatus.SUCCEEDED,
    "text_artifact": CallStatus.SUCCEEDED,
    "json_artifact": CallStatus.SUCCEEDED,
    "binary_artifact": CallStatus.FAILED,
    "unserializable": CallStatus.FAILED,
}


@pytest.fixture
def own_queue() -> Iterator[str]:
    """Route this test's tasks to a queue only its own worker consumes (the session's worker lacks the tool)."""
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = f"{previous}-secrets"
    yield celery_app.conf.task_default_queue
    celery_app.control.purge()
    celery_app.conf.task_default_queue = previous


def test_a_worker_stores_and_logs_no_secret(own_queue: str, alice: User) -> None:
    # given a worker whose environment holds the secret, and that knows the leaky tool
    _require_services()
    worker = Worker(
        "secrets", concurrency=1, DJANGO_SETTINGS_MODULE="tests.toolsec.worker_settings", **{SECRET_ENV: SECRET}
    )
    log = LOG_DIR / f"worker-{worker.name}.log"
    log.unlink(missing_ok=True)
    worker.start()
    principal = CallPrincipal(user_id=alice.pk, username=alice.username, tenant="acme")
    try:
        # when the tool leaks its secret through every channel
        with registry.temporarily(leaky):
            calls = {
                channel: tool_call_request(
                    request=CallRequest(
                        tool_name="leaky", arguments={"channel": channel}, principal=principal, context=ToolContext()
                    )
                )
                for channel in CHANNELS
            }
        settled = {
            channel: wait_for(
                lambda c=call: (row := ToolCall.objects.get(pk=c.pk)).is_settled and row,
                timeout=60,
                what=f"the {channel} call",
            )
            for channel, call in calls.items()
        }
    finally:
        worker.stop()

    # then every call ran on the worker and settled as expected, with no trace of the secret
    assert {channel: call.status for channel, call in settled.items()} == CHANNELS
    assert all(call.worker.startswith(worker.name) for call in settled.values())
    assert settled["result"].result["key"] == "[secret]"
    assert settled["exception"].error_detail.count("Bearer [secret]") >= 1
    assert_no_secret(*(traces_of(call) for call in settled.values()))
    # and the worker's log holds the tool's lines, its prints and the tracebacks, all scrubbed
    text = log.read_text(errors="replace")
    assert_no_secret(text)
    assert text.count("calling upstream with key [secret] (url-encoded [secret])") == len(CHANNELS)
    assert "debug print: key=[secret]" in text
    assert "ConnectionError: upstream said 401 for [secret]" in text
