"""Probe of 2026-12-04 (p): concurrency of the governed pipeline on PostgreSQL, with real connections.

Each test forces one interleaving deterministically (a row lock held by another session, or a function
wrapped to wait on an Event) and asserts what must hold whichever way it is scheduled.
"""

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.helpers import principal_for
from tests.security_review.pg_races import chain_head_locked, in_thread, wait_for_lock_waiter
from tests.testapp.models import SideEffect
from toolhub import pipeline
from toolhub.audit_hash import chain_for
from toolhub.models import CallStatus, Grant, GrantEffect, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


# --- helpers -----------------------------------------------------------------------------------------------


def _queued_call(user: User, tool_name: str, arguments: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> ToolCall:
    """A call of ``user`` in acme, queued for a worker (its message is not sent: the test delivers it)."""
    from toolhub.celery import app

    monkeypatch.setattr(pipeline, "dispatch_call", lambda call: None)
    app.conf.task_always_eager = False  # restored by the _celery_mode fixture
    call = tool_call_request(
        request=CallRequest(
            tool_name=tool_name,
            arguments=arguments,
            principal=principal_for(user, tenant="acme"),
            context=ToolContext({}),
        )
    )
    call.refresh_from_db()
    assert call.status == CallStatus.QUEUED
    return call


# --- a revoked grant and a claim waiting on the chain head ---------------------------------------------------


def test_a_grant_revoked_while_the_claim_waits_on_the_chain_head_is_not_honoured(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: the worker's claim (``toolhub.claims._claim``) checks the governance stamp inside its guarded UPDATE
    (``GOVERNANCE_STAMP_CHECK``), and the re-check that follows reads no stamp (``_execute_claimed`` with
    ``stamp_checked``: the process's cached grants). But the stamp is read in the statement's snapshot, taken
    before the statement waits for the tenant's audit chain head (``toolhub.audit_sql``: the head's upsert locks
    it; any concurrent append in acme holds it). An operator's deny grant for alice that commits while the claim
    waits is never seen: the claim commits after the revocation and the worker runs record_effect for her with
    the grants cached before it. A busy tenant chain makes the window as long as any other append's transaction.
    Expect: a call whose claim commits after the revocation is refused (denied), nothing executed; e.g. the
    claim locks the stamp row (``FOR SHARE``) or re-reads the stamp after its statement.
    """
    from toolhub.execution import tool_call_execute

    call = _queued_call(alice, "record_effect", {"note": "after revoke"}, monkeypatch)
    chain = chain_for(call.id, "acme")

    with chain_head_locked(chain):
        worker, result = in_thread(lambda: tool_call_execute(call_id=call.id, worker="w1"))
        wait_for_lock_waiter("WITH ")
        # the operator's revocation commits while the claim waits
        Grant.objects.create(user=alice, tool_name="record_effect", effect=GrantEffect.DENY, note="revoked")
    worker.join(30)
    assert not worker.is_alive()
    assert not isinstance(result[0], BaseException), result

    call.refresh_from_db()
    assert SideEffect.objects.filter(note="after revoke").count() == 0, "the tool ran after its grant was revoked"
    assert call.status == CallStatus.DENIED, call.status


def test_a_call_run_in_process_whose_row_waits_on_the_chain_head_while_its_grant_is_revoked_is_denied(
    alice: User,
) -> None:
    """Fix (the probe above, for the process that asks for a call and runs it itself): the row, written already
    claimed, waits for the chain head while a deny grant commits. The write returns the stamp read after its
    locks (``ToolCall.governance_moved``), and the call is checked again before it runs: denied, nothing run.
    """
    import uuid

    # an earlier call of alice's in acme: the chain head the next call's row advances exists, and is locked below
    earlier = tool_call_request(
        request=CallRequest(
            tool_name="record_effect",
            arguments={"note": "earlier"},
            principal=principal_for(alice, tenant="acme"),
            context=ToolContext({}),
        )
    )
    chain = chain_for(earlier.id, "acme")
    call_id = next(key for key in iter(uuid.uuid4, None) if chain_for(key, "acme") == chain)
    request = CallRequest(
        tool_name="record_effect",
        arguments={"note": "in process after revoke"},
        principal=principal_for(alice, tenant="acme"),
        context=ToolContext({}),
        call_id=call_id,
    )

    with chain_head_locked(chain):
        requester, result = in_thread(lambda: tool_call_request(request=request))
        wait_for_lock_waiter("WITH ")
        Grant.objects.create(user=alice, tool_name="record_effect", effect=GrantEffect.DENY, note="revoked")
    requester.join(30)
    assert not requester.is_alive()
    assert not isinstance(result[0], BaseException), result

    call = ToolCall.objects.get(pk=call_id)
    assert SideEffect.objects.filter(note="in process after revoke").count() == 0, "the tool ran after the revocation"
    assert call.status == CallStatus.DENIED, call.status


# --- the reconciler and a claim taken after it read the call ---------------------------------------------------


def test_a_stale_reconciler_does_not_take_back_a_live_claim_of_a_later_attempt(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: ``toolhub.sweeper.calls_reconcile_expired_leases`` reads the running calls whose lease expired, then
    moves each with ``call_transition(allowed_from={RUNNING})``: no ``attempt=`` and no lease condition. Between
    its read and its move (the earlier calls of its batch of 500, or a second sweep overlapping the first) the
    call may have been taken back and claimed again by a live worker: attempt 2, lease minutes ahead. The stale
    move takes that live claim back (queued again and dispatched), so a third worker runs the call while the
    second still runs it, and the second's outcome is refused. (For a non-idempotent tool the same stale move
    sends a live attempt to needs_attention, e.g. after a saga's retry of an unknown compensation requeued it.)
    Expect: the reconciler moves only the attempt it found expired; attempt 2 keeps its claim (running, w2).
    """
    from toolhub import sweeper
    from toolhub.claims import tool_calls_claim

    monkeypatch.setattr(sweeper, "dispatch_call", lambda call: None)
    call = _queued_call(alice, "slow_idempotent", {"seconds": 0}, monkeypatch)
    assert tool_calls_claim(call_id=call.id, worker="dead", limit=1)  # a worker claimed it, then died
    ToolCall.objects.filter(id=call.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    read, go_on = threading.Event(), threading.Event()
    real_transition = sweeper.call_transition

    def paused_transition(*args: Any, **kwargs: Any) -> bool:
        if threading.current_thread().name == "stale-sweep":
            read.set()
            go_on.wait(30)
        return real_transition(*args, **kwargs)

    monkeypatch.setattr(sweeper, "call_transition", paused_transition)
    stale, result = in_thread(sweeper.calls_reconcile_expired_leases, name="stale-sweep")
    assert read.wait(10), "the first sweep did not pause between its read and its move"

    # meanwhile another sweep requeues the expired attempt and a live worker claims it: attempt 2
    assert sweeper.calls_reconcile_expired_leases()["requeued"] == 1
    assert tool_calls_claim(call_id=call.id, worker="w2", limit=1)
    live = ToolCall.objects.get(id=call.id)
    assert (live.status, live.attempts, live.worker) == (CallStatus.RUNNING, 2, "w2")
    assert live.lease_expires_at > timezone.now() + timedelta(seconds=60)

    go_on.set()
    stale.join(30)
    assert not isinstance(result[0], BaseException), result

    after = ToolCall.objects.get(id=call.id)
    assert (after.status, after.attempts, after.worker) == (CallStatus.RUNNING, 2, "w2"), (
        f"the stale sweep took back attempt 2's live claim: now {after.status}, attempt {after.attempts}"
    )
