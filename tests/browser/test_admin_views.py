"""The admin's guards, through Django's test client: forged decisions and edits of the trail are refused."""

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from agents_app.models import Agent
from agents_app.services import run_start
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_reject
from demo.management.commands.load_demo import ORDER_SCRIPT
from toolhub.catalogue import tool_catalogue_sync
from toolhub.models import AuditEvent, CallStatus, ToolCall, ToolDefinition

pytestmark = pytest.mark.django_db


@pytest.fixture
def pending(alice: User, django_capture_on_commit_callbacks: Callable[..., Any]) -> ApprovalRequest:
    """Alice's order of 5000, waiting for an operator."""
    agent = Agent.objects.create(name="order-demo", script=ORDER_SCRIPT, tools=["create_order"])
    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(agent=agent, user=alice, input="Order a laptop for me.")
    request = ApprovalRequest.objects.select_related("call").get(call__run_id=run.id)
    assert request.status == ApprovalStatus.PENDING
    return request


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def assert_untouched(request: ApprovalRequest) -> None:
    request.refresh_from_db()
    request.call.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING
    assert not request.decisions.exists()
    assert request.call.status == CallStatus.PENDING_APPROVAL


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_forged_decision_post_without_the_permission_is_refused(
    viewer: User, pending: ApprovalRequest, decision: str
) -> None:
    # given: a staff user who may view approval requests but not decide them
    viewer.user_permissions.add(Permission.objects.get(codename="view_approvalrequest"))
    url = reverse(f"admin:approvals_approvalrequest_{decision}", args=[pending.pk])

    # when: they post the decision form by hand
    response = logged_in(viewer).post(url, {"comment": "forged"})

    # then: refused, and nothing changed
    assert response.status_code == 403
    assert_untouched(pending)


def test_forged_decision_post_from_a_non_staff_requester_is_refused(alice: User, pending: ApprovalRequest) -> None:
    url = reverse("admin:approvals_approvalrequest_approve", args=[pending.pk])

    response = logged_in(alice).post(url, {"comment": "approving my own"})

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))
    assert_untouched(pending)


def test_forged_list_action_without_the_permission_is_refused(viewer: User, pending: ApprovalRequest) -> None:
    viewer.user_permissions.add(Permission.objects.get(codename="view_approvalrequest"))

    response = logged_in(viewer).post(
        reverse("admin:approvals_approvalrequest_changelist"),
        {"action": "approve_selected", "_selected_action": [pending.pk], "apply": "yes", "comment": "forged"},
        follow=True,
    )

    assert response.status_code == 200
    assert "approve_selected" not in response.content.decode()
    assert_untouched(pending)


def test_decision_urls_accept_only_post(operator: User, pending: ApprovalRequest) -> None:
    response = logged_in(operator).get(reverse("admin:approvals_approvalrequest_approve", args=[pending.pk]))

    assert response.status_code == 405
    assert_untouched(pending)


def test_deciding_an_already_decided_request_changes_nothing(
    operator: User, second_operator: User, pending: ApprovalRequest
) -> None:
    # given: another operator rejected the request a moment ago
    approval_reject(request_id=pending.pk, user=second_operator, comment="Too expensive.")

    # when: the operator, on a stale page, clicks Approve
    response = logged_in(operator).post(
        reverse("admin:approvals_approvalrequest_approve", args=[pending.pk]), {"comment": "ok"}, follow=True
    )

    # then: the error is shown and the rejection stands
    messages = [str(message) for message in response.context["messages"]]
    assert any("already rejected" in message for message in messages), messages
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.REJECTED
    assert list(pending.decisions.values_list("decided_by_name", "decision")) == [("operator2", "reject")]


def test_approval_requests_cannot_be_added_changed_or_deleted(admin_user: User, pending: ApprovalRequest) -> None:
    client = logged_in(admin_user)

    assert client.get(reverse("admin:approvals_approvalrequest_add")).status_code == 403
    assert client.get(reverse("admin:approvals_approvalrequest_delete", args=[pending.pk])).status_code == 403
    assert (
        client.post(reverse("admin:approvals_approvalrequest_change", args=[pending.pk]), {"status": "approved"})
    ).status_code == 403
    assert_untouched(pending)


