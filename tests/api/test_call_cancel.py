"""POST /api/v1/calls/{id}/cancel/: the requester (or an operator) withdraws a call that has not started.

A held call ends with its approval request (no operator can approve it any more), a call awaiting an
external result refuses the result that comes later; a run waiting on the call goes on, its model told
why the call did not run. A call that started, or bad input, changes nothing.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from agents_app.models import AgentRun, RunStatus
from agents_app.services import agent_create, run_start
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.api.conftest import client_for
from tests.helpers import assert_audit_intact, event_types
from tests.tenancy.conftest import CRM_LOOKUP, make_user
from tests.testapp.models import SideEffect
from toolhub import registry
from toolhub.models import CallStatus, Tenant, ToolCall
from toolhub.waiting import CancelReasonError, tool_call_cancel

# Committed for real: the embedded mode runs a call when the request's transaction commits, before it answers.
pytestmark = pytest.mark.django_db(transaction=True)


def _call(user: User, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    response = client_for(user).post("/api/v1/calls/", {"tool": tool, "arguments": arguments}, format="json")
    assert response.status_code in (200, 202), response.content
    return response.json()


def _cancel(user: User, call_id: str, body: Any = None) -> Any:
    return client_for(user).post(f"/api/v1/calls/{call_id}/cancel/", body or {}, format="json")


def test_the_requester_withdraws_a_held_call_and_no_operator_can_approve_it(alice: User, acme_operator: User) -> None:
    held = _call(alice, "risky_effect", {"note": "wire money"})

    response = _cancel(alice, held["id"], {"reason": "changed my mind"})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "cancelled"
    assert body["error"] == "Not executed: cancelled by user:alice: changed my mind"
    request = ApprovalRequest.objects.get(pk=held["approval_id"])
    assert request.status == ApprovalStatus.CANCELLED
    approve = client_for(acme_operator).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": 1}, format="json")
    assert approve.status_code == 409 and "already cancelled" in approve.json()["detail"]
    polled = client_for(alice).get(f"/api/v1/calls/{held['id']}/")
    assert (polled.status_code, polled.json()["status"]) == (200, "cancelled")
    assert event_types(ToolCall.objects.get(pk=held["id"]))[-2:] == ["approval.cancelled", "call.cancelled"]
    assert not SideEffect.objects.exists()
    assert_audit_intact()


def test_an_operator_of_the_tenant_may_cancel_it_and_nobody_else(
    alice: User, carol: User, acme_operator: User, acme_auditor: User, globex_operator: User
) -> None:
    held = _call(alice, "risky_effect", {"note": "wire money"})

    assert _cancel(acme_auditor, held["id"]).status_code == 403  # sees it, changes nothing
    assert _cancel(carol, held["id"]).status_code == 404  # a colleague does not see alice's calls
    assert _cancel(globex_operator, held["id"]).status_code == 404  # another tenant's
    assert ToolCall.objects.get(pk=held["id"]).status == CallStatus.PENDING_APPROVAL
    assert ApprovalRequest.objects.get(pk=held["approval_id"]).status == ApprovalStatus.PENDING

    response = _cancel(acme_operator, held["id"])

    assert response.status_code == 200, response.content
    assert response.json()["error"] == "Not executed: cancelled by user:acme-operator: no reason given"


def test_a_call_that_ran_is_not_cancelled(alice: User) -> None:
    ran = _call(alice, "record_effect", {"note": "done"})

    response = _cancel(alice, ran["id"], {"reason": "too late"})

    assert response.status_code == 409
    assert response.json()["detail"] == (
        "This call is succeeded; only a call that has not started (held for approval, queued or awaiting a result) "
        "can be cancelled. Nothing was changed."
    )
    assert ToolCall.objects.get(pk=ran["id"]).status == CallStatus.SUCCEEDED
    assert SideEffect.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"reason": "x" * 501}, "no more than 500 characters"),
        ({"reason": ["a", "list"]}, "Not a valid string"),
        ({"reason": None}, "may not be null"),
        ({"reason": "a\x00b"}, "reason contains a NUL character"),
    ],
)
def test_a_bad_reason_is_refused_and_the_call_still_waits(alice: User, body: dict[str, Any], problem: str) -> None:
    held = _call(alice, "risky_effect", {"note": "wire money"})

    response = _cancel(alice, held["id"], body)

    assert response.status_code == 400
    assert problem in str(response.json())
    assert ToolCall.objects.get(pk=held["id"]).status == CallStatus.PENDING_APPROVAL
    assert ApprovalRequest.objects.get(pk=held["approval_id"]).status == ApprovalStatus.PENDING


@pytest.mark.parametrize("reason", ["a \udfff b", "a\x00b"])
def test_a_reason_no_column_can_store_is_refused_whatever_the_channel(alice: User, reason: str) -> None:
    """The REST parser refuses such a body first; the service refuses it too, for MCP and the admin."""
    held = _call(alice, "risky_effect", {"note": "wire money"})
    raw = '{"reason": "a \\udfff b"}'
    over_rest = client_for(alice).post(f"/api/v1/calls/{held['id']}/cancel/", data=raw, content_type="application/json")

    with pytest.raises(CancelReasonError, match="Nothing was cancelled: the reason contains"):
        tool_call_cancel(call=ToolCall.objects.get(pk=held["id"]), actor="user:alice", reason=reason, reader=alice)

    assert over_rest.status_code == 400 and "lone surrogate" in over_rest.json()["detail"]
    assert ToolCall.objects.get(pk=held["id"]).status == CallStatus.PENDING_APPROVAL
    assert ApprovalRequest.objects.get(pk=held["approval_id"]).status == ApprovalStatus.PENDING


def test_a_call_awaiting_an_external_result_refuses_the_result_once_cancelled(alice: User) -> None:
    with registry.temporarily(CRM_LOOKUP):
        waiting = _call(alice, "crm_lookup", {"email": "ada@acme.example"})
        assert waiting["status"] == "awaiting_result"

        cancelled = _cancel(alice, waiting["id"], {"reason": "found it myself"})
        late = client_for(alice).post(f"/api/v1/calls/{waiting['id']}/result/", {"result": "ada"}, format="json")

    assert cancelled.status_code == 200, cancelled.content
    assert late.status_code == 409
    call = ToolCall.objects.get(pk=waiting["id"])
    assert (call.status, call.result) == (CallStatus.CANCELLED, None)


def test_a_run_waiting_on_its_cancelled_call_goes_on_and_its_model_is_told_why(alice: User) -> None:
    agent = agent_create(
        name="held-then-answer",
        provider="scripted",
        tools=["risky_effect"],
        tenant="acme",
        script=[
            {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]},
            {"content": "The tool said: {last_tool_result}"},
        ],
    )
    run = run_start(agent=agent, user=alice, input="go")
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    call = ToolCall.objects.get(run_id=run.pk)

    assert _cancel(alice, str(call.id), {"reason": "not this one"}).status_code == 200

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.output == "The tool said: Not executed: cancelled by user:alice: not this one"
    assert not SideEffect.objects.exists()


def test_the_admin_action_cancels_only_the_operators_tenants_waiting_calls(
    alice: User, acme_operator: User, globex_operator: User, acme_auditor: User
) -> None:
    held = _call(alice, "risky_effect", {"note": "wire money"})
    ran = _call(alice, "record_effect", {"note": "done"})
    bob = make_user("bob-globex", tenant=Tenant.objects.get(slug="globex"))
    theirs = _call(bob, "risky_effect", {"note": "globex money"})
    selected = {"action": "cancel_selected", "_selected_action": [held["id"], ran["id"], theirs["id"]]}
    url = "/admin/toolhub/toolcall/"

    auditor = Client()
    auditor.force_login(acme_auditor)
    refused = auditor.post(url, {**selected, "apply": "1", "reason": "x"})
    assert refused.status_code in (200, 302)
    assert ToolCall.objects.get(pk=held["id"]).status == CallStatus.PENDING_APPROVAL

    operator = Client()
    operator.force_login(acme_operator)
    page = operator.post(url, selected).content.decode()
    assert "Cancel 1 call(s)" in page and held["id"] in page and theirs["id"] not in page
    done = operator.post(url, {**selected, "apply": "1", "reason": "wrong account"}, follow=True)

    assert "Cancelled 1 call(s)." in done.content.decode()
    assert ToolCall.objects.get(pk=held["id"]).error == "Not executed: cancelled by user:acme-operator: wrong account"
    assert ToolCall.objects.get(pk=ran["id"]).status == CallStatus.SUCCEEDED
    assert ToolCall.objects.get(pk=theirs["id"]).status == CallStatus.PENDING_APPROVAL  # globex's: out of reach
    assert_audit_intact()
