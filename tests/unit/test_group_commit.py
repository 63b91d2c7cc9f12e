"""Group commit on the worker path: one delivery claims a batch of queued calls, runs them, records them together."""

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.helpers import assert_audit_intact, event_types, for_a_worker, principal_for
from tests.testapp.models import SideEffect
from toolhub import execution
from toolhub.audit_hash import tenant_chains
from toolhub.audit_verify import verify_audit_chains
from toolhub.execution import tool_call_execute
from toolhub.models import AuditEvent, CallStatus, Tenant, TenantMembership, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

pytestmark = pytest.mark.django_db


def _queued(user: User, count: int, capture: Any, tenants: tuple[str, ...] = ("acme",)) -> list[ToolCall]:
    """``count`` queued calls (of ``tenants`` in turn) whose broker messages are held back (no worker saw them)."""
    calls = []
    with for_a_worker(), capture(execute=False):
        for index in range(count):
            tenant = tenants[index % len(tenants)]
            calls.append(
                tool_call_request(
                    request=CallRequest(
                        tool_name="record_effect",
                        arguments={"note": f"batch {index}"},
                        principal=principal_for(user, tenant=tenant),
                        context=ToolContext(tenant=tenant),
                    )
                )
            )
    return calls


def _statuses(calls: list[ToolCall]) -> list[str]:
    by_id = dict(ToolCall.objects.filter(pk__in=[c.pk for c in calls]).values_list("pk", "status"))
    return [by_id[call.pk] for call in calls]


def test_one_delivery_claims_a_batch_runs_each_once_and_records_claims_before_outcomes(
    alice: User, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    # given five queued calls and workers that claim up to four at a time
    settings.TOOLHUB = {**settings.TOOLHUB, "WORKER_CLAIM_BATCH": 4}
    calls = _queued(alice, 5, django_capture_on_commit_callbacks)

    # when the last call's message is delivered
    ran = tool_call_execute(call_id=calls[-1].id, worker="w1")

    # then that call and the three oldest others ran, each once; the fourth stays queued for its own message
    assert ran is not None and ran.pk == calls[-1].pk
    assert _statuses(calls) == [CallStatus.SUCCEEDED] * 3 + [CallStatus.QUEUED, CallStatus.SUCCEEDED]
    effects = list(SideEffect.objects.values_list("call_id", flat=True))
    assert sorted(effects) == sorted(str(call.pk) for call in [*calls[:3], calls[-1]])
    # every claim was written before any outcome (claims commit before any tool runs)
    batch = [*calls[:3], calls[-1]]
    events = list(AuditEvent.objects.filter(call_id__in=[c.pk for c in batch]).order_by("created_at", "seq"))
    running = [e.created_at for e in events if e.event_type == "call.running"]
    settled = [e.created_at for e in events if e.event_type == "call.succeeded"]
    assert len(running) == len(settled) == 4 and max(running) < min(settled)
    assert_audit_intact()


def test_the_messages_of_batched_calls_find_them_taken_and_do_nothing(
    alice: User, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    # given three queued calls, all run by one batch
    settings.TOOLHUB = {**settings.TOOLHUB, "WORKER_CLAIM_BATCH": 8}
    calls = _queued(alice, 3, django_capture_on_commit_callbacks)
    tool_call_execute(call_id=calls[0].id, worker="w1")

    # when their own messages arrive afterwards
    later = [tool_call_execute(call_id=call.id, worker="w2") for call in calls[1:]]

    # then nothing runs again
    assert later == [None, None]
    assert SideEffect.objects.count() == 3
    for call in calls:
        assert event_types(call).count("call.running") == 1
        assert ToolCall.objects.get(pk=call.pk).worker == "w1"
    assert_audit_intact()


def test_a_batched_call_with_no_time_left_is_handed_back_unstarted(
    alice: User, settings: Any, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given three queued calls, claimed in one batch by a task that is about to run out of time
    settings.TOOLHUB = {**settings.TOOLHUB, "WORKER_CLAIM_BATCH": 3}
    calls = _queued(alice, 3, django_capture_on_commit_callbacks)
    monkeypatch.setattr(execution, "task_seconds_left", lambda: 1.0)

    # when the batch runs
    with django_capture_on_commit_callbacks(execute=False) as dispatched:
        tool_call_execute(call_id=calls[0].id, worker="w1")

    # then the first ran, the two others were queued again untouched, with a new message each
    assert _statuses(calls) == [CallStatus.SUCCEEDED, CallStatus.QUEUED, CallStatus.QUEUED]
    assert list(SideEffect.objects.values_list("call_id", flat=True)) == [str(calls[0].pk)]
    for call in calls[1:]:
        row = ToolCall.objects.get(pk=call.pk)
        assert (row.attempts, row.worker, row.started_at, row.lease_expires_at) == (0, "", None, None)
        assert event_types(call)[-2:] == ["call.running", "call.queued"]
    assert len(dispatched) >= 2
    # and a later delivery runs a handed-back call normally
    settings.TOOLHUB = {**settings.TOOLHUB, "WORKER_CLAIM_BATCH": 1}
    assert tool_call_execute(call_id=calls[1].id, worker="w2") is not None
    assert _statuses(calls)[1] == CallStatus.SUCCEEDED
    assert_audit_intact()


def test_a_batch_of_one_is_the_single_claim(alice: User, django_capture_on_commit_callbacks: Any) -> None:
    # given two queued calls and the default (one call per delivery)
    calls = _queued(alice, 2, django_capture_on_commit_callbacks)

    tool_call_execute(call_id=calls[1].id, worker="w1")

    assert _statuses(calls) == [CallStatus.QUEUED, CallStatus.SUCCEEDED]
    assert_audit_intact()


def test_a_batch_of_two_tenants_calls_keeps_each_tenants_events_in_its_own_chains(
    alice: User, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    # given six queued calls of acme and globex in turn, all claimed by one delivery
    globex, _ = Tenant.objects.get_or_create(slug="globex", defaults={"name": "Globex"})
    TenantMembership.objects.create(user=alice, tenant=globex)
    settings.TOOLHUB = {**settings.TOOLHUB, "WORKER_CLAIM_BATCH": 8}
    calls = _queued(alice, 6, django_capture_on_commit_callbacks, tenants=("acme", "globex"))

    tool_call_execute(call_id=calls[0].id, worker="w1")

    # then all ran once, and each tenant's events (claims and outcomes alike) are in its own chains only
    assert _statuses(calls) == [CallStatus.SUCCEEDED] * 6
    for slug in ("acme", "globex"):
        chains = set(AuditEvent.objects.filter(tenant=slug).values_list("chain", flat=True))
        assert chains and all(chain in tenant_chains(slug) for chain in chains), slug
        assert verify_audit_chains(tenant=slug) == (AuditEvent.objects.filter(tenant=slug).count(), [])
    assert_audit_intact()
