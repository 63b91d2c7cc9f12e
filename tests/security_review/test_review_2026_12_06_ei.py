"""Review ei (2026-12-06): the review of reviews dw (retriers barred from approving) and ec (compensations are no
saga steps).

Each finding's test failed on the code as found (main at 0fe5faa) and passes now.

Findings:

1. Review ec made "a call made on behalf of a compensation" a notion (its context names the step it ``compensates``,
   an agentic compensation's inner calls inherit it) but only the saga-step readers used it: everything else that
   treats a compensation apart still tested ``kind == CallKind.COMPENSATION``, so an agentic compensation's inner
   call was treated as the step's user's own call:
   a. four eyes: ``compensation_askers`` answered nothing for it, so the operator who rolled back a member's saga
      approved the inner call the compensation made (the undo), alone;
   b. the member whose step it undoes cancelled it (``POST /calls/{id}/cancel/``), while a compensation is never
      cancelled (README: undoing their own step "is for an operator other than them");
   c. cancelling the run (``agents_app.cancelling``) withdrew it with the run's own held calls, while "the sagas'
      compensations are never withdrawn": the rollback under way lost its undo.
   Fixed in the shared mechanism: ``is_undoing`` / ``undoing`` (``toolhub.models.calls``: the compensation's kind,
   or ``compensates`` in the context), read by ``is_saga_step``, ``compensation_askers``, ``tool_call_cancel``, the
   external result's refusal (``CallResultView``: the same predicate, no test of its own) and the run's withdrawal
   (``agents_app.cancelling``); requests of such calls pending at the upgrade get the compensation's askers
   (``approvals 0018``).

Checked and holding:
- dw: ``run_retry`` is reached only through ``POST /runs/{id}/retry/`` (the admin has no retry action), and records
  anyone but the run's user in ``retried_by`` under the run's lock; two operators retrying in turn are both
  recorded (M2M ``add``) and both barred; the run's own user adds nobody. A request made before a retry cannot
  exist: a run fails retryable on a model turn, asked only once the previous turn's calls settled
  (``loop._begin_step``); the askers are read when a request is made (or reopened), so calls made after the retry carry
  the retrier. Askers are people, not roles: a retrier who gains the operators' role later is still barred, one
  who loses it could not decide anyway. The desk's bulk approve and the REST approve both go through ``_decide``,
  which reads ``asker_ids``; ``approvers_of`` (list and e-mails) excludes askers. Deleting the retrier's account
  removes its rows in both M2Ms (the person who could approve is gone with it). ``retried_by`` is not shown in the
  run's admin page; the ``run.retried`` audit event names who retried (a display gap, not a bypass).
- dw: an agentic tool's inner call in a retried run carries the run's id, so its request takes the retriers too;
  a compensation's call in a retried run takes them as well (conservative: they set the step in motion).
- ec: ``SAGA_STEPS`` is read by ``step_calls``, ``saga_record_step``, ``saga_ignores``, the unheard-failures and the
  ended-steps scans; ``ROLLBACK_KINDS`` excludes inner calls, so a failing compensation's inner call (kind inner)
  never rolls the saga back, and a compensation's call (kind compensation) is in no step kind. The partial index
  ``toolcall_ended_saga_step`` has no JSON condition; the scan's extra ``NOT (context ? 'compensates')`` is a filter
  on its rows, its predicate still implied (the ended-steps tests of reviews cs, da and dj still pass on PostgreSQL).
"""

import importlib
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import User

from agents_app.services import agent_create
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_approve
from tests.security_review.conftest import client_for
from tests.testapp.tools import risky_effect
from toolhub import tool
from toolhub.agentic import SimpleAgenticTool
from toolhub.exceptions import ToolhubError
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.sagas.models import Compensation
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

UNDO_DESK = SimpleAgenticTool(
    "undo_held_desk", "Undo a trip through a held effect.", tools=[risky_effect], max_iterations=3, agent="undo-held"
)


@tool(compensate_with="undo_held_desk", compensation_mapping=lambda arguments, result: {"task": f"undo {result}"})
def reserve_trip(city: str) -> dict[str, Any]:
    """Reserve a trip; undone by an agentic desk whose effect waits for an operator."""
    return {"trip": f"T-{city}"}


@pytest.fixture
def held_undo(alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any) -> ToolCall:
    """Alice's direct saga step, rolled back by the operator: the agentic compensation's inner call, held."""
    agent_create(
        name="undo-held",
        provider="scripted",
        script=[{"tool_calls": [{"name": "risky_effect", "arguments": {"note": "undo"}}]}, {"content": "asked"}],
        tools=[],
    )
    with registry.temporarily(reserve_trip, *UNDO_DESK.__toolhub_tools__()):
        with django_capture_on_commit_callbacks(execute=True):
            made = client_for(alice).post(
                "/api/v1/calls/",
                {"tool": "reserve_trip", "arguments": {"city": "oslo"}, "saga_id": "trip"},
                format="json",
            )
        assert made.status_code in (200, 201, 202), made.content
        step = ToolCall.objects.get(pk=made.json()["id"])
        assert step.status == CallStatus.SUCCEEDED, step.error
        with django_capture_on_commit_callbacks(execute=True):
            saga_rollback_on_demand(saga_key="trip", tenant="acme", actor="user:acme-operator", by=acme_operator)
    undo = Compensation.objects.get(step_call=step)
    inner = ToolCall.objects.get(kind=CallKind.INNER, tool_name="risky_effect")
    assert inner.context["parent_call_id"] == str(undo.call_id) and inner.context["compensates"] == str(step.pk)
    assert inner.status == CallStatus.PENDING_APPROVAL and inner.user_id == alice.pk
    return inner


