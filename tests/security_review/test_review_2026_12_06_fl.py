"""Review fl (2026-12-06): compensations governed as the compensation (reviews er, fa), reviewed hostile: an agentic
compensation's inner calls (``toolhub.agentic.inner``), their grants, budget, messages, trail and approvals.

Each finding's test failed on the code as found (main at 3fc511b) and passes now.

Findings:

1. An agentic compensation whose inner call needs an operator's approval reported the step undone before anyone
   decided: its model is told the held call "runs once approved" and answers, the compensation's call succeeds, and
   ``apply_call_outcome`` marked the compensation succeeded, the step ``compensated``, the saga ``compensated`` and
   the rollback finished, while the only call that undoes anything still waited for approval; rejected (or failed),
   the step stayed ``compensated`` though nothing was undone, and no operator was asked to look. Fixed in the shared
   mechanism: a compensation's outcome includes the calls held on its behalf (``held_inner_outcome``: made inside
   the attempt and not settled when it finished); it stays running (``compensation.waiting`` in its trail) until
   they settle, the sagas follow those calls' settling, and one that did not succeed is its outcome (rejected:
   failed, needs attention). (``test_a_held_inner_call_keeps_the_compensation_running``,
   ``test_an_approved_inner_call_completes_the_compensation``,
   ``test_a_rejected_inner_call_fails_the_compensation``.)
2. The saga's audit events (``saga_audit_events``, the "Audit events" of its admin page) held its steps' and its
   compensation calls' events only, not those of the calls an agentic compensation's model chose and ran (what undid
   the step, and their approvals): an auditor following a rollback saw the step compensated and not how. Fixed: the
   events of every call made on behalf of the saga's compensations (``undoing()``, naming a step of the saga in
   ``compensates``, of its tenant) are listed with them
   (``test_the_sagas_audit_events_show_the_calls_made_undoing_its_steps``).

Checked and holding (regression tests below where marked):
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from agents_app.services import agent_create
from approvals.models import ApprovalRequest
from approvals.services import approval_approve, approval_reject
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from tests.testapp.tools import risky_effect
from toolhub import tool
from toolhub.agentic import SimpleAgenticTool
from toolhub.models import AuditEvent, CallKind, CallStatus, Tenant, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Saga
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

HELD_DESK = SimpleAgenticTool(
    "undo_fl_held_desk", "Undo a trip through a held effect.", tools=[risky_effect], max_iterations=3, agent="fl-held"
)


@tool(compensate_with="undo_fl_held_desk", compensation_mapping=lambda arguments, result: {"task": f"undo {result}"})
def reserve_fl_trip(city: str) -> dict[str, Any]:
    """Reserve a trip; undone by an agentic desk whose effect waits for an operator."""
    return {"trip": f"T-{city}"}


def _held_undo(alice: User, acme_operator: User, capture: Any) -> tuple[Compensation, ToolCall]:
    """Alice's direct saga step, rolled back by the operator: the desk's inner call is held for approval."""
    agent_create(
        name="fl-held",
        provider="scripted",
        script=[{"tool_calls": [{"name": "risky_effect", "arguments": {"note": "undo"}}]}, {"content": "asked"}],
        tools=[],
    )
    with capture(execute=True):
        made = client_for(alice).post(
            "/api/v1/calls/",
            {"tool": "reserve_fl_trip", "arguments": {"city": "oslo"}, "saga_id": "trip"},
            format="json",
        )
    assert made.status_code in (200, 201, 202), made.content
    step = ToolCall.objects.get(pk=made.json()["id"])
    assert step.status == CallStatus.SUCCEEDED, step.error
    with capture(execute=True):
        saga_rollback_on_demand(saga_key="trip", tenant="acme", actor="user:acme-operator", by=acme_operator)
    undo = Compensation.objects.select_related("call", "step_call", "saga").get(step_call=step)
    inner = ToolCall.objects.get(kind=CallKind.INNER, tool_name="risky_effect")
    assert inner.status == CallStatus.PENDING_APPROVAL, inner.error
    assert undo.call is not None and undo.call.status == CallStatus.SUCCEEDED  # the desk's model answered
    return undo, inner


@pytest.fixture
def desk_operator(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-operator-fl", tenant=tenant, staff=True, groups=(roles["operators"],))


def test_a_held_inner_call_keeps_the_compensation_running(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: the desk's inner call waited for approval, yet the compensation was ``succeeded``, the step
    ``compensated`` and the saga ``compensated`` (its rollback finished): nothing had been undone.
    Expect: the compensation stays running while the call held on its behalf is open, says why in its trail, and
    the step is not marked compensated."""
    with registry.temporarily(reserve_fl_trip, *HELD_DESK.__toolhub_tools__()):
        undo, inner = _held_undo(alice, acme_operator, django_capture_on_commit_callbacks)
    undo.refresh_from_db()
    undo.step_call.refresh_from_db()
    assert undo.status == CompensationStatus.RUNNING, (undo.status, undo.last_error)
    assert str(inner.pk) in undo.last_error and "pending_approval" in undo.last_error
    assert undo.step_call.status == CallStatus.SUCCEEDED
    assert Saga.objects.get(pk=undo.saga_id).status != "compensated"
    waiting = AuditEvent.objects.filter(event_type="compensation.waiting", call_id=undo.step_call_id)
    assert waiting.count() == 1


