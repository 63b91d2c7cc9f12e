"""The whole governed flow on real services: API -> waiting -> approve -> worker executes -> completed."""

import json
import os
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from demo.models import Order
from tests.integration.workers import LOG_DIR, Worker, wait_for
from tests.testapp.models import SideEffect
from toolhub.api.keys import api_key_issue
from toolhub.audit_verify import verify_audit_chains
from toolhub.models import AuditEvent, CallStatus, ToolCall

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ORDER_SCRIPT = [
    {"content": "", "tool_calls": [{"name": "create_order", "arguments": {"product": "Laptop", "amount": "5000"}}]},
    {"content": "Order placed: {last_tool_result}"},
]


def _token_client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_key_issue(user)}")
    return client


def _run(client: APIClient, run_id: str) -> dict:
    response = client.get(f"/api/v1/runs/{run_id}/")
    assert response.status_code == 200, response.content
    return response.json()


def test_run_waits_for_approval_then_a_worker_executes_the_call_once(
    celery_worker: Worker, alice: User, operator: User, developer: User
) -> None:
    # given an agent of acme (made by a developer) whose model asks for an order above the approval threshold
    alice_api, operator_api = _token_client(alice), _token_client(operator)
    created = _token_client(developer).post(
        "/api/v1/agents/",
        {"name": "orders", "model": {"provider": "scripted", "script": ORDER_SCRIPT}, "tools": ["create_order"]},
        format="json",
    )
    assert created.status_code == 201, created.content

    # when alice starts a run over the API
    started_at = time.perf_counter()
    started = alice_api.post("/api/v1/runs/", {"agent": "orders", "input": "create an order of 5000"}, format="json")
    assert started.status_code == 201, started.content
    run_id = started.json()["id"]

    # then the run waits, fully persisted, with one pending approval and nothing executed
    waiting = wait_for(lambda: (r := _run(alice_api, run_id))["status"] == "waiting" and r, what="run waiting")
    assert len(waiting["pending_approvals"]) == 1
    assert waiting["tool_calls"][0]["status"] == "pending_approval"
    assert Order.objects.count() == 0

    # when the operator approves over the API
    approval_id = waiting["pending_approvals"][0]
    pending = operator_api.get("/api/v1/approvals/?status=pending").json()["results"]
    assert [item["id"] for item in pending] == [approval_id]
    approved = operator_api.post(f"/api/v1/approvals/{approval_id}/approve/", {"comment": "fine"}, format="json")
    assert approved.status_code == 200, approved.content

    # then a worker executes the call exactly once and the run completes
    done = wait_for(lambda: (r := _run(alice_api, run_id))["status"] == "completed" and r, what="run completed")
    elapsed = time.perf_counter() - started_at
    assert Order.objects.count() == 1
    call = ToolCall.objects.get(run_id=run_id)
    assert call.status == CallStatus.SUCCEEDED
    assert call.attempts == 1
    assert call.worker.startswith(f"itest-{os.getpid()}@")
    assert "Order placed" in done["output"] and '"product": "Laptop"' in done["output"]
    events = list(AuditEvent.objects.filter(call_id=call.id).order_by("seq").values_list("event_type", flat=True))
    assert events == [
        "call.requested",
        "call.pending_approval",
        "approval.approve",
        "call.queued",
        "call.running",
        "call.succeeded",
    ]
    # a second approval is refused and runs nothing
    again = operator_api.post(f"/api/v1/approvals/{approval_id}/approve/", {}, format="json")
    assert again.status_code == 409
    checked, problems = verify_audit_chains()
    assert problems == [] and checked >= len(events)
    call_command("verify_audit", "--no-progress")

    LOG_DIR.mkdir(exist_ok=True)
    figures = Path(LOG_DIR / "figures.json")
    data = json.loads(figures.read_text()) if figures.exists() else {}
    data["approval_flow_wall_seconds"] = round(elapsed, 3)
    figures.write_text(json.dumps(data, indent=2))
    print(f"\napproval flow wall time (start run -> waiting -> approve -> completed): {elapsed:.3f}s")


def test_a_second_delivery_of_the_same_call_does_not_run_it_again(celery_worker: Worker, alice: User) -> None:
    # given a low-risk call that a worker executed
    from toolhub.authorization import CallPrincipal
    from toolhub.pipeline import CallRequest, tool_call_request
    from toolhub.tasks import execute_tool_call_task
    from toolhub.tools.context import ToolContext

    principal = CallPrincipal(user_id=alice.pk, username="alice", tenant="acme")
    call = tool_call_request(
        request=CallRequest(
            tool_name="record_effect", arguments={"note": "once"}, principal=principal, context=ToolContext()
        )
    )
    wait_for(lambda: ToolCall.objects.get(pk=call.pk).status == CallStatus.SUCCEEDED, what="call succeeded")

    # when the broker delivers the same message twice more
    execute_tool_call_task.delay(str(call.pk))
    execute_tool_call_task.delay(str(call.pk))
    time.sleep(1.5)

    # then the tool ran once
    assert SideEffect.objects.filter(call_id=str(call.pk)).count() == 1
    assert ToolCall.objects.get(pk=call.pk).attempts == 1
