"""The hot path's hand-built writes store a call exactly as the ORM would store it.

A call's INSERT (``call_insert``) and its guarded status moves (``call_transition``) are SQL built once
and run inside the audit append's statement, not the ORM's ``save``. Text, JSON values of every shape,
times to the microsecond, UUIDs and keys must come back unchanged; a value the ORM would refuse is
refused too, with nothing written.
"""

import datetime as dt
import uuid
import warnings

import pytest
from django.db import transaction
from django.utils import timezone

from tests.unit.test_audit_one_statement import AWKWARD_TEXT
from toolhub.audit import EventSpec
from toolhub.calls import call_insert, call_transition
from toolhub.models import CallStatus, ToolCall

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

#: JSON values of every shape a JSON column may hold, the awkward text among them.
JSON_VALUES = [None, "plain text", 0, -3.25, True, [], {}, [1, "two", None], {"nested": {"list": AWKWARD_TEXT}}]


def _call(**fields: object) -> ToolCall:
    return ToolCall(
        id=uuid.uuid4(),
        tool_name="record_effect",
        status=CallStatus.QUEUED,
        tenant="acme",
        queued_at=timezone.now(),
        **fields,
    )


def _insert(call: ToolCall) -> None:
    with transaction.atomic():
        assert call_insert(call, [EventSpec("call.requested", "test")])


@pytest.mark.parametrize("text", AWKWARD_TEXT)
def test_text_columns_come_back_unchanged(text: str) -> None:
    call = _call(raw_arguments=text, error=text, tool_version=text[:32], arguments={"text": text}, context={"k": text})
    _insert(call)

    stored = ToolCall.objects.get(pk=call.pk)
    assert (stored.raw_arguments, stored.error, stored.tool_version) == (text, text, text[:32])
    assert stored.arguments == {"text": text}
    assert stored.context == {"k": text}


@pytest.mark.parametrize("value", JSON_VALUES)
def test_json_columns_keep_their_value_whatever_its_shape(value: object) -> None:
    call = _call(result=value, arguments={"value": value})
    _insert(call)

    stored = ToolCall.objects.get(pk=call.pk)
    assert stored.result == value
    assert stored.arguments == {"value": value}


def test_times_keys_and_numbers_come_back_as_written() -> None:
    moment = dt.datetime(2026, 11, 30, 23, 59, 59, 123456, tzinfo=dt.UTC)
    run_id = uuid.uuid4()
    call = _call(run_id=run_id, turn=7, position=3, attempts=2, lease_expires_at=moment, started_at=moment)
    _insert(call)

    stored = ToolCall.objects.get(pk=call.pk)
    assert (stored.run_id, stored.turn, stored.position, stored.attempts) == (run_id, 7, 3, 2)
    assert stored.lease_expires_at == moment and stored.started_at == moment
    assert stored.created_at == call.created_at and stored.created_at is not None  # auto_now_add, as stamped
    assert stored.user_id is None


def test_a_guarded_move_writes_its_values_the_same_way() -> None:
    call = _call()
    _insert(call)
    call = ToolCall.objects.get(pk=call.pk)
    finished = timezone.now()

    with transaction.atomic():
        assert call_transition(
            call,
            to=CallStatus.RUNNING,
            allowed_from={CallStatus.QUEUED},
            actor="worker:test",
            worker='w "1" \\ 中文',
            started_at=finished,
            attempts=1,
        )
    with transaction.atomic():
        assert call_transition(
            call, to=CallStatus.SUCCEEDED, allowed_from={CallStatus.RUNNING}, actor="worker:test", result=["a", 1]
        )

    stored = ToolCall.objects.get(pk=call.pk)
    assert (stored.status, stored.worker, stored.started_at, stored.result) == (
        CallStatus.SUCCEEDED,
        'w "1" \\ 中文',
        finished,
        ["a", 1],
    )


def test_a_naive_time_is_made_aware_as_the_orm_would() -> None:
    naive = dt.datetime(2026, 11, 30, 12, 0, 0)
    call = _call(lease_expires_at=naive)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _insert(call)

    assert any("naive datetime" in str(warning.message) for warning in caught)
    assert ToolCall.objects.get(pk=call.pk).lease_expires_at == timezone.make_aware(naive)


def test_a_value_json_cannot_hold_is_refused_and_nothing_is_written() -> None:
    call = _call(result={"when": timezone.now()})

    with pytest.raises(TypeError), transaction.atomic():
        call_insert(call, [EventSpec("call.requested", "test")])

    assert not ToolCall.objects.filter(pk=call.pk).exists()
