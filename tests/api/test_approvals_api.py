"""The approvals API: the operators' queue, and decisions with the right status codes."""

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest, ApprovalStatus
from tests.api.conftest import client_for
from tests.helpers import principal_for
from tests.testapp.models import SideEffect
from toolhub.models import CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

pytestmark = pytest.mark.django_db

Committed = Callable[..., Any]


@pytest.fixture
def hold(django_capture_on_commit_callbacks: Any) -> Callable[..., ApprovalRequest]:
    """Request a high-risk call for ``user``; return its approval request."""

    def request(user: User, note: str = "careful") -> ApprovalRequest:
        with django_capture_on_commit_callbacks(execute=True):
            call = tool_call_request(
                request=CallRequest(
                    tool_name="risky_effect",
                    arguments={"note": note},
                    principal=principal_for(user, tenant="acme"),
                    context=ToolContext(),
                )
            )
        return ApprovalRequest.objects.get(call=call)

    return request


def test_the_pending_queue(
    operator_client: APIClient, hold: Callable[..., ApprovalRequest], alice: User, committed: Committed
) -> None:
    # given two held calls, one of them decided already
    first, second = hold(alice, "one"), hold(alice, "two")
    committed(operator_client.post, f"/api/v1/approvals/{first.pk}/reject/", {"comment": "no"}, format="json")

    # when
    pending = operator_client.get("/api/v1/approvals/?status=pending")
    everything = operator_client.get("/api/v1/approvals/")

    # then
    assert pending.status_code == 200
    [item] = pending.json()["results"]
    assert item["id"] == second.pk
    assert (item["status"], item["tool_name"], item["risk"], item["reason"]) == (
        "pending",
        "risky_effect",
        "high",
        "risk is high",
    )
    assert (item["call"], item["arguments"], item["requested_by"], item["tenant"]) == (
        str(second.call_id),
        {"note": "two"},
        "alice",
        "acme",
    )
    assert item["decisions"] == []
    assert [i["id"] for i in everything.json()["results"]] == [second.pk, first.pk]


def test_an_unknown_status_filter_is_refused(operator_client: APIClient) -> None:
    response = operator_client.get("/api/v1/approvals/?status=maybe")

    assert response.status_code == 400
    assert "status" in response.json()


def test_approve(
    operator_client: APIClient, hold: Callable[..., ApprovalRequest], alice: User, committed: Committed
) -> None:
    request = hold(alice)

    response = committed(
        operator_client.post, f"/api/v1/approvals/{request.pk}/approve/", {"comment": "go"}, format="json"
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "approved"
    assert [(d["decision"], d["decided_by_name"], d["comment"]) for d in body["decisions"]] == [
        ("approve", "operator", "go")
    ]
    assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.SUCCEEDED
    assert SideEffect.objects.count() == 1
    detail = operator_client.get(f"/api/v1/approvals/{request.pk}/")
    assert detail.status_code == 200 and detail.json()["status"] == "approved"


def test_approve_with_edited_arguments(
    operator_client: APIClient, hold: Callable[..., ApprovalRequest], alice: User, committed: Committed
) -> None:
    request = hold(alice, "original")

    invalid = operator_client.post(
        f"/api/v1/approvals/{request.pk}/approve/", {"arguments": {"note": 7}}, format="json"
    )
    edited = committed(
        operator_client.post,
        f"/api/v1/approvals/{request.pk}/approve/",
        {"arguments": {"note": "edited"}},
        format="json",
    )

    assert invalid.status_code == 400
    assert "- note: Input should be a valid string" in invalid.json()["detail"]
    assert edited.status_code == 200, edited.content
    assert edited.json()["decisions"][0]["diff"] == {"note": {"before": "original", "after": "edited"}}
    assert SideEffect.objects.get().note == "edited"


def test_reject(
    operator_client: APIClient, hold: Callable[..., ApprovalRequest], alice: User, committed: Committed
) -> None:
    request = hold(alice)

    response = committed(
        operator_client.post, f"/api/v1/approvals/{request.pk}/reject/", {"comment": "not now"}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["status"] == "rejected"
    call = ToolCall.objects.get(pk=request.call_id)
    assert (call.status, call.error) == (CallStatus.REJECTED, "Rejected by operator: not now")
    assert SideEffect.objects.count() == 0


@pytest.mark.parametrize("action", ["approve", "reject"])
def test_deciding_without_the_permission_is_forbidden(
    viewer: User, alice_client: APIClient, hold: Callable[..., ApprovalRequest], alice: User, action: str
) -> None:
    request = hold(alice)

    for client in (client_for(viewer), alice_client):
        response = client.post(f"/api/v1/approvals/{request.pk}/{action}/", {}, format="json")
        assert response.status_code == 403
        assert "permission" in response.json()["detail"]

    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING


@pytest.mark.parametrize("action", ["approve", "reject"])
def test_the_requester_may_not_decide(
    operator_client: APIClient, hold: Callable[..., ApprovalRequest], operator: User, action: str
) -> None:
    request = hold(operator)

    response = operator_client.post(f"/api/v1/approvals/{request.pk}/{action}/", {}, format="json")

    assert response.status_code == 403
    assert response.json()["detail"] == "You started this call; another operator must decide it."
    assert SideEffect.objects.count() == 0


def test_deciding_twice_is_a_conflict(
    operator_client: APIClient,
    second_operator: User,
    hold: Callable[..., ApprovalRequest],
    alice: User,
    committed: Committed,
) -> None:
    request = hold(alice)
    committed(operator_client.post, f"/api/v1/approvals/{request.pk}/approve/", {}, format="json")

    again = client_for(second_operator).post(f"/api/v1/approvals/{request.pk}/reject/", {}, format="json")

    assert again.status_code == 409
    assert again.json()["detail"] == "This approval request is already approved; nothing was changed."
    assert SideEffect.objects.count() == 1


def test_deciding_an_unknown_request_is_not_found(operator_client: APIClient) -> None:
    assert operator_client.post("/api/v1/approvals/999999/approve/", {}, format="json").status_code == 404
    assert operator_client.get("/api/v1/approvals/999999/").status_code == 404


def test_approvals_need_authentication(api_client: APIClient, db: None) -> None:
    assert api_client.get("/api/v1/approvals/").status_code in (401, 403)
    assert api_client.post("/api/v1/approvals/1/approve/", {}, format="json").status_code in (401, 403)


def test_users_see_only_the_approval_requests_of_their_own_calls(
    bob_client: APIClient, alice_client: APIClient, hold: Callable[..., ApprovalRequest], alice: User
) -> None:
    request = hold(alice, "acme's secret plan")

    assert bob_client.get("/api/v1/approvals/").json()["results"] == []
    assert bob_client.get(f"/api/v1/approvals/{request.pk}/").status_code == 404
    assert [r["id"] for r in alice_client.get("/api/v1/approvals/").json()["results"]] == [request.pk]
