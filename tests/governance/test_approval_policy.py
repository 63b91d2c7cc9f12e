"""Approval rules, approver groups, escalation, binding, expiry and notifications."""

import base64
import hashlib
import hmac
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from approvals import signals
from approvals.models import ApprovalRequest, ApprovalRule, ApprovalStatus, DeliveryStatus, WebhookDelivery
from approvals.services import approval_approve
from approvals.unanswered import approvals_escalate_due, approvals_expire_due
from approvals.webhooks import webhook_deliver
from tests.governance.conftest import parse
from tests.testapp.models import SideEffect
from toolhub import Risk, ToolContext, tool
from toolhub.exceptions import DecisionNotAllowedError
from toolhub.models import AuditEvent, CallStatus, ToolCall, ToolGroup
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_database_rule_holds_matching_calls_and_is_shown_on_the_request(request_call) -> None:
    rule = ApprovalRule.objects.create(
        name="big notes", tool_name="record_effect", argument="note", operator="contains", value="wire"
    )
    held = request_call("record_effect", {"note": "wire transfer"})
    passed = request_call("record_effect", {"note": "hello"})
    assert held.status == CallStatus.PENDING_APPROVAL
    request = ApprovalRequest.objects.get(call=held)
    assert request.rule == rule and request.source == "rule" and "big notes" in request.reason
    assert ToolCall.objects.get(pk=passed.pk).status == CallStatus.SUCCEEDED


def test_numeric_conditions_compare_exact_decimals_and_respect_tenant_and_risk(request_call, other_tenant) -> None:
    from demo.models import Account

    Account.objects.create(account_id="A", owner="x", tenant="acme", balance=Decimal("5000"))
    ApprovalRule.objects.create(name="large debit", tool_name="debit", argument="amount", operator=">", value=1000)
    ApprovalRule.objects.create(name="other tenant", tool_name="get_balance", tenant=other_tenant)
    ApprovalRule.objects.create(name="critical only", tool_name="get_balance", min_risk="critical")
    assert request_call("debit", {"account_id": "A", "amount": "1000.00"}).status != CallStatus.PENDING_APPROVAL
    assert request_call("debit", {"account_id": "A", "amount": "1000.01"}).status == CallStatus.PENDING_APPROVAL
    # neither the other tenant's rule nor the critical-only rule applies to a low-risk call in acme
    assert request_call("get_balance", {"account_id": "A"}).status != CallStatus.PENDING_APPROVAL


@tool(risk=Risk.LOW)
def store_payload(payload: dict[str, Any] | list[Any] | int, ctx: ToolContext) -> str:
    """Store a payload of any shape."""
    SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="store_payload", note=str(payload))
    return "stored"


@pytest.mark.parametrize(
    ("operator", "value", "argument"),
    [
        ("contains", ["vip"], {"tier": "gold"}),  # a list looked up in an object: unhashable
        ("contains", {"a": 1}, {"tier": "gold"}),
        (">", "abc", 5),  # text against a number
        ("<=", [1], {"a": 1}),
    ],
)
def test_a_rule_that_cannot_be_decided_on_the_arguments_holds_the_call_never_fails_it(
    request_call, operator: str, value: Any, argument: Any
) -> None:
    """Whatever value an operator or a tenant's developer saved: a rule that cannot compare holds the call."""
    ApprovalRule.objects.create(
        name="odd", tool_name="store_payload", argument="payload", operator=operator, value=value
    )

    with registry.temporarily(store_payload):
        call = request_call("store_payload", {"payload": argument})

    assert call.status == CallStatus.PENDING_APPROVAL
    assert not SideEffect.objects.exists()


def test_a_developers_never_does_not_override_an_operators_rule(request_call) -> None:
    def ping() -> str:
        """Answer pong."""
        return "pong"

    with registry.temporarily(Tool.from_function(ping, needs_approval=False, risk="high")):
        assert request_call("ping", {}).status != CallStatus.PENDING_APPROVAL  # never: risk default off
        ApprovalRule.objects.create(name="hold pings", tool_name="ping")
        assert request_call("ping", {}).status == CallStatus.PENDING_APPROVAL


