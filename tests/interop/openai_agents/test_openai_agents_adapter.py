"""The OpenAI Agents SDK adapter, with the real SDK against a local fake OpenAI endpoint (offline).

The SDK runs its tools in threads of its own (``sync_to_async``), so these tests commit for real.
"""

import asyncio
import json
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest
from agents import Agent, OpenAIChatCompletionsModel, RunConfig
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.db import connections
from openai import AsyncOpenAI
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest, ApprovalStatus
from tests.testapp.models import SideEffect
from tests.unit.fake_openai import FakeModel, completion, serve
from toolhub.adapters.openai_agents import (
    RunNotDecidedError,
    governed_tools,
    resume_governed,
    run_context,
    run_governed,
)
from toolhub.adapters.openai_agents.models import PausedAgentRun, PausedRunStatus
from toolhub.adapters.openai_agents.store import AdapterError, paused_runs_ready
from toolhub.models import AuditEvent, CallStatus, Tenant, TenantMembership, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

T = TypeVar("T")
NO_TRACING = RunConfig(tracing_disabled=True)


def run(awaitable: Awaitable[T]) -> T:
    """Run the SDK's coroutine, then close the connections its worker thread opened."""

    async def main() -> T:
        try:
            return await awaitable
        finally:
            await sync_to_async(connections.close_all)()

    return asyncio.run(main())


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    with serve(FakeModel()) as model:
        yield model


def agent_for(fake: FakeModel, user: User, *names: str) -> Agent[Any]:
    model = OpenAIChatCompletionsModel(
        model="test-model", openai_client=AsyncOpenAI(base_url=fake.base_url, api_key="test-key", max_retries=0)
    )
    return Agent(name="clerk", instructions="Help.", model=model, tools=governed_tools(user=user, names=list(names)))


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> Any:
    return completion(tool_calls=[{"id": call_id, "name": name, "arguments": json.dumps(arguments)}])


def tool_messages(fake: FakeModel) -> list[str]:
    return [m["content"] for r in fake.requests for m in r["body"]["messages"] if m.get("role") == "tool"]


def events_of(call: ToolCall) -> list[tuple[str, str]]:
    return list(AuditEvent.objects.filter(call_id=call.pk).order_by("seq").values_list("event_type", "actor"))


def test_a_high_risk_call_pauses_then_runs_once_with_the_operators_edit(
    fake: FakeModel, alice: User, operator_client: APIClient
) -> None:
    # given a model that calls the high-risk tool, then answers
    fake.queue(tool_call("risky_effect", {"note": "original"}), completion(content="Recorded."))
    agent = agent_for(fake, alice, "risky_effect")

    # when the run pauses
    outcome = run(run_governed(agent, "record it", user=alice, run_config=NO_TRACING))

    # then nothing ran; the operators see the call with its arguments and requester
    assert outcome.paused is not None and outcome.final_output is None
    assert [i.tool_name for i in outcome.result.interruptions] == ["risky_effect"]
    call = ToolCall.objects.get()
    assert (call.status, call.arguments, call.tenant) == (CallStatus.PENDING_APPROVAL, {"note": "original"}, "acme")
    assert SideEffect.objects.count() == 0
    request = ApprovalRequest.objects.get(call=call)
    listed = operator_client.get(f"/api/v1/approvals/{request.pk}/").json()
    assert (listed["tool_name"], listed["arguments"], listed["requested_by"]) == (
        "risky_effect",
        {"note": "original"},
        "alice",
    )
    # and resuming before the decision is refused, nothing run
    with pytest.raises(RunNotDecidedError, match="Still waiting"):
        run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=NO_TRACING))
    assert PausedAgentRun.objects.get().status == PausedRunStatus.PAUSED

    # when the operator approves with edited arguments through the API, and the run resumes
    approved = operator_client.post(
        f"/api/v1/approvals/{request.pk}/approve/", {"arguments": {"note": "edited"}}, format="json"
    )
    assert approved.status_code == 200, approved.content
    assert [run.pk for run in paused_runs_ready(user=alice)] == [outcome.paused.pk]
    resumed = run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=NO_TRACING))

    # then the tool ran once, with the edited arguments, and the model got its result
    assert resumed.paused is None and resumed.final_output == "Recorded."
    call.refresh_from_db()
    assert (call.status, call.arguments) == (CallStatus.SUCCEEDED, {"note": "edited"})
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["edited"]
    assert ToolCall.objects.count() == 1
    effect_id = SideEffect.objects.get().pk
    assert json.loads(tool_messages(fake)[-1]) == {"effect_id": effect_id}
    # and the audit trail names the approver and the run's pause and resume
    events = events_of(call)
    assert ("approval.edit", "operator:operator") in events
    kinds = [kind for kind, _ in events]
    # (toolhub runs the call on the operator's decision; the resumed SDK run reads its result)
    assert kinds.index("openai_agents.paused") < kinds.index("approval.edit") < kinds.index("call.succeeded")
    assert kinds.index("call.succeeded") < kinds.index("openai_agents.resumed")
    assert PausedAgentRun.objects.get().status == PausedRunStatus.RESUMED
    # and a paused run resumes once
    with pytest.raises(AdapterError, match="No paused run"):
        run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=NO_TRACING))


