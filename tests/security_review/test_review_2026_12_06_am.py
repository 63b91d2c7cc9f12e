"""Review 2026-12-06 (am): the four-eyes rule as extended last session (``Rollback.asked_by``,
``Compensation.retried_by``, ``ApprovalRequest.askers``, ``compensation_askers``), reviewed adversarially.

Findings (each test fails on main at 819d82f and passes after the fix):

1. A step still running when an operator rolls the saga back is compensated by that rollback once it succeeds
   (README: "one that succeeds afterwards is compensated by the rollback"), but ``plan_compensation`` files its
   compensation under the *newest* rollback asked after the step began (``late_for``). When another rollback came
   between (an automatic one after a later step failed, or another operator's), ``compensation_askers`` read only
   that one's ``asked_by``: the operator who asked for the step to be undone first approved its compensation
   alone. Now every rollback asked between the step's start and its compensation's planning asked for it, and
   each one's person is barred (``compensation_askers``).

Checked and holds (no test kept unless named):

- Every deciding path (admin change page, *Approve/Reject selected*, ``POST /api/v1/approvals/{id}/approve|reject/``,
  the examples and adapters) goes through ``approvals.services._decide``, which judges the decider after the row lock
  with ``approval_may_decide``: requester and askers are refused before the superuser exemption, for approve, edit
  and reject alike; the refusal names why ("You asked for this call (you rolled back ...)"); the change page shows
  the same text as a warning; bulk actions report it per row.
- MCP (``tools/call``, ``toolhub_call_status``, ``toolhub_cancel_call``) and the in-process adapters (LangGraph,
  OpenAI Agents, Pydantic AI) never decide: a framework's approval is read from toolhub's released call only; the
  webhooks and e-mails carry no decision link. Agentic tools' inner calls and subagents' runs are the outer
  call's user (the requester); no path makes a call in another user's name except a compensation (the step's user).
- ``approvers_of`` (the desk's "May still approve", the approvers' and escalation e-mails) excludes the requester
  and every asker in the same query; ``ApproverStanding`` stops counting an approval once its giver became an asker.
- Quorums: one person counts once per round; an edit opens a new round where only the editor counts and never
  lowers ``required_approvals``; a confirmation adds no row. A rejection is final (a new call, or a retry recorded
  in ``retried_by``, asks anew).
- Admin: ``askers``, ``requested_by``, ``Rollback.asked_by`` and ``Compensation.retried_by`` are read-only.
- Deleted users: ``requested_by`` / ``asked_by`` are SET_NULL and the askers' M2M rows cascade, but only for an
  account that no longer exists (no login; primary keys are never reused: AUTOINCREMENT on SQLite, sequences on
  PostgreSQL). A second account is a different principal (nothing links them; out of scope).
- Every rollback a person asks for passes ``by`` (sagas and runs API, a parent run's subagents); a rollback asked
  while one is under way with nothing new to undo returns the first and adds nobody, and asked nothing new.
- An operator's ``run_retry`` resumes the model in the run's user's name: the model, not the operator, chooses the
  calls that follow (reported, not changed).
"""

from collections.abc import Iterator
from datetime import timedelta
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.selectors import approvers_of
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from toolhub import Param, registry, tool
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Rollback
from toolhub.sagas.services import saga_call_settled

pytestmark = pytest.mark.django_db


@tool(risk="high")
def review_am_cancel_booking(ref: Annotated[str, Param("The booking to cancel.")]) -> dict:
    """Cancel a booking (high risk: an operator approves it)."""
    return {"cancelled": ref}


@tool(
    risk="low",
    compensate_with="review_am_cancel_booking",
    compensation_mapping=lambda arguments, result: {"ref": arguments["ref"]},
)
def review_am_book(ref: Annotated[str, Param("The booking to make.")]) -> dict:
    """Make a booking."""
    return {"booked": ref}


@tool(risk="low")
def review_am_fail(ref: Annotated[str, Param("Anything.")]) -> dict:
    """Always fails (a saga's failed step)."""
    raise RuntimeError("the supplier is down")


@pytest.fixture
def booking_tools() -> Iterator[None]:
    with registry.temporarily(review_am_cancel_booking, review_am_book, review_am_fail):
        yield


def _step(user: User, tool_name: str, ref: str, saga: str, capture: Any) -> ToolCall:
    with capture(execute=True):
        made = client_for(user).post(
            "/api/v1/calls/", {"tool": tool_name, "arguments": {"ref": ref}, "saga_id": saga}, format="json"
        )
    assert made.status_code in (200, 201, 202, 400, 500), made.content
    return ToolCall.objects.get(pk=made.json()["id"])


def _pending_request_of(step: ToolCall) -> ApprovalRequest:
    compensation = Compensation.objects.select_related("call").get(step_call=step)
    assert compensation.call is not None and compensation.call.status == CallStatus.PENDING_APPROVAL, compensation
    return ApprovalRequest.objects.get(call=compensation.call, status=ApprovalStatus.PENDING)


