"""The approvals API with edits: the version under approval is shown and named; bad edits are 400 and write nothing."""

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from tests.api.conftest import client_for
from tests.approvals.conftest import Hold
from tests.helpers import RequestCall
from tests.testapp.models import SideEffect
from toolhub.arguments import MAX_NESTING
from toolhub.audit import REDACTED
from toolhub.models import AuditEvent, CallStatus, ToolCall

pytestmark = pytest.mark.django_db

Committed = Callable[..., Any]


def _post(client: APIClient, request: ApprovalRequest, action: str, body: dict[str, Any]) -> Any:
    """POST JSON as a client sends it: text with escapes, so lone surrogates arrive as such."""
    return client.post(f"/api/v1/approvals/{request.pk}/{action}/", json.dumps(body), content_type="application/json")


def _approve(client: APIClient, request: ApprovalRequest, body: dict[str, Any]) -> Any:
    return _post(client, request, "approve", body)


def test_four_eyes_over_the_api(
    hold: Hold, operator: User, second_operator: User, committed: Committed, operator_client: APIClient
) -> None:
    # given a call that needs two approvers, and what the first operator reads
    request = hold("pay 5000", approvers=2)
    seen = operator_client.get(f"/api/v1/approvals/{request.pk}/").json()
    assert (seen["round"], seen["arguments"], seen["arguments_diff"]) == (1, {"note": "pay 5000"}, {})

    # when the first approves what they read, and the second approves with an edit
    first = committed(_approve, operator_client, request, {"round": seen["round"]})
    second = committed(_approve, client_for(second_operator), request, {"arguments": {"note": "pay 9000"}})

    # then the request shows the version that will run, its diff from the model's, and a new round
    assert first.status_code == 200 and second.status_code == 200, (first.content, second.content)
    body = second.json()
    assert body["status"] == "pending"
    assert (body["round"], body["approvals_in_round"], body["required_approvals"]) == (2, 1, 2)
    assert body["arguments"] == {"note": "pay 9000"}
    assert body["original_arguments"] == {"note": "pay 5000"}
    assert body["arguments_diff"] == {"note": {"before": "pay 5000", "after": "pay 9000"}}
    assert [(d["decision"], d["decided_by_name"], d["round"]) for d in body["decisions"]] == [
        ("approve", "operator", 1),
        ("edit", "operator2", 2),
    ]
    assert body["decisions"][1]["arguments_hash"] == body["arguments_hash"]
    assert SideEffect.objects.count() == 0

    # when the first operator's stale page is submitted again, it is a conflict and nothing is recorded
    stale = _approve(operator_client, request, {"expected_arguments_hash": seen["arguments_hash"]})
    assert stale.status_code == 409
    assert stale.json()["detail"].startswith("The arguments changed since you looked; review them again")
    assert ApprovalDecision.objects.filter(request=request).count() == 2

    # when they review the new version and approve it
    reviewed = operator_client.get(f"/api/v1/approvals/{request.pk}/").json()
    done = committed(_approve, operator_client, request, {"expected_arguments_hash": reviewed["arguments_hash"]})

    # then the edited version ran, once
    assert done.status_code == 200, done.content
    assert done.json()["status"] == "approved"
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["pay 9000"]


def test_a_round_that_is_over_is_a_conflict(
    hold: Hold, second_operator: User, committed: Committed, operator_client: APIClient
) -> None:
    request = hold("pay 5000", approvers=2)
    committed(_approve, client_for(second_operator), request, {"arguments": {"note": "pay 1"}})

    response = _approve(operator_client, request, {"round": 1})

    assert response.status_code == 409
    assert "review them again" in response.json()["detail"]
    assert ApprovalDecision.objects.filter(request=request).count() == 1


def test_sensitive_values_are_redacted_in_the_request(
    secret_tool: None,
    request_call: RequestCall,
    alice: User,
    second_operator: User,
    committed: Committed,
    operator_client: APIClient,
) -> None:
    call = request_call("rotate_secret", {"username": "bob", "password": "old-secret-1"}, alice, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)
    committed(_approve, client_for(second_operator), request, {"arguments": {"password": "new-secret-2"}})

    body = operator_client.get(f"/api/v1/approvals/{request.pk}/").json()

    assert body["arguments"] == {"username": "bob", "password": REDACTED}
    assert body["original_arguments"] == {"username": "bob", "password": REDACTED}
    assert body["arguments_diff"] == {"password": {"before": REDACTED, "after": REDACTED}}
    assert "secret-" not in json.dumps(body)


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"note": "pay\u0000 9000"}, "note contains a NUL character"),
        ({"note": "pay \ud800 9000"}, "note contains an invalid character (a lone surrogate)"),
        ({"note": _nested(MAX_NESTING + 50)}, f"Arguments are nested deeper than {MAX_NESTING} levels"),
        ({"note": 9000}, "- note: Input should be a valid string"),
    ],
    ids=["nul", "lone-surrogate", "deeply-nested", "wrong-type"],
)
def test_unusable_edits_are_400_and_write_nothing(
    hold: Hold, operator_client: APIClient, edit: dict[str, Any], message: str
) -> None:
    # given a pending request
    request = hold("pay 5000")
    events = AuditEvent.objects.count()

    # when an operator edits it with arguments no column can store, too deep, or of the wrong type
    response = _approve(operator_client, request, {"arguments": edit, "round": 1})

    # then a clear 400 names the field, and nothing was written or run
    assert response.status_code == 400, response.content
    assert message in response.json()["detail"]
    fresh = ApprovalRequest.objects.get(pk=request.pk)
    assert (fresh.status, fresh.round, fresh.arguments) == (ApprovalStatus.PENDING, 1, {"note": "pay 5000"})
    assert not ApprovalDecision.objects.exists()
    assert AuditEvent.objects.count() == events
    assert ToolCall.objects.get(pk=request.call_id).status == CallStatus.PENDING_APPROVAL


def test_a_comment_no_column_can_store_is_400_and_writes_nothing(hold: Hold, operator_client: APIClient) -> None:
    request = hold("pay 5000")
    events = AuditEvent.objects.count()

    for action in ("approve", "reject"):
        response = _post(operator_client, request, action, {"comment": "ok \ud800"})
        # refused by DRF's field (or, earlier, by the body check every JSON request passes), naming the comment
        assert response.status_code == 400, response.content
        assert "comment" in response.content.decode() and "urrogate" in response.content.decode()

    assert not ApprovalDecision.objects.exists()
    assert AuditEvent.objects.count() == events
    assert ApprovalRequest.objects.get(pk=request.pk).status == ApprovalStatus.PENDING


def test_a_version_that_is_not_a_version_is_refused(hold: Hold, operator_client: APIClient) -> None:
    request = hold("pay 5000")

    response = _approve(operator_client, request, {"round": 0, "expected_arguments_hash": "x" * 65})

    assert response.status_code == 400
    assert set(response.json()) == {"round", "expected_arguments_hash"}
    assert not ApprovalDecision.objects.exists()
