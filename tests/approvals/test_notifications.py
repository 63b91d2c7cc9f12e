"""Approvers are e-mailed when a request arrives or escalates: only those who may decide it, with a link."""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core import mail
from django.utils import timezone

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.notifications import approval_email_approvers
from approvals.services import approval_approve
from approvals.unanswered import approvals_escalate_due
from tests.approvals.conftest import Hold
from toolhub.models import Tenant, TenantMembership, ToolGroup


@pytest.fixture
def globex_operator(operator: User, other_tenant: Tenant) -> User:
    """An operator of another tenant: never told about acme's requests."""
    user = User.objects.create_user("globex-op", "globex-op@example.com", "x", is_staff=True)
    user.groups.add(Group.objects.get(name="operators"))
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    return user


def _recipients(outbox: list[Any]) -> list[str]:
    return sorted(address for message in outbox for address in message.to)


def test_a_new_request_mails_each_approver_of_its_tenant_once_with_a_link_and_no_arguments(
    hold: Hold, operator: User, second_operator: User, viewer: User, globex_operator: User, mailoutbox: list[Any]
) -> None:
    # when alice's call is held back for approval
    request = hold("pay 5000 to IBAN DE02")

    # then each operator of acme gets a message of their own; not alice, not a viewer, not globex's operator
    assert _recipients(mailoutbox) == ["operator2@example.com", "operator@example.com"]
    assert all(len(message.to) == 1 for message in mailoutbox)
    message = mailoutbox[0]
    assert message.subject == "[toolhub] Approval needed: risky_effect (high) in acme"
    assert f"/admin/approvals/approvalrequest/{request.pk}/change/" in message.body
    assert "DE02" not in message.body and "pay 5000" not in message.body


def test_the_link_starts_with_the_configured_console_address(
    hold: Hold, operator: User, settings: Any, mailoutbox: list[Any]
) -> None:
    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "CONSOLE_URL": "https://toolhub.example.com/"}

    request = hold()

    assert f"https://toolhub.example.com/admin/approvals/approvalrequest/{request.pk}/change/" in mailoutbox[0].body


def test_only_the_tool_groups_approvers_are_mailed_and_the_fallback_group_on_escalation(
    hold: Hold, operator: User, second_operator: User, mailoutbox: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    # given: risky_effect's approvers are one group; the other operator is the fallback after escalation
    approvers, fallback = Group.objects.create(name="effect-approvers"), Group.objects.create(name="duty")
    operator.groups.add(approvers)
    second_operator.groups.add(fallback)
    ToolGroup.objects.create(
        name="effects", extra_tools=["risky_effect"], approver_group=approvers, escalation_group=fallback
    )

    # when a request arrives
    request = hold()

    # then only the approver group's member is mailed
    assert _recipients(mailoutbox) == ["operator@example.com"]

    # when it escalates
    mailoutbox.clear()
    ApprovalRequest.objects.filter(pk=request.pk).update(escalate_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert approvals_escalate_due() == 1

    # then the fallback group may decide it now, and is told so
    assert "operator2@example.com" in _recipients(mailoutbox)
    assert all(m.subject.startswith("[toolhub] Escalated, approval needed: risky_effect") for m in mailoutbox)


def test_no_mail_for_a_request_decided_meanwhile_or_when_switched_off(
    hold: Hold, operator: User, settings: Any, mailoutbox: list[Any]
) -> None:
    request = hold()
    mailoutbox.clear()
    approval_approve(request_id=request.pk, user=operator)

    assert approval_email_approvers(request_id=request.pk, event="approval.requested") == 0
    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "APPROVAL_EMAILS": False}
    hold("another")
    assert mailoutbox == []


def test_a_mail_server_failure_is_logged_and_the_request_still_waits_on_the_desk(
    hold: Hold, operator: User, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # given: a mail server that refuses every connection
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 2

    # when a call is held back
    request = hold()

    # then the failure is logged with the request's id, and the request is on the desk, decidable
    assert f"Could not e-mail the approvers of approval request {request.pk}" in caplog.text
    assert approval_approve(request_id=request.pk, user=operator).status == ApprovalStatus.APPROVED
    assert len(mail.outbox) == 0