def test_who_rolled_back_does_not_approve_the_compensations_inner_call(
    held_undo: ToolCall, acme_operator: User
) -> None:
    """Found: ``compensation_askers`` answered only for the compensation's own call: the operator who rolled back
    alice's saga was no asker of the inner call the agentic compensation made, and approved it alone.
    Expect: whoever asked for the compensation is an asker of every call made on its behalf: refused."""
    request = ApprovalRequest.objects.get(call=held_undo)
    assert list(request.askers.values_list("pk", flat=True)) == [acme_operator.pk]
    with pytest.raises(ToolhubError):
        approval_approve(request_id=request.pk, user=acme_operator, expected_round=request.round)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING


def test_the_member_does_not_cancel_the_undoing_of_her_own_step(held_undo: ToolCall, alice: User) -> None:
    """Found: a compensation is never cancelled (409), but the inner call an agentic compensation made was: alice
    cancelled the undo of her own step through ``POST /calls/{id}/cancel/``.
    Expect: a call made on behalf of a compensation is refused as the compensation is; it stays held."""
    response = client_for(alice).post(f"/api/v1/calls/{held_undo.pk}/cancel/", {}, format="json")
    assert response.status_code == 409, response.content
    assert "compensation" in response.json()["detail"]
    held_undo.refresh_from_db()
    assert held_undo.status == CallStatus.PENDING_APPROVAL


def test_cancelling_the_run_leaves_the_undoing_of_its_steps(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: cancelling a run withdrew its steps "but never the sagas' compensations" by ``kind``: the inner call of
    an agentic compensation under way (the run's id in its context) was withdrawn with the run's own held call, and
    the rollback the operator asked for lost its undo.
    Expect: the run's own held call is withdrawn; the call made on behalf of the compensation stays held."""
    agent_create(
        name="undo-held",
        provider="scripted",
        script=[{"tool_calls": [{"name": "risky_effect", "arguments": {"note": "undo"}}]}, {"content": "asked"}],
        tools=[],
    )
    with registry.temporarily(reserve_trip, *UNDO_DESK.__toolhub_tools__()):
        agent = agent_create(
            name="trips",
            provider="scripted",
            tenant="acme",
            tools=["reserve_trip", "risky_effect"],
            script=[
                {"tool_calls": [{"name": "reserve_trip", "arguments": {"city": "oslo"}}]},
                {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]},
                {"content": "done"},
            ],
        )
        with django_capture_on_commit_callbacks(execute=True):
            started = client_for(alice).post("/api/v1/runs/", {"agent_id": agent.pk, "input": "go"}, format="json")
        assert started.status_code in (200, 201, 202), started.content
        run_id = started.json()["id"]
        own = ToolCall.objects.get(run_id=run_id, kind=CallKind.CALL, tool_name="risky_effect")
        assert own.status == CallStatus.PENDING_APPROVAL
        with django_capture_on_commit_callbacks(execute=True):
            rolled = client_for(acme_operator).post(f"/api/v1/runs/{run_id}/rollback/", {}, format="json")
        assert rolled.status_code == 202, rolled.content
        undo = ToolCall.objects.get(run_id=run_id, kind=CallKind.INNER, tool_name="risky_effect")
        assert undo.status == CallStatus.PENDING_APPROVAL and "compensates" in undo.context
        with django_capture_on_commit_callbacks(execute=True):
            cancelled = client_for(alice).post(f"/api/v1/runs/{run_id}/cancel/", {"reason": "stop"}, format="json")
        assert cancelled.status_code == 200, cancelled.content

    own.refresh_from_db()
    undo.refresh_from_db()
    assert own.status == CallStatus.CANCELLED
    assert undo.status == CallStatus.PENDING_APPROVAL, undo.error
    assert ApprovalRequest.objects.get(call=undo).status == ApprovalStatus.PENDING


def test_a_request_pending_at_the_upgrade_bars_the_compensations_askers(
    held_undo: ToolCall, acme_operator: User
) -> None:
    """Found: requests of a compensation's inner calls made before the fix carry no askers (finding 1a).
    Expect: ``approvals 0018`` gives each pending one the compensation's askers; the operator is refused then."""
    request = ApprovalRequest.objects.get(call=held_undo)
    request.askers.clear()
    migration = importlib.import_module("approvals.migrations.0018_undoing_inner_askers")
    migration.bar_compensation_askers(django_apps, None)
    assert list(request.askers.values_list("pk", flat=True)) == [acme_operator.pk]
    with pytest.raises(ToolhubError):
        approval_approve(request_id=request.pk, user=acme_operator, expected_round=request.round)
