"""Review er (2026-12-06): the review of reviews dw/ei (retriers barred, compensations set apart: ``is_undoing``)
and dp/ed (delegation locks).

Each finding's test failed on the code as found (main at 98885c5) and passes now.

Findings:

1. Review ei made a call made on behalf of a compensation (``is_undoing``: an agentic compensation's inner calls
   inherit ``compensates``) "the compensation's as much as its own call is" for four eyes and cancelling, but not for
   who the call is made for: its inner calls were asked with the plain principal of their context
   (``toolhub.disclosure.principals.principal_of_context``), which named the step's agent (the step's context carries
   ``agent``) and was not ``undoing``; and the worker's re-check exempted only the compensation's kind
   (``refusal_at_execution``). So an agentic compensation of a run's step was limited by the run's agent's tool list
   (a compensation names no agent: "undo_trip_desk has no tools you may use", every attempt), and one undoing a
   deactivated (or departed) member's step had its inner calls refused by the member's standing, at the request and,
   for a held inner call approved later, at execution. The undo never ran; the saga needed attention.
   Fixed in the shared mechanism: ``principal_of_context`` builds the compensation's principal (no agent,
   ``undoing``) for a context that ``is_undoing``, and ``refusal_at_execution`` reads ``is_undoing``.
   (``test_an_agentic_compensation_of_an_ended_runs_step_runs``,
   ``test_an_agentic_compensation_undoes_a_deactivated_members_step``,
   ``test_an_approved_inner_call_of_a_compensation_runs_for_a_deactivated_member``.)
2. An agentic compensation's inner model was the run's (``agents_app.agentic._ChargedToRun``: the step's context
   carries the run's id): it refused every model turn of a run that had ended ("the run has ended (completed)"), so a
   completed, failed or cancelled run, the usual moment for a rollback, could never be undone by an agentic
   compensation; it was charged to the run and stopped by a budget the parent gave the run; and its inner calls
   (``kind=inner`` with the run's id) counted against the run's ``max_tool_calls`` and, through ``spending_below``,
   its parent's: undoing a step spent the member's budget. Fixed: an undoing context's model is not wrapped as the
   run's, and ``agents_app.budgets`` counts ``BUDGETED_KINDS`` less ``undoing()``.
   (``test_an_agentic_compensation_of_an_ended_runs_step_runs``,
   ``test_the_undo_of_a_runs_step_does_not_spend_the_runs_budget``.)
3. An agentic tool's playbook and state machine state is replayed from the run's earlier inner calls of that tool
   (``toolhub.agentic.inner.InnerState.load``: by run id and ``parent_tool``), and an agentic compensation's inner
   calls carry the run's id: a compensation through a desk the run had used itself continued in the state the run
   left (its inner call refused as "not available in state 'confirmed'", the undo not done), and the run's later
   uses of the desk would have continued in the undo's state. Fixed there: a compensation's inner state is replayed
   from the calls made undoing the same step only (its earlier attempts), and the run's excludes ``undoing()``
   (``test_an_agentic_compensation_starts_its_own_inner_state``).
4. Display gap left by review ei: who retried a run (``AgentRun.retried_by``) was not shown to operators. The run's
   admin page now shows "Retried by (barred from approving its calls)"
   (``test_the_run_admin_names_who_retried_the_run``).

Checked and holding (read in the code):
- four eyes: a retry of a retry adds each retrier (M2M ``add`` under the run's lock); a child copies its parent's
  retriers at its start and a grandchild its parent's (so the whole chain); a parent is retried only once failed,
  and it fails only on its own model turn, taken once every call of its turn (a subagent's included) settled, so no
  child is going then. There is no pause/resume of a run other than a held call being decided (the decider reviewed
  that call), no run started for someone else (``run_start`` takes the request's user; the API's ``POST /runs/``),
  and no scheduled or triggered run (beat runs sweeps and checkpoints only). The rollback is asked only through the
  API (``POST /runs/{id}/rollback/``, ``POST /sagas/{id}/rollback/``), both passing ``by``; the admin has retry and
  resolve actions (``compensations_retry``/``saga_retry`` pass ``by``), no rollback action. The edit rule (the
  editor's approval counts once in the new round) is the README's design (reviews af, s, dp).
- ``is_undoing`` elsewhere: the run's cancel and a user's removal go through ``run_cancel_locked`` (``undoing``
  excluded); ``tool_call_cancel`` and the external result refuse undoing calls; the saga lists read compensations
  through ``Compensation`` and steps through ``SAGA_STEPS``; a run's turn calls, the agent's own ``max_tool_calls``
  and the run API's calls read ``kind=call`` only; the REST ``calls`` throttle is per request (no compensation is a
  request); the approver's conversation excerpt of a compensation (no model call id) shows no model message.
- ``compensates`` now exempts a call from the agent's tool list and its user's standing, so no caller may set it:
  ``run_start`` and ``toolhub.direct`` (REST, MCP, the adapters) refuse reserved context keys, the pipeline drops
  them from an interaction's context, and only the sagas (``compensation_request``) and the calls made inside a
  compensation (inner, chained: they inherit its context) carry it; the user's grants and the approval policy still
  apply to them.
- ``retried_by``: a M2M to the user model, its rows go with a deleted user (nobody left to approve); per run, and a
  run is its tenant's; the retry is refused for a child run (its parent is retried instead).
- delegation: ``delegators_held`` takes share locks ordered by pk before the parent's row; a rename takes one agent
  then runs; the loop requests calls under the run's lock but executes them after commit, so no path holds a run and
  then waits for an agent (review ed's reading holds); an agent with runs is protected, one without is share-locked
  with the child's start (review ed).
"""

