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

3. An agentic compensation's model is not the run's (review er: not charged to it, nor stopped by its budget), and
   nothing else recorded its turns: the tokens an undo's model spent, on every attempt and retry (each up to the
   desk's ``max_iterations``), showed in no usage, result or audit event; the same for a direct call's agentic tool
   naming its own agent. Fixed where the model is chosen (``agents_app.agentic.agentic_model``): a model no run pays
   for is wrapped to append each billed turn to its call's trail (``agentic.model_turn``: tokens, tool calls asked,
   a refused answer's billed tokens too) (``test_what_the_compensations_model_spent_is_on_its_trail``).
4. A compensation attempt that failed left the calls held on its behalf waiting: the desk's model asked for a held
   undo and then ran out of turns (or failed), the compensation was scheduled again (its retry's model asks again)
   or left failed, and the old held call stayed before the operators: approved, it undid the step a second time, or
   once after the compensation was counted failed. Fixed where the attempt's outcome is applied
   (``apply_call_outcome`` -> ``withdraw_held_inner``): the calls still waiting on behalf of an attempt that did not
   succeed are withdrawn with their approval requests (``test_a_failed_attempts_held_inner_call_is_withdrawn``).

Checked and holding (regression tests below where marked):
- Whom the compensation's inner calls run as: the step's user (``compensation_request``: ``user_id`` of the step,
  no agent, ``undoing``) in the step's tenant (its context's, which no client sets: reviews er, fa); the desk's
  model is offered only its members that user is granted (``inner_definitions``/``granted_for``), a denied member
  reads as an unknown tool, a tool outside the desk is refused by its gate, a tenant argument naming another tenant
  is refused by the pipeline as for any call (``tenant_argument_denial``), and a nested agentic tool is refused
  (``refuse_nested``) (``test_the_desk_model_reaches_no_tool_outside_its_desk_nor_its_principals_grants``).
- Permissions at execution on the worker path: an approved inner call of a compensation is authorized again by the
  worker (``refusal_at_execution`` with ``is_undoing``): denied meanwhile, it is refused there (queued, running,
  denied) and runs nothing (``test_a_held_inner_undo_call_is_checked_again_when_it_runs``; its last assertions are
  finding 1's).
- Bounds: the desk's loop stops at ``max_iterations`` (1-50) turns and refuses a turn beyond ``max_calls`` (1-200),
  failing the call with the reason; a compensation is attempted ``SAGA_MAX_ATTEMPTS`` times, more only by an
  operator's retry (audited, the retrier barred from approving). No token ceiling applies to a compensation's model
  beyond those bounds (by design since review er: the saga's work is not the run's spending); finding 3 gives it a
  trail.
- Secrets and hidden context: the desk's model reads its system prompt and the compensation's arguments only; the
  context (hidden values, ``user_id``, ``tenant``) reaches tools and the playbook predicates, never its messages; a
  mapping that would copy a step's sensitive argument into the compensation's arguments is not planned (its error
  names no value), and an agentic tool declares no sensitive parameter, so none reaches its model
  (``test_a_steps_secret_never_reaches_the_compensations_model``). Its inner calls' outcomes reach it as
  ``ToolCall.model_text`` (the sanitized text every model reads), a denied tool as an unknown one.
- Approvals: an inner call of a compensation that needs approval is held, its askers (who rolled back, retriers)
  barred (review ei); approved by another operator, it runs on the worker and, with finding 1, completes the
  compensation (``test_an_approved_inner_call_completes_the_compensation``); an approval that expires settles the
  call (``expired``), which fails the compensation (``test_an_expired_inner_call_fails_the_compensation``): no
  deadlock, since the rollback's later compensations wait for it as they wait for any running one, and the sweep
  reads a waiting compensation again oldest-touched first.
- Trail: each inner call's ``call.requested`` event records ``parent_call_id`` (the compensation's call),
  ``compensates`` (the step), ``saga_id`` and the step's ``run_id``; with finding 2 the saga's events list them.
