"""Execution guarantees under faults, on real PostgreSQL, Redis and Celery worker processes.

These tests use their own queue and their own workers, so they can kill them without disturbing
the session's worker.
"""

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis
from django.contrib.auth.models import Group, User
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.models import ApprovalDecision, ApprovalRequest
from tests.integration.workers import Worker, wait_for
from tests.testapp.models import SideEffect
from toolhub.audit_verify import verify_audit_chains
from toolhub.authorization import CallPrincipal
from toolhub.celery import app as celery_app
from toolhub.models import SETTLED_STATUSES, CallStatus, Tenant, TenantMembership, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.sweeper import calls_reconcile_expired_leases, calls_redispatch_stale
from toolhub.tools.context import ToolContext

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fault_queue() -> Iterator[str]:
    """Route this test's tasks to a queue only its own workers consume."""
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = f"{previous}-faults"
    yield celery_app.conf.task_default_queue
    celery_app.control.purge()
    celery_app.conf.task_default_queue = previous


def _worker(name: str) -> Worker:
    return Worker(name, concurrency=1)


def _request(tool: str, arguments: dict, user: User) -> ToolCall:
    principal = CallPrincipal(user_id=user.pk, username=user.username, tenant="acme")
    return tool_call_request(
        request=CallRequest(
            tool_name=tool, arguments=arguments, principal=principal, context=ToolContext(tenant="acme")
        )
    )


def _status(call: ToolCall) -> str:
    return ToolCall.objects.values_list("status", flat=True).get(pk=call.pk)


def _expire_leases() -> None:
    """Let the lease of every running call run out now, as time would."""
    ToolCall.objects.filter(status=CallStatus.RUNNING).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_sigkill_during_non_idempotent_calls_never_loses_or_repeats_one(fault_queue: str, alice: User) -> None:
    # given a worker, and calls of a tool that is not idempotent
    worker = _worker("chaos-a").start()
    calls: list[ToolCall] = []
    kills = Counter()
    try:
        for round_ in range(20):
            call = _request("slow_effect", {"seconds": 2.0}, alice)
            calls.append(call)
            wait_for(lambda c=call: _status(c) == CallStatus.RUNNING, timeout=30, what=f"call {round_} running")
            time.sleep(0.2)
            if round_ % 2 == 0:
                # kill the pool process that runs the tool: the main process re-delivers the message
                for pid in worker.child_pids():
                    os.kill(pid, signal.SIGKILL)
                kills["pool process"] += 1
            else:
                # kill the whole worker: its message stays unacknowledged in Redis
                worker.kill()
                kills["whole worker"] += 1
                worker = _worker(f"chaos-a{round_}").start()
        # the killed calls stay `running` until their lease runs out; a redelivery must not run them again
        time.sleep(2.5)
        _expire_leases()
        reconciled = calls_reconcile_expired_leases()
    finally:
        worker.stop()

    # then no call is lost, none ran twice, every one is settled (unknown outcomes need attention)
    statuses = Counter(_status(call) for call in calls)
    effects = Counter(SideEffect.objects.values_list("call_id", flat=True))
    assert all(count <= 1 for count in effects.values()), effects
    assert set(statuses) <= SETTLED_STATUSES, statuses
    assert statuses[CallStatus.NEEDS_ATTENTION] == reconciled["needs_attention"] == 20
    assert ToolCall.objects.filter(status__in=[CallStatus.QUEUED, CallStatus.RUNNING]).count() == 0
    assert verify_audit_chains()[1] == []
    print(f"\nSIGKILL x20 ({dict(kills)}): statuses {dict(statuses)}, side effects {sum(effects.values())}")


def test_an_idempotent_call_whose_worker_died_is_retried_and_takes_effect_once(fault_queue: str, alice: User) -> None:
    worker = _worker("chaos-b").start()
    try:
        call = _request("slow_idempotent", {"seconds": 2.0}, alice)
        wait_for(lambda: _status(call) == CallStatus.RUNNING, timeout=30, what="running")
        worker.kill()
        worker = _worker("chaos-b2").start()
        _expire_leases()
        assert calls_reconcile_expired_leases() == {"requeued": 1, "needs_attention": 0}
        wait_for(lambda: _status(call) == CallStatus.SUCCEEDED, timeout=30, what="retried call succeeded")
    finally:
        worker.stop()
    assert ToolCall.objects.get(pk=call.pk).attempts == 2
    assert SideEffect.objects.filter(call_id=str(call.pk)).count() == 1


