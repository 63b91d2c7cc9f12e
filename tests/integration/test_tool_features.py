"""Tool features on a real Celery worker process: a timeout enforced, progress stored while running."""

import time

import pytest
from django.contrib.auth.models import User

from tests.integration.workers import Worker, wait_for
from tests.testapp.models import SideEffect
from toolhub.authorization import CallPrincipal
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _request(tool_name: str, arguments: dict, user: User) -> ToolCall:
    principal = CallPrincipal(user_id=user.pk, username=user.get_username(), tenant="acme")
    return tool_call_request(
        request=CallRequest(tool_name=tool_name, arguments=arguments, principal=principal, context=ToolContext())
    )


def test_the_worker_stops_a_call_at_its_timeout(celery_worker: Worker, alice: User) -> None:
    # given a tool limited to 1 s, asked to work for 20 s
    started = time.monotonic()
    call = _request("overrunning_effect", {"seconds": 20}, alice)

    # then the worker fails it at about its limit, with a clear error, and the tool's work never completed
    failed = wait_for(
        lambda: (c := ToolCall.objects.get(pk=call.pk)).status == CallStatus.FAILED and c, timeout=15, what="timeout"
    )
    elapsed = time.monotonic() - started
    assert failed.error.startswith("Tool 'overrunning_effect' did not finish within its time limit of 1 s")
    assert failed.worker.startswith(celery_worker.name)
    assert elapsed < 10
    assert not SideEffect.objects.filter(call_id=str(call.pk)).exists()
    events = list(AuditEvent.objects.filter(call_id=call.id).order_by("seq").values_list("event_type", flat=True))
    assert events == ["call.requested", "call.queued", "call.running", "call.failed"]

    # and the worker process is still healthy: the next call runs normally
    quick = _request("overrunning_effect", {"seconds": 0}, alice)
    wait_for(lambda: ToolCall.objects.get(pk=quick.pk).status == CallStatus.SUCCEEDED, what="next call")


def test_progress_is_stored_on_the_call_while_it_runs(celery_worker: Worker, alice: User) -> None:
    # given a stepped tool (1 s per step, progress written at most every 0.5 s)
    call = _request("stepped_work", {"steps": 4, "seconds_per_step": 1.0}, alice)

    # then progress shows up on the row while the call is still running
    running = wait_for(
        lambda: (c := ToolCall.objects.get(pk=call.pk)).status == CallStatus.RUNNING and c.progress and c,
        timeout=20,
        what="progress while running",
    )
    assert running.progress[0]["message"].startswith("step ")

    # and when it finishes, every step is there, and the model's text holds only the result
    done = wait_for(
        lambda: (c := ToolCall.objects.get(pk=call.pk)).status == CallStatus.SUCCEEDED and c, timeout=20, what="done"
    )
    assert [u["current"] for u in done.progress] == [1, 2, 3, 4]
    assert done.progress[-1]["fraction"] == 1.0
    assert done.model_text() == "worked 4 steps"


def test_a_tool_suspends_itself_on_the_worker_and_resumes_with_the_posted_result(
    celery_worker: Worker, alice: User
) -> None:
    from toolhub.waiting import tool_call_submit_result

    # given a tool that suspends itself mid-call, run by a real worker
    call = _request("suspending_effect", {"note": "ship it"}, alice)

    # then the call awaits its result, with why and what the executor needs stored on it
    waiting = wait_for(
        lambda: (c := ToolCall.objects.get(pk=call.pk)).status == CallStatus.AWAITING_RESULT and c,
        timeout=20,
        what="suspension",
    )
    assert waiting.suspension == {"reason": "waiting for the outside executor", "payload": {"note": "ship it"}}
    assert waiting.worker.startswith(celery_worker.name) and waiting.lease_expires_at is None

    # when the outside executor posts the result, the call succeeds with it (and nothing re-runs the tool)
    done = tool_call_submit_result(call_id=call.pk, actor="external:alice", result={"shipped": True})
    assert done.status == CallStatus.SUCCEEDED
    events = list(AuditEvent.objects.filter(call_id=call.id).order_by("seq").values_list("event_type", flat=True))
    assert events == ["call.requested", "call.queued", "call.running", "call.awaiting_result", "call.succeeded"]
    time.sleep(1)
    assert ToolCall.objects.get(pk=call.pk).result == {"shipped": True}
