"""Adversarial probe (2026-12-03, eighth pass) of races: concurrent decisions, idempotency keys, sagas and runs.

Black-box, on PostgreSQL with real commits: every test starts real threads that act as people do (the REST API
with DRF clients, the approval desk's decide endpoint through a logged-in Django client, the expiry task's
service) and close their database connection when done. Tried: one operator approving one request twice at once
(API and desk), a requester racing a colleague on a request that needs two approvers, an approve racing a
reject, an edit and the expiry, one Idempotency-Key sent at once with two bodies and by users of two tenants,
two rollbacks of one saga at once, a rollback racing a step still running under the same saga id, two first
steps from two tenants racing on one fresh saga id, and a run's retry racing its rollback. Invariants: a call
runs at most once, only the approved version runs, nobody approves their own call, no compensation runs twice,
a saga never spans tenants, every audit chain verifies.

Where the outcome of a race is a matter of timing, the test asserts what must hold whichever side wins; where
two requests must both pass a check before either acts, the check is wrapped (its real answer kept) so that the
threads meet after it, which makes the interleaving deterministic.

Tests named ``test_fixed_*`` are problems this probe found (written first as strict expected failures asserting
the secure behaviour), fixed the same day; the docstring says what it was and how it was fixed. The others passed
when written and stay as regression tests.
"""

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Annotated, Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone

from agents_app.models import AgentRun, RunStatus
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from approvals.unanswered import approvals_expire_due
from demo.models import Account
from tests.helpers import RequestCall, assert_audit_intact
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import AcmeData
from tests.testapp.models import SideEffect
from toolhub import Param, Risk, ToolContext, registry, tool
from toolhub.models import AuditEvent, CallKind, CallStatus, Tenant, ToolCall, ToolDefinition
from toolhub.sagas.models import Compensation, Saga

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


# --- helpers ---------------------------------------------------------------------------------------------


def _together(*actions: Callable[[], Any], timeout: float = 30) -> list[Any]:
    """Run the actions in threads released at once by a barrier; return their results (or exceptions), in order."""
    barrier = threading.Barrier(len(actions))
    results: list[Any] = [None] * len(actions)

    def runner(index: int, action: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout)
            results[index] = action()
        except Exception as exc:  # noqa: BLE001 - handed back to the test
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=runner, args=(n, action)) for n, action in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
        assert not thread.is_alive(), "a racing request hung"
    return results


def _hold(request_call: RequestCall, user: User, note: str = "pay 5000", *, approvers: int = 1) -> ApprovalRequest:
    """Hold a call of ``user`` (tenant acme) for approval; ``approvers=2`` makes its tool critical."""
    if approvers == 2:
        ToolDefinition.objects.filter(name="risky_effect").update(risk_override="critical")
    call = request_call("risky_effect", {"note": note}, user, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)
    assert (request.status, request.required_approvals) == (ApprovalStatus.PENDING, approvers)
    return request


def _api_approve(user: User, request: ApprovalRequest, **body: Any) -> Callable[[], Any]:
    return lambda: client_for(user).post(
        f"/api/v1/approvals/{request.pk}/approve/", {"comment": "ok", "round": 1, **body}, format="json"
    )


def _effects(tool_name: str = "risky_effect") -> list[str]:
    return list(SideEffect.objects.filter(tool=tool_name).values_list("note", flat=True))


def _assert_outcome_matches(request: ApprovalRequest) -> None:
    """The request, its call and the side effects agree: approved ran once with its version, else nothing ran."""
    request.refresh_from_db()
    call = ToolCall.objects.get(pk=request.call_id)
    if request.status == ApprovalStatus.APPROVED:
        assert call.status == CallStatus.SUCCEEDED
        assert call.arguments == request.arguments
        assert _effects() == [request.arguments["note"]]
    else:
        assert call.status != CallStatus.SUCCEEDED
        assert _effects() == []
    assert AuditEvent.objects.filter(call_id=call.id, event_type="call.started").count() <= 1


