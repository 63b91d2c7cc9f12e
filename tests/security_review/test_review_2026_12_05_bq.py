"""Review of 2026-12-05 (bq): the Pydantic AI adapter's re-request of a deferred call (real library, offline).

The first three tests fail on the reviewed code (main at a7202f1); the last guards the fix (the key is derived
from ids a client holds). Each states who reaches what, where, and what is expected.

Findings: a deferred call approved in Pydantic AI alone (``DeferredToolResults(approvals={id: True})``, no
toolhub metadata) was requested from toolhub again as a *new* call: the first stayed pending, the operators'
queue showed two identical requests for one model tool call, and approving both ran the tool twice.

Checked and found holding: the re-request now carries an idempotency key derived from the run's
``conversation_id`` (Pydantic AI 2.78 keeps it across the deferred-tools resume, read from the message history;
``run_id`` is new per run) and the model's ``tool_call_id``; ``direct_call_request`` binds that key to the
request's fingerprint per (tenant, user), so the same request joins the first call and its decision, other
arguments (``ToolApproved(override_args=...)`` without toolhub) are refused with nothing run, and another user
or tenant replaying the same history and ids gets a call of their own (keys are per tenant and user), never
someone else's call, decision or result.
"""

import json
from dataclasses import dataclass, field

import pytest
from django.contrib.auth.models import User
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from approvals.models import ApprovalRequest
from tests.security_review.conftest import client_for
from tests.testapp.models import SideEffect
from toolhub.adapters.pydantic_ai import ToolhubToolset, operator_decisions, pending_approvals
from toolhub.models import AuditEvent, Tenant, TenantMembership, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class OneCall:
    """Calls ``risky_effect`` once with ``note`` (id ``call-1``), then answers with what the tool returned."""

    note: str
    seen: list[str] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart):
                text = part.model_response() if isinstance(part, RetryPromptPart) else part.model_response_str()
                self.seen.append(text)
                return ModelResponse(parts=[TextPart(f"The tool said: {text}")])
        return ModelResponse(parts=[ToolCallPart("risky_effect", {"note": self.note}, tool_call_id="call-1")])


def agent_for(user: User, model: OneCall) -> Agent[None, str | DeferredToolRequests]:
    return Agent(
        FunctionModel(model),
        toolsets=[ToolhubToolset(user=user, tools={"risky_effect"})],
        output_type=[str, DeferredToolRequests],
    )


PYDANTIC_AI_ONLY = DeferredToolResults(approvals={"call-1": True})


@pytest.fixture
def carol(tenant: Tenant) -> User:
    """alice's colleague in acme."""
    user = User.objects.create_user("carol", "carol@example.com", "carol-password")
    TenantMembership.objects.create(user=user, tenant=tenant)
    return user


@pytest.fixture
def bob(other_tenant: Tenant) -> User:
    """A user of another tenant."""
    user = User.objects.create_user("bob", "bob@example.com", "bob-password")
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    return user


def test_a_pydantic_ai_only_approval_joins_the_held_call_and_it_runs_once(alice: User, operator: User) -> None:
    """Found: resuming with ``approvals={"call-1": True}`` and no toolhub metadata made a second toolhub call of
    the same model tool call (two pending approval requests); the operator approving both ran the tool twice.
    Expect: the re-request joins the held call (same call, same approval request, nothing new on the desk); once
    the operator approves it, the resume runs it once and another resume reads its result, never runs it again.
    """
    model = OneCall("order 5 laptops")
    agent = agent_for(alice, model)
    first = agent.run_sync("Record it.")
    [held] = pending_approvals(first.output)

    again = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=PYDANTIC_AI_ONLY)

    assert isinstance(again.output, DeferredToolRequests)
    [still] = pending_approvals(again.output)
    assert (still.call_id, still.approval_id) == (held.call_id, held.approval_id)
    assert ToolCall.objects.count() == 1
    assert ApprovalRequest.objects.count() == 1

    answer = client_for(operator).post(f"/api/v1/approvals/{held.approval_id}/approve/", {}, format="json")
    assert answer.status_code == 200, answer.content
    done = agent.run_sync(message_history=again.all_messages(), deferred_tool_results=PYDANTIC_AI_ONLY)
    once_more = agent.run_sync(message_history=again.all_messages(), deferred_tool_results=PYDANTIC_AI_ONLY)

    effect = SideEffect.objects.get()
    assert done.output == once_more.output == f'The tool said: {{"effect_id":{effect.pk}}}'
    call = ToolCall.objects.get()
    assert call.status == "succeeded"
    assert AuditEvent.objects.filter(call_id=call.pk, event_type="call.succeeded").count() == 1
    assert AuditEvent.objects.filter(event_type="call.requested").count() == 1


