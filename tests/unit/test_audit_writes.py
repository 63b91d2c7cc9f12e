"""Rows written with an audited change (``writes``): in its statement on PostgreSQL, all or nothing everywhere.

An operator's decision writes its own row and the request's move beside the call's change and its audit
events; they are one write, so a decision is never recorded without its events, nor its events without it.
"""

import uuid

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from tests.helpers import assert_audit_intact
from tests.testapp.models import PlainRecord
from toolhub.audit import EventSpec, WriteMissedError, audit_call_events
from toolhub.calls import CALL_TRANSITIONS
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.rowwrite import insert_params, insert_sql
from toolhub.transitions import guarded_update_sql

pytestmark = pytest.mark.django_db


def _claim(call_id: uuid.UUID) -> tuple[str, list[object]]:
    """The guarded move of call ``call_id`` from queued to running, as toolhub writes it."""
    return guarded_update_sql(
        ToolCall, call_id, table=CALL_TRANSITIONS, to=CallStatus.RUNNING, allowed_from={CallStatus.QUEUED}, values={}
    )


def _record_write(name: str) -> tuple[str, list[object]]:
    return insert_sql(PlainRecord), insert_params(PlainRecord(name=name, payload={"k": [1, "雨"]}), connection)


def _queued_call() -> ToolCall:
    return ToolCall.objects.create(tool_name="record_effect", status=CallStatus.QUEUED, tenant="acme")


def test_a_write_commits_with_the_change_and_its_events() -> None:
    call = _queued_call()
    change = _claim(call.id)

    with transaction.atomic():
        written = audit_call_events(
            call, [EventSpec("call.running", "tester")], change=change, writes=[_record_write("with the change")]
        )

    assert written is not None
    record = PlainRecord.objects.get(name="with the change")
    assert record.payload == {"k": [1, "雨"]} and record.created_at is not None  # auto_now_add, as the ORM sets it
    assert ToolCall.objects.get(pk=call.pk).status == "running"
    assert list(AuditEvent.objects.filter(call_id=call.id).values_list("event_type", flat=True)) == ["call.running"]
    assert_audit_intact()


def test_a_write_is_kept_when_the_change_touches_no_row() -> None:
    # a decision on a call that left its state some other way is still recorded (and audited by the caller)
    call = ToolCall.objects.create(tool_name="record_effect", status=CallStatus.SUCCEEDED, tenant="acme")
    change = _claim(call.id)

    with transaction.atomic():
        written = audit_call_events(
            call, [EventSpec("call.running", "tester")], change=change, writes=[_record_write("kept")]
        )

    assert written is None
    assert PlainRecord.objects.filter(name="kept").exists()
    assert not AuditEvent.objects.filter(call_id=call.id).exists()


def test_a_write_that_misses_its_row_leaves_nothing_of_the_whole_change() -> None:
    call, other = _queued_call(), uuid.uuid4()
    change = _claim(call.id)
    missing = _claim(other)  # no such row: a guarded move that lost its race

    with pytest.raises(WriteMissedError), transaction.atomic():
        audit_call_events(
            call, [EventSpec("call.running", "tester")], change=change, writes=[_record_write("lost"), missing]
        )

    assert not PlainRecord.objects.filter(name="lost").exists()
    assert ToolCall.objects.get(pk=call.pk).status == "queued"
    assert not AuditEvent.objects.filter(call_id=call.id).exists()
    assert_audit_intact()


def test_writes_go_with_events_that_record_no_change() -> None:
    call = _queued_call()

    with transaction.atomic():
        written = audit_call_events(call, [EventSpec("approval.partial", "tester")], writes=[_record_write("alone")])

    assert written is not None and PlainRecord.objects.filter(name="alone").exists()
    assert list(AuditEvent.objects.filter(call_id=call.id).values_list("event_type", flat=True)) == ["approval.partial"]


@pytest.mark.postgres
def test_on_postgresql_the_writes_the_change_and_the_events_are_one_statement() -> None:
    call = _queued_call()
    change = _claim(call.id)

    with CaptureQueriesContext(connection) as captured, transaction.atomic():
        audit_call_events(
            call, [EventSpec("call.running", "tester")], change=change, writes=[_record_write("a"), _record_write("b")]
        )

    statements = [query["sql"] for query in captured.captured_queries if "SAVEPOINT" not in query["sql"]]
    assert len(statements) == 1, statements
    assert statements[0].count('INSERT INTO "testapp_plainrecord"') == 2
    assert PlainRecord.objects.filter(name__in=["a", "b"]).count() == 2