@tool(risk=Risk.LOW)
def probe_slow_step(
    label: Annotated[str, Param("Which step this is.")],
    seconds: Annotated[float, Param("How long the step works.")],
    ctx: ToolContext,
) -> dict:
    """A compensable step that works for ``seconds`` before recording its effect."""
    time.sleep(seconds)
    SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="probe_slow_step", note=label)
    return {"label": label}


@probe_slow_step.compensation(risk=Risk.LOW)
def undo_probe_slow_step(label: str, ctx: ToolContext) -> dict:
    """Undo a step; records every execution (not once per key), so that a second execution shows."""
    SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="undo_probe_slow_step", note=label)
    return {"undone": label}


@pytest.fixture
def probe_tools() -> Iterator[None]:
    with registry.temporarily(probe_slow_step, undo_probe_slow_step):
        yield


def _step(user: User, label: str, saga_id: str, seconds: float = 0.0) -> Any:
    return client_for(user).post(
        "/api/v1/calls/",
        {"tool": "probe_slow_step", "arguments": {"label": label, "seconds": seconds}, "saga_id": saga_id},
        format="json",
    )


def _assert_each_step_compensated_at_most_once() -> None:
    undone = list(SideEffect.objects.filter(tool="undo_probe_slow_step").values_list("note", flat=True))
    assert len(undone) == len(set(undone)), f"a compensation ran twice: {sorted(undone)}"
    per_step = ToolCall.objects.filter(kind=CallKind.COMPENSATION).values_list("arguments", flat=True)
    labels = [arguments.get("label") for arguments in per_step]
    assert len(labels) == len(set(labels)), f"a step got two compensation calls: {sorted(labels)}"


# --- approvals ---------------------------------------------------------------------------------------------


def test_one_operator_approving_at_once_on_the_api_and_the_desk_counts_once(
    request_call: RequestCall, alice: User, operator: User
) -> None:
    # given alice's call that needs two approvers
    request = _hold(request_call, alice, approvers=2)
    desk = Client()
    desk.force_login(operator)

    # when the same operator presses Approve on the desk while their API client approves too
    api, page = _together(
        _api_approve(operator, request),
        lambda: desk.post(
            f"/admin/approvals/approvalrequest/{request.pk}/approve/",
            {"comment": "ok", "round": 1, "arguments_hash": request.arguments_hash},
        ),
    )

    # then one approval counts, the other is refused; nothing ran; the trail verifies
    assert not isinstance(api, Exception) and not isinstance(page, Exception), (api, page)
    assert page.status_code == 302
    assert ApprovalDecision.objects.filter(request=request, decided_by=operator).count() == 1
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    assert _effects() == []
    assert_audit_intact()


def test_a_requester_racing_a_colleague_never_approves_their_own_call(
    request_call: RequestCall, operator: User, second_operator: User
) -> None:
    # given a call the operator requested themselves, which needs two approvers
    request = _hold(request_call, operator, approvers=2)

    # when the requester and a colleague approve at once
    own, colleague = _together(_api_approve(operator, request), _api_approve(second_operator, request))

    # then the requester is refused whatever the order; the colleague's approval alone does not release it
    assert own.status_code == 403, own.content
    assert colleague.status_code == 200, colleague.content
    decisions = list(ApprovalDecision.objects.filter(request=request).values_list("decided_by_id", flat=True))
    assert decisions == [second_operator.pk]
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    assert _effects() == []
    assert_audit_intact()


def test_an_approve_racing_a_reject_has_one_winner(
    request_call: RequestCall, alice: User, operator: User, second_operator: User
) -> None:
    request = _hold(request_call, alice)

    approve, reject = _together(
        _api_approve(operator, request),
        lambda: client_for(second_operator).post(
            f"/api/v1/approvals/{request.pk}/reject/", {"comment": "no"}, format="json"
        ),
    )

    # exactly one decision took effect and the other got 409; the call ran iff it was approved
    assert sorted([approve.status_code, reject.status_code]) == [200, 409], (approve.content, reject.content)
    request.refresh_from_db()
    winner = ApprovalStatus.APPROVED if approve.status_code == 200 else ApprovalStatus.REJECTED
    assert request.status == winner
    assert ApprovalDecision.objects.filter(request=request).count() == 1
    _assert_outcome_matches(request)
    assert_audit_intact()