def test_a_rejected_call_stays_rejected_when_approved_in_pydantic_ai_alone(alice: User, operator: User) -> None:
    """Found: after an operator rejected the held call, ``approvals={"call-1": True}`` asked toolhub again: a new
    call waited on the desk, so a rejection was only ever one more request away from another chance.
    Expect: the re-request joins the rejected call; the model reads the operator's rejection, nothing runs.
    """
    model = OneCall("delete everything")
    agent = agent_for(alice, model)
    first = agent.run_sync("Record it.")
    [held] = pending_approvals(first.output)
    answer = client_for(operator).post(
        f"/api/v1/approvals/{held.approval_id}/reject/", {"comment": "No."}, format="json"
    )
    assert answer.status_code == 200, answer.content

    again = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=PYDANTIC_AI_ONLY)

    assert json.loads(model.seen[0]) == {"error": "Rejected by operator: No."}
    assert again.output == 'The tool said: {"error":"Rejected by operator: No."}'
    assert ToolCall.objects.get().status == "rejected"
    assert ApprovalRequest.objects.count() == 1
    assert not SideEffect.objects.exists()


def test_other_arguments_under_the_same_tool_call_are_refused_and_run_nothing(alice: User, operator: User) -> None:
    """Found: ``ToolApproved(override_args=...)`` without toolhub's metadata requested a second call with the new
    arguments, next to the first.
    Expect: refused with a bounded message to the model (the call was asked with other arguments); no second call,
    and approving the first runs only its own arguments.
    """
    model = OneCall("as the model wrote it")
    agent = agent_for(alice, model)
    first = agent.run_sync("Record it.")
    [held] = pending_approvals(first.output)

    again = agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"call-1": ToolApproved(override_args={"note": "other"})}),
    )

    error = json.loads(model.seen[0])["error"]
    assert "other arguments" in error and "nothing was run" in error, error
    assert isinstance(again.output, str)
    assert ToolCall.objects.count() == 1
    assert not SideEffect.objects.exists()
    decided = client_for(operator).post(f"/api/v1/approvals/{held.approval_id}/approve/", {}, format="json")
    assert decided.status_code == 200, decided.content
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["as the model wrote it"]


@pytest.mark.parametrize("stranger", ["carol", "bob"])
def test_another_user_replaying_the_history_cannot_join_the_call(
    request: pytest.FixtureRequest, stranger: str, alice: User, operator: User
) -> None:
    """Found (guarded with the fix): the key is derived from ids a client holds (conversation id, tool call id).
    Expect: a colleague (carol) or another tenant's user (bob) replaying alice's history with the same ids gets a
    call of their own, held for an operator; alice's call, its approval and its result are never theirs.
    """
    other: User = request.getfixturevalue(stranger)
    alices = agent_for(alice, OneCall("alice's"))
    first = alices.run_sync("Record it.")
    [held] = pending_approvals(first.output)
    client_for(operator).post(f"/api/v1/approvals/{held.approval_id}/approve/", {}, format="json")
    assert SideEffect.objects.count() == 1

    theirs = agent_for(other, OneCall("alice's")).run_sync(
        message_history=first.all_messages(), deferred_tool_results=PYDANTIC_AI_ONLY
    )

    assert isinstance(theirs.output, DeferredToolRequests)
    [own] = pending_approvals(theirs.output)
    assert own.call_id != held.call_id
    assert ToolCall.objects.get(pk=own.call_id).user_id == other.pk
    assert SideEffect.objects.count() == 1
    assert operator_decisions(first.output, user=alice).results.approvals["call-1"] == ToolApproved()