"""

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from agents_app.services import agent_create
from approvals.models import ApprovalRequest
from approvals.services import approval_approve, approval_reject
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from tests.testapp.models import SideEffect
from tests.testapp.tools import record_effect, risky_effect
from toolhub import tool
from toolhub.agentic import SimpleAgenticTool
from toolhub.models import AuditEvent, CallKind, CallStatus, Grant, GrantEffect, Tenant, ToolCall
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


def test_a_held_inner_undo_call_is_checked_again_when_it_runs(
    alice: User, acme_operator: User, desk_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Holding (regression): a call made on behalf of a compensation is authorized again when it goes out, not only
    when its model asked: once alice was denied the held tool, the approved inner call ran nothing.
    Expect: refused at execution (nothing recorded by the tool), and that refusal is the compensation's outcome."""
    with registry.temporarily(reserve_fl_trip, *HELD_DESK.__toolhub_tools__()):
        undo, inner = _held_undo(alice, acme_operator, django_capture_on_commit_callbacks)
        Grant.objects.create(effect=GrantEffect.DENY, tool_name="risky_effect", user=alice)
        request = ApprovalRequest.objects.get(call=inner)
        with django_capture_on_commit_callbacks(execute=True):
            approval_approve(request_id=request.pk, user=desk_operator, expected_round=request.round)
    inner.refresh_from_db()
    assert inner.status == CallStatus.DENIED, inner.status
    trail = list(AuditEvent.objects.filter(call_id=inner.pk).order_by("id").values_list("event_type", flat=True))
    assert trail[-3:] == ["call.queued", "call.running", "call.denied"], trail  # refused by the worker
    assert not SideEffect.objects.filter(tool="risky_effect").exists()
    undo.refresh_from_db()
    assert undo.status == CompensationStatus.FAILED, undo.status
    assert str(inner.pk) in undo.last_error and "denied" in undo.last_error


WIDE_DESK = SimpleAgenticTool(
    "undo_fl_wide_desk",
    "Undo a trip through a desk with two effects.",
    tools=[record_effect, risky_effect],
    max_iterations=3,
    agent="fl-wide",
)


@tool(compensate_with="undo_fl_wide_desk", compensation_mapping=lambda arguments, result: {"task": f"undo {result}"})
def reserve_fl_wide_trip(city: str) -> dict[str, Any]:
    """Reserve a trip; undone by a desk whose model tries tools it may not use."""
    return {"trip": f"T-{city}"}


def test_the_desk_model_reaches_no_tool_outside_its_desk_nor_its_principals_grants(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Holding (regression): the compensation's model chooses its calls, but runs only its desk's tools that the
    step's user is granted (the compensation's principal), in the step's tenant: a tool outside the desk (a
    compensable step tool) and a member alice is denied both read as refused, and nothing runs.
    Expect: the denied member is not offered and reads as an unknown tool; the outsider is refused by the desk; no
    tool ran; every inner call is alice's, in acme, linked to the compensation's call and the step."""
    agent_create(
        name="fl-wide",
        provider="scripted",
        script=[
            {
                "tool_calls": [
                    {"name": "record_effect", "arguments": {"note": "undo"}},
                    {"name": "reserve_fl_wide_trip", "arguments": {"city": "rome"}},
                ]
            },
            {"content": "could not"},
        ],
        tools=[],
    )
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="record_effect", user=alice)
    with registry.temporarily(reserve_fl_wide_trip, *WIDE_DESK.__toolhub_tools__()):
        with django_capture_on_commit_callbacks(execute=True):
            made = client_for(alice).post(
                "/api/v1/calls/",
                {"tool": "reserve_fl_wide_trip", "arguments": {"city": "oslo"}, "saga_id": "trip"},
                format="json",
            )
        step = ToolCall.objects.get(pk=made.json()["id"])
        assert step.status == CallStatus.SUCCEEDED, step.error
        with django_capture_on_commit_callbacks(execute=True):
            saga_rollback_on_demand(saga_key="trip", tenant="acme", actor="user:acme-operator", by=acme_operator)
    undo = Compensation.objects.get(step_call=step)
    inner = list(ToolCall.objects.filter(kind=CallKind.INNER).order_by("position"))
    assert [(c.tool_name, c.status) for c in inner] == [
        ("record_effect", CallStatus.DENIED),
        ("reserve_fl_wide_trip", CallStatus.INVALID),
    ]
    assert not SideEffect.objects.exists()
    assert ToolCall.objects.filter(tool_name="reserve_fl_wide_trip").count() == 2  # the step and the refused one
    for call in inner:
        assert (call.user_id, call.tenant, call.agent_name) == (alice.pk, "acme", "")
        assert call.context["parent_call_id"] == str(undo.call_id) and call.context["compensates"] == str(step.pk)
    desk_call = ToolCall.objects.get(pk=undo.call_id)
    assert desk_call.status == CallStatus.SUCCEEDED
    assert [c["status"] for c in desk_call.result["calls"]] == [CallStatus.INVALID, CallStatus.INVALID]


@tool(
    sensitive=("card",),
    compensate_with="undo_fl_held_desk",
    compensation_mapping=lambda arguments, result: {"task": f"refund {arguments}"},
)
def pay_fl(amount: int, card: str) -> dict[str, Any]:
    """Pay with a card; the mapping would hand the card to the desk's model."""
    return {"paid": amount}


