"""Serial execution per agent (AgentScope ``parallel(false)``): one call of a turn at a time, in the model's order."""

import pytest
from django.contrib.auth.models import User

from agents_app.models import AgentRun, RunStatus
from agents_app.services import agent_create, run_start
from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.testapp.models import SideEffect
from toolhub.models import AuditEvent, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

TURN = [
    {"name": "record_effect", "arguments": {"note": "first"}},
    {"name": "record_efect", "arguments": {"note": "misspelt"}},
    {"name": "risky_effect", "arguments": {"note": "held"}},
    {"name": "record_effect", "arguments": {"note": "after the held one"}},
]


def _agent(serial: bool) -> object:
    return agent_create(
        name="serial" if serial else "parallel",
        script=[{"content": "", "tool_calls": TURN}, {"content": "done: {last_tool_result}"}],
        tools=["record_effect", "risky_effect"],
        serial_tool_execution=serial,
    )


def _statuses(run: AgentRun) -> list[tuple[int, str]]:
    return list(ToolCall.objects.filter(run_id=run.pk).order_by("position").values_list("position", "status"))


def test_a_held_call_holds_the_calls_after_it_until_it_is_decided(alice: User, operator: User) -> None:
    # given a serial agent whose model asks for four calls in one turn, the third needing approval
    run = run_start(agent=_agent(serial=True), user=alice, input="four things")

    # then the first ran, the misspelt one was refused, the held one waits, and the fourth was not even requested
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    assert _statuses(run) == [(0, "succeeded"), (1, "invalid"), (2, "pending_approval")]
    assert [call["position"] for call in run.deferred_calls] == [3]
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["first"]

    # when an operator approves the held call
    held = ApprovalRequest.objects.get(call__run_id=run.pk)
    approval_approve(request_id=held.pk, user=operator, comment="fine")

    # then the rest ran after it, in the model's order, and the run completed with every result in order
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.error
    assert _statuses(run) == [(0, "succeeded"), (1, "invalid"), (2, "succeeded"), (3, "succeeded")]
    assert run.deferred_calls == [] and run.turn == 2
    assert list(SideEffect.objects.order_by("pk").values_list("note", flat=True)) == [
        "first",
        "held",
        "after the held one",
    ]
    assert [m["tool_call_id"] for m in run.messages if m["role"] == "tool"] == [f"call_1_{i}" for i in range(1, 5)]
    # and each call was requested only after the one before it settled (audit order)
    requested = list(
        AuditEvent.objects.filter(run_id=run.pk, event_type="call.requested").order_by("pk").values_list("call_id")
    )
    by_id = dict(ToolCall.objects.filter(run_id=run.pk).values_list("id", "position"))
    assert [by_id[call_id] for (call_id,) in requested] == [0, 1, 2, 3]


def test_without_serial_execution_every_call_of_the_turn_is_requested_at_once(alice: User) -> None:
    run = run_start(agent=_agent(serial=False), user=alice, input="four things")

    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    assert _statuses(run) == [(0, "succeeded"), (1, "invalid"), (2, "pending_approval"), (3, "succeeded")]
    assert run.deferred_calls == []


def test_the_serial_option_is_set_and_shown_through_the_api(developer_client: object) -> None:
    body = {"name": "one-by-one", "model": {"provider": "scripted", "script": []}, "serial_tool_execution": True}
    created = developer_client.post("/api/v1/agents/", body, format="json")  # type: ignore[attr-defined]
    assert created.status_code == 201, created.content
    assert created.json()["serial_tool_execution"] is True and created.json()["stream"] is False

    changed = developer_client.patch(  # type: ignore[attr-defined]
        f"/api/v1/agents/{created.json()['id']}/", {"serial_tool_execution": False, "stream": True}, format="json"
    )
    assert changed.status_code == 200, changed.content
    assert (changed.json()["serial_tool_execution"], changed.json()["stream"]) == (False, True)

    refused = developer_client.patch(  # type: ignore[attr-defined]
        f"/api/v1/agents/{created.json()['id']}/", {"serial_tool_execution": "sometimes"}, format="json"
    )
    assert refused.status_code == 400 and "serial_tool_execution" in refused.json()