def test_who_rolled_back_while_a_step_ran_does_not_approve_its_late_compensation_alone(
    booking_tools: None,
    alice: User,
    tenant: Tenant,
    roles: dict[str, Group],
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: B rolled back alice's saga while one of its steps (late) still ran; alice's next step failed, which
    rolled the saga back again, automatically; the late step then succeeded and was compensated under the newer,
    automatic rollback: its high-risk compensation's request barred only alice, and B approved it alone (200).
    Expect: B (who asked for it first) is refused (403), is not among its approvers and is listed as who asked;
    D approves it and the late step is compensated."""
    capture = django_capture_on_commit_callbacks
    b, d = (make_user(f"acme-op-am{n}", tenant=tenant, staff=True, groups=(roles["operators"],)) for n in "bd")
    with capture(execute=True):
        assert client_for(alice).post("/api/v1/sagas/", {"saga_id": "trip-am"}, format="json").status_code == 201
    first = _step(alice, "review_am_book", "first", "trip-am", capture)
    assert first.status == CallStatus.SUCCEEDED
    late = ToolCall.objects.create(
        tool_name="review_am_book",
        kind=CallKind.API,
        status=CallStatus.RUNNING,
        arguments={"ref": "late"},
        saga_id="trip-am",
        tenant="acme",
        user=alice,
    )
    with capture(execute=True):  # B asks for the whole saga to be undone, the running step included
        assert client_for(b).post("/api/v1/sagas/trip-am/rollback/", format="json").status_code == 202
    with capture(execute=True):  # D approves the first step's compensation: it runs
        approved = client_for(d).post(
            f"/api/v1/approvals/{_pending_request_of(first).pk}/approve/", {"round": 1}, format="json"
        )
    assert approved.status_code == 200, approved.content
    # alice goes on: a step that succeeds, then one that fails, which rolls the saga back again (nobody asked)
    later = _step(alice, "review_am_book", "later", "trip-am", capture)
    failed = _step(alice, "review_am_fail", "x", "trip-am", capture)
    assert (later.status, failed.status) == (CallStatus.SUCCEEDED, CallStatus.FAILED)
    rollbacks = list(Rollback.objects.filter(saga__key="trip-am").order_by("requested_at"))
    assert [rollback.asked_by_id for rollback in rollbacks] == [b.pk, None]
    with capture(execute=True):
        approved = client_for(d).post(
            f"/api/v1/approvals/{_pending_request_of(later).pk}/approve/", {"round": 1}, format="json"
        )
    assert approved.status_code == 200, approved.content

    # the late step succeeds: B's rollback asked for it to be undone
    ToolCall.objects.filter(pk=late.pk).update(
        status=CallStatus.SUCCEEDED, result={"booked": "late"}, finished_at=timezone.now()
    )
    with capture(execute=True):
        saga_call_settled(call_id=late.pk)
    request = _pending_request_of(late)
    with capture(execute=True):
        own = client_for(b).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
    assert own.status_code == 403, f"B asked for the late step's undoing and approved it alone: {own.status_code}"
    assert "You asked for this call" in own.json()["detail"], own.content
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    assert b not in approvers_of(request) and d in approvers_of(request)
    assert client_for(d).get(f"/api/v1/approvals/{request.pk}/").json()["asked_by"] == [b.username]
    with capture(execute=True):
        approved = client_for(d).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
    assert approved.status_code == 200, approved.content
    assert Compensation.objects.get(step_call=late).status == CompensationStatus.SUCCEEDED


@pytest.mark.django_db(transaction=True)
def test_a_late_compensation_pending_at_the_upgrade_bars_every_rollback_that_asked_for_it() -> None:
    """Found: a late step's compensation waiting for approval at the upgrade was asked for before the fix, its request
    barring only the newest rollback's person (none for an automatic one): B, whose rollback asked first, could
    still approve it alone. Expect: after ``approvals 0014`` B is its asker; E, whose rollback came after the
    compensation was planned, is not; a decided request is left as it was decided."""
    before = [("approvals", "0013_pending_compensation_askers"), ("sagas", "0006_compensation_retried_by")]
    alice, b, e = (User.objects.create_user(f"review-am-{name}") for name in ("alice", "b", "e"))
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(before)
    try:
        old = MigrationExecutor(connection).loader.project_state(before).apps
        calls = old.get_model("toolhub", "ToolCall").objects
        requests = old.get_model("approvals", "ApprovalRequest").objects
        rollbacks = old.get_model("sagas", "Rollback").objects
        saga = old.get_model("sagas", "Saga").objects.create(key="review-am", tenant="acme", created_by_id=alice.pk)
        start = timezone.now() - timedelta(hours=1)

        def rollback(by: User | None, minutes: int) -> Any:
            made = rollbacks.create(saga=saga, trigger="on_demand", requested_by="x", asked_by_id=by.pk if by else None)
            rollbacks.filter(pk=made.pk).update(requested_at=start + timedelta(minutes=minutes))
            return made

        def late_compensation_request(status: str, sequence: int) -> int:
            step = calls.create(tool_name="book", tenant="acme", user_id=alice.pk)
            calls.filter(pk=step.pk).update(created_at=start)
            compensation = old.get_model("sagas", "Compensation").objects.create(
                saga=saga, sequence=sequence, rollback=automatic, step_call=step, step_tool="book", tool_name="cancel"
            )
            compensation._meta.model.objects.filter(pk=compensation.pk).update(created_at=start + timedelta(minutes=3))
            undo = calls.create(
                tool_name="cancel",
                tenant="acme",
                user_id=alice.pk,
                kind="compensation",
                context={"compensates": str(step.pk)},
            )
            return requests.create(
                call=undo,
                tool_name="cancel",
                requested_by_id=alice.pk,
                tenant="acme",
                status=status,
                expires_at="2100-01-01T00:00:00Z",
            ).pk

        rollback(b, 1)  # B asks while the steps still run
        automatic = rollback(None, 2)  # a failed step rolls back again; the late steps are filed under it
        pending = late_compensation_request("pending", 1)
        decided = late_compensation_request("approved", 2)
        rollback(e, 4)  # E asks after the compensations were planned: not for them
    finally:
        MigrationExecutor(connection).migrate(latest)  # the later tests' schema, whatever happened here
    askers = {
        pk: list(ApprovalRequest.objects.get(pk=pk).askers.values_list("pk", flat=True)) for pk in (pending, decided)
    }
    assert askers == {pending: [b.pk], decided: []}
