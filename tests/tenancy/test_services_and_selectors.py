"""The boundary in the services and selectors themselves (defence in depth, whatever the caller)."""

import pytest
from django.contrib.auth.models import User

from agents_app.selectors import runs_visible_to
from approvals.deciders import approval_may_decide
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.selectors import approval_requests_visible_to
from approvals.services import approval_approve, approval_reject
from tests.helpers import RequestCall
from tests.tenancy.conftest import AcmeData, database_state
from toolhub.exceptions import NotInTenantError
from toolhub.models import AuditEvent, ToolCall
from toolhub.sagas.models import SagaStatus
from toolhub.sagas.selectors import (
    compensations_visible_to,
    saga_for_run,
    sagas_needing_attention,
    sagas_visible_to,
)
from toolhub.selectors import audit_events_visible_to, tool_call_list, tool_calls_visible_to

pytestmark = pytest.mark.django_db(transaction=True)


def visible(user: User, acme: AcmeData) -> dict[str, bool]:
    """Which kinds of acme's rows each selector gives ``user``."""
    return {
        "calls": tool_calls_visible_to(user).filter(pk=acme.artifact_call.pk).exists(),
        "call list": tool_call_list(run=str(acme.ledger_run.id), visible_to=user).exists(),
        "approvals": approval_requests_visible_to(user).filter(pk=acme.approval.pk).exists(),
        "runs": runs_visible_to(user).filter(pk=acme.ledger_run.pk).exists(),
        "sagas": sagas_visible_to(user).filter(pk=acme.saga.pk).exists(),
        "saga of the run": saga_for_run(acme.ledger_run.id, visible_to=user) is not None,
        "compensations": compensations_visible_to(user).filter(pk=acme.compensation.pk).exists(),
        "audit events": audit_events_visible_to(user).filter(call_id=acme.artifact_call.pk).exists(),
    }


@pytest.mark.parametrize(
    ("who", "sees"),
    [
        ("globex_auditor", False),
        ("globex_operator", False),
        ("globex_user", False),
        ("acme_operator", True),
        ("superuser", True),
        ("platform_user", True),
    ],
)
def test_selectors_give_staff_their_tenants_rows_only(
    who: str, sees: bool, acme: AcmeData, request: pytest.FixtureRequest
) -> None:
    assert set(visible(request.getfixturevalue(who), acme).values()) == {sees}


def test_a_plain_member_sees_their_own_rows_but_not_their_colleagues(alice: User, carol: User, acme: AcmeData) -> None:
    # alice sees every row of her own, her run's saga included
    assert set(visible(alice, acme).values()) == {True}
    # carol, of the same tenant but not staff, sees none of them
    assert set(visible(carol, acme).values()) == {False}


def test_needing_attention_is_scoped(acme: AcmeData, globex_operator: User, acme_operator: User) -> None:
    acme.saga.status = SagaStatus.NEEDS_ATTENTION
    acme.saga.save(update_fields=["status"])

    assert list(sagas_needing_attention(visible_to=globex_operator)) == []
    assert list(sagas_needing_attention(visible_to=acme_operator)) == [acme.saga]


def test_rows_of_no_tenant_are_their_owners_and_the_platforms_only(
    request_call: RequestCall, acme_operator: User, superuser: User
) -> None:
    loner = User.objects.create_user("loner")
    call = request_call("export_file", {"name": "mine"}, loner)
    assert call.tenant == ""

    assert tool_calls_visible_to(loner).filter(pk=call.pk).exists()
    assert not tool_calls_visible_to(acme_operator).filter(pk=call.pk).exists()
    assert tool_calls_visible_to(superuser).filter(pk=call.pk).exists()


@pytest.mark.parametrize("decide", [approval_approve, approval_reject])
def test_a_decider_of_another_tenant_is_refused_before_anything_is_revealed(
    decide: object, acme: AcmeData, globex_operator: User, acme_operator: User
) -> None:
    before = database_state()

    with pytest.raises(NotInTenantError):
        decide(request_id=acme.approval.pk, user=globex_operator)  # type: ignore[operator]
    with pytest.raises(NotInTenantError):
        approval_may_decide(acme.approval, globex_operator)

    assert database_state() == before
    assert approval_may_decide(acme.approval, acme_operator) is None


def test_a_decided_request_of_another_tenant_still_answers_not_in_tenant(
    acme: AcmeData, globex_operator: User, acme_operator: User, alice: User
) -> None:
    # once acme's operator approved it, globex's operator learns neither that nor who asked
    approval_approve(request_id=acme.approval.pk, user=acme_operator)
    assert ApprovalRequest.objects.get(pk=acme.approval.pk).status == ApprovalStatus.APPROVED
    decided_events = AuditEvent.objects.count()

    with pytest.raises(NotInTenantError):
        approval_reject(request_id=acme.approval.pk, user=globex_operator, comment="too late?")
    assert AuditEvent.objects.count() == decided_events
    # the requester themself, now outside acme, is refused the same way (leaving cancels her runs there: audited)
    alice.tenant_memberships.all().delete()
    decided_events = AuditEvent.objects.count()
    with pytest.raises(NotInTenantError):
        approval_may_decide(acme.approval, User.objects.get(pk=alice.pk))
    assert AuditEvent.objects.count() == decided_events
    assert ToolCall.objects.get(pk=acme.approval.call_id).status != "rejected"
