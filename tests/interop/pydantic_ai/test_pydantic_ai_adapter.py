"""The Pydantic AI adapter with the real library offline: its ``FunctionModel`` plays the model.

The run's tool calls go through toolhub's governed pipeline in a worker thread (Celery is eager), so
the database is committed for real and both threads see the rows.
"""

import json
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import anyio
import pytest
from django.contrib.auth.models import User
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from tests.testapp.models import SideEffect
from toolhub.adapters.pydantic_ai import (
    ToolhubDeferralError,
    ToolhubToolset,
    aoperator_decisions,
    operator_decisions,
    pending_approvals,
)
from toolhub.celery import app as celery_app
from toolhub.direct import CallerContextError
from toolhub.execution import tool_call_execute
from toolhub.interceptors import InterceptedCall, Interceptor
from toolhub.models import AuditEvent, Grant, ToolCall
from toolhub.tasks import execute_tool_call_task

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class ScriptedModel:
    """Calls ``tool`` with ``arguments`` (then with ``retry_with``, if given), answers with what the tool returned.

    Records what it read of each tool result in ``seen``.
    """

    tool: str
    arguments: dict[str, Any]
    retry_with: dict[str, Any] | None = None
    seen: list[str] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart):
                text = part.model_response() if isinstance(part, RetryPromptPart) else part.model_response_str()
                self.seen.append(text)
                if self.retry_with is not None and len(self.seen) == 1:
                    return ModelResponse(parts=[ToolCallPart(self.tool, self.retry_with, tool_call_id="call-2")])
                return ModelResponse(parts=[TextPart(f"The tool said: {text}")])
        return ModelResponse(parts=[ToolCallPart(self.tool, self.arguments, tool_call_id="call-1")])


def agent_for(user: User, model: ScriptedModel, **options: Any) -> Agent[None, str | DeferredToolRequests]:
    return Agent(
        FunctionModel(model),
        toolsets=[ToolhubToolset(user=user, tools={"record_effect", "risky_effect"}, **options)],
        output_type=[str, DeferredToolRequests],
    )


def client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_high_risk_call_pauses_the_run_then_runs_once_with_the_operators_edited_arguments(
    alice: User, operator: User
) -> None:
    model = ScriptedModel("risky_effect", {"note": "as the model wrote it"})
    agent = agent_for(alice, model)

    first = agent.run_sync("Record it.")

    assert isinstance(first.output, DeferredToolRequests)
    [pending] = pending_approvals(first.output)
    request = ApprovalRequest.objects.get(pk=pending.approval_id)
    assert (request.tool_name, request.requested_by, request.arguments) == (
        "risky_effect",
        alice,
        {"note": "as the model wrote it"},
    )
    assert str(request.call_id) == pending.call_id
    assert not SideEffect.objects.exists()
    undecided = operator_decisions(first.output, user=alice)
    assert (undecided.complete, undecided.pending) == (False, ("call-1",))

    answer = client_for(operator).post(
        f"/api/v1/approvals/{request.pk}/approve/",
        {"arguments": {"note": "as the operator edited it"}, "comment": "tidier"},
        format="json",
    )
    assert answer.status_code == 200, answer.content
    decisions = operator_decisions(first.output, user=alice)
    assert decisions.complete
    assert decisions.results.approvals["call-1"] == ToolApproved(override_args={"note": "as the operator edited it"})
    assert decisions.results.answered_by == {"call-1": "operator:operator"}

    resumed = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=decisions.results)

    effect = SideEffect.objects.get()
    assert effect.note == "as the operator edited it"
    assert resumed.output == f'The tool said: {{"effect_id":{effect.pk}}}'
    call = ToolCall.objects.get()
    assert (call.status, call.kind, call.user_id, call.arguments) == (
        "succeeded",
        "api",
        alice.pk,
        {"note": "as the operator edited it"},
    )
    events = list(AuditEvent.objects.filter(call_id=call.pk).values_list("event_type", "actor"))
    assert ("approval.edit", "operator:operator") in events
    assert [event for event, _ in events].count("call.succeeded") == 1