def test_only_the_tool_groups_approvers_may_decide_until_escalation_opens_it_to_the_fallback(
    request_call, operator: User, second_operator: User
) -> None:
    approvers, fallback = Group.objects.create(name="ledger-approvers"), Group.objects.create(name="duty")
    second_operator.groups.add(fallback)
    ToolGroup.objects.create(
        name="effects",
        extra_tools=["risky_effect"],
        approver_group=approvers,
        escalation_group=fallback,
        escalate_after_seconds=60,
    )
    call = request_call("risky_effect", {"note": "x"})
    request = ApprovalRequest.objects.get(call=call)
    assert request.approver_group == approvers and request.escalate_at is not None

    with pytest.raises(DecisionNotAllowedError, match="approvers of this tool's group"):
        approval_approve(request_id=request.pk, user=second_operator)
    escalated: list[Any] = []
    signals.approval_escalated.connect(lambda **kw: escalated.append(kw["request"].pk), weak=False, dispatch_uid="t")
    ApprovalRequest.objects.filter(pk=request.pk).update(escalate_at=timezone.now() - timedelta(seconds=1))
    assert approvals_escalate_due() == 1
    signals.approval_escalated.disconnect(dispatch_uid="t")
    approval_approve(request_id=request.pk, user=second_operator, comment="on duty")
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.SUCCEEDED
    assert escalated == [request.pk]
    assert AuditEvent.objects.filter(call_id=call.pk, event_type="approval.escalated").exists()
    # operator was never in either group
    assert operator.groups.filter(name__in=["ledger-approvers", "duty"]).count() == 0


@pytest.mark.django_db(transaction=False)
def test_a_tool_changed_after_approval_sends_the_call_back_for_a_new_decision(
    request_call, operator: User, second_operator: User, django_capture_on_commit_callbacks
) -> None:
    def transfer(note: str) -> str:
        """Move money."""
        SideEffect.objects.create(call_id="transfer", tool="transfer", note=note)
        return "moved"

    original = Tool.from_function(transfer, risk="high")
    with registry.temporarily(original):
        call = request_call("transfer", {"note": "x"})
        request = ApprovalRequest.objects.get(call=call)
        with django_capture_on_commit_callbacks(execute=False) as dispatches:
            approval_approve(request_id=request.pk, user=operator, comment="ok")
    # the tool's definition changes before a worker picks the call up
    with registry.temporarily(original.with_description("Move money, now to any bank.")):
        with django_capture_on_commit_callbacks(execute=True):
            for dispatch in dispatches:
                dispatch()
        call.refresh_from_db()
        request.refresh_from_db()
        assert call.status == CallStatus.PENDING_APPROVAL
        assert request.status == ApprovalStatus.PENDING and request.round == 2
        assert "changed after approval" in request.reason
        assert SideEffect.objects.count() == 0
        # the earlier approval does not count; a new one runs the call once
        with django_capture_on_commit_callbacks(execute=True):
            approval_approve(request_id=request.pk, user=second_operator, comment="still fine")
        call.refresh_from_db()
        assert call.status == CallStatus.SUCCEEDED
        assert SideEffect.objects.count() == 1


