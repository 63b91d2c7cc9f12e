"""Review of 2026-12-06 (d): the periodic sweeps' queries at production volume (PostgreSQL plans).

Each beat tick runs the sweeps' reads against tables that keep every call, run, saga, rollback and webhook
delivery for ever. The fixture fills them with 100 000 rows of history (a hundredth live), ANALYZEs, runs each
sweep once (nothing is due, so it only reads) and EXPLAINs every statement it sent, as the planner would plan it
with real statistics (no ``enable_seqscan`` games). Each finding test fails on main at c76a846.

Findings:

1. ``_sagas_with_unheard_failures`` (the sagas sweep, every 5 s) filtered ``newest_step_at IS NOT NULL`` on its
   own: a seq scan of every direct saga computing its newest step by subquery (50 001 loops, 2.5 s at 50 000
   sagas). Only sagas holding a failed direct step have it read now (27 ms), with the same result.
2. The sweeps' reads of unfinished rollbacks (sagas sweep's stalled rollbacks, ``runs_to_wake``'s rollbacks under
   way) seq-scanned ``sagas_rollback``, which only grows; index ``rollback_unfinished`` (partial).
3. ``runs_to_wake`` read the live runs through ``status`` and sorted them; index ``agentrun_to_wake`` (partial,
   ``updated_at, id`` of running and waiting runs) reads them longest idle first and stops at the batch.
4. The webhook sweep's due deliveries: ``_give_up_exhausted`` seq-scanned every delivery and ``_due`` walked
   ``next_attempt_at`` over every delivered one since the start (37 + 48 ms at 100 000); index
   ``webhook_delivery_due`` (partial, pending) makes both read the pending few.

Checked and found holding (``test_other_sweeps_read_through_an_index``):

- ``calls_redispatch_stale``, ``calls_reconcile_expired_leases``, ``calls_expire_awaiting_results`` read the
  few queued / running / awaiting calls through ``toolcall_status_created`` (equality on status), bounded 500.
- ``approvals_expire_due`` / ``approvals_escalate_due`` read the pending few through the status index, bounded
  500; they now take the soonest due first (they took the newest requests first by the model's ordering).
- The sagas sweep's due retries use ``compensation_due``; its settled running compensations the status index.
- ``ToolCall.saga_id`` has an index (``toolcall_saga``, migration 0009); every sweep is bounded (500 or ``limit``).
"""

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents_app.models import AgentRun
from agents_app.selectors import runs_to_wake
from agents_app.services import agent_create
from approvals.models import ApprovalRequest, WebhookDelivery
from approvals.unanswered import approvals_escalate_due, approvals_expire_due
from approvals.webhooks import webhooks_dispatch_due
from tests.security_review.query_plans import ago, analyze, clone, explained, max_loops, seq_scans, uuid_of
from toolhub.models import ToolCall
from toolhub.sagas.models import Compensation, Rollback, Saga
from toolhub.sagas.recovery import sagas_sweep
from toolhub.sweeper import calls_expire_awaiting_results, calls_reconcile_expired_leases, calls_redispatch_stale

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

ROWS = 100_000