def test_an_approve_racing_an_edit_runs_only_the_version_that_was_approved(
    request_call: RequestCall, alice: User, operator: User, second_operator: User
) -> None:
    # given alice's note waiting for one approver
    request = _hold(request_call, alice, "pay 5000")

    # when one operator approves round 1 as it is while another edits it to 9000 (an edit-then-approve)
    approve, edit = _together(
        _api_approve(operator, request),
        _api_approve(second_operator, request, arguments={"note": "pay 9000"}),
    )

    # then one wins and the other is told the request changed or was decided; what ran is what was approved
    assert sorted([approve.status_code, edit.status_code]) == [200, 409], (approve.content, edit.content)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED
    expected = "pay 5000" if approve.status_code == 200 else "pay 9000"
    assert request.arguments == {"note": expected}
    _assert_outcome_matches(request)
    assert_audit_intact()


def test_an_approve_racing_the_expiry_either_runs_or_expires_never_both(
    request_call: RequestCall, alice: User, operator: User
) -> None:
    # given a request whose deadline falls while the operator approves and the expiry task sweeps
    request = _hold(request_call, alice)
    ApprovalRequest.objects.filter(pk=request.pk).update(expires_at=timezone.now() + timedelta(milliseconds=150))

    def sweep() -> int:
        expired = 0
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            expired += approvals_expire_due()
            time.sleep(0.01)
        return expired

    def approve_at_the_deadline() -> Any:
        time.sleep(0.15)
        return _api_approve(operator, request)()

    approve, expired = _together(approve_at_the_deadline, sweep)

    request.refresh_from_db()
    call = ToolCall.objects.get(pk=request.call_id)
    assert request.status in (ApprovalStatus.APPROVED, ApprovalStatus.EXPIRED)
    if request.status == ApprovalStatus.APPROVED:
        assert (approve.status_code, expired, call.status) == (200, 0, CallStatus.SUCCEEDED)
    else:
        assert approve.status_code == 409 and call.status == CallStatus.EXPIRED
    assert AuditEvent.objects.filter(call_id=call.id, event_type="approval.expired").count() == (
        1 if request.status == ApprovalStatus.EXPIRED else 0
    )
    _assert_outcome_matches(request)
    assert_audit_intact()


# --- idempotency keys ------------------------------------------------------------------------------------


def test_one_key_sent_at_once_with_two_bodies_makes_one_call_and_one_409(alice: User) -> None:
    def submit(seconds: float) -> Callable[[], Any]:
        return lambda: client_for(alice).post(
            "/api/v1/calls/",
            {"tool": "slow_effect", "arguments": {"seconds": seconds}},
            format="json",
            headers={"Idempotency-Key": "order-42"},
        )

    first, second = _together(submit(0.3), submit(0.31))

    assert sorted([first.status_code, second.status_code]) == [200, 409], (first.content, second.content)
    winner = first if first.status_code == 200 else second
    assert ToolCall.objects.count() == 1 and SideEffect.objects.count() == 1
    assert str(ToolCall.objects.get().id) == winner.json()["id"]
    assert_audit_intact()