def test_a_rule_timeout_expires_the_request_and_the_model_is_told(request_call) -> None:
    ApprovalRule.objects.create(name="short", tool_name="record_effect", timeout_seconds=5)
    call = request_call("record_effect", {"note": "x"})
    request = ApprovalRequest.objects.get(call=call)
    assert (request.expires_at - request.created_at).total_seconds() == pytest.approx(5, abs=1)
    ApprovalRequest.objects.filter(pk=request.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert approvals_expire_due() == 1
    call.refresh_from_db()
    assert call.status == CallStatus.EXPIRED and "expired" in call.model_text()
    assert ApprovalRequest.objects.get(pk=request.pk).status == ApprovalStatus.EXPIRED
    assert SideEffect.objects.count() == 0


def test_notifications_reach_the_webhook_signed_and_failed_deliveries_are_retried_later(
    request_call, operator: User, settings: Any, webhook_receiver, monkeypatch
) -> None:
    url, received = webhook_receiver
    monkeypatch.setenv("TOOLHUB_WEBHOOK_SECRET", "s3cret")
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": url}
    call = request_call("risky_effect", {"note": "x"})
    request = ApprovalRequest.objects.get(call=call)
    approval_approve(request_id=request.pk, user=operator, comment="ok")

    events = [parse(item["body"])["event"] for item in received]
    assert events == ["approval.requested", "approval.approved"]
    for item in received:
        # the Standard Webhooks scheme: the id and the timestamp are signed with the body
        headers = {name.lower(): value for name, value in item["headers"].items()}
        signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + item["body"]
        expected = "v1," + base64.b64encode(hmac.new(b"s3cret", signed, hashlib.sha256).digest()).decode()
        assert headers["webhook-signature"] == expected
    assert parse(received[1]["body"])["by"] == "operator"

    # the receiver goes away: the delivery is kept and scheduled again, not lost
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": "http://127.0.0.1:9/unreachable"}
    request_call("risky_effect", {"note": "y"})
    failed = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).get()
    assert failed.attempts == 1 and failed.next_attempt_at > timezone.now() and failed.last_error
    assert webhook_deliver(delivery_id=failed.pk) is False  # not due yet: nothing is attempted
    assert WebhookDelivery.objects.get(pk=failed.pk).attempts == 1
    WebhookDelivery.objects.filter(pk=failed.pk).update(next_attempt_at=timezone.now())
    assert webhook_deliver(delivery_id=failed.pk) is False
    assert WebhookDelivery.objects.get(pk=failed.pk).attempts == 2


def test_operator_decisions_are_audit_events_with_identity_and_comment(request_call, operator: User) -> None:
    call = request_call("risky_effect", {"note": "x"})
    approval_approve(request_id=ApprovalRequest.objects.get(call=call).pk, user=operator, comment="checked the note")
    event = AuditEvent.objects.get(call_id=call.pk, event_type="approval.approve")
    assert event.actor == "operator:operator"
    assert event.payload["comment"] == "checked the note"


def test_a_user_without_the_right_gets_403_not_the_requests_state(request_call, operator: User, viewer: User) -> None:
    from rest_framework.test import APIClient

    call = request_call("risky_effect", {"note": "x"})
    request = ApprovalRequest.objects.get(call=call)
    approval_approve(request_id=request.pk, user=operator, comment="ok")
    client = APIClient()
    client.force_authenticate(viewer)
    assert client.post(f"/api/v1/approvals/{request.pk}/reject/", {}, format="json").status_code == 403


def test_a_tool_group_can_require_a_permission_of_its_approvers(
    request_call, operator: User, second_operator: User
) -> None:
    from django.contrib.auth.models import Permission
    from django.core.exceptions import ValidationError

    # a mistyped permission is refused before it can lock every approver out
    with pytest.raises(ValidationError, match="No permission"):
        ToolGroup(name="typo", approver_permission="approvals.approve_mony").full_clean()

    group = ToolGroup(name="money", extra_tools=["risky_effect"], approver_permission="approvals.add_approvalrule")
    group.full_clean()
    group.save()
    second_operator.user_permissions.add(Permission.objects.get(codename="add_approvalrule"))
    second_operator = User.objects.get(pk=second_operator.pk)  # fresh permission cache
    call = request_call("risky_effect", {"note": "x"})
    request = ApprovalRequest.objects.get(call=call)
    assert request.approver_permission == "approvals.add_approvalrule"
    with pytest.raises(DecisionNotAllowedError, match="approvers of this tool's group"):
        approval_approve(request_id=request.pk, user=operator)
    approval_approve(request_id=request.pk, user=second_operator, comment="has the right")
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.SUCCEEDED
