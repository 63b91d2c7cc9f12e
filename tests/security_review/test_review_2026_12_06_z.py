"""Review of 2026-12-06 (z): four eyes across a compensation's retry.

Findings (fail on 18d3a64, pass after the fix):
- An operator who retried a compensation another operator's rejection had failed approved the new request alone:
  only the step's user and who rolled the saga back were barred (``ApprovalRequest.asked_by``, one person), so one
  person both asked for and approved the action, overriding the rejection.
- The same for an operator who chose to compensate a held step (the same *Retry*, of a held compensation).
  Fixed in the shared mechanism: each operator who retries is kept on the compensation (``Compensation.retried_by``),
  ``compensation_askers`` returns everyone who asked (the rollback's asker and the retriers), and the request bars
  them all (``ApprovalRequest.askers``, replacing the one-person ``asked_by``) by the one rule of
  ``approval_may_decide`` (``asker_ids``) / ``approvers_of``; the API shows them (``asked_by``), the admin under
  "Who asked", the compensation's page its retriers.

Checked and holds:
- the rollback's asker stays barred on the retried compensation's request, and an operator who asked for nothing
  approves it and the compensation runs (the tests below).
- the upgrade copies each request's former ``asked_by`` into ``askers`` (``approvals 0012``; test below).
- a retry of a compensation whose approved call failed runs the same call again (``launch``): no new approval is
  asked, the one given stands, given by someone who was not barred then; a refused external call is asked anew and
  its request bars the retrier too (``compensation_askers`` is read when any compensation call's request is opened).
- the sweeper's retries (``compensation_retry_due``) and an automatic rollback add nobody; the decision path reads the
  askers with its locked row (``approvals.rows.locked_request``), no query of its own; lists prefetch them.
"""

from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.selectors import approvers_of
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from toolhub import Param, registry, tool
from toolhub.admin_marks import seen_digest
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Saga
from toolhub.sagas.recovery import retry_marks

pytestmark = pytest.mark.django_db


@tool(risk="high")
def review_z_void_invoice(invoice: Annotated[str, Param("The invoice to void.")]) -> dict:
    """Void an invoice (high risk: an operator approves it)."""
    return {"voided": invoice}


@tool(
    risk="low",
    compensate_with="review_z_void_invoice",
    compensation_mapping=lambda arguments, result: {"invoice": arguments["invoice"]},
)
def review_z_issue_invoice(invoice: Annotated[str, Param("The invoice to issue.")]) -> dict:
    """Issue an invoice."""
    return {"issued": invoice}


@pytest.fixture
def invoice_tools() -> Iterator[None]:
    with registry.temporarily(review_z_void_invoice, review_z_issue_invoice):
        yield


def _held_request() -> ApprovalRequest:
    undo = ToolCall.objects.filter(kind=CallKind.COMPENSATION).order_by("-created_at").first()
    assert undo is not None and undo.status == CallStatus.PENDING_APPROVAL, undo
    return ApprovalRequest.objects.get(call=undo)


