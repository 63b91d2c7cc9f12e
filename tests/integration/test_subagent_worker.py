"""A subagent on real workers: the child's held call suspends the parent; the operator approves; both complete."""

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents_app.models import AgentRun, RunStatus
from agents_app.services import agent_create
from tests.integration.workers import Worker, wait_for
from tests.testapp.models import SideEffect
from toolhub.api.keys import api_key_issue
from toolhub.audit_verify import verify_audit_chains
from toolhub.models import CallStatus, ToolCall

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _token_client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_key_issue(user)}")
    return client


def test_a_held_call_in_a_subagent_waits_for_the_operator_then_both_runs_complete(
    celery_worker: Worker, alice: User, operator: User
) -> None:
    # given a researcher agent whose tool always waits for an operator, and a parent that asks it
    agent_create(
        name="researcher",
        provider="scripted",
        tools=["risky_effect"],
        script=[
            {"content": "", "tool_calls": [{"name": "risky_effect", "arguments": {"note": "child"}}]},
            {"content": "researched: {last_tool_result}"},
        ],
    )
    agent_create(
        name="lead",
        provider="scripted",
        tools=["ask_researcher"],
        script=[
            {"content": "", "tool_calls": [{"name": "ask_researcher", "arguments": {"task": "look"}}]},
            {"content": "lead says: {last_tool_result}"},
        ],
    )
    alice_api, operator_api = _token_client(alice), _token_client(operator)

    # when alice starts the parent run
    started = alice_api.post("/api/v1/runs/", {"agent": "lead", "input": "go"}, format="json")
    assert started.status_code == 201, started.content
    run_id = started.json()["id"]

    # then the child waits for approval and the parent waits on the child
    child = wait_for(
        lambda: (c := AgentRun.objects.filter(parent_run_id=run_id).first()) and c.status == RunStatus.WAITING and c,
        what="child run waiting",
    )
    parent = wait_for(
        lambda: (r := alice_api.get(f"/api/v1/runs/{run_id}/").json())["status"] == "waiting" and r,
        what="parent run waiting",
    )
    assert parent["children"][0]["run"] == str(child.id)
    assert parent["tool_calls"][0]["status"] == "awaiting_result"
    shown_child = operator_api.get(f"/api/v1/runs/{child.id}/").json()
    assert shown_child["parent"]["run"] == run_id and len(shown_child["pending_approvals"]) == 1
    assert not SideEffect.objects.exists()

    # when the operator approves the child's call
    approval_id = shown_child["pending_approvals"][0]
    approved = operator_api.post(f"/api/v1/approvals/{approval_id}/approve/", {"comment": "ok"}, format="json")
    assert approved.status_code == 200, approved.content

    # then the child completes, its answer settles the parent's call, and the parent completes with it
    done = wait_for(
        lambda: (r := alice_api.get(f"/api/v1/runs/{run_id}/").json())["status"] == "completed" and r,
        timeout=60,
        what="parent completed",
    )
    child.refresh_from_db()
    assert child.status == RunStatus.COMPLETED and child.output.startswith("researched: ")
    assert done["output"] == f"lead says: {child.output}"
    call = ToolCall.objects.get(run_id=run_id)
    assert call.status == CallStatus.SUCCEEDED and call.result == child.output
    held = ToolCall.objects.get(run_id=child.id)
    assert held.status == CallStatus.SUCCEEDED and held.worker.startswith(celery_worker.name)
    assert SideEffect.objects.count() == 1
    checked, problems = verify_audit_chains()
    assert checked > 0 and problems == []