def test_a_rejection_reaches_the_model_as_the_operators_comment(
    fake: FakeModel, alice: User, operator_client: APIClient
) -> None:
    fake.queue(tool_call("risky_effect", {"note": "wire money"}), completion(content="Understood."))
    agent = agent_for(fake, alice, "risky_effect")
    outcome = run(run_governed(agent, "do it", user=alice, run_config=NO_TRACING))
    assert outcome.paused is not None
    request = ApprovalRequest.objects.get()

    rejected = operator_client.post(
        f"/api/v1/approvals/{request.pk}/reject/", {"comment": "not without a ticket"}, format="json"
    )
    assert rejected.status_code == 200, rejected.content
    resumed = run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=NO_TRACING))

    assert resumed.final_output == "Understood."
    assert tool_messages(fake) == ["Rejected by operator: not without a ticket"]
    assert ApprovalRequest.objects.get().status == ApprovalStatus.REJECTED
    assert ToolCall.objects.get().status == CallStatus.REJECTED
    assert SideEffect.objects.count() == 0


def test_a_withdrawn_call_is_rejected_in_the_sdk_with_its_reason(
    fake: FakeModel, alice: User, alice_client: APIClient
) -> None:
    """Withdrawn by its requester is no approval (no operator decided): the SDK rejects it, the model reads why."""
    fake.queue(tool_call("risky_effect", {"note": "wire money"}), completion(content="Understood."))
    agent = agent_for(fake, alice, "risky_effect")
    outcome = run(run_governed(agent, "do it", user=alice, run_config=NO_TRACING))
    assert outcome.paused is not None
    call = ToolCall.objects.get()
    cancelled = alice_client.post(f"/api/v1/calls/{call.pk}/cancel/", {"reason": "duplicate"}, format="json")
    assert cancelled.status_code == 200, cancelled.content

    resumed = run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=NO_TRACING))

    assert resumed.final_output == "Understood."
    assert tool_messages(fake) == ["Not executed: cancelled by user:alice: duplicate"]
    resumed_event = AuditEvent.objects.get(call_id=call.pk, event_type="openai_agents.resumed")
    assert resumed_event.payload["decision"] == "reject"
    assert SideEffect.objects.count() == 0


def test_a_low_risk_call_runs_without_interruption_and_is_audited(fake: FakeModel, alice: User) -> None:
    fake.queue(tool_call("record_effect", {"note": "hello"}), completion(content="Done."))
    agent = agent_for(fake, alice, "record_effect")

    outcome = run(run_governed(agent, "note it", user=alice, run_config=NO_TRACING))

    assert outcome.paused is None and outcome.final_output == "Done."
    call = ToolCall.objects.get()
    assert (call.tool_name, call.status, call.arguments, call.user_id) == (
        "record_effect",
        CallStatus.SUCCEEDED,
        {"note": "hello"},
        alice.pk,
    )
    kinds = [kind for kind, _ in events_of(call)]
    assert kinds[0] == "call.requested" and kinds[-1] == "call.succeeded"
    assert ("call.requested", "user:alice") in events_of(call)
    assert SideEffect.objects.count() == 1
    assert json.loads(tool_messages(fake)[0]) == {"effect_id": SideEffect.objects.get().pk}
    assert PausedAgentRun.objects.count() == 0