def test_who_retried_a_rejected_compensation_does_not_approve_it_alone(
    invoice_tools: None,
    alice: User,
    tenant: Tenant,
    roles: dict[str, Group],
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: A rolled back alice's saga; the compensation (high risk) was held; B rejected it; C retried it from the
    saga's admin page, which asked for a new approval barring only alice and A: C approved it alone (200), the
    invoice voided against B's rejection, C having both asked for and approved it.
    Expect: C (who retried) and A (who rolled back) are refused (403) and not among its approvers; D approves it and
    the compensation runs; the API lists A and C as who asked."""
    operators = (roles["operators"],)
    a, b, c, d = (make_user(f"acme-op-z{n}", tenant=tenant, staff=True, groups=operators) for n in "abcd")
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(alice).post("/api/v1/sagas/", {"saga_id": "inv-z1"}, format="json").status_code == 201
        step = client_for(alice).post(
            "/api/v1/calls/",
            {"tool": "review_z_issue_invoice", "arguments": {"invoice": "I-1"}, "saga_id": "inv-z1"},
            format="json",
        )
    assert step.status_code in (200, 201, 202), step.content
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(a).post("/api/v1/sagas/inv-z1/rollback/", format="json").status_code == 202
    first = _held_request()
    with django_capture_on_commit_callbacks(execute=True):
        rejected = client_for(b).post(f"/api/v1/approvals/{first.pk}/reject/", {"comment": "no"}, format="json")
    assert rejected.status_code == 200, rejected.content
    compensation = Compensation.objects.get(saga__key="inv-z1")
    assert compensation.status == CompensationStatus.FAILED

    _retry_on_the_saga_page("inv-z1", c, capture=django_capture_on_commit_callbacks)
    assert Compensation.objects.get(pk=compensation.pk).status == CompensationStatus.RUNNING
    second = _held_request()
    assert second.pk != first.pk
    _only_others_decide(second, askers=(a, c), other=d, capture=django_capture_on_commit_callbacks)
    compensation.refresh_from_db()
    assert compensation.status == CompensationStatus.SUCCEEDED


def test_who_chose_to_compensate_a_held_step_does_not_approve_it_alone(
    invoice_tools: None,
    alice: User,
    tenant: Tenant,
    roles: dict[str, Group],
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: A rolled back alice's saga, whose step's outcome was unknown (held for an operator); C chose to
    compensate it (the saga's *Retry*), which asked for an approval barring only alice and A: C approved it alone.
    Expect: C and A are refused (403) and not among its approvers; D approves it and the step is compensated."""
    operators = (roles["operators"],)
    a, c, d = (make_user(f"acme-op-zh{n}", tenant=tenant, staff=True, groups=operators) for n in "acd")
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(alice).post("/api/v1/sagas/", {"saga_id": "inv-z2"}, format="json").status_code == 201
    ToolCall.objects.create(
        tool_name="review_z_issue_invoice",
        status=CallStatus.NEEDS_ATTENTION,
        arguments={"invoice": "I-2"},
        saga_id="inv-z2",
        tenant="acme",
        user=alice,
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(a).post("/api/v1/sagas/inv-z2/rollback/", format="json").status_code == 202
    compensation = Compensation.objects.get(saga__key="inv-z2")
    assert compensation.status == CompensationStatus.HELD

    _retry_on_the_saga_page("inv-z2", c, capture=django_capture_on_commit_callbacks)
    _only_others_decide(_held_request(), askers=(a, c), other=d, capture=django_capture_on_commit_callbacks)
    compensation.refresh_from_db()
    assert compensation.status == CompensationStatus.SUCCEEDED


def _retry_on_the_saga_page(key: str, operator: User, *, capture: Any) -> None:
    """``operator`` presses the saga's *Retry* (the console's one way to retry or compensate a held step)."""
    saga = Saga.objects.get(key=key)
    admin = Client()
    admin.force_login(operator)
    with capture(execute=True):
        answer = admin.post(
            reverse("admin:sagas_saga_retry", args=[saga.pk]), {"marks": seen_digest(retry_marks(saga))}
        )
    assert answer.status_code == 302, answer.content


def _only_others_decide(request: ApprovalRequest, *, askers: tuple[User, ...], other: User, capture: Any) -> None:
    """Every asker is refused (and not mailed), the API lists them as who asked, ``other`` approves it."""
    shown = client_for(other).get(f"/api/v1/approvals/{request.pk}/")
    assert sorted(shown.json()["asked_by"]) == sorted(asker.username for asker in askers), shown.content
    for asker in askers:
        with capture(execute=True):
            own = client_for(asker).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
        assert own.status_code == 403, f"{asker.username} asked for it and approved it alone: {own.status_code}"
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    approvers = approvers_of(request)
    assert not set(askers) & set(approvers) and other in approvers, approvers
    with capture(execute=True):
        approved = client_for(other).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
    assert approved.status_code == 200, approved.content


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_keeps_who_asked_for_earlier_requests(alice: User, operator: User) -> None:
    """Found: nothing (holds; the fix's upgrade). Expect: a request's former ``asked_by`` (who rolled back) becomes its
    only asker, so a compensation still waiting stays barred to them; a request nobody asked for has none."""
    before = [("approvals", "0011_compensation_asked_by"), ("sagas", "0005_rollback_asked_by")]
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(before)
    old = MigrationExecutor(connection).loader.project_state(before).apps
    calls = old.get_model("toolhub", "ToolCall").objects
    requests = old.get_model("approvals", "ApprovalRequest").objects
    asked, plain = (
        requests.create(
            call=calls.create(tool_name="review_z_void_invoice", tenant="acme", user_id=alice.pk),
            tool_name="review_z_void_invoice",
            requested_by_id=alice.pk,
            asked_by_id=by,
            tenant="acme",
            expires_at="2100-01-01T00:00:00Z",
        ).pk
        for by in (operator.pk, None)
    )
    MigrationExecutor(connection).migrate(latest)
    kept = {pk: list(ApprovalRequest.objects.get(pk=pk).askers.values_list("pk", flat=True)) for pk in (asked, plain)}
    assert kept == {asked: [operator.pk], plain: []}
