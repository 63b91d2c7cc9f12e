"""The agent loop: scripted and OpenAI-compatible models, waiting on approvals, limits and model failures."""

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents_app.models import Agent, AgentRun, ModelProvider, ProviderKind, RunStatus, StopReason
from agents_app.services import agent_create
from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from demo.models import Order
from tests.helpers import assert_audit_intact
from tests.testapp.models import SideEffect
from tests.unit.fake_openai import FakeModel, Reply, completion, serve
from toolhub.models import AuditEvent, CallStatus, ToolCall

pytestmark = pytest.mark.django_db

MakeAgent = Callable[..., Agent]
StartRun = Callable[..., AgentRun]
Settle = Callable[..., Any]

ANSWER_SCRIPT = [
    {"tool_calls": [{"name": "calculate", "arguments": {"a": 6, "op": "*", "b": 7}}]},
    {"content": "The answer is {last_tool_result}."},
]

ORDER_SCRIPT = [
    {"tool_calls": [{"name": "create_order", "arguments": {"product": "Laptop", "amount": "5000"}}]},
    {"content": "Done: {last_tool_result}"},
]


def _calls(run: AgentRun) -> list[ToolCall]:
    return list(ToolCall.objects.filter(run_id=run.id).order_by("turn", "position"))


# --- scripted model ---------------------------------------------------------------------------------


def test_scripted_agent_completes(make_agent: MakeAgent, start_run: StartRun, alice: User) -> None:
    # given
    agent = make_agent("calc", script=ANSWER_SCRIPT, tools=["calculate"], system_prompt="Be exact.")

    # when
    run = start_run(agent, alice, "What is 6 times 7?")

    # then
    assert run.status == RunStatus.COMPLETED
    assert run.stop_reason == StopReason.ANSWERED
    assert run.output == "The answer is 42.0."
    assert (run.tenant, run.turn, run.finished_at is not None) == ("acme", 2, True)
    assert [m["role"] for m in run.messages] == ["system", "user", "assistant", "tool", "assistant"]
    [asked] = run.messages[2]["tool_calls"]
    assert (asked["id"], asked["type"], asked["function"]["name"]) == ("call_1_1", "function", "calculate")
    assert json.loads(asked["function"]["arguments"]) == {"a": 6, "op": "*", "b": 7}
    assert run.messages[3] == {"role": "tool", "tool_call_id": "call_1_1", "content": "42.0"}
    assert run.prompt_tokens > 0 and run.completion_tokens > 0
    [call] = _calls(run)
    assert (call.status, call.result, call.agent_name, call.user_id) == (CallStatus.SUCCEEDED, 42.0, "calc", alice.pk)
    assert call.context["run_id"] == str(run.id)
    assert call.context["tenant"] == "acme"
    assert_audit_intact()


def test_a_bad_call_is_told_to_the_model_and_the_run_goes_on(
    make_agent: MakeAgent, start_run: StartRun, alice: User
) -> None:
    script = [
        {"tool_calls": [{"name": "calculate", "arguments": '{"a": 1, "op": "+",'}]},
        {"tool_calls": [{"name": "calcuate", "arguments": {}}]},
        {"content": "Gave up: {last_tool_result}"},
    ]
    agent = make_agent("clumsy", script=script, tools=["calculate"])

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED
    first, second = _calls(run)
    assert first.status == second.status == CallStatus.INVALID
    tool_messages = [m["content"] for m in run.messages if m["role"] == "tool"]
    assert tool_messages[0].startswith("Arguments are not valid JSON")
    assert tool_messages[1].startswith("Unknown tool 'calcuate'. Did you mean: calculate")
    assert run.output == f"Gave up: {tool_messages[1]}"