import re
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from agents_app.budgets import calls_used, spending_of
from agents_app.models import AgentRun, RunStatus, StopReason
from agents_app.services import agent_create
from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.agentic import sample_tools
from tests.agentic.conftest import answer as desk_answer
from tests.agentic.conftest import call as desk_call
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from tests.testapp.tools import record_effect, risky_effect
from toolhub import tool
from toolhub.agentic import SimpleAgenticTool
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

UNDO_DESK = SimpleAgenticTool(
    "undo_trip_desk", "Undo a trip through a desk's effect.", tools=[record_effect], max_iterations=3, agent="undo-desk"
)


@tool(compensate_with="undo_trip_desk", compensation_mapping=lambda arguments, result: {"task": f"undo {result}"})
def book_trip(city: str) -> dict[str, Any]:
    """Book a trip; undone by an agentic desk whose inner model records the undo."""
    return {"trip": f"T-{city}"}


def _undo_desk_agent() -> None:
    agent_create(
        name="undo-desk",
        provider="scripted",
        script=[{"tool_calls": [{"name": "record_effect", "arguments": {"note": "undo"}}]}, {"content": "undone"}],
        tools=[],
    )


def _undone(step: ToolCall) -> tuple[Compensation, ToolCall | None]:
    undo = Compensation.objects.get(step_call=step)
    inner = ToolCall.objects.filter(kind=CallKind.INNER, tool_name="record_effect").first()
    return undo, inner


def _rolled_back_run(alice: User, acme_operator: User, capture: Any) -> tuple[AgentRun, ToolCall]:
    """Alice's run booked a trip and completed; the operator rolls it back (the agentic desk undoes the booking)."""
    _undo_desk_agent()
    with registry.temporarily(book_trip, *UNDO_DESK.__toolhub_tools__()):
        agent = agent_create(
            name="trips",
            provider="scripted",
            tenant="acme",
            tools=["book_trip"],
            script=[{"tool_calls": [{"name": "book_trip", "arguments": {"city": "oslo"}}]}, {"content": "done"}],
        )
        with capture(execute=True):
            started = client_for(alice).post("/api/v1/runs/", {"agent_id": agent.pk, "input": "go"}, format="json")
        assert started.status_code in (200, 201, 202), started.content
        run = AgentRun.objects.get(pk=started.json()["id"])
        assert run.status == RunStatus.COMPLETED
        step = ToolCall.objects.get(run_id=run.pk, tool_name="book_trip")
        with capture(execute=True):
            rolled = client_for(acme_operator).post(f"/api/v1/runs/{run.pk}/rollback/", {}, format="json")
        assert rolled.status_code == 202, rolled.content
    run.refresh_from_db()
    return run, step


