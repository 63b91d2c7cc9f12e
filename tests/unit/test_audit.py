"""The audit trail: hash chains that name the first tampered event, and an append-only table."""

import datetime as dt
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from tests.helpers import RequestCall, assert_audit_intact
from toolhub.audit import audit_append
from toolhub.audit_hash import chain_for
from toolhub.audit_verify import verify_audit_chains
from toolhub.models import AuditChainHead, AuditEvent

pytestmark = pytest.mark.django_db

#: The append-only trigger exists on PostgreSQL only; outside CI the collection hook skips these elsewhere.
postgres_only = pytest.mark.postgres


@contextmanager
def tampering() -> Iterator[None]:
    """Let a test change audit rows behind the application's back, as an attacker with SQL access would."""
    postgres = connection.vendor == "postgresql"
    if postgres:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE toolhub_auditevent DISABLE TRIGGER toolhub_audit_append_only")
    try:
        yield
    finally:
        if postgres:
            with connection.cursor() as cursor:
                cursor.execute("ALTER TABLE toolhub_auditevent ENABLE TRIGGER toolhub_audit_append_only")


def _append_events(count: int, key: uuid.UUID | None = None) -> list[AuditEvent]:
    key = key or uuid.uuid4()
    with transaction.atomic():
        return [
            audit_append(
                event_type=f"test.step{index}",
                actor="tester",
                data={"index": index, "amount": Decimal("10.50"), "text": "naïve ✓", "nested": {"b": 1, "a": [1, 2]}},
                call_id=key,
                tool_name="record_effect",
                status="queued",
                tenant="acme",
            )
            for index in range(1, count + 1)
        ]


def _only_problem() -> str:
    checked, problems = verify_audit_chains()
    assert len(problems) == 1
    return str(problems[0])


def test_an_untouched_chain_verifies() -> None:
    events = _append_events(5)

    checked, problems = verify_audit_chains()

    assert problems == []
    assert checked == 5
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert [e.prev_hash for e in events[1:]] == [e.hash for e in events[:-1]]
    head = AuditChainHead.objects.get(chain=events[0].chain)
    assert (head.seq, head.hash) == (5, events[-1].hash)


def test_values_survive_the_database_round_trip() -> None:
    with transaction.atomic():
        audit_append(
            event_type="test.values",
            actor="tester",
            data={"when": dt.datetime(2025, 1, 2, 3, 4, 5, 123456, tzinfo=dt.UTC), "d": dt.date(2025, 1, 2)},
            run_id=uuid.uuid4(),
        )

    assert_audit_intact()
    assert AuditEvent.objects.get().payload == {"when": "2025-01-02T03:04:05.123456+00:00", "d": "2025-01-02"}


def test_events_of_one_call_stay_in_one_chain(settings: object, request_call: RequestCall) -> None:
    call = request_call("record_effect", {"note": "x"})

    chains = set(AuditEvent.objects.filter(call_id=call.id).values_list("chain", flat=True))

    assert chains == {chain_for(call.id)}
    assert 0 <= chain_for(call.id) < 8
    assert_audit_intact()


def test_audit_append_outside_a_transaction_is_refused(transactional_db: None) -> None:
    with pytest.raises(RuntimeError, match="inside the transaction"):
        audit_append(event_type="test.loose", actor="tester")
    assert AuditEvent.objects.count() == 0


def test_altered_data_is_detected_and_the_event_named() -> None:
    # given
    events = _append_events(5)
    target = events[2]

    # when someone rewrites what happened
    with tampering():
        AuditEvent.objects.filter(pk=target.pk).update(data='{"index":3,"amount":"0.01"}')

    # then
    problem = _only_problem()
    assert f"event #{target.pk} (seq 3)" in problem
    assert "hash does not match its content: event was altered" in problem


def test_altered_column_is_detected() -> None:
    events = _append_events(3)

    with tampering():
        AuditEvent.objects.filter(pk=events[0].pk).update(actor="someone-else")

    assert f"event #{events[0].pk} (seq 1)" in _only_problem()


def test_an_altered_event_with_a_recomputed_hash_breaks_the_next_link() -> None:
    from toolhub.audit_hash import compute_hash

    events = _append_events(4)
    forged = AuditEvent.objects.get(pk=events[1].pk)
    forged.data = '{"index":2,"forged":true}'
    forged.hash = compute_hash(forged)

    with tampering():
        AuditEvent.objects.filter(pk=forged.pk).update(data=forged.data, hash=forged.hash)

    problem = _only_problem()
    assert f"event #{events[2].pk} (seq 3)" in problem
    assert "previous hash does not match" in problem


def test_a_deleted_middle_event_is_detected() -> None:
    events = _append_events(5)

    with tampering():
        AuditEvent.objects.filter(pk=events[2].pk).delete()

    problem = _only_problem()
    assert f"event #{events[3].pk} (seq 4)" in problem
    assert "expected seq 3: events are missing" in problem


def test_removed_newest_events_are_detected_by_the_chain_head() -> None:
    events = _append_events(5)

    with tampering():
        AuditEvent.objects.filter(pk__in=[events[3].pk, events[4].pk]).delete()

    problem = _only_problem()
    assert f"chain {events[0].chain}: after seq 3 (seq 3)" in problem
    assert "chain head says seq 5: the newest events were removed" in problem


def test_each_broken_chain_is_reported() -> None:
    keys = [uuid.uuid4() for _ in range(50)]
    by_chain = {}
    for key in keys:
        by_chain.setdefault(chain_for(key), key)
    first, second = list(by_chain.values())[:2]
    a, b = _append_events(2, first), _append_events(2, second)

    with tampering():
        AuditEvent.objects.filter(pk__in=[a[0].pk, b[1].pk]).update(status="succeeded")

    checked, problems = verify_audit_chains()
    assert sorted(p.event_id for p in problems) == sorted([a[0].pk, b[1].pk])


def test_verify_audit_command_reports_an_intact_trail() -> None:
    from io import StringIO

    _append_events(3)
    out = StringIO()

    call_command("verify_audit", "--no-progress", stdout=out)

    assert "Audit trail verified: 3 events, every chain intact." in out.getvalue()


def test_verify_audit_command_fails_naming_the_bad_event() -> None:
    from io import StringIO

    events = _append_events(3)
    with tampering():
        AuditEvent.objects.filter(pk=events[1].pk).update(event_type="test.other")
    err = StringIO()

    with pytest.raises(CommandError) as excinfo:
        call_command("verify_audit", "--no-progress", stderr=err)

    assert f"event #{events[1].pk}" in str(excinfo.value)
    assert "does not verify" in str(excinfo.value)
    assert f"TAMPERED chain {events[1].chain}: event #{events[1].pk}" in err.getvalue()


@postgres_only
def test_the_database_refuses_update_of_audit_events() -> None:
    event = _append_events(1)[0]

    with pytest.raises(DatabaseError, match="append-only: UPDATE refused"), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).update(actor="mallory")

    assert AuditEvent.objects.get(pk=event.pk).actor == "tester"


@postgres_only
def test_the_database_refuses_delete_of_audit_events() -> None:
    event = _append_events(1)[0]

    with pytest.raises(DatabaseError, match="append-only: DELETE refused"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM toolhub_auditevent WHERE id = %s", [event.pk])

    assert AuditEvent.objects.filter(pk=event.pk).exists()
    assert_audit_intact()
