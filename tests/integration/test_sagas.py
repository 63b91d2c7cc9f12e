"""Sagas on real services: compensations run by Celery worker processes, persisted, retried, escalated.

Retry times are columns (``next_attempt_at``) acted on by the periodic ``sagas_sweep``; the tests play
the periodic task by calling it, after moving a due time into the past instead of sleeping through
the backoff (the delays themselves are asserted from what was stored).
"""

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from demo.models import Account, LedgerEntry
from tests.helpers import action_confirmation
from tests.integration.workers import LOG_DIR, ROOT, Worker, wait_for
from tests.testapp.models import SideEffect
from toolhub.audit_verify import verify_audit_chains
from toolhub.authorization import CallPrincipal
from toolhub.celery import app as celery_app
from toolhub.models import AuditEvent, CallKind, CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.sagas.conf import retry_delay_seconds, saga_setting
from toolhub.sagas.models import Compensation, CompensationAttempt, CompensationStatus, Saga, SagaStatus
from toolhub.sagas.recovery import sagas_sweep
from toolhub.sagas.selectors import call_summary
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.sweeper import calls_reconcile_expired_leases
from toolhub.tools.context import ToolContext

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TRANSFER_SCRIPT = [
    {"content": "", "tool_calls": [{"name": "debit", "arguments": {"account_id": "ACC-A", "amount": "250"}}]},
    {"content": "", "tool_calls": [{"name": "credit", "arguments": {"account_id": "ACC-B", "amount": "250"}}]},
    {"content": "The transfer did not happen: {last_tool_result}"},
]
BUSY = {CompensationStatus.PENDING, CompensationStatus.RUNNING, CompensationStatus.RETRY_SCHEDULED}


def _figures(**values: object) -> None:
    LOG_DIR.mkdir(exist_ok=True)
    path = Path(LOG_DIR / "figures.json")
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(values)
    path.write_text(json.dumps(data, indent=2, default=str))
    print("\n" + json.dumps(values, indent=2, default=str))


def _direct(tool: str, arguments: dict, *, saga: str, user: User) -> ToolCall:
    """A direct (non-agent) governed call that belongs to ``saga``; waits until it settled."""
    principal = CallPrincipal(user_id=user.pk, username=user.username, tenant="acme")
    call = tool_call_request(
        request=CallRequest(
            tool_name=tool, arguments=arguments, principal=principal, context=ToolContext(tenant="acme"), saga_id=saga
        )
    )
    wait_for(lambda: ToolCall.objects.get(pk=call.pk).is_settled, what=f"{tool} settled")
    return ToolCall.objects.get(pk=call.pk)


def _step(tool: str, arguments: dict, *, saga: str, user: User) -> ToolCall:
    """A completed compensable step, once its compensation is recorded (the worker does it after the commit)."""
    call = _direct(tool, arguments, saga=saga, user=user)
    assert call.status == CallStatus.SUCCEEDED, call.error
    wait_for(lambda: Compensation.objects.filter(step_call=call).exists(), what=f"{tool} recorded")
    return call


def _rolled_back(key: str, timeout: float = 60.0) -> Saga:
    def done() -> Saga | None:
        saga = Saga.objects.filter(key=key).first()
        if saga is None or not saga.rollbacks.exists() or saga.compensations.filter(status__in=BUSY).exists():
            return None
        # Read again: the last compensation may have committed (with the saga's status) since the first read.
        saga.refresh_from_db()
        return saga

    return wait_for(done, timeout=timeout, what=f"rollback of saga {key} finished")  # type: ignore[return-value]


def _compensation(pk: int) -> Compensation:
    return Compensation.objects.select_related("call", "step_call").get(pk=pk)