@pytest.fixture
def backlog() -> None:
    """A year of history: ROWS settled calls, runs, sagas, requests and deliveries; the live few are recent."""
    agent = agent_create(name="sweeper", script=[{"content": "hi"}])
    now = timezone.now()
    call = ToolCall.objects.create(tool_name="t", status="succeeded", tenant="acme")
    clone(
        ToolCall,
        call,
        ROWS,
        id=uuid_of("call"),
        # a hundredth of them live (queued, running, awaiting), the rest settled; a few failed direct steps
        status="CASE WHEN g % 100 = 0 THEN (ARRAY['queued','running','awaiting_result'])[1 + g / 100 % 3] "
        "WHEN g % 50 = 1 THEN 'failed' ELSE 'succeeded' END",
        saga_id="CASE WHEN g % 2 = 0 THEN 'saga-' || (g / 2) ELSE '' END",
        created_at=ago(f"{ROWS} - g"),
        finished_at="CASE WHEN g % 100 = 0 THEN NULL ELSE " + ago(f"{ROWS} - g") + " END",
        queued_at="CASE WHEN g % 100 = 0 THEN now() ELSE " + ago(f"{ROWS} - g") + " END",
        lease_expires_at="now() + interval '1 hour'",
    )
    run = AgentRun.objects.create(agent=agent, tenant="acme", input="x", status="completed")
    clone(
        AgentRun,
        run,
        ROWS,
        id=uuid_of("run"),
        status="CASE WHEN g % 100 = 0 THEN 'running' WHEN g % 100 = 1 THEN 'waiting' ELSE 'completed' END",
        created_at=ago(f"{ROWS} - g"),
        # the running ones advanced a moment ago; the waiting ones idle for long (held calls, a slow result)
        updated_at="CASE WHEN g % 100 = 0 THEN now() ELSE " + ago(f"{ROWS} - g") + " END",
    )
    saga = Saga.objects.create(key="saga-0", tenant="acme", status="compensated")
    clone(Saga, saga, ROWS // 2, key="'saga-' || g", created_at=ago(f"{ROWS} - g"))
    first = Saga.objects.order_by("id").values_list("id", flat=True)[1]
    comp = Compensation.objects.create(
        saga=saga, sequence=1, step_call=call, step_tool="t", tool_name="undo", status="succeeded"
    )
    clone(
        Compensation,
        comp,
        ROWS // 2,
        saga_id=f"{first} + g - 1",
        step_call_id=uuid_of("call"),
        status="CASE WHEN g % 100 = 0 THEN 'recorded' ELSE 'succeeded' END",
    )
    rollback = Rollback.objects.create(saga=saga, trigger="on_demand", requested_by="x", finished_at=now)
    clone(Rollback, rollback, ROWS // 2, saga_id=f"{first} + g - 1")
    request = ApprovalRequest.objects.create(call=call, reason="r", tool_name="t", status="approved", expires_at=now)
    clone(
        ApprovalRequest,
        request,
        ROWS,
        call_id=uuid_of("call"),
        status="CASE WHEN g % 100 = 0 THEN 'pending' ELSE 'approved' END",
        expires_at="CASE WHEN g % 100 = 0 THEN now() + interval '1 day' ELSE " + ago(f"{ROWS} - g") + " END",
        escalate_at="CASE WHEN g % 100 = 0 THEN now() + interval '1 hour' ELSE " + ago(f"{ROWS} - g") + " END",
        created_at=ago(f"{ROWS} - g"),
    )
    delivery = WebhookDelivery.objects.create(event="e", payload={}, status="delivered", next_attempt_at=now)
    clone(
        WebhookDelivery,
        delivery,
        ROWS,
        message_id="'msg_' || g",
        status="CASE WHEN g % 100 = 0 THEN 'pending' ELSE 'delivered' END",
        next_attempt_at="CASE WHEN g % 100 = 0 THEN now() + interval '1 hour' ELSE " + ago(f"{ROWS} - g") + " END",
    )
    analyze()


SWEEPS: dict[str, Callable[[], Any]] = {
    "redispatch": calls_redispatch_stale,
    "leases": calls_reconcile_expired_leases,
    "awaiting": calls_expire_awaiting_results,
    "runs": lambda: runs_to_wake(idle_since=timezone.now() - timedelta(seconds=60)),
    "sagas": sagas_sweep,
    "approvals_expire": approvals_expire_due,
    "approvals_escalate": approvals_escalate_due,
    "webhooks": webhooks_dispatch_due,
}


def _plans(name: str) -> list[tuple[str, str]]:
    return explained(SWEEPS[name])


def test_unheard_failures_read_only_sagas_with_a_failed_step(backlog: None) -> None:
    """Found: the sagas sweep computed every direct saga's newest step each 5 s (50 001 subquery loops).
    Expect: only the sagas holding a failed direct step have theirs read; no rollback is read whole."""
    plans = _plans("sagas")
    unheard = [plan for sql, plan in plans if "toolcall_failed_direct_step" in plan]  # review bd: from the failures
    assert len(unheard) == 2  # review bv: the window rolled back, and the one before it held for an operator
    for plan in unheard:
        assert max_loops(plan) < ROWS // 20, plan
    stalled = [plan for sql, plan in plans if sql.startswith('SELECT "sagas_rollback"."saga_id"')]
    assert stalled and "rollback_unfinished" in stalled[0] and not seq_scans(stalled[0]), stalled


def test_runs_to_wake_reads_the_live_runs_through_its_index(backlog: None) -> None:
    """Found: the runs sweep seq-scanned the rollbacks (every rollback ever, each tick) besides its live runs.
    Expect: the live runs read through an index of live runs only (``agentrun_to_wake``, longest idle first, or
    ``status``'s then sorted: the planner picks by the statistics of the moment, in the full suite the latter, both
    a few ms), never the whole history; unfinished rollbacks through ``rollback_unfinished``."""
    [(_, plan)] = _plans("runs")
    live_runs = r"(Index Scan using|Bitmap Index Scan on) (agentrun_to_wake|agents_app_agentrun_status_\w+)"
    assert re.search(live_runs, plan), plan
    assert "rollback_unfinished" in plan, plan
    assert "Seq Scan on sagas_rollback" not in plan, plan
    assert not seq_scans(plan), plan


def test_webhook_sweep_reads_only_pending_deliveries(backlog: None) -> None:
    """Found: each tick seq-scanned every webhook delivery and walked every delivered one's next_attempt_at.
    Expect: both statements read the pending few through ``webhook_delivery_due``."""
    plans = _plans("webhooks")
    assert len(plans) == 2
    for _, plan in plans:
        assert "webhook_delivery_due" in plan and not seq_scans(plan), plan


def test_other_sweeps_read_through_an_index(backlog: None) -> None:
    """Found holding: the call and approval sweeps read their few live rows through a status index.
    Expect: that index in every plan, no big table read whole."""
    for name, index in [
        ("redispatch", "toolcall_status_created"),
        ("leases", "toolcall_status_created"),
        ("awaiting", "toolcall_status_created"),
        ("approvals_expire", "approvals_approvalrequest_status"),
        ("approvals_escalate", "approvals_approvalrequest_status"),
    ]:
        for sql, plan in _plans(name):
            assert index in plan and not seq_scans(plan), (name, sql, plan)
