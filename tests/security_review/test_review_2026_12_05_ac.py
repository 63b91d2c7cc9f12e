"""Review of 2026-12-05 (ac): races on PostgreSQL with real concurrent connections.

Each test forces one interleaving deterministically (a function wrapped to wait on an Event, a row held by another
session, ``pg_races``) and fails on the reviewed code (main at 066a32d); its docstring says what was found
("Found: ...") and what is expected ("Expect: ...").

Findings:

1. A batch worker hands a call it has no time for back with ``attempts - 1``, so the next claim reuses the attempt
   number; a reconciler that read the batch's expired claim then moved the live one (``needs_attention`` while
   worker B ran it). Fixed: the reconciler's move is also guarded by the lease it read as ended
   (``call_transition(lease_expired_by=)``).
2. A saga step still running when a rollback was asked for, whose worker then died, reached ``needs_attention``
   after the rollback and was never held: the saga read ``compensated``. Fixed: ``saga_record_step`` holds such a
   step under the rollback asked for after it, as ``hold_unknown_steps`` does for one unknown before.
3. A decider removed from the tenant (or deactivated, or stripped of the permission) while their decision waited
   for the request's row lock was judged with the standing their HTTP request memoized before the wait: their
   approval released a critical call. Fixed: the decisions read after the lock carries the governance stamp, and
   the decider is judged as they are under it (``approvals.deciders.decider_as_now``, a per-process cache kept
   until the next governance change, so a warm decision reads nothing more; cold, one row more).

Checked and found holding (no test here): approve racing reject, edit, expiry and a run's cancellation all
serialise on the request's row lock, taken before the call's row and the chain head in every path (the run's
cancellation locks run, requests, calls, then appends), so none deadlocks and exactly one outcome is written; a
cancellation that waits for an approval finds the request approved and withdraws the queued call instead. An
earlier approver whose standing is revoked while a colleague's approval is decided: the colleague's read of their
standing and the revocation serialise as "decision first" (nothing the revocation reads is written by the
decision), the release then stands. A grant revoked while a claim waits for the chain head (probes p and review c);
a batch's later calls are re-checked under a stamp read when each runs (``stamp_checked`` only for a single
claim). The claim's own window (committed, then the tool starts in the same process with the governance the claim
checked) is what the README calls the check "when the call executes". Audit appends from 8 connections into one
chain (200+ events, fresh chain, barrier-started): gapless, one head, ``verify_audit`` clean (the head is upserted
in the statement that writes the events; ``ON CONFLICT`` serialises the first append). A late success of a step
asked before a rollback is compensated by it (``plan_compensation``'s ``late_for``); a compensation's late outcome
is applied once under the saga's lock (``apply_call_outcome`` checks the compensation still runs that call).

Found, not fixed: an operator's new approval rule does not hold a call already queued (decided before it): the
worker re-checks grants, the tool's enabled flag and the user's standing, not the approval policy. The README's
"a changed rule applies to the very next call" is about calls asked for after it; now said explicitly there.
"""

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Annotated, Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from tests.helpers import RequestCall, assert_audit_intact, principal_for
from tests.security_review.conftest import client_for
from tests.security_review.pg_races import dsn, in_thread, wait_for_lock_waiter
from tests.testapp.models import SideEffect
from toolhub import Param, Risk, ToolContext, pipeline, registry, tool
from toolhub.models import CallStatus, TenantMembership, ToolCall, ToolDefinition
from toolhub.pipeline import CallRequest, tool_call_request

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


# --- helpers -----------------------------------------------------------------------------------------------