def test_a_rejection_reaches_the_model_as_the_operators_comment(alice: User, operator: User) -> None:
    model = ScriptedModel("risky_effect", {"note": "delete everything"})
    agent = agent_for(alice, model)
    first = agent.run_sync("Record it.")
    [pending] = pending_approvals(first.output)

    answer = client_for(operator).post(
        f"/api/v1/approvals/{pending.approval_id}/reject/", {"comment": "Not on a Friday."}, format="json"
    )
    assert answer.status_code == 200, answer.content
    decisions = operator_decisions(first.output, user=alice)
    resumed = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=decisions.results)

    assert decisions.results.approvals == {"call-1": ToolDenied("Rejected by operator: Not on a Friday.")}
    assert model.seen == ["Rejected by operator: Not on a Friday."]
    assert resumed.output == "The tool said: Rejected by operator: Not on a Friday."
    assert not SideEffect.objects.exists()
    assert ToolCall.objects.get().status == "rejected"


def test_a_low_risk_call_runs_directly_and_is_audited(alice: User) -> None:
    model = ScriptedModel("record_effect", {"note": "harmless"})

    result = agent_for(alice, model).run_sync("Record it.")

    effect = SideEffect.objects.get()
    assert result.output == f'The tool said: {{"effect_id":{effect.pk}}}'
    call = ToolCall.objects.get()
    assert (call.status, call.tool_name, call.user_id, call.tenant) == ("succeeded", "record_effect", alice.pk, "acme")
    requested = AuditEvent.objects.get(call_id=call.pk, event_type="call.requested")
    assert requested.payload["client"] == {"channel": "pydantic-ai", "tool_call_id": "call-1"}
    assert AuditEvent.objects.filter(call_id=call.pk, event_type="call.succeeded").count() == 1


def test_only_the_users_granted_tools_are_offered(settings: Any, alice: User) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    Grant.objects.create(tool_name="record_effect", user=alice)
    offered: list[str] = []

    def look(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.extend(tool.name for tool in info.function_tools)
        return ModelResponse(parts=[TextPart("done")])

    Agent(FunctionModel(look), toolsets=[ToolhubToolset(user=alice)]).run_sync("What can you do?")

    assert offered == ["record_effect"]


def test_an_approval_given_to_pydantic_ai_alone_approves_nothing_and_joins_the_held_call(alice: User) -> None:
    agent = agent_for(alice, ScriptedModel("risky_effect", {"note": "sneaky"}))
    first = agent.run_sync("Record it.")

    again = agent.run_sync(
        message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={"call-1": True})
    )

    assert isinstance(again.output, DeferredToolRequests)
    assert not SideEffect.objects.exists()
    assert pending_approvals(again.output) == pending_approvals(first.output)  # the same call, not a second one
    assert ToolCall.objects.filter(status="pending_approval").count() == 1


def test_a_forged_call_id_runs_nothing_and_tells_the_model(alice: User, operator: User, bob: User) -> None:
    bobs = agent_for(bob, ScriptedModel("risky_effect", {"note": "bob's"})).run_sync("Record it.")
    [bobs_pending] = pending_approvals(bobs.output)
    client_for(operator).post(f"/api/v1/approvals/{bobs_pending.approval_id}/reject/", {}, format="json")
    model = ScriptedModel("risky_effect", {"note": "alice's"})
    agent = agent_for(alice, model)
    first = agent.run_sync("Record it.")
    forged = DeferredToolResults(
        approvals={"call-1": True}, metadata={"call-1": {"toolhub": {"call_id": bobs_pending.call_id}}}
    )

    resumed = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=forged)

    assert json.loads(model.seen[0]) == {
        "error": f"There is no call {bobs_pending.call_id} of risky_effect among yours; ask for the call again."
    }
    assert "no call" in resumed.output
    assert not SideEffect.objects.exists()
    with pytest.raises(ToolhubDeferralError, match="among yours"):
        operator_decisions(bobs.output, user=alice)


def test_a_deferral_from_another_toolset_is_refused(alice: User) -> None:
    requests = DeferredToolRequests(approvals=[ToolCallPart("risky_effect", {"note": "x"}, tool_call_id="c")])

    with pytest.raises(ToolhubDeferralError, match="not a toolhub call"):
        operator_decisions(requests, user=alice)


def test_invalid_arguments_are_sent_back_to_the_model_and_nothing_runs(alice: User) -> None:
    model = ScriptedModel("record_effect", {"nope": 1}, retry_with={"note": "fixed"})

    result = agent_for(alice, model).run_sync("Record it.")

    assert json.loads(model.seen[0])["error"] == (
        "Invalid arguments for tool 'record_effect'; nothing was executed. Fix these and call again:\n"
        "- note: Field required\n- nope: Extra inputs are not permitted"
    )
    assert ToolCall.objects.filter(status="invalid").count() == 1
    effect = SideEffect.objects.get()
    assert effect.note == "fixed"
    assert result.output == f'The tool said: {{"effect_id":{effect.pk}}}'


