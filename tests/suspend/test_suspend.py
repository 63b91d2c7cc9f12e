"""A tool suspends itself mid-call (``raise ToolSuspend``): the call awaits its result from outside."""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from agents_app.models import RunStatus
from tests.helpers import RequestCall, audit_text, event_types
from tests.tools.conftest import StartRun
from toolhub import Secret, ToolSuspend, registry, tool
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.sweeper import calls_expire_awaiting_results


@tool
def wire_transfer(amount: int) -> str:
    """Ask the bank to wire money; the bank answers later."""
    raise ToolSuspend("the bank confirms transfers by callback", {"amount": amount, "iban": "DE00"})


SCRIPT = [
    {"content": "", "tool_calls": [{"name": "wire_transfer", "arguments": {"amount": 5}}]},
    {"content": "Bank says: {last_tool_result}"},
]


def test_a_suspended_call_awaits_its_result_and_the_run_resumes(
    start_run: StartRun, alice: User, alice_client: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    with registry.temporarily(wire_transfer):
        run = start_run(alice, tools=["wire_transfer"], script=SCRIPT)
        call = ToolCall.objects.get(run_id=run.id)

        # the call awaits its result, with the reason and payload stored and audited; the run waits
        assert call.status == CallStatus.AWAITING_RESULT
        assert call.suspension == {
            "reason": "the bank confirms transfers by callback",
            "payload": {"amount": 5, "iban": "DE00"},
        }
        assert event_types(call)[-1] == "call.awaiting_result"
        audited = AuditEvent.objects.get(call_id=call.id, event_type="call.awaiting_result")
        assert audited.actor.startswith("worker:") and audited.payload["payload"] == {"amount": 5, "iban": "DE00"}
        assert run.status != RunStatus.COMPLETED and run.output == ""
        shown = alice_client.get(f"/api/v1/calls/{call.id}/").json()
        assert shown["suspension"]["reason"] == "the bank confirms transfers by callback"

        # when the result is posted, the call succeeds and the run completes with it
        with django_capture_on_commit_callbacks(execute=True):
            response = alice_client.post(f"/api/v1/calls/{call.id}/result/", {"result": "wired"}, format="json")

    assert response.status_code == 200, response.content
    call.refresh_from_db()
    run.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.result == "wired"
    assert event_types(call)[-2:] == ["call.awaiting_result", "call.succeeded"]
    assert run.status == RunStatus.COMPLETED and run.output == "Bank says: wired"


def test_a_suspended_call_expires_when_no_result_arrives(
    start_run: StartRun, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    with registry.temporarily(wire_transfer):
        run = start_run(alice, tools=["wire_transfer"], script=SCRIPT)
        call = ToolCall.objects.get(run_id=run.id)
        # the expiry counts from the suspension
        assert call.queued_at is not None and calls_expire_awaiting_results() == 0
        ToolCall.objects.filter(pk=call.pk).update(queued_at=timezone.now() - timedelta(days=2))
        with django_capture_on_commit_callbacks(execute=True):
            assert calls_expire_awaiting_results() == 1
    call.refresh_from_db()
    run.refresh_from_db()
    assert call.status == CallStatus.EXPIRED
    assert run.status == RunStatus.COMPLETED and "expired unanswered" in run.output


@tool
def await_colleague(task: str) -> str:
    """Hand a task to work toolhub itself settles later (as a subagent's child run does)."""
    raise ToolSuspend("a colleague answers", {"task": task}, expires=False)


def test_a_call_suspended_without_expiry_is_left_alone_by_the_sweeper(
    start_run: StartRun, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    script = [{"content": "", "tool_calls": [{"name": "await_colleague", "arguments": {"task": "t"}}]}, {"content": ""}]
    with registry.temporarily(await_colleague):
        run = start_run(alice, tools=["await_colleague"], script=script)
        call = ToolCall.objects.get(run_id=run.id)
        assert call.suspension == {"reason": "a colleague answers", "payload": {"task": "t"}, "expires": False}

        # when it has waited far beyond the external results' timeout and the sweeper runs
        ToolCall.objects.filter(pk=call.pk).update(queued_at=timezone.now() - timedelta(days=30))
        with django_capture_on_commit_callbacks(execute=True):
            expired = calls_expire_awaiting_results()

    # then it still waits, and its run with it
    call.refresh_from_db()
    run.refresh_from_db()
    assert expired == 0
    assert call.status == CallStatus.AWAITING_RESULT and run.status == RunStatus.WAITING


def test_secrets_are_scrubbed_from_the_reason_and_payload(
    request_call: RequestCall, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLHUB_TEST_TOKEN", "tok-very-secret")

    @tool(presets={"token": Secret("TOOLHUB_TEST_TOKEN")})
    def leaky_suspend(token: str) -> str:
        """Suspend, quoting the token."""
        raise ToolSuspend(f"waiting with {token}", {"auth": token, "note": "x"})

    with registry.temporarily(leaky_suspend):
        call = request_call("leaky_suspend", {})

    assert call.status == CallStatus.AWAITING_RESULT
    assert "tok-very-secret" not in str(call.suspension) + audit_text(call)
    assert call.suspension["payload"]["note"] == "x" and "[secret]" in call.suspension["reason"]


def test_a_payload_that_cannot_be_stored_fails_the_call(request_call: RequestCall) -> None:
    @tool
    def odd_suspend() -> str:
        """Suspend with a payload JSON cannot hold."""
        raise ToolSuspend("waiting", {"when": object()})

    with registry.temporarily(odd_suspend):
        call = request_call("odd_suspend", {})

    assert call.status == CallStatus.FAILED
    assert "cannot be stored as JSON" in call.error
    assert call.suspension is None
    assert "call.awaiting_result" not in event_types(call)