def _queued(user: User, tool_name: str, arguments: dict[str, Any]) -> ToolCall:
    """A call of ``user`` in acme, queued for a worker (no message is sent: the test delivers it)."""
    call = tool_call_request(
        request=CallRequest(
            tool_name=tool_name,
            arguments=arguments,
            principal=principal_for(user, tenant="acme"),
            context=ToolContext({}),
        )
    )
    call.refresh_from_db()
    assert call.status == CallStatus.QUEUED, call.status
    return call


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls are queued for workers the test drives by hand: no task message is sent, no eager run."""
    from toolhub import execution, sweeper
    from toolhub.celery import app

    for module in (pipeline, execution, sweeper):
        monkeypatch.setattr(module, "dispatch_call", lambda call: None)
    app.conf.task_always_eager = False  # restored by the _celery_mode fixture


_gate: dict[str, threading.Event] = {}


@tool(risk=Risk.LOW)
def review_ac_gated(label: Annotated[str, Param("Which call this is.")], ctx: ToolContext) -> dict:
    """Signal that it runs, wait until the test lets it go, then record its effect (not idempotent)."""
    _gate["running"].set()
    assert _gate["go"].wait(30), "the test never let the gated tool go"
    SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="review_ac_gated", note=label)
    return {"label": label}


@pytest.fixture
def gated() -> Iterator[dict[str, threading.Event]]:
    _gate.update(running=threading.Event(), go=threading.Event())
    with registry.temporarily(review_ac_gated):
        yield _gate
    _gate.clear()


def _paused(real: Callable[..., Any], thread_name: str) -> tuple[Callable[..., Any], threading.Event, threading.Event]:
    """``real``, made to stop before it acts when called on thread ``thread_name``, until the test lets it go."""
    reached, go_on = threading.Event(), threading.Event()

    def paused(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == thread_name:
            reached.set()
            assert go_on.wait(30), "the test never let the paused call go on"
        return real(*args, **kwargs)

    return paused, reached, go_on


# --- a batch's handed-back call and a stale reconciler -------------------------------------------------------------


def test_a_stale_reconciler_does_not_take_a_live_claim_after_a_batch_handed_the_call_back(
    alice: User, workers: None, gated: dict[str, threading.Event], settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: a batch worker hands back a claimed call it has no time left for (``execution._hand_back``) with
    ``attempts=call.attempts - 1``, so the next claim takes the *same* attempt number again. The reconciler's
    move is guarded by the attempt it read as expired (``sweeper.calls_reconcile_expired_leases``, the fix of probe
    p), which now names the later, live claim as well: a sweep that read the batch's expired claim of record_effect,
    then moved it after the hand-back and worker B's claim, sent B's live attempt to ``needs_attention`` while B
    ran it (B's outcome then refused: the effect happened, the call reads "outcome unknown").
    Expect: the stale move misses; B keeps its claim (running, worker B) and records its outcome.
    """
    from toolhub import sweeper
    from toolhub.claims import tool_calls_claim
    from toolhub.execution import tool_call_execute
    from toolhub.signals import running_after_task

    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "WORKER_CLAIM_BATCH": 2}
    first = _queued(alice, "review_ac_gated", {"label": "first"})
    later = _queued(alice, "record_effect", {"note": "later"})

    def batch_worker() -> Any:
        with running_after_task(seconds=5):  # the task's time limit is near: no time for a second call
            return tool_call_execute(call_id=first.id, worker="A")

    worker_a, a_result = in_thread(batch_worker, name="worker-A")
    assert gated["running"].wait(10), "worker A did not start its batch"
    claimed = ToolCall.objects.get(pk=later.pk)
    assert (claimed.status, claimed.worker, claimed.attempts) == (CallStatus.RUNNING, "A", 1)

    # A stalls on its first call until the batch's claim of the later call has expired
    ToolCall.objects.filter(pk=later.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    paused, read, go_on = _paused(sweeper.call_transition, "stale-sweep")
    monkeypatch.setattr(sweeper, "call_transition", paused)
    stale, sweep_result = in_thread(sweeper.calls_reconcile_expired_leases, name="stale-sweep")
    assert read.wait(10), "the sweep did not pause between its read and its move"

    # A goes on, finds no time for the later call and hands it back; worker B claims it
    gated["go"].set()
    worker_a.join(30)
    assert not isinstance(a_result[0], BaseException), a_result
    assert ToolCall.objects.get(pk=later.pk).status == CallStatus.QUEUED
    assert tool_calls_claim(call_id=later.id, worker="B", limit=1)

    go_on.set()
    stale.join(30)
    assert not isinstance(sweep_result[0], BaseException), sweep_result

    after = ToolCall.objects.get(pk=later.pk)
    assert (after.status, after.worker) == (CallStatus.RUNNING, "B"), (
        f"the stale sweep took B's live claim: now {after.status} ({after.error})"
    )


# --- a rollback and a step whose outcome becomes unknown after it ---------------------------------------------------


def _saga_step(user: User, label: str, saga_id: str) -> ToolCall:
    call = tool_call_request(
        request=CallRequest(
            tool_name="saga_step",
            arguments={"label": label},
            principal=principal_for(user, tenant="acme"),
            context=ToolContext({}),
            saga_id=saga_id,
        )
    )
    call.refresh_from_db()
    return call


def test_a_step_whose_worker_died_after_the_rollback_was_asked_is_held_for_an_operator(
    alice: User, workers: None
) -> None:
    """Found: a rollback holds for an operator the steps whose outcome is unknown (``hold_unknown_steps``: their
    call needs attention) and compensates a step that succeeds after it was asked (``plan_compensation``'s
    ``late_for``). A step still running when the rollback is asked, whose worker then dies, reaches
    ``needs_attention`` through the reconciler after the rollback: ``saga_call_settled`` follows only succeeded and
    failed steps, so it is never held. The saga reads ``compensated`` and the rollback's note names flight alone,
    while saga_step may have done its effect (here it did): nobody is asked to look at it. Had the worker died a
    moment before the rollback, the step would have been held.
    Expect: as when the step's outcome was unknown before the rollback, its compensation is held under that
    rollback and the saga needs attention.
    """
    from toolhub.claims import tool_calls_claim
    from toolhub.execution import tool_call_execute
    from toolhub.sagas.models import Compensation, CompensationStatus, Saga
    from toolhub.sagas.services import saga_rollback_on_demand
    from toolhub.sweeper import calls_reconcile_expired_leases

    flight = _saga_step(alice, "flight", "trip-ac")
    assert tool_call_execute(call_id=flight.id, worker="w1") is not None
    hotel = _saga_step(alice, "hotel", "trip-ac")
    assert tool_calls_claim(call_id=hotel.id, worker="dies", limit=1)  # hotel's worker works on it ...

    # ... when alice rolls the saga back; flight's compensation runs
    saga_rollback_on_demand(saga_key="trip-ac", tenant="acme", actor="user:alice")
    undo = Compensation.objects.get(step_call=flight)
    assert tool_call_execute(call_id=undo.call_id, worker="w1") is not None
    assert Compensation.objects.get(step_call=flight).status == CompensationStatus.SUCCEEDED

    # then hotel's worker turns out dead: its lease expires and the reconciler finds its outcome unknown
    ToolCall.objects.filter(pk=hotel.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert calls_reconcile_expired_leases()["needs_attention"] == 1

    saga = Saga.objects.get(key="trip-ac", tenant="acme")
    held = Compensation.objects.filter(step_call=hotel).first()
    assert held is not None and held.status == CompensationStatus.HELD, (
        f"hotel's unknown outcome is held for nobody; the saga reads {saga.status}"
    )
    assert held.rollback_id == undo.rollback_id
    assert saga.status == "needs_attention"


# --- a decider whose standing ends while their decision waits for the request -----------------------------------


def _held_for_two(request_call: RequestCall, user: User) -> ApprovalRequest:
    """A call of ``user`` (acme) held for two approvers: risky_effect made critical."""
    ToolDefinition.objects.filter(name="risky_effect").update(risk_override="critical")
    call = request_call("risky_effect", {"note": "pay 5000"}, user, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)
    assert (request.status, request.required_approvals) == (ApprovalStatus.PENDING, 2)
    return request


def test_an_approver_removed_from_the_tenant_while_their_approval_waits_for_the_request_does_not_release_it(
    request_call: RequestCall, alice: User, operator: User, second_operator: User
) -> None:
    """Found: the decision service judges the decider (``approval_may_decide``) after locking the request, but with
    the user object of the HTTP request: its tenants and permissions were memoized when the API looked the request
    up (``approval_requests_visible_to``, before the lock), and its ``is_active`` is the row as the request began.
    An operator removed from acme while their approval waits for the request's row lock (held by another decider,
    the expiry sweep or a run's cancellation, themselves waiting for a busy chain head) is judged a member: their
    approval is recorded and, with a colleague's, releases a critical call after they left; risky_effect runs.
    (An earlier approval whose giver leaves no longer counts, ``ApproverStanding``; the decider's own did.)
    Expect: the decider is judged as they are once the request is locked: refused (answered as a missing
    request), nothing recorded, the call still held.
    """
    request = _held_for_two(request_call, alice)
    first = client_for(operator).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
    assert first.status_code == 200, first.content

    locker = psycopg.connect(**dsn())  # another decision holds the request
    locker.execute("SELECT id FROM approvals_approvalrequest WHERE id = %s FOR UPDATE", [request.pk])
    try:
        second, result = in_thread(
            lambda: client_for(second_operator).post(
                f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json"
            )
        )
        wait_for_lock_waiter("approvals_approvalrequest")
        # while it waits, the second operator is removed from acme (committed)
        TenantMembership.objects.filter(user=second_operator, tenant__slug="acme").delete()
    finally:
        locker.rollback()
        locker.close()
    second.join(30)
    assert not second.is_alive()
    response = result[0]
    assert not isinstance(response, BaseException), response

    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING, f"released by someone no longer in acme ({response.status_code})"
    assert response.status_code in (403, 404), response.content
    assert not ApprovalDecision.objects.filter(request=request, decided_by=second_operator).exists()
    assert not SideEffect.objects.filter(tool="risky_effect").exists()
    assert_audit_intact()