def test_invalid_arguments_are_refused_by_toolhub_and_told_to_the_model(fake: FakeModel, alice: User) -> None:
    fake.queue(tool_call("record_effect", {"note": 7}), completion(content="Sorry."))
    agent = agent_for(fake, alice, "record_effect")

    outcome = run(run_governed(agent, "note it", user=alice, run_config=NO_TRACING))

    assert outcome.final_output == "Sorry."
    call = ToolCall.objects.get()
    assert call.status == CallStatus.INVALID
    assert SideEffect.objects.count() == 0
    assert "note" in tool_messages(fake)[0]


def test_tools_the_user_may_not_call_are_refused(alice: User) -> None:
    with pytest.raises(AdapterError, match="Not available to alice: no_such_tool"):
        governed_tools(user=alice, names=["no_such_tool"])


def test_the_run_needs_its_toolhub_key(fake: FakeModel, alice: User) -> None:
    from agents import Runner
    from agents.exceptions import UserError

    fake.queue(tool_call("record_effect", {"note": "x"}))
    agent = agent_for(fake, alice, "record_effect")

    # the SDK wraps the tool's error in its own
    with pytest.raises(UserError, match="Run the agent with context=run_context"):
        run(Runner.run(agent, "go", run_config=NO_TRACING))
    assert ToolCall.objects.count() == 0
    assert "toolhub_run" in run_context()


def test_another_tenants_user_neither_sees_nor_resumes_the_paused_run(
    fake: FakeModel, alice: User, operator_client: APIClient
) -> None:
    fake.queue(tool_call("risky_effect", {"note": "x"}))
    agent = agent_for(fake, alice, "risky_effect")
    outcome = run(run_governed(agent, "go", user=alice, run_config=NO_TRACING))
    assert outcome.paused is not None
    operator_client.post(f"/api/v1/approvals/{ApprovalRequest.objects.get().pk}/approve/", {}, format="json")
    globex, _ = Tenant.objects.get_or_create(slug="globex", defaults={"name": "Globex"})
    mallory = User.objects.create_user("mallory", "m@example.com", "mallory-password")
    TenantMembership.objects.create(user=mallory, tenant=globex)

    assert paused_runs_ready(user=mallory) == []
    with pytest.raises(AdapterError, match="No paused run"):
        run(resume_governed(outcome.paused.pk, agent, user=mallory, run_config=NO_TRACING))
    assert PausedAgentRun.objects.get().status == PausedRunStatus.PAUSED


def test_a_low_and_a_high_risk_call_in_one_turn_each_run_once_across_pause_and_resume(
    fake: FakeModel, alice: User, operator_client: APIClient
) -> None:
    both = completion(
        tool_calls=[
            {"id": "call_low", "name": "record_effect", "arguments": json.dumps({"note": "low"})},
            {"id": "call_high", "name": "risky_effect", "arguments": json.dumps({"note": "high"})},
        ]
    )
    fake.queue(both, completion(content="Both done."))
    agent = agent_for(fake, alice, "record_effect", "risky_effect")
    outcome = run(run_governed(agent, "do both", user=alice, run_config=NO_TRACING))
    assert outcome.paused is not None and [i.tool_name for i in outcome.result.interruptions] == ["risky_effect"]
    operator_client.post(f"/api/v1/approvals/{ApprovalRequest.objects.get().pk}/approve/", {}, format="json")

    resumed = run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=NO_TRACING))

    assert resumed.final_output == "Both done."
    assert sorted(SideEffect.objects.values_list("note", flat=True)) == ["high", "low"]
    assert sorted(ToolCall.objects.values_list("tool_name", "status")) == [
        ("record_effect", CallStatus.SUCCEEDED),
        ("risky_effect", CallStatus.SUCCEEDED),
    ]


def test_a_resume_that_fails_gives_the_run_back_and_runs_nothing_twice(
    fake: FakeModel, alice: User, operator_client: APIClient
) -> None:
    fake.queue(tool_call("risky_effect", {"note": "once"}))  # then the endpoint fails (no reply queued)
    agent = agent_for(fake, alice, "risky_effect")
    outcome = run(run_governed(agent, "go", user=alice, run_config=NO_TRACING))
    assert outcome.paused is not None
    operator_client.post(f"/api/v1/approvals/{ApprovalRequest.objects.get().pk}/approve/", {}, format="json")

    with pytest.raises(Exception, match="no reply queued"):
        run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=NO_TRACING))
    assert PausedAgentRun.objects.get().status == PausedRunStatus.PAUSED

    fake.queue(completion(content="Finally."))
    resumed = run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=NO_TRACING))
    assert resumed.final_output == "Finally."
    assert SideEffect.objects.count() == 1 and ToolCall.objects.count() == 1


