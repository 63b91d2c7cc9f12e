"""The benchmarks' raw-SQL floors write what toolhub writes: calls that settle, and audit chains that verify."""

import pytest

from benchmarks.floor import raw_sql_atomic_floor, raw_sql_floor, raw_sql_queued_intent, raw_sql_worker_floor
from tests.helpers import assert_audit_intact
from tests.testapp.models import SideEffect
from tests.testapp.tools import atomic_effect, record_effect
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