def test_demo_transfer_the_credit_to_a_frozen_account_fails_and_the_debit_is_refunded(
    celery_worker: Worker, alice: User, developer: User
) -> None:
    # given two accounts, the second one frozen, and an agent that compensates on error
    Account.objects.create(account_id="ACC-A", owner="alice", tenant="acme", balance=Decimal("1000.00"))
    Account.objects.create(account_id="ACC-B", owner="bob", tenant="acme", balance=Decimal("40.00"), frozen=True)
    before = dict(Account.objects.values_list("account_id", "balance"))
    api = APIClient()
    api.force_authenticate(alice)
    agent = {
        "name": "transfer",
        "model": {"provider": "scripted", "script": TRANSFER_SCRIPT},
        "tools": ["debit", "credit"],
        "compensate_on_error": True,
    }
    developer_api = APIClient()
    developer_api.force_authenticate(developer)
    assert developer_api.post("/api/v1/agents/", agent, format="json").status_code == 201

    # when the model debits A and then credits the frozen B
    started = api.post("/api/v1/runs/", {"agent": "transfer", "input": "move 250 from ACC-A to ACC-B"}, format="json")
    assert started.status_code == 201, started.content
    run_id = started.json()["id"]
    run = wait_for(
        lambda: (r := api.get(f"/api/v1/runs/{run_id}/").json())["status"] in {"completed", "failed"} and r,
        timeout=60,
        what="run finished",
    )

    # then the debit was refunded by a worker, and the balances are exactly as before
    assert run["status"] == "completed", run["error"]
    after = dict(Account.objects.values_list("account_id", "balance"))
    assert after == before == {"ACC-A": Decimal("1000.00"), "ACC-B": Decimal("40.00")}
    ledger = list(LedgerEntry.objects.filter(account__account_id="ACC-A").order_by("id").values_list("kind", "amount"))
    assert ledger == [("debit", Decimal("-250.00")), ("refund", Decimal("250.00"))]
    debit = ToolCall.objects.get(run_id=run_id, tool_name="debit")
    credit = ToolCall.objects.get(run_id=run_id, tool_name="credit")
    refund = ToolCall.objects.get(run_id=run_id, kind=CallKind.COMPENSATION)
    assert (debit.status, credit.status, refund.status) == ("compensated", "failed", "succeeded")
    assert refund.tool_name == "refund_debit" and refund.worker.startswith("itest")
    assert refund.arguments == {"tx_id": str(debit.id), "account_id": "ACC-A", "amount": debit.result["amount"]}
    assert Decimal(refund.arguments["amount"]) == Decimal("250")
    assert refund.context["compensates"] == str(debit.id) and refund.saga_id == run_id
    saga = Saga.objects.get(key=run_id)
    assert saga.status == SagaStatus.COMPENSATED
    (compensation,) = saga.compensations.all()
    assert (compensation.sequence, compensation.status, compensation.attempts) == (1, "succeeded", 1)

    # and the model was told which step failed and which were rolled back, before it answered
    note = run["messages"][-2]
    assert note["role"] == "system"
    assert note["content"].startswith(f"Step {call_summary(credit)} failed (Account ACC-B is frozen")
    assert f"- {call_summary(debit)}: rolled back (by refund_debit)." in note["content"]
    assert run["output"] == "The transfer did not happen: Account ACC-B is frozen and cannot receive money."

    # every state change is in the audit trail, and the trail verifies
    debit_events = list(
        AuditEvent.objects.filter(call_id=debit.id).order_by("seq").values_list("event_type", flat=True)
    )
    assert debit_events[-5:] == [
        "compensation.recorded",
        "compensation.pending",
        "compensation.started",
        "compensation.succeeded",
        "call.compensated",
    ]
    assert verify_audit_chains()[1] == []
    _figures(
        sagas_transfer_balances_before={k: str(v) for k, v in before.items()},
        sagas_transfer_balances_after={k: str(v) for k, v in after.items()},
        sagas_transfer_ledger_acc_a=[[kind, str(amount)] for kind, amount in ledger],
    )


