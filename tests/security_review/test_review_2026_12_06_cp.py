"""Review 2026-12-06 cp: the review of reviews cl (the sagas sweep reads failures by ``finished_at``) and cm
(``allowed_from`` on ``tool_call_cancel`` / ``tool_call_withdraw``).

Each finding's test failed on the reviewed code (main at 0a88083) and passes now.

Findings:

1. ``tool_call_withdraw(allowed_from=...)`` (review cm) narrowed only the call's own guarded UPDATE: a call read as
   held still had its approval request withdrawn (``approval_withdrawing``), which cancels the call from
   ``pending_approval`` whatever ``allowed_from`` said, so ``allowed_from={queued, awaiting_result}`` cancelled a held
   call and ended its request. The request is withdrawn only when ``pending_approval`` is one of ``allowed_from``.
   Latent: no caller narrows it so today (the OpenAI Agents refusal passes ``{pending_approval}``).

Checked and holds:
- Every way a call becomes ``failed`` sets ``finished_at`` in the same guarded UPDATE, so no failed direct step is
  missing from the sweep's ``finished_at`` scans: the worker's outcome (``execution._finish`` through
  ``_outcome_change``, one call or a claimed batch, an atomic tool's undone outcome too), an external result's error
  (``waiting._settle_with_result``), a subagent's child run ending unfinished (``subagent_run_ended``, also from the
  runs sweep). ``CALL_TRANSITIONS`` lets ``failed`` be entered from ``running`` and ``awaiting_result`` only; nothing
  else writes a call's status: no ``.update(status=...)``, bulk update or raw SQL on ``toolhub_toolcall``, no
  ``call_insert`` of a failed row (refusals insert ``invalid``/``denied`` with ``finished_at``). Cancellations,
  approvals' rejection and expiry, the reconciler (``needs_attention``) and the OpenAI Agents adapter write no
  ``failed``. The only move out of ``failed`` (clearing ``finished_at``) is a compensation's next attempt
  (``compensating.launch``), a ``compensation`` call, never in ``ROLLBACK_KINDS``. Shown end to end:
  ``test_a_direct_external_step_failing_after_a_long_wait_is_rolled_back``.
- Review cm: ``allowed_from`` defaults to ``WITHDRAWABLE_STATUSES`` in both functions, so the REST API, the admin
  action, MCP ``cancel`` and a cancelled run's withdrawals behave as before; the move is ``call_transition``'s
  conditional UPDATE (status IN ``allowed_from``) with its audit event in the same statement, inside
  ``tool_call_cancel``'s transaction; the approvals receiver locks the request and cancels only a pending one from
  ``pending_approval``, so an approval that landed after the read stands.
"""

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from approvals.models import ApprovalRequest, ApprovalStatus
from tests.security_review.direct_sagas import direct_call, unheard_call
from tests.security_review.sdk_calls import held_sdk_call
from toolhub import Tool, registry
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.sagas.models import CompensationStatus, Saga, SagaStatus
from toolhub.sagas.recovery import sagas_sweep
from toolhub.signals import call_settled
from toolhub.waiting import tool_call_submit_result, tool_call_withdraw

WINDOW = dt.timedelta(days=7)  # SAGA_UNHEARD_FAILURE_HOURS's default

ASK_CARRIER = Tool.external(
    "ask_carrier",
    "Ask the carrier for a slot (answered by the carrier's connector).",
    {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]},
)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("saga_tools")
def test_a_direct_external_step_failing_after_a_long_wait_is_rolled_back(alice: User, settings: Any) -> None:
    """Found: nothing (holds): review cl's tests forge ``finished_at``; this one fails a step on a real path.
    Expect: a direct step that awaited its external result eight days and then failed, its notification lost, is
    rolled back by the next sweep (its ``finished_at`` is set when it fails), once."""
    settings.TOOLHUB = {**settings.TOOLHUB, "EXTERNAL_RESULT_TIMEOUT_SECONDS": 30 * 24 * 3600}
    with registry.temporarily(ASK_CARRIER):
        # given a direct saga: a booking, then an external call still awaiting its result, both eight days old
        booked = unheard_call("book", {"item": "slot"}, saga="carrier", user=alice)
        asked = direct_call("ask_carrier", {"item": "slot"}, saga="carrier", user=alice)
        assert asked.status == CallStatus.AWAITING_RESULT
        long_ago = timezone.now() - WINDOW - dt.timedelta(days=1)
        ToolCall.objects.filter(pk=booked.pk).update(created_at=long_ago, finished_at=long_ago)
        ToolCall.objects.filter(pk=asked.pk).update(created_at=long_ago, queued_at=long_ago)
        assert sagas_sweep()["held"] == 0  # a completed scan: the mark at now - W

        # when the carrier answers with an error and nobody hears of it
        receivers = call_settled.receivers
        call_settled.receivers = []
        try:
            call_settled.sender_receivers_cache.clear()
            tool_call_submit_result(call_id=asked.pk, actor="external:carrier", error="No slot left.")
        finally:
            call_settled.receivers = receivers
            call_settled.sender_receivers_cache.clear()
        failed = ToolCall.objects.get(pk=asked.pk)
        assert failed.status == CallStatus.FAILED and failed.finished_at is not None

        counts = sagas_sweep()

    # then the sweep rolls the saga back, once
    assert counts["rolled_back"] == 1 and counts["held"] == 0, counts
    saga = Saga.objects.get(key="carrier")
    assert saga.rollbacks.get().failed_call_id == asked.pk
    assert saga.compensations.get().status == CompensationStatus.SUCCEEDED
    assert saga.status == SagaStatus.COMPENSATED
    assert sagas_sweep()["rolled_back"] == 0


@pytest.mark.django_db
def test_withdrawing_only_started_waits_leaves_a_held_call_and_its_request(alice: User) -> None:
    """Found: ``tool_call_withdraw(allowed_from={queued, awaiting_result})`` on a held call withdrew its approval
    request through ``approval_withdrawing``, which cancelled the call from ``pending_approval``: ``allowed_from``
    narrowed only the fallback UPDATE. Expect: False, the call still held, its request pending, nothing audited."""
    held = held_sdk_call(alice, "narrowed")
    trail = AuditEvent.objects.filter(call_id=held.pk).count()

    withdrawn = tool_call_withdraw(
        call=held,
        actor="user:alice",
        reason="the run moved on",
        allowed_from=frozenset({CallStatus.QUEUED, CallStatus.AWAITING_RESULT}),
    )

    assert withdrawn is False
    held.refresh_from_db()
    assert held.status == CallStatus.PENDING_APPROVAL
    assert ApprovalRequest.objects.get(call=held).status == ApprovalStatus.PENDING
    assert AuditEvent.objects.filter(call_id=held.pk).count() == trail
