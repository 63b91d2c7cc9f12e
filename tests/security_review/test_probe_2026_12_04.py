"""Adversarial probe (2026-12-04, ninth pass) of people who leave: what still runs in their name.

Black-box: people act as they would (the REST API, the approval endpoints, runs of scripted agents), and an
administrator removes someone from their tenant or deactivates them in between. Tried: a call held for approval
and approved after its requester left the tenant or was deactivated; an agent run whose user is removed from the
tenant between two of its tool calls; a direct call made for someone removed (the services behind the API, which
background work uses); the same person added back; someone who acts in every tenant by permission; and a saga
of someone who left, rolled back by an operator.

Invariant: nothing runs in the name of someone who may no longer act in the call's tenant, checked when the call
is requested and again when it executes, as grants are. Undoing what they did is the saga's, not theirs: their
compensations still run.

Tests named ``test_fixed_*`` are holes this probe found (written first asserting the secure behaviour), fixed
the same day; each docstring says what ran and how it was fixed. The others passed when written.
"""

from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent, AgentRun, RunStatus, StopReason
from agents_app.services import agent_create, run_start
from approvals.models import ApprovalRequest
from tests.helpers import assert_audit_intact, principal_for
from tests.security_review.conftest import client_for
from tests.testapp.models import SideEffect
from toolhub import Param, ToolContext, registry, tool
from toolhub.models import AuditEvent, CallStatus, Tenant, TenantMembership, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.sagas.models import Saga

# Committed for real: approvals dispatch, runs advance and sagas record steps when transactions commit.
pytestmark = pytest.mark.django_db(transaction=True)