def test_a_call_needing_approval_makes_the_run_wait_then_resume(
    make_agent: MakeAgent, start_run: StartRun, alice: User, operator: User, committed: Settle
) -> None:
    # given a run whose model asks for a large order
    agent = make_agent("orders", script=ORDER_SCRIPT, tools=["create_order"])
    run = start_run(agent, alice, "Order a laptop")

    # then it waits, with nothing executed
    assert run.status == RunStatus.WAITING
    [call] = _calls(run)
    assert call.status == CallStatus.PENDING_APPROVAL
    assert Order.objects.count() == 0

    # when an operator approves
    request = ApprovalRequest.objects.get(call=call)
    committed(approval_approve, request_id=request.pk, user=operator)

    # then the call ran once and the run completed
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    order = Order.objects.get()
    assert (order.product, order.amount, order.tenant, order.created_by) == ("Laptop", 5000, "acme", "alice")
    assert '"product": "Laptop"' in run.output
    assert_audit_intact()


def test_one_turn_with_mixed_fates_resumes_once_all_settle(
    make_agent: MakeAgent, start_run: StartRun, alice: User, operator: User, committed: Settle
) -> None:
    script = [
        {
            "tool_calls": [
                {"name": "calculate", "arguments": {"a": 1, "op": "+", "b": 1}},
                {"name": "risky_effect", "arguments": {"note": "careful"}},
                {"name": "nope", "arguments": {}},
            ]
        },
        {"content": "All done."},
    ]
    agent = make_agent("mixed", script=script, tools=["calculate", "risky_effect"])
    run = start_run(agent, alice)
    assert run.status == RunStatus.WAITING

    request = ApprovalRequest.objects.get(call__run_id=run.id)
    committed(approval_approve, request_id=request.pk, user=operator)

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert [c.status for c in _calls(run)] == [CallStatus.SUCCEEDED, CallStatus.SUCCEEDED, CallStatus.INVALID]
    tool_messages = [m for m in run.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_1_1", "call_1_2", "call_1_3"]
    assert tool_messages[0]["content"] == "2.0"
    assert SideEffect.objects.count() == 1


def test_max_tool_calls_is_enforced(make_agent: MakeAgent, start_run: StartRun, alice: User) -> None:
    # given an agent allowed two calls whose model asks for three
    script = [
        {"tool_calls": [{"name": "record_effect", "arguments": {"note": "1"}}]},
        {
            "tool_calls": [
                {"name": "record_effect", "arguments": {"note": "2"}},
                {"name": "record_effect", "arguments": {"note": "3"}},
            ]
        },
        {"content": "never reached"},
    ]
    agent = make_agent("greedy", script=script, tools=["record_effect"], max_tool_calls=2)

    # when
    run = start_run(agent, alice)

    # then the run failed at the limit and nothing beyond it ran
    assert run.status == RunStatus.FAILED
    assert run.stop_reason == StopReason.MAX_TOOL_CALLS
    assert run.retryable is False
    assert "beyond this agent's limit of 2 per run" in run.error
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["1"]
    assert len(_calls(run)) == 1
    # and the trail says why it stopped, in the run's tenant's chain
    failed = AuditEvent.objects.get(run_id=run.id, event_type="run.failed")
    assert (failed.actor, failed.tenant) == ("agent-loop", run.tenant)
    assert failed.payload == {"stop_reason": "max_tool_calls", "error": run.error, "retryable": False}
    assert_audit_intact()


def test_a_scripted_model_out_of_turns_fails_the_run(make_agent: MakeAgent, start_run: StartRun, alice: User) -> None:
    agent = make_agent(
        "short",
        script=[{"tool_calls": [{"name": "calculate", "arguments": {"a": 1, "op": "+", "b": 1}}]}],
        tools=["calculate"],
    )

    run = start_run(agent, alice)

    assert run.status == RunStatus.FAILED
    assert run.stop_reason == StopReason.MODEL_ERROR
    assert run.error == "The scripted model has no turn 2 (the script has 1)."


# --- OpenAI-compatible model ------------------------------------------------------------------------


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    with serve(FakeModel()) as model:
        yield model


def _openai_agent(base_url: str, *, credential_env: str = "", **options: Any) -> Agent:
    """An agent on a provider an administrator configured for the fake endpoint."""
    provider = ModelProvider.objects.create(
        name=f"fake-{ModelProvider.objects.count()}",
        kind=ProviderKind.OPENAI,
        base_url=base_url,
        model_name="test-model",
        credential_env=credential_env,
    )
    return agent_create(
        name=options.pop("name", "gpt"),
        provider=provider.name,
        tools=options.pop("tools", ["calculate"]),
        **options,
    )


def test_openai_adapter_runs_tool_calls_through_the_pipeline(
    fake_model: FakeModel, start_run: StartRun, alice: User
) -> None:
    # given a model that asks for a calculation, then answers
    fake_model.queue(
        completion(tool_calls=[{"id": "call_abc", "name": "calculate", "arguments": '{"a": 6, "op": "*", "b": 7}'}]),
        completion(content="It is 42.", prompt=30, done=4),
    )
    agent = _openai_agent(fake_model.base_url, system_prompt="Use tools.")

    # when
    run = start_run(agent, alice, "6*7?")

    # then the run completed, with the tool's result sent back to the model
    assert run.status == RunStatus.COMPLETED
    assert run.output == "It is 42."
    assert (run.prompt_tokens, run.completion_tokens) == (41, 11)
    first, second = (r["body"] for r in fake_model.requests)
    assert fake_model.requests[0]["path"] == "/v1/chat/completions"
    assert first["model"] == "test-model"
    assert first["messages"] == [{"role": "system", "content": "Use tools."}, {"role": "user", "content": "6*7?"}]
    [definition] = first["tools"]
    assert definition["function"]["name"] == "calculate"
    assert definition["function"]["parameters"]["required"] == ["a", "op", "b"]
    assert "parallel_tool_calls" not in first
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_abc", "content": "42.0"}
    [call] = _calls(run)
    assert (call.model_call_id, call.status) == ("call_abc", CallStatus.SUCCEEDED)


def test_openai_adapter_passes_parallel_tool_calls_off(fake_model: FakeModel, start_run: StartRun, alice: User) -> None:
    fake_model.queue(completion(content="No tools needed."))
    agent = _openai_agent(fake_model.base_url, parallel_tool_calls=False)

    run = start_run(agent, alice)

    assert run.status == RunStatus.COMPLETED
    assert fake_model.requests[0]["body"]["parallel_tool_calls"] is False


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(200, b"this is not json", "text/plain"), "not a chat completion"),
        (Reply(200, b'{"unexpected": true}'), "not a chat completion"),
        (Reply(200, b'{"choices": []}'), "not a chat completion"),
        (Reply(500, b'{"error": {"message": "internal"}}'), "Model endpoint answered HTTP 500"),
        (Reply(401, b'{"error": {"message": "bad key"}}'), "Model endpoint answered HTTP 401"),
    ],
    ids=["garbage", "json-not-completion", "no-choices", "http-500", "http-401"],
)
def test_openai_adapter_failures_fail_the_run_with_a_clear_reason(
    fake_model: FakeModel, start_run: StartRun, alice: User, reply: Reply, reason: str
) -> None:
    fake_model.fallback = reply

    run = start_run(_openai_agent(fake_model.base_url), alice)

    assert run.status == RunStatus.FAILED
    assert run.stop_reason == StopReason.MODEL_ERROR
    assert reason in run.error
    assert run.retryable is True
    assert run.step_lease_until is None
    assert ToolCall.objects.count() == 0