def test_a_steps_secret_never_reaches_the_compensations_model(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Holding (regression): a compensation's arguments are the desk model's first message; a mapping copying the
    step's sensitive argument into them is not planned (``mapping._copied_into``), so the model is never asked.
    Expect: the compensation fails without a call, its error names no card number, no inner call is made."""
    card = "4111111111111111"
    with registry.temporarily(pay_fl, *HELD_DESK.__toolhub_tools__()):
        with django_capture_on_commit_callbacks(execute=True):
            made = client_for(alice).post(
                "/api/v1/calls/",
                {"tool": "pay_fl", "arguments": {"amount": 5, "card": card}, "saga_id": "pay"},
                format="json",
            )
        step = ToolCall.objects.get(pk=made.json()["id"])
        assert step.status == CallStatus.SUCCEEDED, step.error
        with django_capture_on_commit_callbacks(execute=True):
            saga_rollback_on_demand(saga_key="pay", tenant="acme", actor="user:acme-operator", by=acme_operator)
    undo = Compensation.objects.get(step_call=step)
    assert undo.call_id is None and undo.status == CompensationStatus.FAILED, undo.status
    assert card not in undo.last_error and "sensitive" in undo.last_error
    assert not ToolCall.objects.filter(kind=CallKind.INNER).exists()
    assert not AuditEvent.objects.filter(data__contains=card).exists()


UNDO_DESK = SimpleAgenticTool(
    "undo_fl_desk", "Undo a trip through a desk's effect.", tools=[record_effect], max_iterations=3, agent="fl-undo"
)


@tool(compensate_with="undo_fl_desk", compensation_mapping=lambda arguments, result: {"task": f"undo {result}"})
def book_fl_trip(city: str) -> dict[str, Any]:
    """Book a trip; undone by an agentic desk whose inner model records the undo."""
    return {"trip": f"T-{city}"}


def test_what_the_compensations_model_spent_is_on_its_trail(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a compensation's model is not the run's (review er: not charged to it), and its turns were recorded
    nowhere else: the tokens an undo's model spent, on every attempt and retry, showed in no usage, result or audit
    event, so a compensation looping to its ``max_iterations`` left no trail of its cost.
    Expect: each model turn no run pays for is an ``agentic.model_turn`` event of the compensation's call (its
    tokens and the tool calls it asked for); the run's usage is untouched."""
    agent_create(
        name="fl-undo",
        provider="scripted",
        script=[{"tool_calls": [{"name": "record_effect", "arguments": {"note": "undo"}}]}, {"content": "undone"}],
        tools=[],
    )
    with registry.temporarily(book_fl_trip, *UNDO_DESK.__toolhub_tools__()):
        with django_capture_on_commit_callbacks(execute=True):
            made = client_for(alice).post(
                "/api/v1/calls/", {"tool": "book_fl_trip", "arguments": {"city": "oslo"}, "saga_id": "t"}, format="json"
            )
        step = ToolCall.objects.get(pk=made.json()["id"])
        with django_capture_on_commit_callbacks(execute=True):
            saga_rollback_on_demand(saga_key="t", tenant="acme", actor="user:acme-operator", by=acme_operator)
    undo = Compensation.objects.get(step_call=step)
    assert undo.status == CompensationStatus.SUCCEEDED, undo.last_error
    turns = AuditEvent.objects.filter(call_id=undo.call_id, event_type="agentic.model_turn").order_by("id")
    spent = [json.loads(event.data) for event in turns]
    assert [turn["tool_calls"] for turn in spent] == [1, 0], spent
    assert all(turn["prompt_tokens"] > 0 and turn["completion_tokens"] >= 0 for turn in spent), spent
    assert {(event.tenant, event.tool_name) for event in turns} == {("acme", "undo_fl_desk")}


def test_an_expired_inner_call_fails_the_compensation(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: (finding 1) nobody decided the held inner call and it expired; the step had long read compensated.
    Expect: the held call waits no longer than its approval: expired, it fails the compensation (no deadlock), named,
    and the step stays done."""
    from datetime import timedelta

    from django.utils import timezone

    from approvals.unanswered import approvals_expire_due

    with registry.temporarily(reserve_fl_trip, *HELD_DESK.__toolhub_tools__()):
        undo, inner = _held_undo(alice, acme_operator, django_capture_on_commit_callbacks)
        ApprovalRequest.objects.filter(call=inner).update(expires_at=timezone.now() - timedelta(seconds=1))
        with django_capture_on_commit_callbacks(execute=True):
            assert approvals_expire_due() == 1
    inner.refresh_from_db()
    assert inner.status == CallStatus.EXPIRED
    undo.refresh_from_db()
    undo.step_call.refresh_from_db()
    assert undo.status == CompensationStatus.FAILED, (undo.status, undo.last_error)
    assert str(inner.pk) in undo.last_error and "expired" in undo.last_error
    assert undo.step_call.status == CallStatus.SUCCEEDED


SHORT_DESK = SimpleAgenticTool(
    "undo_fl_short_desk", "Undo a trip through a held effect.", tools=[risky_effect], max_iterations=1, agent="fl-short"
)


@tool(compensate_with="undo_fl_short_desk", compensation_mapping=lambda arguments, result: {"task": f"undo {result}"})
def reserve_fl_short_trip(city: str) -> dict[str, Any]:
    """Reserve a trip; undone by a desk whose model runs out of turns after asking for a held effect."""
    return {"trip": f"T-{city}"}


def test_a_failed_attempts_held_inner_call_is_withdrawn(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: the desk's model asked for a held undo and then ran out of turns: the compensation's attempt failed and
    was scheduled again (a retry runs the model again, which asks again), yet the held call of the failed attempt
    stayed before the operators: approving it and the retry's each ran the undo (twice, for a tool not idempotent),
    after the compensation had already been counted failed.
    Expect: a compensation attempt that fails withdraws the calls still held on its behalf (their approval requests
    with them); the retry asks afresh."""
    agent_create(
        name="fl-short",
        provider="scripted",
        script=[{"tool_calls": [{"name": "risky_effect", "arguments": {"note": "undo"}}]}],
        tools=[],
    )
    with registry.temporarily(reserve_fl_short_trip, *SHORT_DESK.__toolhub_tools__()):
        with django_capture_on_commit_callbacks(execute=True):
            made = client_for(alice).post(
                "/api/v1/calls/",
                {"tool": "reserve_fl_short_trip", "arguments": {"city": "oslo"}, "saga_id": "s"},
                format="json",
            )
        step = ToolCall.objects.get(pk=made.json()["id"])
        with django_capture_on_commit_callbacks(execute=True):
            saga_rollback_on_demand(saga_key="s", tenant="acme", actor="user:acme-operator", by=acme_operator)
    undo = Compensation.objects.get(step_call=step)
    assert undo.status == CompensationStatus.RETRY_SCHEDULED, (undo.status, undo.last_error)
    inner = ToolCall.objects.get(kind=CallKind.INNER, tool_name="risky_effect")
    assert inner.status == CallStatus.CANCELLED, inner.status
    assert not ApprovalRequest.objects.filter(call=inner, status="pending").exists()