def _held_call(alice: User) -> dict[str, Any]:
    held = client_for(alice).post("/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "r"}}, format="json")
    assert held.status_code == 202, held.content
    return held.json()


def _approve(operator: User, approval_id: int) -> Any:
    return client_for(operator).post(f"/api/v1/approvals/{approval_id}/approve/", {"round": 1}, format="json")


def _direct_call(user: User, capture: Any) -> ToolCall:
    """A low-risk call for ``user`` in acme through the pipeline's service, run here once it commits."""
    with capture(execute=True):
        call = tool_call_request(
            request=CallRequest(
                tool_name="record_effect",
                arguments={"note": "direct"},
                principal=principal_for(user, tenant="acme"),
                context=ToolContext(),
            )
        )
    call.refresh_from_db()
    return call


def test_fixed_a_held_call_approved_after_its_requester_left_the_tenant_does_not_run(
    alice: User, acme_operator: User
) -> None:
    """Found: the re-check at execution asked the grants, not whether the requester still belonged to the
    tenant, so an operator's approval ran alice's call in acme after she had left it. Fixed: authorization
    reads the person's tenants and active flag (cached behind the governance stamp, which membership and
    activation changes now bump) and refuses a call for someone who may no longer act in its tenant."""
    held = _held_call(alice)
    TenantMembership.objects.filter(user=alice).delete()

    approved = _approve(acme_operator, held["approval_id"])

    assert approved.status_code == 200, approved.content
    call = ToolCall.objects.get(pk=held["id"])
    assert call.status == CallStatus.DENIED
    assert "no longer" in call.error and "acme" in call.error
    assert not SideEffect.objects.filter(tool="risky_effect").exists()
    assert_audit_intact()


def test_fixed_a_held_call_approved_after_its_requester_was_deactivated_does_not_run(
    alice: User, acme_operator: User
) -> None:
    """Found with the one above: a deactivated requester's approved call ran. Fixed by the same check."""
    held = _held_call(alice)
    User.objects.filter(pk=alice.pk).update(is_active=False)

    approved = _approve(acme_operator, held["approval_id"])

    assert approved.status_code == 200, approved.content
    call = ToolCall.objects.get(pk=held["id"])
    assert call.status == CallStatus.DENIED and "deactivated" in call.error
    assert not SideEffect.objects.filter(tool="risky_effect").exists()


def test_fixed_a_held_call_approved_after_its_requester_was_deleted_does_not_run(
    alice: User, acme_operator: User
) -> None:
    """Found with the ones above: deleting a user empties their calls' link to them, so the approved call ran for
    nobody in particular. Fixed: the execution check takes the user the boundary recorded in the call's context,
    finds them gone, and refuses."""
    held = _held_call(alice)
    alice.delete()

    approved = _approve(acme_operator, held["approval_id"])

    assert approved.status_code == 200, approved.content
    call = ToolCall.objects.get(pk=held["id"])
    assert call.user_id is None
    assert call.status == CallStatus.DENIED and "no longer exists" in call.error
    assert not SideEffect.objects.filter(tool="risky_effect").exists()


def _agent_then_record_effect(name: str, first_tool: str, first_arguments: dict[str, Any]) -> Agent:
    """An acme agent whose script calls ``first_tool``, then ``record_effect``, then answers."""
    return agent_create(
        name=name,
        provider="scripted",
        tools=[first_tool, "record_effect"],
        tenant="acme",
        script=[
            {"tool_calls": [{"name": first_tool, "arguments": first_arguments}]},
            {"tool_calls": [{"name": "record_effect", "arguments": {"note": "after"}}]},
            {"content": "done"},
        ],
    )


@tool
def probe_i_leave_tenant(why: Annotated[str, Param("Why.")], ctx: ToolContext) -> str:
    """Stands for an administrator removing the run's user from the tenant while the run goes on."""
    TenantMembership.objects.filter(user_id=ctx.user_id).delete()
    return "removed"


@pytest.fixture
def leave_tool() -> Iterator[None]:
    with registry.temporarily(probe_i_leave_tenant):
        yield


def test_fixed_a_run_whose_user_left_the_tenant_mid_run_calls_nothing_more(alice: User, leave_tool: None) -> None:
    """Found: a run's later calls were authorized by grants only, so alice's agent went on acting in acme after
    she was removed from it. Fixed: removing her cancels her runs there at once (governance, in the audit trail);
    the model is asked nothing more and nothing more runs."""
    agent = _agent_then_record_effect("probe-i-leaver", "probe_i_leave_tenant", {"why": "offboarding"})

    run = run_start(agent=agent, user=alice, input="go")

    run = AgentRun.objects.get(pk=run.pk)
    assert (run.status, run.stop_reason) == (RunStatus.CANCELLED, StopReason.CANCELLED), run.error
    assert run.error.startswith("Cancelled by governance:") and "no longer belongs to tenant 'acme'" in run.error
    assert run.turn == 1  # the model answered once, before she left; never again
    assert not ToolCall.objects.filter(run_id=run.id, tool_name="record_effect").exists()
    assert not SideEffect.objects.filter(tool="record_effect").exists()
    cancelled = AuditEvent.objects.get(run_id=run.id, event_type="run.cancelled")
    assert (cancelled.actor, cancelled.tenant) == ("governance", "acme")
    assert_audit_intact()


def test_fixed_a_run_whose_user_is_deleted_ends_and_its_held_call_never_runs(alice: User, acme_operator: User) -> None:
    """Found: deleting a user empties their runs' link to them, and a run waiting for approval went on afterwards
    as a run of nobody, judged by tenant and agent grants only. Fixed: deleting a user first cancels their runs
    still going, and withdraws their held calls: no operator can approve one any more."""
    agent = _agent_then_record_effect("probe-i-held", "risky_effect", {"note": "held"})
    run = run_start(agent=agent, user=alice, input="go")
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    held = ApprovalRequest.objects.get(call__run_id=run.pk)

    alice.delete()
    approved = _approve(acme_operator, held.pk)

    run = AgentRun.objects.get(pk=run.pk)
    assert (run.status, run.stop_reason, run.user_id) == (RunStatus.CANCELLED, StopReason.CANCELLED, None)
    assert "user was deleted" in run.error
    assert approved.status_code == 409 and "already cancelled" in approved.json()["detail"]
    call = ToolCall.objects.get(pk=held.call_id)
    assert call.status == CallStatus.CANCELLED and "its run was cancelled" in call.error
    assert not SideEffect.objects.filter(tool__in=["risky_effect", "record_effect"]).exists()
    assert not ToolCall.objects.filter(run_id=run.pk, tool_name="record_effect").exists()
    assert_audit_intact()


def test_fixed_a_call_for_someone_removed_is_refused_and_allowed_again_once_they_are_back(
    alice: User, tenant: Tenant, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: the services behind the API (which background work and adapters use) ran a call for alice in acme
    after she was removed from it. Fixed by the same check; adding her back applies to the very next call."""
    capture = django_capture_on_commit_callbacks
    assert _direct_call(alice, capture).status == CallStatus.SUCCEEDED
    TenantMembership.objects.filter(user=alice).delete()

    refused = _direct_call(alice, capture)
    TenantMembership.objects.create(user=alice, tenant=tenant)
    allowed = _direct_call(alice, capture)

    assert refused.status == CallStatus.DENIED and "no longer" in refused.error
    assert allowed.status == CallStatus.SUCCEEDED
    assert SideEffect.objects.filter(tool="record_effect").count() == 2


def test_someone_who_acts_in_every_tenant_by_permission_still_may(
    superuser: User, tenant: Tenant, django_capture_on_commit_callbacks: Any
) -> None:
    """A superuser (as the cross-tenant permission) belongs to no tenant and still acts in acme."""
    assert not TenantMembership.objects.filter(user=superuser).exists()

    assert _direct_call(superuser, django_capture_on_commit_callbacks).status == CallStatus.SUCCEEDED


def test_a_saga_of_someone_who_left_is_still_undone_by_an_operator(alice: User, acme_operator: User) -> None:
    """alice's direct saga made a step, then she left acme; acme's operator rolls the saga back: the undo is the
    saga's, not hers, so her step's compensation runs (her grants would still apply)."""
    client = client_for(alice)
    assert client.post("/api/v1/sagas/", {"saga_id": "trip-i"}, format="json").status_code == 201
    stepped = client.post(
        "/api/v1/calls/", {"tool": "saga_step", "arguments": {"label": "flight"}, "saga_id": "trip-i"}, format="json"
    )
    assert stepped.status_code == 200, stepped.content
    TenantMembership.objects.filter(user=alice).delete()

    rolled = client_for(acme_operator).post("/api/v1/sagas/trip-i/rollback/")

    assert rolled.status_code == 202, rolled.content
    assert Saga.objects.get(key="trip-i").status == "compensated"
    assert list(SideEffect.objects.filter(tool="undo_saga_step").values_list("note", flat=True)) == ["flight"]