def test_model_text_the_database_cannot_store_is_made_storable(
    fake_model: FakeModel, start_run: StartRun, alice: User
) -> None:
    fake_model.queue(
        completion(
            tool_calls=[{"id": "c\u00001", "name": "calculate", "arguments": '{"a": 1, "op": "+", "b": 1}\u0000'}]
        ),
        completion(content="done\u0000 \ud800"),
    )

    run = start_run(_openai_agent(fake_model.base_url), alice)

    assert run.status == RunStatus.COMPLETED
    assert run.output == "done\\u0000 \\ud800"
    [call] = _calls(run)
    assert call.status == CallStatus.INVALID
    assert "\x00" not in json.dumps(run.messages)


def test_over_long_and_repeated_call_ids_are_kept_matched_to_their_calls(
    fake_model: FakeModel, start_run: StartRun, alice: User
) -> None:
    """Ids longer than a call row holds, or repeated in a turn, get derived ids in the conversation and the rows."""
    long_id = "x" * 150
    fake_model.queue(
        completion(
            tool_calls=[
                {"id": long_id, "name": "calculate", "arguments": '{"a": 1, "op": "+", "b": 1}'},
                {"id": "dup", "name": "calculate", "arguments": '{"a": 2, "op": "+", "b": 2}'},
                {"id": "dup", "name": "calculate", "arguments": '{"a": 3, "op": "+", "b": 3}'},
            ]
        ),
        completion(content="done"),
    )

    run = start_run(_openai_agent(fake_model.base_url), alice)

    assert run.status == RunStatus.COMPLETED, run.error
    asked = [c["id"] for m in run.messages if m.get("tool_calls") for c in m["tool_calls"]]
    answered = [m["tool_call_id"] for m in run.messages if m.get("role") == "tool"]
    rows = [call.model_call_id for call in _calls(run)]
    assert len(set(asked)) == 3 and asked == answered == rows
    assert all(len(call_id) <= 100 for call_id in asked) and asked[1] == "dup"
    # the model was sent the results under the ids of the turn it was sent
    sent = fake_model.requests[-1]["body"]["messages"]
    assert [m["tool_call_id"] for m in sent if m.get("role") == "tool"] == asked