@pytest.mark.parametrize("who", ["auditor", "admin_user"])
@pytest.mark.parametrize("model", ["auditevent", "toolcall"])
def test_audit_admins_refuse_add_change_and_delete(
    request: pytest.FixtureRequest, pending: ApprovalRequest, who: str, model: str
) -> None:
    # given: an auditor with view permissions, or even a superuser
    client = logged_in(request.getfixturevalue(who))
    obj = AuditEvent.objects.order_by("id").first() if model == "auditevent" else pending.call
    events_before = list(AuditEvent.objects.order_by("id").values_list("id", "hash"))
    calls_before = list(ToolCall.objects.order_by("id").values_list("id", "status", "updated_at"))

    # then: the list and the page are readable, but add, change and delete are forbidden
    changelist = client.get(reverse(f"admin:toolhub_{model}_changelist"))
    assert changelist.status_code == 200
    assert b"delete_selected" not in changelist.content
    page = client.get(reverse(f"admin:toolhub_{model}_change", args=[obj.pk]))
    assert page.status_code == 200
    assert b'name="_save"' not in page.content
    assert client.get(reverse(f"admin:toolhub_{model}_add")).status_code == 403
    assert client.post(reverse(f"admin:toolhub_{model}_add"), {"event_type": "forged"}).status_code == 403
    assert client.post(reverse(f"admin:toolhub_{model}_change", args=[obj.pk]), {"status": "x"}).status_code == 403
    assert client.get(reverse(f"admin:toolhub_{model}_delete", args=[obj.pk])).status_code == 403
    assert client.post(reverse(f"admin:toolhub_{model}_delete", args=[obj.pk]), {"post": "yes"}).status_code == 403
    bulk = client.post(
        reverse(f"admin:toolhub_{model}_changelist"),
        {"action": "delete_selected", "_selected_action": [obj.pk], "post": "yes", "index": 0},
    )
    assert bulk.status_code in (200, 302)
    assert list(AuditEvent.objects.order_by("id").values_list("id", "hash")) == events_before
    assert list(ToolCall.objects.order_by("id").values_list("id", "status", "updated_at")) == calls_before


def test_staff_without_view_permission_cannot_open_the_trail(viewer: User, pending: ApprovalRequest) -> None:
    client = logged_in(viewer)

    for model in ("auditevent", "toolcall"):
        assert client.get(reverse(f"admin:toolhub_{model}_changelist")).status_code == 403
    assert client.get(reverse("admin:approvals_approvalrequest_change", args=[pending.pk])).status_code == 403


def test_auditor_sees_sensitive_arguments_redacted_on_the_approval_page(
    auditor: User, pending: ApprovalRequest
) -> None:
    page = logged_in(auditor).get(reverse("admin:approvals_approvalrequest_change", args=[pending.pk]))

    assert page.status_code == 200
    body = page.content.decode()
    assert "&quot;amount&quot;: &quot;5000&quot;" in body
    assert 'id="approval-decision"' not in body


def test_operator_governs_tools_from_the_catalogue_list_but_cannot_add_or_delete(operator: User) -> None:
    # given: the catalogue mirrors the code, and the operator is a platform operator (the catalogue is shared
    # by every tenant, so only people who cross the tenant boundary change it)
    operator.user_permissions.add(Permission.objects.get(content_type__app_label="toolhub", codename="cross_tenant"))
    tool_catalogue_sync()
    definition = ToolDefinition.objects.get(name="create_order")
    client = logged_in(operator)

    # when: the operator disables create_order and raises its risk from the list
    response = client.post(
        reverse("admin:toolhub_tooldefinition_changelist") + "?q=create_order",
        {
            "form-TOTAL_FORMS": "1",
            "form-INITIAL_FORMS": "1",
            "form-MIN_NUM_FORMS": "0",
            "form-MAX_NUM_FORMS": "1000",
            "form-0-id": str(definition.pk),
            "form-0-risk_override": "critical",
            "_save": "Save",
        },
    )

    # then: the operator's fields changed, the code's did not; rows cannot be added or deleted
    assert response.status_code == 302, response.content.decode()[:2000]
    definition.refresh_from_db()
    assert (definition.enabled, definition.risk_override, definition.risk) == (False, "critical", "medium")
    assert client.get(reverse("admin:toolhub_tooldefinition_add")).status_code == 403
    assert client.get(reverse("admin:toolhub_tooldefinition_delete", args=[definition.pk])).status_code == 403
    page = client.get(reverse("admin:toolhub_tooldefinition_change", args=[definition.pk]))
    assert b'name="input_schema"' not in page.content
    assert b'name="name"' not in page.content