def test_an_agentic_compensation_of_an_ended_runs_step_runs(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: rolling back a completed run whose step an agentic tool undoes: the compensation failed on every
    attempt and the saga needed attention. Its inner calls were governed by the run's agent's tool list
    (``principal_of_context`` read the step's ``agent``; "undo_trip_desk has no tools you may use"), though a
    compensation names no agent; and its inner model was charged to the run (``agents_app.agentic._ChargedToRun``),
    which refuses every model turn of a run that ended ("the run has ended (completed)"): a completed, failed or
    cancelled run, the usual moment for a rollback, could never be undone by an agentic compensation.
    Expect: the calls made on behalf of the compensation are governed as it is; the undo runs, the step is
    compensated."""
    run, step = _rolled_back_run(alice, acme_operator, django_capture_on_commit_callbacks)
    undo, inner = _undone(step)
    assert undo.status == CompensationStatus.SUCCEEDED, (undo.status, undo.last_error)
    assert inner is not None and inner.status == CallStatus.SUCCEEDED, inner and inner.error
    assert inner.agent_name == ""
    step.refresh_from_db()
    assert step.status == CallStatus.COMPENSATED


def test_the_undo_of_a_runs_step_does_not_spend_the_runs_budget(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: the calls a run's budget counts (``budgets.BUDGETED_KINDS``: its turns' and inner calls, by run id)
    included the inner calls an agentic compensation made for it: undoing a step spent the budget a parent gave
    the run (and, through ``spending_below``, the parent's own), as if the member's model had asked for them.
    Expect: a call made on behalf of a compensation is not the run's spending: only the booking counts."""
    run, _ = _rolled_back_run(alice, acme_operator, django_capture_on_commit_callbacks)
    assert ToolCall.objects.filter(run_id=run.pk, kind=CallKind.INNER).count() == 1
    assert calls_used(run) == (1, 1)
    assert run.inner_calls_charged == 0
    assert spending_of(run).calls == 1


def test_an_agentic_compensation_undoes_a_deactivated_members_step(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a compensation runs although its step's user may no longer act (``CallPrincipal.undoing``), but the
    inner calls an agentic compensation makes were asked with the plain principal of their context
    (``principal_of_context``) and re-checked at execution by ``kind`` (``refusal_at_execution``): once the member
    was deactivated, the undo's inner call was refused ("The account this call is made for is deactivated").
    Expect: a call made on behalf of a compensation is governed as the compensation: the undo runs."""
    _undo_desk_agent()
    with registry.temporarily(book_trip, *UNDO_DESK.__toolhub_tools__()):
        with django_capture_on_commit_callbacks(execute=True):
            made = client_for(alice).post(
                "/api/v1/calls/", {"tool": "book_trip", "arguments": {"city": "oslo"}, "saga_id": "trip"}, format="json"
            )
        assert made.status_code in (200, 201, 202), made.content
        step = ToolCall.objects.get(pk=made.json()["id"])
        assert step.status == CallStatus.SUCCEEDED, step.error
        alice.is_active = False
        alice.save()
        with django_capture_on_commit_callbacks(execute=True):
            saga_rollback_on_demand(saga_key="trip", tenant="acme", actor="user:acme-operator", by=acme_operator)

    undo, inner = _undone(step)
    assert inner is not None and inner.status == CallStatus.SUCCEEDED, inner and inner.error
    assert undo.status == CompensationStatus.SUCCEEDED, (undo.status, undo.last_error)


HELD_DESK = SimpleAgenticTool(
    "undo_trip_held_desk", "Undo a trip through a held effect.", tools=[risky_effect], max_iterations=3, agent="held"
)


@tool(compensate_with="undo_trip_held_desk", compensation_mapping=lambda arguments, result: {"task": f"undo {result}"})
def book_held_trip(city: str) -> dict[str, Any]:
    """Book a trip; undone by an agentic desk whose effect waits for an operator."""
    return {"trip": f"T-{city}"}


def test_an_approved_inner_call_of_a_compensation_runs_for_a_deactivated_member(
    alice: User,
    acme_operator: User,
    tenant: Tenant,
    roles: dict[str, Group],
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: the worker's re-check of what it runs (``refusal_at_execution``) exempted only the compensation's own
    kind from the user's standing: the inner call an agentic compensation made, held for an operator and approved
    by one who did not ask for the rollback, was refused at execution once the member was deactivated meanwhile.
    Expect: a call made on behalf of a compensation is re-checked as the compensation: approved, it runs."""
    second = make_user("acme-operator-er", tenant=tenant, staff=True, groups=(roles["operators"],))
    agent_create(
        name="held",
        provider="scripted",
        script=[{"tool_calls": [{"name": "risky_effect", "arguments": {"note": "undo"}}]}, {"content": "asked"}],
        tools=[],
    )
    with registry.temporarily(book_held_trip, *HELD_DESK.__toolhub_tools__()):
        with django_capture_on_commit_callbacks(execute=True):
            made = client_for(alice).post(
                "/api/v1/calls/",
                {"tool": "book_held_trip", "arguments": {"city": "oslo"}, "saga_id": "trip"},
                format="json",
            )
        step = ToolCall.objects.get(pk=made.json()["id"])
        assert step.status == CallStatus.SUCCEEDED, step.error
        with django_capture_on_commit_callbacks(execute=True):
            saga_rollback_on_demand(saga_key="trip", tenant="acme", actor="user:acme-operator", by=acme_operator)
        inner = ToolCall.objects.get(kind=CallKind.INNER, tool_name="risky_effect")
        assert inner.status == CallStatus.PENDING_APPROVAL, inner.error
        alice.is_active = False
        alice.save()
        request = ApprovalRequest.objects.get(call=inner)
        with django_capture_on_commit_callbacks(execute=True):
            approval_approve(request_id=request.pk, user=second, expected_round=request.round)

    inner.refresh_from_db()
    assert inner.status == CallStatus.SUCCEEDED, inner.error


def test_the_run_admin_names_who_retried_the_run(
    alice: User, tenant: Tenant, roles: dict[str, Group], django_capture_on_commit_callbacks: Any
) -> None:
    """Found: who retried a member's run (``AgentRun.retried_by``) was kept but not shown: an operator reading the
    run's page could not tell who else set its calls in motion and is barred from approving them (review ei left it
    as a display gap; only the ``run.retried`` audit event named them).
    Expect: the run's admin page names the retrier, and "-" for a run nobody else retried."""
    retrier = make_user("op-retry-er", tenant=tenant, staff=True, groups=(roles["operators"],))
    agent = agent_create(name="flaky", provider="scripted", tenant="acme", tools=[], script=[{"content": "done"}])
    run = AgentRun.objects.create(
        agent=agent,
        user=alice,
        tenant="acme",
        input="go",
        messages=[{"role": "user", "content": "go"}],
        status=RunStatus.FAILED,
        stop_reason=StopReason.MODEL_ERROR,
        error="The model endpoint was unreachable.",
        retryable=True,
    )
    viewer = make_user("op-view-er", tenant=tenant, staff=True, groups=(roles["operators"],))
    desk = Client()
    desk.force_login(viewer)

    def shown() -> str:
        page = desk.get(f"/admin/agents_app/agentrun/{run.pk}/change/")
        assert page.status_code == 200
        found = re.search(r"Retried by.*?<div class=\"readonly\">(.*?)</div>", page.content.decode(), re.DOTALL)
        assert found is not None, "the run's page has no 'Retried by' field"
        return found.group(1).strip()

    assert shown() == "-"
    with django_capture_on_commit_callbacks(execute=True):
        retried = client_for(retrier).post(f"/api/v1/runs/{run.pk}/retry/")
    assert retried.status_code == 200, retried.content
    assert shown() == "op-retry-er"


@tool(compensate_with="order_desk", compensation_mapping=lambda arguments, result: {"task": "confirm the undo"})
def place_desk_order(sku: str) -> dict[str, Any]:
    """Place an order; undone through the order desk (whose inner state machine confirms the undo)."""
    return {"order": f"O-{sku}"}


def test_an_agentic_compensation_starts_its_own_inner_state(
    alice: User, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: an agentic tool's playbook and state machine state is replayed from the run's earlier inner calls of
    that tool (``InnerState.load``: by run id and ``parent_tool``), and an agentic compensation's inner calls carry the
    run's id: the undo continued in the state the run's own use of the desk had left (its ``confirm_order`` refused,
    "a tool of state 'confirmed'"), and the run's later uses would continue in the undo's.
    Expect: a compensation's inner state is its own (its calls on behalf of the same step), the run's excludes it:
    the undo's inner call runs."""
    sample_tools.RAN.clear()
    agent_create(name="desk-brain", provider="scripted", tools=[], script=[desk_call("confirm_order"), desk_answer()])
    with registry.temporarily(place_desk_order, *sample_tools.ALL):
        agent = agent_create(
            name="orders",
            provider="scripted",
            tenant="acme",
            tools=["order_desk", "place_desk_order"],
            script=[
                desk_call("order_desk", task="confirm"),
                desk_call("place_desk_order", sku="A1"),
                desk_answer(),
            ],
        )
        with django_capture_on_commit_callbacks(execute=True):
            started = client_for(alice).post("/api/v1/runs/", {"agent_id": agent.pk, "input": "go"}, format="json")
        run = AgentRun.objects.get(pk=started.json()["id"])
        assert run.status == RunStatus.COMPLETED, run.error
        assert sample_tools.RAN == ["confirm_order"]
        step = ToolCall.objects.get(run_id=run.pk, tool_name="place_desk_order")
        with django_capture_on_commit_callbacks(execute=True):
            rolled = client_for(acme_operator).post(f"/api/v1/runs/{run.pk}/rollback/", {}, format="json")
        assert rolled.status_code == 202, rolled.content

    undo = Compensation.objects.get(step_call=step)
    inner = ToolCall.objects.get(run_id=run.pk, kind=CallKind.INNER, context__compensates=str(step.pk))
    assert inner.status == CallStatus.SUCCEEDED, inner.error
    assert sample_tools.RAN == ["confirm_order", "confirm_order"]
    assert undo.status == CompensationStatus.SUCCEEDED, (undo.status, undo.last_error)
