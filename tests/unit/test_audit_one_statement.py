"""The audit append that PostgreSQL finishes in one statement: its hashes are the ones Python computes.

The database completes each event's hashed text with the chain's previous hash and seq and hashes it;
``verify_audit`` recomputes every hash in Python. Any difference in escaping or encoding between the two
(quotes, backslashes, control characters, text outside the BMP, CJK) would break every chain it touches.
"""

import uuid

import pytest
from django.db import connection, transaction

from tests.helpers import assert_audit_intact
from toolhub.audit import EventSpec, audit_append, audit_call_events
from toolhub.audit_hash import canonical_json, compute_hash, hash_parts
from toolhub.audit_sql import appended_sql
from toolhub.models import AuditChainHead, AuditEvent, CallStatus, ToolCall
from toolhub.prepared import prepared_cursor

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

AWKWARD_TEXT = [
    'quote " and backslash \\ and slash /',
    "new\nline, tab\t, carriage\r, bell \x07, escape \x1b, delete \x7f",
    "naïve café, 中文工具说明, emoji 🧾 outside the BMP",
    "\u2028 line separator and \u2029 paragraph separator",
    "x" * 5000,
]


@pytest.mark.parametrize("text", AWKWARD_TEXT)
def test_hashes_finished_by_the_database_match_pythons(text: str) -> None:
    call_id = uuid.uuid4()
    with transaction.atomic():
        events = [
            audit_append(
                event_type="test.awkward",
                actor=text[:200],
                data={"text": text, "index": index},
                call_id=call_id,
                run_id=uuid.uuid4() if index else None,
                tool_name=text[:200],
                status="queued",
                tenant=text[:100],
            )
            for index in range(3)
        ]

    stored = list(AuditEvent.objects.filter(call_id=call_id).order_by("seq"))
    assert [event.hash for event in stored] == [event.hash for event in events]
    assert all(compute_hash(event) == event.hash for event in stored)
    assert [event.prev_hash for event in stored[1:]] == [event.hash for event in stored[:-1]]
    assert_audit_intact()


def test_the_parts_rebuild_the_canonical_text_of_the_columns() -> None:
    moment, call_id = "2026-11-30T18:00:00.123456+00:00", uuid.uuid4()
    for text in AWKWARD_TEXT:
        parts = hash_parts(7, "call.queued", call_id, None, text, "queued", text, text, moment, text)
        assert parts is not None
        before, middle, after = parts
        columns = {
            "chain": 7,
            "seq": 42,
            "event_type": "call.queued",
            "call_id": str(call_id),
            "run_id": None,
            "tool_name": text,
            "status": "queued",
            "tenant": text,
            "actor": text,
            "created_at": moment,
            "data": text,
            "prev_hash": "ab12",
        }
        assert before + "ab12" + middle + "42" + after == canonical_json(columns)


def test_a_chain_without_a_head_row_starts_in_the_same_statement() -> None:
    AuditChainHead.objects.all().delete()
    call_id = uuid.uuid4()
    with transaction.atomic():
        event = audit_append(event_type="test.first", actor="tester", call_id=call_id)

    head = AuditChainHead.objects.get(chain=event.chain)
    assert (event.seq, event.prev_hash) == (1, "")
    assert (head.seq, head.hash, head.previous_hash) == (1, event.hash, "")
    assert_audit_intact()


def test_a_change_that_touches_no_row_appends_nothing_and_moves_no_head() -> None:
    call = ToolCall.objects.create(tool_name="record_effect", status=CallStatus.SUCCEEDED, tenant="acme")
    before = list(AuditChainHead.objects.values_list("chain", "seq", "hash"))
    change = ("UPDATE toolhub_toolcall SET status = %s WHERE id = %s AND status = %s", ["running", call.id, "queued"])

    written = audit_call_events(call, [EventSpec("call.running", "tester")], change=change)

    assert written is None
    assert list(AuditChainHead.objects.values_list("chain", "seq", "hash")) == before
    assert not AuditEvent.objects.filter(call_id=call.id).exists()


def test_a_change_and_its_events_commit_together_outside_a_transaction(transactional_db: None) -> None:
    call = ToolCall.objects.create(tool_name="record_effect", status=CallStatus.QUEUED, tenant="acme")
    change = ("UPDATE toolhub_toolcall SET status = %s WHERE id = %s AND status = %s", ["running", call.id, "queued"])
    assert not connection.in_atomic_block

    written = audit_call_events(
        call, [EventSpec("call.running", "tester"), EventSpec("call.note", "tester", {"a": 1})], change=change
    )

    assert written is not None and [event.seq for event in written] == [written[0].seq, written[0].seq + 1]
    assert ToolCall.objects.get(pk=call.pk).status == "running"
    stored = AuditEvent.objects.filter(call_id=call.id).order_by("seq")
    assert [event.hash for event in stored] == [event.hash for event in written]
    assert all(compute_hash(event) == event.hash for event in written)
    assert_audit_intact()


def test_a_failed_statement_leaves_neither_the_change_nor_the_events(transactional_db: None) -> None:
    call = ToolCall.objects.create(tool_name="record_effect", status=CallStatus.QUEUED, tenant="acme")
    heads = list(AuditChainHead.objects.values_list("chain", "seq", "hash"))
    # The change succeeds, then the events' insert fails (a status longer than its column): all or nothing.
    change = ("UPDATE toolhub_toolcall SET status = %s WHERE id = %s AND status = %s", ["running", call.id, "queued"])
    with pytest.raises(Exception, match="too long"):
        audit_call_events(call, [EventSpec("call.running", "tester", status="s" * 50)], change=change)

    assert ToolCall.objects.get(pk=call.pk).status == "queued"
    assert list(AuditChainHead.objects.values_list("chain", "seq", "hash")) == heads
    assert not AuditEvent.objects.filter(call_id=call.id).exists()


def test_the_statement_is_built_once_per_shape() -> None:
    appended_sql.cache_clear()
    appended_sql(3, None)
    appended_sql(3, None)
    appended_sql(2, "UPDATE t SET a = %s")
    assert appended_sql.cache_info().misses == 2 and appended_sql.cache_info().hits == 1
    with pytest.raises(ValueError):
        appended_sql(0, None)


@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "client-bound"])
def test_the_statement_appends_the_same_chain_prepared_or_not(settings: object, prepared: bool) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "PREPARED_STATEMENTS": prepared}  # type: ignore[attr-defined]
    call_id = uuid.uuid4()
    with transaction.atomic():
        # more executions than psycopg waits for before it prepares a statement
        events = [audit_append(event_type="test.repeat", actor="tester", call_id=call_id) for _ in range(5)]

    assert [event.seq for event in events] == list(range(events[0].seq, events[0].seq + 5))
    assert all(compute_hash(event) == event.hash for event in events)
    assert_audit_intact()
    if prepared:  # the server holds it prepared for this session
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%auditchainhead%"])
            assert cursor.fetchone()[0] >= 1


def test_a_connection_that_prepares_plans_its_statements_generically(transactional_db: None) -> None:
    """Set once per connection, outside a transaction, so that a rollback cannot take it back."""
    connection.close()
    with transaction.atomic(), prepared_cursor(connection) as cursor:
        cursor.execute("SELECT 1")
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "auto"  # not inside a transaction, which could be rolled back

    with prepared_cursor(connection) as cursor:
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "force_generic_plan"
    with transaction.atomic():
        transaction.set_rollback(True)
    with connection.cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "force_generic_plan"