def test_missing_api_key_variable_fails_the_run_without_naming_it(
    fake_model: FakeModel, start_run: StartRun, alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    agent = _openai_agent(fake_model.base_url, credential_env="TOOLHUB_TEST_KEY_THAT_IS_NOT_SET")

    run = start_run(agent, alice)

    assert run.status == RunStatus.FAILED
    assert run.error == f"Model provider {agent.provider.name!r} is not configured; ask an administrator."
    assert "TOOLHUB_TEST_KEY_THAT_IS_NOT_SET" not in json.dumps(run.messages)
    # the detail is for the server log only
    assert "TOOLHUB_TEST_KEY_THAT_IS_NOT_SET" in caplog.text
    assert fake_model.requests == []


def test_model_down_then_retry_over_the_api_once_it_is_back(
    start_run: StartRun, alice: User, alice_client: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    # given a model endpoint that is down (its port refuses connections)
    model = FakeModel()
    with serve(model):
        pass
    agent = _openai_agent(model.base_url)

    # when a run starts
    run = start_run(agent, alice, "hello")

    # then it failed, retryably, saying why
    assert run.status == RunStatus.FAILED
    assert run.stop_reason == StopReason.MODEL_ERROR
    assert run.error.startswith("Model endpoint unreachable")
    assert run.retryable is True
    assert alice_client.get(f"/api/v1/runs/{run.id}/").json()["retryable"] is True

    # when the model is back and the run is retried over the API
    model.queue(completion(content="Hello again."))
    with serve(model), django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(f"/api/v1/runs/{run.id}/retry/")

    # then it completes
    assert response.status_code == 200, response.content
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.output == "Hello again."
    assert run.error == "" and run.retryable is False
    assert [m["role"] for m in run.messages] == ["user", "assistant"]

    # and a finished run cannot be retried
    again = alice_client.post(f"/api/v1/runs/{run.id}/retry/")
    assert again.status_code == 409
    assert "Only a run that failed for a retryable reason can be retried" in again.json()["detail"]