def test_the_admin_lists_paused_runs_of_the_users_tenants_only(fake: FakeModel, alice: User) -> None:
    from django.contrib.auth.models import Permission
    from django.test import Client

    fake.queue(tool_call("risky_effect", {"note": "x"}))
    prompt = "please order the blue widgets"
    run(run_governed(agent_for(fake, alice, "risky_effect"), prompt, user=alice, run_config=NO_TRACING))
    paused = PausedAgentRun.objects.get()
    globex, _ = Tenant.objects.get_or_create(slug="globex", defaults={"name": "Globex"})
    view = Permission.objects.get(codename="view_pausedagentrun")
    staff = {}
    for name, tenant in (("acme_staff", paused.tenant), ("globex_staff", globex.slug)):
        user = User.objects.create_user(name, f"{name}@example.com", "pw", is_staff=True)
        user.user_permissions.add(view)
        TenantMembership.objects.create(user=user, tenant=Tenant.objects.get(slug=tenant))
        client = Client()
        client.force_login(user)
        staff[name] = client
    url = "/admin/openai_agents_adapter/pausedagentrun/"

    mine, theirs = staff["acme_staff"].get(url), staff["globex_staff"].get(url)

    assert mine.status_code == theirs.status_code == 200
    assert str(paused.pk) in mine.content.decode()
    assert str(paused.pk) not in theirs.content.decode()
    assert staff["globex_staff"].get(f"{url}{paused.pk}/change/").status_code == 302  # not found: back to the list
    detail = staff["acme_staff"].get(f"{url}{paused.pk}/change/")
    assert detail.status_code == 200 and str(ToolCall.objects.get().pk) in detail.content.decode()
    assert prompt not in detail.content.decode()  # the stored conversation stays out of the admin


def test_approving_in_the_sdk_alone_runs_nothing(fake: FakeModel, alice: User) -> None:
    from agents import Runner

    fake.queue(tool_call("risky_effect", {"note": "sneaky"}), completion(content="Ok."))
    agent = agent_for(fake, alice, "risky_effect")
    outcome = run(run_governed(agent, "go", user=alice, run_config=NO_TRACING))
    state = outcome.result.to_state()
    for item in state.get_interruptions():
        state.approve(item)  # the SDK's own approval, bypassing toolhub's operators

    result = run(Runner.run(agent, state, run_config=NO_TRACING))

    assert result.final_output == "Ok."
    assert "waiting for an operator's approval in toolhub; it has not run" in tool_messages(fake)[-1]
    assert ToolCall.objects.get().status == CallStatus.PENDING_APPROVAL
    assert SideEffect.objects.count() == 0


def test_a_call_id_taken_by_another_tool_or_user_is_refused_never_joined(alice: User, viewer: User) -> None:
    """The adapter derives a toolhub call id from the run key and the SDK's call id, both of the client's choosing.

    A second run given the same key (a model reusing call ids) that asks another tool under a taken id must
    not be answered with the first tool's call; another user's request under the same id must not crash on the
    taken row. Both are refused with the adapter's error, and nothing more runs (as LangGraph's bridge does).
    """
    from toolhub.adapters.openai_agents.store import governed_call

    first = governed_call(
        user=alice, tenant=None, run_key="k1", tool_name="record_effect", sdk_call_id="call_1", arguments={"note": "a"}
    )
    assert first.tool_name == "record_effect"
    effects, calls = SideEffect.objects.count(), ToolCall.objects.count()

    with pytest.raises(AdapterError, match="taken by another call"):
        governed_call(
            user=alice,
            tenant=None,
            run_key="k1",
            tool_name="risky_effect",
            sdk_call_id="call_1",
            arguments={"note": "b"},
        )
    with pytest.raises(AdapterError, match="taken by another call"):
        governed_call(
            user=viewer,
            tenant=None,
            run_key="k1",
            tool_name="record_effect",
            sdk_call_id="call_1",
            arguments={"note": "c"},
        )

    # the same request again is the same call (pause and resume reach one row)
    again = governed_call(
        user=alice, tenant=None, run_key="k1", tool_name="record_effect", sdk_call_id="call_1", arguments={"note": "a"}
    )
    assert again.pk == first.pk
    assert (SideEffect.objects.count(), ToolCall.objects.count()) == (effects, calls)