def test_async_code_resumes_with_an_approval_as_requested(alice: User, operator: User) -> None:
    model = ScriptedModel("risky_effect", {"note": "as is"})
    agent = agent_for(alice, model)

    async def first_run() -> Any:
        return await agent.run("Record it.")

    first = anyio.run(first_run)
    [pending] = pending_approvals(first.output)
    client_for(operator).post(f"/api/v1/approvals/{pending.approval_id}/approve/", {}, format="json")

    async def resume() -> tuple[Any, Any]:
        decisions = await aoperator_decisions(first.output, user=alice)
        resumed = await agent.run(message_history=first.all_messages(), deferred_tool_results=decisions.results)
        return decisions, resumed

    decisions, resumed = anyio.run(resume)

    assert decisions.results.approvals == {"call-1": ToolApproved()}
    assert decisions.results.answered_by == {"call-1": "operator:operator"}
    effect = SideEffect.objects.get()
    assert (effect.note, resumed.output) == ("as is", f'The tool said: {{"effect_id":{effect.pk}}}')


def test_a_call_still_queued_is_deferred_and_its_result_is_handed_over_later(alice: User) -> None:
    model = ScriptedModel("record_effect", {"note": "later"})
    agent = agent_for(alice, model, wait_seconds=0)
    # Dispatched to a worker (not eagerly), and no worker takes it: the call stays queued.
    celery_app.conf.task_always_eager = False  # the autouse _celery_mode fixture restores it
    with mock.patch.object(execute_tool_call_task, "delay") as sent:
        first = agent.run_sync("Record it.")
    celery_app.conf.task_always_eager = True

    sent.assert_called_once()

    assert isinstance(first.output, DeferredToolRequests)
    assert [part.tool_call_id for part in first.output.calls] == ["call-1"]
    assert operator_decisions(first.output, user=alice).pending == ("call-1",)
    call = ToolCall.objects.get()
    assert call.status == "queued"

    tool_call_execute(call_id=call.pk, worker="test")
    decisions = operator_decisions(first.output, user=alice)
    resumed = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=decisions.results)

    effect = SideEffect.objects.get()
    assert decisions.results.calls == {"call-1": {"effect_id": effect.pk}}
    assert resumed.output == f'The tool said: {{"effect_id":{effect.pk}}}'


def test_context_the_client_may_not_set_is_refused_before_anything_is_recorded(alice: User) -> None:
    agent = agent_for(alice, ScriptedModel("record_effect", {"note": "x"}), context={"tenant": "globex"})

    with pytest.raises(CallerContextError, match="set by toolhub from your authentication"):
        agent.run_sync("Record it.")

    assert not ToolCall.objects.exists()
    assert not SideEffect.objects.exists()


class Tagger(Interceptor):
    """Appends a tag to ``note``: a rewrite of toolhub's, never the model's nor an operator's."""

    name = "tagger"

    def before(self, call: InterceptedCall) -> dict[str, Any] | None:
        return {**call.arguments, "note": f"{call.arguments['note']}|tagged"} if "note" in call.arguments else None


def test_an_interceptors_rewrite_is_no_override(alice: User, operator: User, settings: Any) -> None:
    """Only an operator's edit becomes ``override_args``: approved as is, the call is ``ToolApproved()``."""
    settings.TOOLHUB = {**settings.TOOLHUB, "INTERCEPTORS": [f"{__name__}.Tagger"]}
    model = ScriptedModel("risky_effect", {"note": "as the model wrote it"})
    agent = agent_for(alice, model)
    first = agent.run_sync("Record it.")
    assert isinstance(first.output, DeferredToolRequests)
    client_for(operator).post(f"/api/v1/approvals/{ApprovalRequest.objects.get().pk}/approve/", {}, format="json")

    decisions = operator_decisions(first.output, user=alice, wait_seconds=5)

    assert decisions.results.approvals["call-1"] == ToolApproved(override_args=None)
    resumed = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=decisions.results)
    effect = SideEffect.objects.get()
    assert effect.note == "as the model wrote it|tagged"
    assert resumed.output == f'The tool said: {{"effect_id":{effect.pk}}}'