def test_three_compensable_steps_are_undone_newest_first_one_after_another(celery_worker: Worker, alice: User) -> None:
    # given three completed steps of a direct saga
    key = f"order-{uuid.uuid4()}"
    steps = [_step("saga_step", {"label": label}, saga=key, user=alice) for label in ("one", "two", "three")]

    # when a fourth call of the saga fails
    failed = _direct("always_fails", {"reason": "third party down"}, saga=key, user=alice)
    assert failed.status == CallStatus.FAILED
    saga = _rolled_back(key)

    # then the persisted sequence numbers follow completion, and the compensations ran in reverse, one at a time
    compensations = [_compensation(c.pk) for c in saga.compensations.order_by("sequence")]
    assert [(c.sequence, c.step_call_id) for c in compensations] == [
        (1, steps[0].id),
        (2, steps[1].id),
        (3, steps[2].id),
    ]
    assert all(c.status == CompensationStatus.SUCCEEDED for c in compensations)
    ran = sorted(compensations, key=lambda c: c.call.started_at)
    assert [c.sequence for c in ran] == [3, 2, 1]
    for earlier, later in zip(ran, ran[1:], strict=False):
        assert later.call.created_at >= earlier.call.finished_at
    undone = list(SideEffect.objects.filter(tool="undo_saga_step").order_by("id").values_list("note", flat=True))
    assert undone == ["three", "two", "one"]
    # arguments matched by name: the result's camelCase stepId fills step_id
    assert compensations[0].arguments == {"step_id": steps[0].result["stepId"], "label": "one"}
    assert saga.status == SagaStatus.COMPENSATED
    assert saga.rollbacks.get().failed_call_id == failed.id
    assert {s.status for s in ToolCall.objects.filter(pk__in=[s.pk for s in steps])} == {CallStatus.COMPENSATED}
    _figures(
        sagas_order_sequences_completed=[c.sequence for c in compensations],
        sagas_order_sequences_compensated=[c.sequence for c in ran],
        sagas_order_undo_effects=undone,
    )


def test_a_compensation_that_always_fails_is_retried_per_policy_then_needs_attention_and_the_operator_retry_succeeds(
    celery_worker: Worker, alice: User, operator: User
) -> None:
    # given steps a (fine), b (its undoing fails until repaired), c (fine)
    key = f"fragile-{uuid.uuid4()}"
    _step("saga_step", {"label": "a"}, saga=key, user=alice)
    _step("fragile_step", {"label": "b"}, saga=key, user=alice)
    _step("saga_step", {"label": "c"}, saga=key, user=alice)
    max_attempts = int(saga_setting("SAGA_MAX_ATTEMPTS"))

    # when a later step fails
    _direct("always_fails", {"reason": "boom"}, saga=key, user=alice)
    first, fragile, newest = Compensation.objects.filter(saga__key=key).order_by("sequence")

    # then c is undone, and b is retried at the stored, growing times until its attempts are used up
    delays = []
    while True:
        current = wait_for(
            lambda: (c := _compensation(fragile.pk)).status in {"retry_scheduled", "failed"} and c,
            what="the fragile compensation's attempt settled",
        )
        if current.status == CompensationStatus.FAILED:
            break
        delays.append((current.next_attempt_at - current.call.finished_at).total_seconds())
        assert current.next_attempt_at > timezone.now()  # nothing runs before its time
        assert _compensation(first.pk).status == CompensationStatus.PENDING  # one after another
        Compensation.objects.filter(pk=fragile.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
        assert sagas_sweep()["retried"] == 1
        wait_for(lambda: _compensation(fragile.pk).status != "running", what="retry attempt done")
    saga = _rolled_back(key)
    fragile, first, newest = _compensation(fragile.pk), _compensation(first.pk), _compensation(newest.pk)
    expected = [retry_delay_seconds(n) for n in range(1, max_attempts)]
    assert delays == pytest.approx(expected, abs=0.5)
    assert fragile.status == CompensationStatus.FAILED and fragile.attempts == max_attempts == fragile.call.attempts
    assert "refused to undo b" in fragile.last_error
    attempts = CompensationAttempt.objects.filter(compensation=fragile).order_by("number")
    assert [(a.number, a.outcome) for a in attempts] == [(n, "failed") for n in range(1, max_attempts + 1)]
    # the others still ran: c before b, a after b gave up
    assert newest.status == first.status == CompensationStatus.SUCCEEDED
    assert newest.call.finished_at <= fragile.call.created_at
    assert first.call.created_at >= attempts.last().finished_at
    assert saga.status == SagaStatus.NEEDS_ATTENTION
    assert AuditEvent.objects.filter(event_type="saga.needs_attention", data__contains=key).exists()

    # when the operator repairs the downstream system and retries from the admin
    SideEffect.objects.create(tool="repair", note="b")
    operator.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="sagas", codename__in=["view_saga", "operate_saga"])
    )
    admin = Client()
    admin.force_login(operator)
    listed = admin.get("/admin/sagas/saga/?attention=yes").content.decode()
    assert key in listed
    confirmation = action_confirmation(admin, "/admin/sagas/saga/", "retry_selected", [saga.pk])
    response = admin.post("/admin/sagas/saga/", confirmation, follow=True)
    assert "1 compensation(s) retried." in response.content.decode()

    # then the same compensation call runs once more and succeeds; the saga is compensated
    done = wait_for(lambda: (c := _compensation(fragile.pk)).status == "succeeded" and c, what="operator retry")
    assert done.call_id == fragile.call_id and done.call.attempts == max_attempts + 1
    assert SideEffect.objects.filter(tool="undo_fragile_step", note="b").count() == 1
    assert _rolled_back(key).status == SagaStatus.COMPENSATED
    retried = AuditEvent.objects.get(event_type="compensation.retry_requested", call_id=fragile.step_call_id)
    assert retried.actor == "user:operator"
    assert verify_audit_chains()[1] == []
    _figures(
        sagas_retry_max_attempts=max_attempts,
        sagas_retry_delays_seconds=[round(d, 2) for d in delays],
        sagas_retry_attempts_after_operator=done.call.attempts,
    )