def test_an_approved_inner_call_completes_the_compensation(
    alice: User, acme_operator: User, desk_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: (as above) the compensation succeeded before its held inner call was decided.
    Expect: approved by another operator, the inner call runs, and its settling completes the compensation: the
    step is compensated and the saga's rollback finishes."""
    with registry.temporarily(reserve_fl_trip, *HELD_DESK.__toolhub_tools__()):
        undo, inner = _held_undo(alice, acme_operator, django_capture_on_commit_callbacks)
        request = ApprovalRequest.objects.get(call=inner)
        with django_capture_on_commit_callbacks(execute=True):
            approval_approve(request_id=request.pk, user=desk_operator, expected_round=request.round)
    inner.refresh_from_db()
    assert inner.status == CallStatus.SUCCEEDED, inner.error
    undo.refresh_from_db()
    undo.step_call.refresh_from_db()
    assert undo.status == CompensationStatus.SUCCEEDED, (undo.status, undo.last_error)
    assert undo.step_call.status == CallStatus.COMPENSATED
    assert Saga.objects.get(pk=undo.saga_id).status == "compensated"


def test_a_rejected_inner_call_fails_the_compensation(
    alice: User, acme_operator: User, desk_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: the operator rejected the only call that undid the step, and the step stayed ``compensated``: the saga
    read as rolled back, nobody was asked to look.
    Expect: the rejection is the compensation's outcome: it fails (needs attention), naming the rejected call, and
    the step stays done (not compensated)."""
    with registry.temporarily(reserve_fl_trip, *HELD_DESK.__toolhub_tools__()):
        undo, inner = _held_undo(alice, acme_operator, django_capture_on_commit_callbacks)
        request = ApprovalRequest.objects.get(call=inner)
        with django_capture_on_commit_callbacks(execute=True):
            approval_reject(request_id=request.pk, user=desk_operator, comment="no")
    inner.refresh_from_db()
    assert inner.status == CallStatus.REJECTED
    undo.refresh_from_db()
    undo.step_call.refresh_from_db()
    assert undo.status == CompensationStatus.FAILED, (undo.status, undo.last_error)
    assert str(inner.pk) in undo.last_error and "rejected" in undo.last_error
    assert undo.step_call.status == CallStatus.SUCCEEDED


def test_the_sagas_audit_events_show_the_calls_made_undoing_its_steps(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: the saga's audit events (``saga_audit_events``, its admin page's "Audit events") held its steps' and
    its compensation calls' events only: the calls an agentic compensation's model chose and ran (what actually
    undid the step, its approvals) were missing, so an auditor following the saga saw "compensated" and not how.
    Expect: the events of every call made on behalf of the saga's compensations are listed with them."""
    from toolhub.sagas.selectors import saga_audit_events

    with registry.temporarily(reserve_fl_trip, *HELD_DESK.__toolhub_tools__()):
        undo, inner = _held_undo(alice, acme_operator, django_capture_on_commit_callbacks)
    events = saga_audit_events(undo.saga)
    inner_events = [e.event_type for e in events if e.call_id == inner.pk]
    assert inner_events == ["call.requested", "call.pending_approval"], inner_events
    desk = client_for(acme_operator)
    desk.force_login(acme_operator)
    page = desk.get(f"/admin/sagas/saga/{undo.saga_id}/change/")
    assert page.status_code == 200
    assert "risky_effect" in page.content.decode()
