"""Saga services end to end with in-process (eager) execution: recording, ordering, retries, operators."""

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.sagas.sample_tools import LOG, RELEASE_FAILS, TOOLS
from toolhub import ToolContext
from toolhub.audit_verify import verify_audit_chains
from toolhub.authorization import CallPrincipal
from toolhub.exceptions import InvalidTransitionError
from toolhub.models import AuditEvent, CallKind, CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.sagas.conf import retry_delay_seconds
from toolhub.sagas.models import Compensation, CompensationAttempt, CompensationStatus, Saga, SagaStatus
from toolhub.sagas.recovery import compensation_resolve, compensation_retry, sagas_sweep
from toolhub.sagas.services import NothingToCompensateError, saga_rollback, saga_rollback_on_demand
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _tools(settings: Any) -> Iterator[None]:
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 3, "SAGA_RETRY_BASE_SECONDS": 10.0}
    LOG.clear()
    RELEASE_FAILS["on"] = False
    with registry.temporarily(*TOOLS):
        yield


def _call(name: str, arguments: dict, *, saga: str, user: User | None = None) -> ToolCall:
    principal = CallPrincipal(user_id=user.pk if user else None, username=user.username if user else "", tenant="acme")
    call = tool_call_request(
        request=CallRequest(
            tool_name=name, arguments=arguments, principal=principal, context=ToolContext(tenant="acme"), saga_id=saga
        )
    )
    call.refresh_from_db()
    return call


def _compensations(key: str) -> list[Compensation]:
    return list(Compensation.objects.filter(saga__key=key).select_related("call", "step_call").order_by("sequence"))


def test_steps_are_numbered_as_they_complete_and_undone_newest_first_one_after_another(alice: User) -> None:
    # given three completed compensable steps of a direct saga
    steps = [_call("book", {"item": item}, saga="trip", user=alice) for item in ("flight", "hotel", "car")]
    assert [c.status for c in steps] == [CallStatus.SUCCEEDED] * 3
    assert [(c.sequence, c.step_tool, c.status) for c in _compensations("trip")] == [
        (1, "book", "recorded"),
        (2, "book", "recorded"),
        (3, "book", "recorded"),
    ]

    # when a later step of the saga fails
    failed = _call("explode", {"reason": "no visa"}, saga="trip", user=alice)

    # then each step was compensated by its own call, newest first, and the saga is compensated
    assert failed.status == CallStatus.FAILED
    assert LOG[-3:] == [("cancel", "B-car"), ("cancel", "B-hotel"), ("cancel", "B-flight")]
    compensations = _compensations("trip")
    assert all(c.status == CompensationStatus.SUCCEEDED for c in compensations)
    by_order = sorted(compensations, key=lambda c: c.call.started_at)
    assert [c.sequence for c in by_order] == [3, 2, 1]
    for earlier, later in zip(by_order, by_order[1:], strict=False):
        assert later.call.created_at >= earlier.call.finished_at  # one after another, never at once
    for compensation in compensations:
        call = compensation.call
        assert call.kind == CallKind.COMPENSATION and call.saga_id == "trip" and call.attempts == 1
        assert call.result["key"] == str(call.id)  # the idempotency key is the compensation call's id
        assert call.context["compensates"] == str(compensation.step_call_id)
        assert compensation.step_call.status == CallStatus.COMPENSATED
    saga = Saga.objects.get(key="trip")
    assert saga.status == SagaStatus.COMPENSATED and saga.rollbacks.get().failed_call_id == failed.id
    events = list(AuditEvent.objects.filter(call_id=steps[0].id).order_by("seq").values_list("event_type", flat=True))
    assert events == [
        "call.requested",
        "call.queued",
        "call.running",
        "call.succeeded",
        "compensation.recorded",
        "compensation.pending",
        "compensation.started",
        "compensation.succeeded",
        "call.compensated",
    ]
    assert AuditEvent.objects.filter(event_type="saga.compensated").count() == 1
    assert verify_audit_chains()[1] == []


