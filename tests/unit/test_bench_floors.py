"""The benchmarks' raw-SQL floors write what toolhub writes: calls that settle, and audit chains that verify."""

from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent, AgentRun, RunStatus
from approvals.models import ApprovalDecision, ApprovalStatus
from benchmarks.floor import (
    raw_sql_approval,
    raw_sql_atomic_floor,
    raw_sql_floor,
    raw_sql_queued_intent,
    raw_sql_run_complete,
    raw_sql_worker_floor,
)
from tests.helpers import assert_audit_intact
from tests.testapp.models import SideEffect
from tests.testapp.tools import atomic_effect, record_effect, risky_effect
from toolhub.models import AuditEvent, CallStatus, ToolCall

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def test_the_in_process_floors_settle_their_calls_with_verifiable_events() -> None:
    # when each in-process floor makes a call
    raw_sql_floor(record_effect, "record_effect", "acme")()
    raw_sql_atomic_floor(atomic_effect, "atomic_effect", "acme")()

    # then both calls succeeded with their four events each, their effects happened, and the chains verify
    assert sorted(ToolCall.objects.values_list("tool_name", "status")) == [
        ("atomic_effect", CallStatus.SUCCEEDED),
        ("record_effect", CallStatus.SUCCEEDED),
    ]
    assert AuditEvent.objects.count() == 8 and SideEffect.objects.count() == 2
    assert_audit_intact()


def test_the_worker_floor_claims_once_runs_the_tool_and_settles_with_verifiable_events() -> None:
    # given a queued call written as the floor's asking side writes it
    call_id = raw_sql_queued_intent("record_effect", "acme")()
    assert ToolCall.objects.get(pk=call_id).status == CallStatus.QUEUED

    # when the floor's worker side takes it, and a second delivery of the same call comes
    raw_sql_worker_floor(call_id, record_effect, "record_effect", "acme")
    raw_sql_worker_floor(call_id, record_effect, "record_effect", "acme")

    # then it ran once and settled, its events chain as toolhub's do
    call = ToolCall.objects.get(pk=call_id)
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)
    assert list(AuditEvent.objects.filter(call_id=call_id).order_by("seq").values_list("event_type", flat=True)) == [
        "call.requested",
        "call.queued",
        "call.running",
        "call.succeeded",
    ]
    assert SideEffect.objects.filter(call_id=str(call_id)).count() == 1
    assert_audit_intact()


def test_the_approval_floor_decides_releases_runs_and_completes_the_run(hold: Any, operator: User) -> None:
    # given a call held for approval and a run waiting on it (the floor's rows are toolhub's own tables)
    request = hold()
    agent = Agent.objects.create(name="floor", script=[{"content": "done"}], tools=["risky_effect"])
    run = AgentRun.objects.create(agent=agent, tenant="acme", input="go", status=RunStatus.WAITING)

    # when the floor approves it, then its worker side runs it and completes the run
    raw_sql_approval(
        request.pk,
        request.call_id,
        request.arguments_hash,
        operator.pk,
        operator.get_username(),
        tool_name="risky_effect",
        tenant="acme",
    )
    assert raw_sql_worker_floor(request.call_id, risky_effect, "risky_effect", "acme")
    raw_sql_run_complete(run.pk, "done")

    # then the decision, the request, the call and the run are as toolhub leaves them, and the chains verify
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED and request.decided_at is not None
    assert list(ApprovalDecision.objects.filter(request=request).values_list("decision", "decided_by")) == [
        ("approve", operator.pk)
    ]
    assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.SUCCEEDED
    run.refresh_from_db()
    assert (run.status, run.output) == (RunStatus.COMPLETED, "done")
    assert SideEffect.objects.filter(call_id=str(request.call_id)).count() == 1
    assert_audit_intact()
