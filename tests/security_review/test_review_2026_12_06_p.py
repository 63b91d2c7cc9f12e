"""Review of 2026-12-06 (p): the four-eyes rule on every path that decides an approval request.

Findings (each test fails on the reviewed code; its docstring says what was found and what is expected):

1. A compensation runs in the name of the user whose step it undoes, and that user alone was barred from deciding
   its approval: the operator who rolled back a member's saga approved, alone, the high-risk compensation they had
   just asked for (``approval_may_decide`` looked at ``requested_by`` only, the step's user). Fixed: the request
   records who asked for it (``ApprovalRequest.asked_by``: the rollback's requester,
   ``toolhub.sagas.selectors.compensation_asked_by``), refused like the requester by the services, the API and the
   desk, and left out of the approvers' e-mail (``approvers_of``).

Checked and found holding (no test here):
- Every deciding path (the change page's Approve/Reject/edit, *Approve selected*/*Reject selected*, the API's
  approve/reject) goes through ``approvals.services._decide`` under the request's row lock, judging the decider
  as now (``decider_as_now``: deactivated, removed from the tenant or from the approver group meanwhile: refused).
- The requester never decides (approve, edit or reject), superusers included; one person counts once per round
  (a second approval, from another tab or session, is refused unless it confirms a quorum standing now).
- Edit-then-approve: the edit is checked against the round/hash shown (hidden fields, the bulk page's marks) before
  it is applied, opens a new round in which only the editor counts; a later edit voids earlier approvals; what runs
  is the approved version, bound by its keyed hash and checked at release; the events record round and hash.
- Bulk approval acts row by row under each row's listed hash: the own call, a decided or changed row are reported,
  the others decided.
- Escalation adds the fallback group as deciders of the first group's restriction only; approvals count together.
- Expiry and a decision both lock the request; the decision checks ``expires_at`` under the lock.
- A superuser may decide a request whose tool group restricts approvers to a group they are not in
  (``approval_may_decide`` skips the restriction for them; ``tests/approvals/test_approvers.py`` holds it): deliberate
  and tested, but the README's four-eyes section does not say so (reported, not changed).
"""

from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import Group, User

from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from approvals.selectors import approvers_of
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from toolhub import Param, registry, tool
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall

pytestmark = pytest.mark.django_db


@tool(risk="high")
def review_p_void_invoice(invoice: Annotated[str, Param("The invoice to void.")]) -> dict:
    """Void an invoice (high risk: an operator approves it)."""
    return {"voided": invoice}


@tool(
    risk="low",
    compensate_with="review_p_void_invoice",
    compensation_mapping=lambda arguments, result: {"invoice": arguments["invoice"]},
)
def review_p_issue_invoice(invoice: Annotated[str, Param("The invoice to issue.")]) -> dict:
    """Issue an invoice."""
    return {"issued": invoice}


@pytest.fixture
def invoice_tools() -> Iterator[None]:
    with registry.temporarily(review_p_void_invoice, review_p_issue_invoice):
        yield


@pytest.fixture
def acme_operator2(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-operator-p2", tenant=tenant, staff=True, groups=(roles["operators"],))


def test_the_operator_who_rolled_back_a_saga_approves_its_compensation_alone(
    invoice_tools: None, alice: User, acme_operator: User, acme_operator2: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: alice issued invoice I-1 in her direct saga; acme's operator rolled the saga back, and its compensation
    (voiding the invoice, high risk) was held for approval with alice as its requester. The same operator then
    approved it over the API: 200, the invoice voided, one person having both asked for and approved it.

    Expect: 403 for who rolled the saga back, as for the requester, nothing recorded and the call still held; they
    are not among the approvers mailed; another operator of the tenant approves it and the compensation runs.
    """
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(alice).post("/api/v1/sagas/", {"saga_id": "inv-p1"}, format="json").status_code == 201
        step = client_for(alice).post(
            "/api/v1/calls/",
            {"tool": "review_p_issue_invoice", "arguments": {"invoice": "I-1"}, "saga_id": "inv-p1"},
            format="json",
        )
    assert ToolCall.objects.get(pk=step.json()["id"]).status == CallStatus.SUCCEEDED, step.content
    with django_capture_on_commit_callbacks(execute=True):
        rolled = client_for(acme_operator).post("/api/v1/sagas/inv-p1/rollback/", format="json")
    assert rolled.status_code == 202, rolled.content
    undo = ToolCall.objects.get(kind=CallKind.COMPENSATION)
    request = ApprovalRequest.objects.get(call=undo)
    assert (undo.status, request.requested_by_id) == (CallStatus.PENDING_APPROVAL, alice.pk)

    assert acme_operator not in approvers_of(request)
    with django_capture_on_commit_callbacks(execute=True):
        own = client_for(acme_operator).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
    undo.refresh_from_db()
    assert own.status_code == 403, f"who rolled back approved its compensation alone: {own.status_code}, {undo.status}"
    assert undo.status == CallStatus.PENDING_APPROVAL
    assert not ApprovalDecision.objects.filter(request=request).exists()

    with django_capture_on_commit_callbacks(execute=True):
        other = client_for(acme_operator2).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
    assert other.status_code == 200, other.content
    undo.refresh_from_db()
    request.refresh_from_db()
    assert (request.status, undo.status) == (ApprovalStatus.APPROVED, CallStatus.SUCCEEDED)