def test_a_failing_compensation_is_retried_with_backoff_then_needs_attention_and_the_rest_still_run(
    alice: User, operator: User
) -> None:
    # given book, reserve, book, and a compensation for reserve that keeps failing
    _call("book", {"item": "a"}, saga="s", user=alice)
    _call("reserve", {"item": "x"}, saga="s", user=alice)
    _call("book", {"item": "c"}, saga="s", user=alice)
    RELEASE_FAILS["on"] = True

    # when the saga rolls back
    _call("explode", {"reason": "boom"}, saga="s", user=alice)

    # then the newest step is undone, the failing one waits for its retry at a stored time, the oldest waits its turn
    first, fragile, newest = _compensations("s")
    assert newest.status == CompensationStatus.SUCCEEDED
    assert fragile.status == CompensationStatus.RETRY_SCHEDULED and fragile.attempts == 1
    assert first.status == CompensationStatus.PENDING
    delay = (fragile.next_attempt_at - fragile.call.finished_at).total_seconds()
    assert delay == pytest.approx(retry_delay_seconds(1), abs=1) == pytest.approx(10, abs=1)
    assert sagas_sweep()["retried"] == 0  # not due yet: nothing runs early

    delays = []
    for _ in range(2):
        Compensation.objects.filter(pk=fragile.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
        assert sagas_sweep()["retried"] == 1
        fragile.refresh_from_db()
        if fragile.next_attempt_at:
            delays.append(round((fragile.next_attempt_at - fragile.call.finished_at).total_seconds()))

    # after the last attempt: failed, the saga needs attention, and the oldest step was still compensated
    fragile.refresh_from_db()
    first.refresh_from_db()
    assert delays == [20]
    assert fragile.status == CompensationStatus.FAILED and fragile.attempts == 3 == fragile.call.attempts
    assert "refused to release x" in fragile.last_error
    assert CompensationAttempt.objects.filter(compensation=fragile).count() == 3
    assert first.status == CompensationStatus.SUCCEEDED
    assert [entry for entry in LOG if entry[0] == "cancel"] == [("cancel", "B-c"), ("cancel", "B-a")]
    assert Saga.objects.get(key="s").status == SagaStatus.NEEDS_ATTENTION

    # when the operator fixes the cause and retries
    RELEASE_FAILS["on"] = False
    compensation_retry(compensation=fragile, actor=f"user:{operator.username}")

    # then it succeeds on the same call (same idempotency key), and the saga is compensated
    fragile.refresh_from_db()
    assert fragile.status == CompensationStatus.SUCCEEDED and fragile.call.attempts == 4
    assert ("release", "x") in LOG
    assert Saga.objects.get(key="s").status == SagaStatus.COMPENSATED
    retried = AuditEvent.objects.get(event_type="compensation.retry_requested")
    assert retried.actor == "user:operator" and retried.payload["previous_status"] == "failed"
    with pytest.raises(InvalidTransitionError):
        compensation_retry(compensation=fragile, actor="user:operator")


def test_an_operator_may_resolve_a_failed_compensation_by_hand(alice: User) -> None:
    _call("reserve", {"item": "x"}, saga="r", user=alice)
    RELEASE_FAILS["on"] = True
    _call("explode", {"reason": "boom"}, saga="r", user=alice)
    (compensation,) = _compensations("r")
    assert compensation.status == CompensationStatus.RETRY_SCHEDULED

    compensation_resolve(compensation=compensation, actor="user:operator", note="released in the warehouse UI")

    compensation.refresh_from_db()
    assert compensation.status == CompensationStatus.RESOLVED
    assert (
        compensation.resolution_note == "released in the warehouse UI" and compensation.resolved_by == "user:operator"
    )
    assert Saga.objects.get(key="r").status == SagaStatus.RESOLVED
    event = AuditEvent.objects.get(event_type="compensation.resolved")
    assert event.payload["note"] == "released in the warehouse UI" and event.actor == "user:operator"
    assert sagas_sweep()["retried"] == 0  # a resolved compensation is never run again


def test_a_step_whose_outcome_is_unknown_is_held_for_the_operator_to_compensate_or_not(alice: User) -> None:
    # given a completed step and a step whose worker died (outcome unknown)
    _call("reserve", {"item": "known"}, saga="u", user=alice)
    unknown = ToolCall.objects.create(
        tool_name="reserve", status=CallStatus.NEEDS_ATTENTION, arguments={"item": "maybe"}, saga_id="u", tenant="acme"
    )

    # when the saga rolls back
    _call("explode", {"reason": "boom"}, saga="u", user=alice)

    # then the known step is undone and the unknown one is held, not compensated on its own
    known, held = _compensations("u")
    assert known.status == CompensationStatus.SUCCEEDED
    assert held.step_call_id == unknown.id and held.status == CompensationStatus.HELD
    assert ("release", "maybe") not in LOG
    assert Saga.objects.get(key="u").status == SagaStatus.NEEDS_ATTENTION

    # when the operator chooses to compensate it
    compensation_retry(compensation=held, actor="user:operator")

    # then it is compensated from its arguments
    held.refresh_from_db()
    unknown.refresh_from_db()
    assert held.status == CompensationStatus.SUCCEEDED and ("release", "maybe") in LOG
    assert unknown.status == CallStatus.COMPENSATED
    assert Saga.objects.get(key="u").status == SagaStatus.COMPENSATED


def test_an_unsatisfiable_mapping_fails_loudly_and_the_other_steps_are_still_undone(alice: User) -> None:
    _call("book", {"item": "a"}, saga="m", user=alice)
    _call("lossy", {"item": "b"}, saga="m", user=alice)
    _call("explode", {"reason": "boom"}, saga="m", user=alice)

    booked, lost = _compensations("m")
    assert lost.status == CompensationStatus.FAILED and lost.call is None
    assert "needs receipt" in lost.last_error and lost.mapping_error
    assert booked.status == CompensationStatus.SUCCEEDED
    assert Saga.objects.get(key="m").status == SagaStatus.NEEDS_ATTENTION


def test_a_mapping_refused_for_a_sensitive_value_runs_nothing_and_shows_the_value_nowhere(alice: User) -> None:
    """A short CVV copied into a clear parameter, and a mapping error quoting a card: not planned, not shown."""
    card = "4111-2222-3333-4444"
    _call("authorise", {"cvv": "737", "amount": 5}, saga="p", user=alice)
    _call("charge", {"card": card}, saga="p", user=alice)
    _call("explode", {"reason": "boom"}, saga="p", user=alice)

    authorised, charged = _compensations("p")
    assert authorised.status == charged.status == CompensationStatus.FAILED
    assert authorised.call is None and charged.call is None
    assert not [entry for entry in LOG if entry[0] == "reverse"]  # nothing executed
    assert "card_check" in authorised.mapping_error and "737" not in authorised.mapping_error
    assert "KeyError: '[secret]'" in charged.mapping_error and card not in charged.last_error
    assert not any(card in str(data) for data in AuditEvent.objects.values_list("data", flat=True))
    assert Saga.objects.get(key="p").status == SagaStatus.NEEDS_ATTENTION


def test_an_explicit_mapping_builds_the_arguments(alice: User) -> None:
    _call("book_mapped", {"item": "z"}, saga="x", user=alice)
    _call("explode", {"reason": "boom"}, saga="x", user=alice)
    (compensation,) = _compensations("x")
    assert compensation.arguments == {"booking_id": "R9/z"}
    assert compensation.status == CompensationStatus.SUCCEEDED and ("cancel", "R9/z") in LOG


def test_rolling_back_twice_for_one_failure_is_one_rollback_and_nothing_is_refused_silently(alice: User) -> None:
    _call("book", {"item": "a"}, saga="twice", user=alice)
    failed = _call("explode", {"reason": "boom"}, saga="twice", user=alice)
    again = saga_rollback(saga_key="twice", tenant="acme", actor="test", trigger="step_failed", failed_call=failed)
    assert again is not None and Saga.objects.get(key="twice").rollbacks.count() == 1
    assert LOG.count(("cancel", "B-a")) == 1
    with pytest.raises(NothingToCompensateError):
        saga_rollback_on_demand(saga_key="twice", tenant="acme", actor="test")
    with pytest.raises(NothingToCompensateError):
        saga_rollback_on_demand(saga_key="no-such-saga", tenant="acme", actor="test")
    # saga ids are per tenant: in another tenant "twice" names no saga
    with pytest.raises(NothingToCompensateError):
        saga_rollback_on_demand(saga_key="twice", tenant="globex", actor="test")
    assert LOG.count(("cancel", "B-a")) == 1


def test_a_lone_direct_call_or_a_failure_without_compensable_steps_forms_no_saga(alice: User) -> None:
    _call("explode", {"reason": "boom"}, saga="", user=alice)
    _call("reserve", {"item": "solo"}, saga="", user=alice)
    _call("explode", {"reason": "boom"}, saga="plain", user=alice)
    assert not Saga.objects.exists()


def test_a_compensation_whose_outcome_is_unknown_needs_attention_and_a_lost_notification_is_repaired(
    alice: User,
) -> None:
    # given a rollback whose second compensation is under way (its first attempt failed, a retry is due)
    _call("book", {"item": "a"}, saga="lost", user=alice)
    _call("reserve", {"item": "x"}, saga="lost", user=alice)
    RELEASE_FAILS["on"] = True
    _call("explode", {"reason": "boom"}, saga="lost", user=alice)
    first, fragile = _compensations("lost")
    assert fragile.status == CompensationStatus.RETRY_SCHEDULED

    # when its worker died mid-way on the retry (the reconciler left the call needs_attention) and the
    # settle notification was lost
    Compensation.objects.filter(pk=fragile.pk).update(status=CompensationStatus.RUNNING, next_attempt_at=None)
    ToolCall.objects.filter(pk=fragile.call_id).update(status=CallStatus.NEEDS_ATTENTION, error="worker died")

    # then the periodic sweep applies the outcome: unknown, the saga needs attention, the next one still runs
    assert sagas_sweep()["synced"] == 1
    fragile.refresh_from_db()
    first.refresh_from_db()
    assert fragile.status == CompensationStatus.UNKNOWN and fragile.last_error == "worker died"
    assert first.status == CompensationStatus.SUCCEEDED
    assert Saga.objects.get(key="lost").status == SagaStatus.NEEDS_ATTENTION

    # and the operator's retry runs the same call again (same idempotency key)
    RELEASE_FAILS["on"] = False
    compensation_retry(compensation=fragile, actor="user:operator")
    fragile.refresh_from_db()
    assert fragile.status == CompensationStatus.SUCCEEDED and fragile.call.status == CallStatus.SUCCEEDED
    assert Saga.objects.get(key="lost").status == SagaStatus.COMPENSATED


def test_a_direct_saga_failure_whose_notification_was_lost_is_rolled_back_by_the_sweep(alice: User) -> None:
    # given a completed step, and a later failed step of the same saga that the sagas never heard of
    _call("book", {"item": "a"}, saga="deaf", user=alice)
    from toolhub.signals import call_settled

    receivers = call_settled.receivers
    call_settled.receivers = []  # the process died between the commit and the notification
    try:
        call_settled.sender_receivers_cache.clear()
        failed = _call("explode", {"reason": "boom"}, saga="deaf", user=alice)
    finally:
        call_settled.receivers = receivers
        call_settled.sender_receivers_cache.clear()
    assert Saga.objects.get(key="deaf").status == SagaStatus.OPEN

    # when the periodic sweep runs
    assert sagas_sweep()["rolled_back"] == 1

    # then the saga is rolled back for that failure, once
    saga = Saga.objects.get(key="deaf")
    assert saga.status == SagaStatus.COMPENSATED and saga.rollbacks.get().failed_call_id == failed.id
    assert sagas_sweep()["rolled_back"] == 0


def test_a_failure_before_the_newest_step_does_not_roll_back_later(alice: User) -> None:
    # given a direct caller who carried on after a failure
    _call("explode", {"reason": "first try"}, saga="carry-on", user=alice)
    _call("book", {"item": "a"}, saga="carry-on", user=alice)

    # then the sweep does not undo the later step
    assert sagas_sweep()["rolled_back"] == 0
    assert Saga.objects.get(key="carry-on").status == SagaStatus.OPEN