def test_one_key_sent_at_once_from_two_tenants_makes_one_call_each(alice: User, globex_user: User) -> None:
    def submit(user: User, note: str) -> Callable[[], Any]:
        return lambda: client_for(user).post(
            "/api/v1/calls/",
            {"tool": "record_effect", "arguments": {"note": note}},
            format="json",
            headers={"Idempotency-Key": "shared-key"},
        )

    acme, globex = _together(submit(alice, "acme's"), submit(globex_user, "globex's"))

    # each gets their own fresh call, never the other tenant's
    assert (acme.status_code, globex.status_code) == (200, 200), (acme.content, globex.content)
    assert not acme.json()["replayed"] and not globex.json()["replayed"]
    assert acme.json()["id"] != globex.json()["id"]
    mine = ToolCall.objects.get(pk=acme.json()["id"])
    theirs = ToolCall.objects.get(pk=globex.json()["id"])
    assert (mine.user_id, mine.tenant, theirs.user_id, theirs.tenant) == (alice.pk, "acme", globex_user.pk, "globex")
    assert sorted(SideEffect.objects.values_list("note", flat=True)) == ["acme's", "globex's"]
    assert_audit_intact()


# --- sagas -------------------------------------------------------------------------------------------------


def test_two_rollbacks_of_one_saga_at_once_compensate_each_step_once(alice: User, probe_tools: None) -> None:
    # given alice's direct saga with two completed steps
    assert _step(alice, "flight", "trip-1").status_code == 200
    assert _step(alice, "hotel", "trip-1").status_code == 200

    # when two rollbacks arrive at once
    first, second = _together(
        lambda: client_for(alice).post("/api/v1/sagas/trip-1/rollback/"),
        lambda: client_for(alice).post("/api/v1/sagas/trip-1/rollback/"),
    )

    # then each step was compensated exactly once and the saga is compensated
    assert {first.status_code, second.status_code} <= {202, 409}, (first.content, second.content)
    assert 202 in (first.status_code, second.status_code)
    assert sorted(SideEffect.objects.filter(tool="undo_probe_slow_step").values_list("note", flat=True)) == [
        "flight",
        "hotel",
    ]
    _assert_each_step_compensated_at_most_once()
    assert Saga.objects.get(key="trip-1").status == "compensated"
    assert_audit_intact()


def test_a_rollback_racing_a_step_still_running_compensates_that_step_too(alice: User, probe_tools: None) -> None:
    # given alice's saga with a completed step
    assert _step(alice, "flight", "trip-2").status_code == 200

    def rollback_while_the_next_step_runs() -> Any:
        time.sleep(0.3)
        return client_for(alice).post("/api/v1/sagas/trip-2/rollback/")

    # when a slow step is asked for under the same saga id and a rollback arrives while it works
    step, rolled = _together(lambda: _step(alice, "hotel", "trip-2", seconds=1.0), rollback_while_the_next_step_runs)

    # then the step asked for before the rollback is compensated by it too, each once; nothing is left behind
    assert (step.status_code, rolled.status_code) == (200, 202), (step.content, rolled.content)
    assert sorted(SideEffect.objects.filter(tool="undo_probe_slow_step").values_list("note", flat=True)) == [
        "flight",
        "hotel",
    ]
    _assert_each_step_compensated_at_most_once()
    assert set(Compensation.objects.values_list("status", flat=True)) == {"succeeded"}
    assert Saga.objects.get(key="trip-2").status == "compensated"
    assert_audit_intact()


def _racing_first_steps(first: tuple[User, str], second: tuple[User, str], saga_id: str) -> list[Any]:
    """Two first steps under one fresh saga id, both checked before either records anything."""
    from toolhub.sagas import selectors

    real = selectors.saga_id_unavailable
    met = threading.Barrier(2)

    def checked_then_meet(*args: Any, **kwargs: Any) -> bool:
        answer = real(*args, **kwargs)
        try:
            met.wait(5)  # both requests have been checked before either records anything
        except threading.BrokenBarrierError:
            pass  # a fix that serialises the check lets only one through at a time
        return answer

    with mock.patch.object(selectors, "saga_id_unavailable", checked_then_meet):
        return _together(lambda: _step(first[0], first[1], saga_id), lambda: _step(second[0], second[1], saga_id))


