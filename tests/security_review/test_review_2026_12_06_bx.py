"""Review bx (2026-12-06): four-eyes leftovers in the approvals app and the admin desk.

Findings (fail on 864332f, pass after the fix):

1. The bulk-approve (and bulk-reject) confirmation page listed each request's "Requested by" (the call's user) but
   not who asked for the call in that user's name (``ApprovalRequest.askers``: who rolled the saga back, retried or
   chose to compensate), which the desk's own page shows as "Asked by" under "Who asked": an operator deciding a
   compensation in bulk did not see that a colleague asked for it. The page now has the desk's "Asked by" column.
2. A governance event's label (``object``: ``str(row)``) named a tool group whose rules name only acme in globex's
   chain ("allow group acme-payroll-secret to globex", a grant the platform set for globex), though every globex
   admin page withholds that name (review ar). ``governance_append`` now composes the label for each chain as that
   tenant's staff read it (``toolhub.withheld_names``), the platform's chains keeping the name.

Checked and holds:
- a superuser is not held to a tool's approver group (the design: a superuser crosses every boundary), but never
  approves their own call nor one they asked for: single approve, edit-and-approve, bulk approve on the desk, the
  REST API (``approval_may_decide`` checks the requester and askers before the superuser bypass, and every path
  goes through ``approval_approve``); MCP has no decision path (it only reports a held call's state).
- an operator who retries a member's failed run: the calls the run makes next are the member's (``requested_by`` =
  the run's user), and the member never approves them. (This review let the retrying operator approve them; review
  dw bars them, as a compensation's retrier is: they set those calls in motion. The test below now says so.)
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from agents_app.models import Agent, RunStatus
from agents_app.services import agent_create, run_start
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_approve
from tests.helpers import action_confirmation, console
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import ORDER_SCRIPT, AcmeData, make_user, pending_copies
from toolhub.exceptions import DecisionNotAllowedError
from toolhub.models import AuditEvent, Grant, Tenant, ToolGroup

APPROVALS = "/admin/approvals/approvalrequest/"
WITHHELD = "a tool group of another tenant"


@pytest.mark.django_db(transaction=True)
def test_the_bulk_confirmation_names_who_asked_as_the_desk_does(
    acme: AcmeData, acme_operator: User, tenant: Tenant
) -> None:
    """Found: the "Approve selected" confirmation showed "Requested by: alice" only; the desk's page of the same
    request says "Asked by: dora" (she asked for the call in alice's name, and is barred from deciding it).

    Expect: the confirmation page has the desk's "Asked by" column naming dora for that request.
    """
    dora = make_user("dora-asker", tenant=tenant)
    (request,) = pending_copies(acme, 1, key="bx-asked")
    request.askers.add(dora)
    client = console(acme_operator)

    page = client.post(APPROVALS, {"action": "approve_selected", "_selected_action": [str(request.pk)]})
    desk = client.get(f"{APPROVALS}{request.pk}/change/")

    body = page.content.decode()
    assert "Asked by" in desk.content.decode() and "dora-asker" in desk.content.decode()
    assert "<th>Asked by</th>" in body.replace(' scope="col"', ""), body[body.find("selected-requests") :][:800]
    assert "dora-asker" in body


@pytest.mark.django_db
def test_a_governance_label_in_globexs_chain_names_no_tool_group_only_acme_sees(
    superuser: User, tenant: Tenant, other_tenant: Tenant
) -> None:
    """Found: the platform's grant of acme's group to globex appended ``governance.added`` to globex's chain with
    ``object`` "allow group acme-payroll-secret to globex": globex's auditors read the name every globex page withholds.

    Expect: globex's event names the group as globex's staff read it ("a tool group of another tenant"); the
    platform's view still names it where it shows (the admin's own history).
    """
    secret = ToolGroup.objects.create(name="acme-payroll-secret", activation_rules=[{"tenants": ["acme"]}])
    form = {"effect": "allow", "note": "", "tool_name": "", "tool_group": secret.pk, "tenant": other_tenant.pk}

    answer = console(superuser).post("/admin/toolhub/grant/add/", form)

    assert answer.status_code == 302, answer.content.decode()[:2000]
    grant = Grant.objects.get(tool_group=secret, tenant=other_tenant)
    (event,) = AuditEvent.objects.filter(event_type="governance.added", tenant="globex")
    assert event.payload["id"] == grant.pk
    assert "acme-payroll-secret" not in str(event.payload)
    assert event.payload["object"] == f"allow group {WITHHELD} to globex"


@pytest.mark.django_db
def test_a_governance_label_keeps_a_group_its_tenant_sees(superuser: User, tenant: Tenant) -> None:
    """Found: nothing (holds with the fix). Expect: acme's event of a grant of acme's own group names the group."""
    own = ToolGroup.objects.create(name="acme-payroll", activation_rules=[{"tenants": ["acme"]}])
    form = {"effect": "allow", "note": "", "tool_name": "", "tool_group": own.pk, "tenant": tenant.pk}

    assert console(superuser).post("/admin/toolhub/grant/add/", form).status_code == 302

    (event,) = AuditEvent.objects.filter(event_type="governance.added", tenant="acme")
    assert event.payload["object"] == "allow group acme-payroll to acme"


@pytest.fixture
def super_alice(alice: User) -> User:
    """alice, whose call waits in acme, made a superuser (not in any approver group)."""
    alice.is_superuser = True
    alice.is_staff = True
    alice.save(update_fields=["is_superuser", "is_staff"])
    return alice


@pytest.mark.django_db(transaction=True)
def test_a_superuser_never_approves_their_own_call_by_any_path(acme: AcmeData, super_alice: User) -> None:
    """Found: nothing (holds). Expect: the superuser who asked for the held call is refused on the desk (approve,
    edit-and-approve), in bulk and through the API; the request stays pending with no decision."""
    request = acme.approval
    with pytest.raises(DecisionNotAllowedError, match="You started this call"):
        approval_approve(request_id=request.pk, user=super_alice, expected_round=request.round)
    with pytest.raises(DecisionNotAllowedError, match="You started this call"):
        approval_approve(
            request_id=request.pk, user=super_alice, arguments={**request.arguments}, expected_round=request.round
        )
    api: Any = client_for(super_alice).post(
        f"/api/v1/approvals/{request.pk}/approve/", {"comment": "mine", "round": request.round}, format="json"
    )
    assert api.status_code == 403, api.content
    client = console(super_alice)
    confirmation = action_confirmation(client, APPROVALS, "approve_selected", [request.pk])
    bulk = client.post(APPROVALS, {**confirmation, "comment": "mine"}, follow=True)
    said = [str(m) for m in bulk.context["messages"]]
    assert any("could not be approved" in m and "You started this call" in m for m in said), said

    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING and not request.decisions.exists()


@pytest.mark.django_db(transaction=True)
def test_a_superuser_who_asked_for_a_call_does_not_approve_it(acme: AcmeData, superuser: User) -> None:
    """Found: nothing (holds). Expect: a superuser among a request's askers is refused like its requester; a superuser
    outside the tool's approver group who asked for nothing approves it (the design's one boundary-crosser)."""
    asked, free = pending_copies(acme, 2, key="bx-super")
    asked.askers.add(superuser)

    with pytest.raises(DecisionNotAllowedError, match="You asked for this call"):
        approval_approve(request_id=asked.pk, user=superuser, expected_round=asked.round)
    done = approval_approve(request_id=free.pk, user=superuser, expected_round=free.round)

    assert done.status == ApprovalStatus.APPROVED
    assert ApprovalRequest.objects.get(pk=asked.pk).status == ApprovalStatus.PENDING


@pytest.mark.django_db(transaction=True)
def test_an_operator_who_retried_a_members_run_is_not_the_asker_of_its_next_calls(
    acme: AcmeData, alice: User, acme_operator: User, roles: dict[str, Group]
) -> None:
    """Found: nothing (holds). Expect: after acme's operator retries alice's failed run, the call its model makes
    next is held as alice's (requested_by alice); alice (an operator too) may not approve it, nor (since review dw)
    the operator who retried, an asker of it; another operator may."""
    alice.groups.add(roles["operators"])
    # given alice's run whose model endpoint failed (a script with no turn: a retryable model error)
    agent = agent_create(name="bx-retried", tenant="acme", provider="scripted", tools=["create_order"], script=[])
    run = run_start(agent=agent, user=alice, input="order a laptop")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.retryable, run.error
    Agent.objects.filter(pk=agent.pk).update(script=ORDER_SCRIPT)

    # when acme's operator retries it, and its model asks for a held order
    answer: Any = client_for(acme_operator).post(f"/api/v1/runs/{run.id}/retry/")
    assert answer.status_code == 200, answer.content
    request = ApprovalRequest.objects.get(call__run_id=run.id)

    # then the request is alice's; she is refused, so is the operator who retried; another operator decides it
    assert request.requested_by_id == alice.pk and list(request.askers.all()) == [acme_operator]
    with pytest.raises(DecisionNotAllowedError, match="You started this call"):
        approval_approve(request_id=request.pk, user=alice, expected_round=request.round)
    with pytest.raises(DecisionNotAllowedError, match="retried its run"):
        approval_approve(request_id=request.pk, user=acme_operator, expected_round=request.round)
    other = make_user(
        "bx-other-operator", tenant=Tenant.objects.get(slug="acme"), staff=True, groups=(roles["operators"],)
    )
    assert approval_approve(request_id=request.pk, user=other, expected_round=request.round).status == (
        ApprovalStatus.APPROVED
    )