def test_an_atomic_call_whose_worker_died_mid_write_is_retried_and_takes_effect_once(
    fault_queue: str, alice: User
) -> None:
    # given an atomic tool that has written its effect (not committed) and works on when its worker is SIGKILLed
    worker = _worker("chaos-atomic").start()
    try:
        call = _request("atomic_effect", {"note": "once", "work_seconds": 0.9}, alice)
        wait_for(lambda: _status(call) == CallStatus.RUNNING, timeout=30, what="running")
        time.sleep(0.3)  # inside the tool, after its INSERT
        worker.kill()
        # then the killed transaction took the effect with it, and the reconciler may run the call again
        assert SideEffect.objects.filter(call_id=str(call.pk)).count() == 0
        worker = _worker("chaos-atomic2").start()
        _expire_leases()
        assert calls_reconcile_expired_leases() == {"requeued": 1, "needs_attention": 0}
        wait_for(lambda: _status(call) == CallStatus.SUCCEEDED, timeout=30, what="retried call succeeded")
    finally:
        worker.stop()
    assert ToolCall.objects.get(pk=call.pk).attempts == 2
    assert SideEffect.objects.filter(call_id=str(call.pk)).count() == 1
    assert verify_audit_chains()[1] == []


def test_a_flushed_broker_loses_no_call(fault_queue: str, alice: User) -> None:
    # given calls queued while no worker runs
    calls = [_request("record_effect", {"note": f"n{index}"}, alice) for index in range(10)]
    assert all(_status(call) == CallStatus.QUEUED for call in calls)
    # when Redis loses every message
    redis.Redis.from_url(os.environ["CELERY_BROKER_URL"]).flushdb()
    worker = _worker("chaos-c").start()
    try:
        time.sleep(1.0)
        assert all(_status(call) == CallStatus.QUEUED for call in calls)  # nothing came through
        # then the sweeper finds them in PostgreSQL and dispatches them again
        assert calls_redispatch_stale(older_than_seconds=0) == 10
        wait_for(
            lambda: all(_status(call) == CallStatus.SUCCEEDED for call in calls), timeout=60, what="all calls done"
        )
        # a second sweep, or a late duplicate message, runs nothing again
        calls_redispatch_stale(older_than_seconds=0)
        time.sleep(1.0)
    finally:
        worker.stop()
    effects = Counter(SideEffect.objects.values_list("call_id", flat=True))
    assert sorted(effects) == sorted(str(call.pk) for call in calls)
    assert set(effects.values()) == {1}


def test_twenty_concurrent_decisions_on_one_approval_give_exactly_one_decision_and_one_execution(
    fault_queue: str, alice: User
) -> None:
    # given twenty operators of the call's tenant and one held-back call
    group, _ = Group.objects.get_or_create(name="operators")
    from django.contrib.auth.models import Permission

    group.permissions.add(Permission.objects.get(codename="decide_approvalrequest"))
    acme, _ = Tenant.objects.get_or_create(slug="acme", defaults={"name": "ACME Corp"})
    operators = []
    for index in range(20):
        user = User.objects.create_user(f"op{index}", is_staff=True)
        user.groups.add(group)
        TenantMembership.objects.create(user=user, tenant=acme)
        operators.append(user)
    call = _request("risky_effect", {"note": "once"}, alice)
    request = ApprovalRequest.objects.get(call=call)
    worker = _worker("chaos-d").start()

    # when they all decide at the same moment, half approving and half rejecting
    barrier = threading.Barrier(20)
    answers: list[int] = []

    def decide(index: int) -> None:
        client = APIClient()
        client.force_authenticate(operators[index])
        action = "approve" if index % 2 == 0 else "reject"
        barrier.wait()
        try:
            answers.append(
                client.post(f"/api/v1/approvals/{request.pk}/{action}/", {"comment": str(index)}).status_code
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=decide, args=(index,)) for index in range(20)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        wait_for(lambda: _status(call) in SETTLED_STATUSES, timeout=30, what="call settled")
    finally:
        worker.stop()

    # then exactly one decision won, the rest were told it was already decided, and it ran at most once
    assert sorted(answers) == [200] + [409] * 19
    assert ApprovalDecision.objects.filter(request=request).count() == 1
    winner = ApprovalDecision.objects.get(request=request).decision
    effects = SideEffect.objects.filter(call_id=str(call.pk)).count()
    assert (winner, _status(call), effects) in {("approve", "succeeded", 1), ("reject", "rejected", 0)}
    print(f"\n20 concurrent deciders: one {winner}, 19 x 409, executions {effects}")