def test_fixed_two_first_steps_from_two_tenants_racing_on_one_fresh_saga_id(
    alice: User, globex_user: User, probe_tools: None
) -> None:
    """Found: the saga id check ran before and outside the call's transaction, so two first steps from two
    tenants both saw the id as unused, both joined one saga, and its owner's rollback compensated the other
    tenant's step. Fixed twice over: saga ids are per tenant (``saga_key_per_tenant``), so the two steps open
    two sagas, one in each tenant, and each owner's rollback undoes only their own step."""
    # when alice (acme) and bob (globex) send their first step with the same fresh saga id at once
    acme, globex = _racing_first_steps((alice, "acme"), (globex_user, "globex"), "trip-9")

    # and each rolls their saga back
    rolled = [client_for(user).post("/api/v1/sagas/trip-9/rollback/") for user in (alice, globex_user)]

    # then both were accepted into a saga of their own tenant, and each rollback undid its own step once
    assert (acme.status_code, globex.status_code) == (200, 200), (acme.content, globex.content)
    assert [response.status_code for response in rolled] == [202, 202], [r.content for r in rolled]
    assert dict(Saga.objects.filter(key="trip-9").values_list("tenant", "status")) == {
        "acme": "compensated",
        "globex": "compensated",
    }
    for saga in Saga.objects.filter(key="trip-9"):
        assert {c.step_call.tenant for c in saga.compensations.select_related("step_call")} == {saga.tenant}
    _assert_each_step_compensated_at_most_once()
    assert sorted(SideEffect.objects.filter(tool="undo_probe_slow_step").values_list("note", flat=True)) == [
        "acme",
        "globex",
    ]


def test_fixed_two_colleagues_first_steps_racing_on_one_fresh_saga_id(
    alice: User, tenant: Tenant, probe_tools: None
) -> None:
    """Two members of one tenant race their first steps under one fresh saga id: the id is claimed by opening
    its saga for the caller on the unique index of the tenant's keys (``toolhub.direct._checked_saga_id``), so
    one gets it and the other is answered "not available"; no step joins a colleague's saga."""
    from tests.tenancy.conftest import make_user

    carol = make_user("acme-carol", tenant=tenant)

    first, second = _racing_first_steps((alice, "alice"), (carol, "carol"), "trip-10")

    assert sorted([first.status_code, second.status_code]) == [200, 400], (first.content, second.content)
    refused = first if first.status_code == 400 else second
    assert "not available" in refused.json()["detail"]
    saga = Saga.objects.get(key="trip-10")
    owner = alice if saga.created_by_id == alice.pk else carol
    assert set(ToolCall.objects.filter(saga_id="trip-10").values_list("user_id", flat=True)) == {owner.pk}


# --- runs --------------------------------------------------------------------------------------------------


def test_a_run_retry_racing_its_rollback_never_compensates_twice(acme: AcmeData, alice: User) -> None:
    # given alice's ledger run (100 debited, a compensable step), failed for a retryable reason
    AgentRun.objects.filter(pk=acme.ledger_run.pk).update(status=RunStatus.FAILED, retryable=True)
    run = acme.ledger_run.id

    retry, rollback = _together(
        lambda: client_for(alice).post(f"/api/v1/runs/{run}/retry/"),
        lambda: client_for(alice).post(f"/api/v1/runs/{run}/rollback/"),
    )

    # then each side got a proper answer and the debit was refunded at most once per debit that ran
    assert retry.status_code in (200, 409), retry.content
    assert rollback.status_code in (202, 409), rollback.content
    debits = ToolCall.objects.filter(run_id=run, tool_name="debit", status__in=["succeeded", "compensated"]).count()
    refunds = ToolCall.objects.filter(kind=CallKind.COMPENSATION, saga_id=str(run), status="succeeded").count()
    refunds = max(refunds, Compensation.objects.filter(saga__key=str(run), status="succeeded").count())
    assert refunds <= debits
    steps = list(Compensation.objects.filter(saga__key=str(run)).values_list("step_call_id", flat=True))
    assert len(steps) == len(set(steps)), "a step got two compensations"
    balance = Account.objects.get(account_id="ACC-ACME").balance
    assert balance == Decimal("1000") - 100 * (debits - refunds)
    assert_audit_intact()
