"""Review of 2026-12-05 (bg): the framework adapters (Pydantic AI, LangGraph, OpenAI Agents SDK) end to end.

Each test fails on the reviewed code (main at 9fb563c) and states what was found ("Found: ...") and what is
expected ("Expect: ..."). The frameworks run offline with their own libraries, as ``tests/interop`` does.

Findings:

1. OpenAI Agents SDK: a paused run's stored ``RunState`` (``PausedAgentRun.state``) kept the model's tool calls
   in clear, ``sensitive=`` values included (copies of a PIN in the model's response, the generated and session
   items and the interruption), and ``resume_governed`` sent the PIN to the model again; toolhub's own runs keep
   such a value redacted in their messages. Now stored as a run's messages are (``store.redacted_state``), the
   SDK's argument binding of a redacted call computed again by its own function (``sdk._kept_state``).
2. OpenAI Agents SDK: ``run_governed`` / ``resume_governed`` ran the SDK with its default tracing, which exports
   each tool call's arguments and output (``trace_include_sensitive_data`` on by default): a ``sensitive=`` value
   left toolhub in the traces. Now traced without them unless the developer passes a ``run_config``.

Checked and found holding (no test here): the user and tenant of every adapter call come from the toolset, hub
or ``governed_tools`` (``caller_principal``), never from the model or a tool argument; each call is a
``direct_call_request`` (grants, interceptors, approval policy, authorization again on the worker); a call id
carried back by a framework (Pydantic AI metadata, LangGraph thread + tool call id, the SDK's run key + call id)
is read only among the user's own calls in their tenant and of the same tool (``own_call`` / ``call_state``); a
rejected, expired, refused or withdrawn call is never answered as approved (``pause_decision``); an operator's
edit reaches Pydantic AI and LangGraph redacted (``edited_arguments``); a paused SDK run is claimed once, by its
user within their tenants; errors the models read are the call's stored (sanitized) error or toolhub's bounded
messages; bad arguments are an ``invalid`` call with the pipeline's message and nothing runs.

Not fixed (noted): a Pydantic-AI-only approval (``approvals={id: True}`` without toolhub's metadata) requests a
second toolhub call and leaves the first pending, so the operators' queue holds two identical requests for one
model tool call (two calls: each runs if approved).
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from agents import add_trace_processor
from agents.tracing import TracingProcessor
from django.contrib.auth.models import User
from rest_framework.test import APIClient

import tests.interop.openai_agents.test_openai_agents_adapter as openai_agents_suite
from approvals.models import ApprovalRequest
from tests.interop.openai_agents.test_openai_agents_adapter import NO_TRACING, agent_for, run, tool_call
from tests.unit.fake_openai import FakeModel, completion
from toolhub.adapters.openai_agents import resume_governed, run_governed
from toolhub.adapters.openai_agents.models import PausedAgentRun
from toolhub.models import CallStatus, ToolCall
from toolhub.tools.definition import Tool
from toolhub.tools.options import Risk
from toolhub.tools.registry import registry

# The SDK suite's fake OpenAI endpoint.
fake = openai_agents_suite.fake

# The frameworks run tools in threads of their own: committed for real, as in tests/interop/.
pytestmark = pytest.mark.django_db(transaction=True)

PIN = "4471-9920-5531"
unlocked: list[str] = []


def unlock_door(door: str, pin: str) -> str:
    """Unlock a door with its PIN."""
    unlocked.append(pin)
    return f"{door} unlocked"


@pytest.fixture
def door() -> Iterator[Tool]:
    """A high-risk tool (every call waits for an operator) with a sensitive parameter."""
    tool = Tool.from_function(unlock_door, risk=Risk.HIGH, sensitive=("pin",))
    unlocked.clear()
    with registry.temporarily(tool):
        yield tool


def _model_read(fake: FakeModel) -> list[str]:
    return [json.dumps(request["body"]) for request in fake.requests]


def test_a_paused_sdk_run_keeps_no_sensitive_value_and_never_shows_it_to_the_model_again(
    fake: FakeModel, alice: User, operator_client: APIClient, door: Tool
) -> None:
    """Found: ``toolhub/adapters/openai_agents/store.py`` ``paused_run_create`` stored ``RunState.to_json()`` as
    the SDK gives it: the model's tool call, a ``sensitive=("pin",)`` value in clear, five times over, in toolhub's
    database; ``resume_governed`` rebuilt the conversation from it and sent the PIN to the model again.
    Expect: the stored state holds the call as a run's messages do (``***redacted***``), the resumed model never
    reads the PIN, and the approved call still runs once with the real PIN (toolhub's call has it).
    """
    # given a model that asks to unlock a door with its PIN, then answers
    fake.queue(tool_call("unlock_door", {"door": "lab", "pin": PIN}), completion(content="Done."))
    agent = agent_for(fake, alice, "unlock_door")

    # when the run pauses on the call
    outcome = run(run_governed(agent, "open the lab", user=alice, run_config=NO_TRACING))
    assert outcome.paused is not None

    # then the stored run keeps the call, its PIN redacted
    stored = json.dumps(PausedAgentRun.objects.get().state)
    assert PIN not in stored
    assert "***redacted***" in stored

    # when an operator approves and the run resumes
    request = ApprovalRequest.objects.get()
    approved = operator_client.post(f"/api/v1/approvals/{request.pk}/approve/", {}, format="json")
    assert approved.status_code == 200, approved.content
    resumed = run(resume_governed(outcome.paused.pk, agent, user=alice, run_config=NO_TRACING))

    # then the tool ran once with the real PIN, and the model read it only in its own first answer's request
    assert resumed.final_output == "Done."
    assert unlocked == [PIN]
    assert ToolCall.objects.get().status == CallStatus.SUCCEEDED
    assert [PIN in text for text in _model_read(fake)] == [False, False]


class _Spans(TracingProcessor):
    """Keeps what the SDK's trace exporters would send, while ``active``."""

    def __init__(self) -> None:
        self.active = True
        self.exported: list[str] = []

    def on_trace_start(self, trace: Any) -> None:
        pass

    def on_trace_end(self, trace: Any) -> None:
        pass

    def on_span_start(self, span: Any) -> None:
        pass

    def on_span_end(self, span: Any) -> None:
        if self.active:
            self.exported.append(json.dumps(span.export(), default=str))

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


def test_a_governed_sdk_run_exports_no_sensitive_value_in_its_traces(fake: FakeModel, alice: User, door: Tool) -> None:
    """Found: ``toolhub/adapters/openai_agents/sdk.py`` ``run_governed`` ran the SDK with its defaults, which
    export traces (to OpenAI's endpoint) holding each tool call's arguments and output
    (``trace_include_sensitive_data`` on): the model's PIN of a ``sensitive=("pin",)`` parameter went there.
    Expect: a run given no ``run_config`` is traced without the tools' data; the PIN is in no exported span.
    """
    spans = _Spans()
    add_trace_processor(spans)
    try:
        fake.queue(tool_call("unlock_door", {"door": "lab", "pin": PIN}))
        outcome = run(run_governed(agent_for(fake, alice, "unlock_door"), "open the lab", user=alice))
    finally:
        spans.active = False
    assert outcome.paused is not None
    assert spans.exported, "the SDK traced the run"
    assert not any(PIN in span for span in spans.exported)