@pytest.fixture
def saga_queue() -> Iterator[str]:
    """Route this test's tasks to a queue only its own workers consume, so they can be killed."""
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = f"{previous}-sagas"
    yield celery_app.conf.task_default_queue
    celery_app.control.purge()
    celery_app.conf.task_default_queue = previous


def test_sigkill_during_a_compensation_it_resumes_on_another_worker_and_takes_effect_once(
    saga_queue: str, alice: User
) -> None:
    key = f"kill-{uuid.uuid4()}"
    first = Worker("saga-kill-a", concurrency=1).start()
    second: Worker | None = None
    try:
        # given a completed step whose compensation takes effect, then works for a few seconds
        step = _step("slow_undo_step", {"label": "k", "seconds": 4.0}, saga=key, user=alice)

        # when it is rolled back and the worker is SIGKILLed after the effect, before the call finished
        saga_rollback_on_demand(saga_key=key, tenant="acme", actor="user:alice")
        wait_for(lambda: SideEffect.objects.filter(tool="undo_slow_step").exists(), what="compensation took effect")
        compensation = Compensation.objects.get(saga__key=key)
        assert compensation.call.status == CallStatus.RUNNING
        first.kill()

        # then nothing is lost: the call stays running until its lease runs out; the reconciler queues it again
        assert ToolCall.objects.get(pk=compensation.call_id).status == CallStatus.RUNNING
        ToolCall.objects.filter(pk=compensation.call_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        assert calls_reconcile_expired_leases()["requeued"] == 1
        second = Worker("saga-kill-b", concurrency=1).start()
        done = wait_for(
            lambda: (c := _compensation(compensation.pk)).status == "succeeded" and c, timeout=60, what="resumed"
        )
    finally:
        first.kill()
        if second is not None:
            second.stop()

    # and it took effect exactly once, under one idempotency key, on the second worker's second attempt
    assert SideEffect.objects.filter(tool="undo_slow_step").count() == 1
    assert SideEffect.objects.get(tool="undo_slow_step").call_id == str(done.call_id)
    assert done.call.attempts == 2 and done.call.worker.startswith("saga-kill-b")
    assert ToolCall.objects.get(pk=step.pk).status == CallStatus.COMPENSATED
    assert Saga.objects.get(key=key).status == SagaStatus.COMPENSATED
    events = list(AuditEvent.objects.filter(call_id=done.call_id).order_by("seq").values_list("event_type", flat=True))
    assert events == ["call.requested", "call.queued", "call.running", "call.queued", "call.running", "call.succeeded"]
    requeued = AuditEvent.objects.filter(call_id=done.call_id, event_type="call.queued").order_by("seq").last()
    assert requeued.actor == "reconciler" and "lease expired" in requeued.payload["reason"]
    _figures(
        sagas_sigkill_compensation_attempts=done.call.attempts,
        sagas_sigkill_effects=SideEffect.objects.filter(tool="undo_slow_step").count(),
    )


def test_a_bad_compensation_mapping_is_rejected_at_startup() -> None:
    # given an installed app whose compensation needs a field its tool's declared result type lacks
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.sagas.bad_settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )

    # then `manage.py check` (run by runserver and migrate too) refuses to start, saying what to fix
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "ship_parcel: (toolhub.E101)" in output and "tracking_number" in output
    assert "HINT: Add the field(s) to the result type" in output
