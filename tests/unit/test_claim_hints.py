"""A queued call's message carries a claim hint: the worker claims without reading the call first.

The claim's UPDATE returns the row and moves it only while the row still holds what the hint says (tool,
tenant, run, attempt), which is what the claim's audit event is hashed with; a hint that no longer holds
claims nothing under it, and the worker reads the call as it would without one.
"""

import dataclasses
import json
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents_app.models import Agent, AgentRun
from agents_app.selectors import agent_tools, run_call_agent_tools, run_call_agent_tools_sql
from tests.helpers import for_a_worker, principal_for
from tests.testapp.models import SideEffect
from toolhub.audit_verify import verify_audit_chains
from toolhub.calls import CALL_TABLE
from toolhub.claims import ClaimHint, tool_call_claim
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tasks import execute_tool_call_task
from toolhub.tools.context import ToolContext

pytestmark = pytest.mark.django_db

TABLE = CALL_TABLE


@pytest.fixture
def queued(
    alice: User, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> tuple[ToolCall, list[Any]]:
    """A low-risk call queued for a worker, and the hint its message carries."""
    sent: list[Any] = []
    monkeypatch.setattr(execute_tool_call_task, "delay", lambda call_id, hint=None: sent.append(hint))
    request = CallRequest(
        tool_name="record_effect",
        arguments={"note": "queued"},
        principal=principal_for(alice, tenant="acme"),
        context=ToolContext({"tenant": "acme", "user": alice.username, "user_id": alice.pk}),
    )
    with for_a_worker(), django_capture_on_commit_callbacks(execute=True):
        call = tool_call_request(request=request)
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.QUEUED
    return call, sent


def _call_reads(statements: list[dict[str, Any]]) -> list[str]:
    return [
        query["sql"] for query in statements if query["sql"].startswith("SELECT") and "toolhub_toolcall" in query["sql"]
    ]


def _claim_event(call_id: uuid.UUID) -> AuditEvent:
    return AuditEvent.objects.get(call_id=call_id, event_type="call.running")


def test_the_message_carries_the_queued_calls_hint(queued: tuple[ToolCall, list[Any]]) -> None:
    call, sent = queued
    assert sent == [["record_effect", "acme", None, 0]]
    assert ClaimHint.from_message(sent[0]) == ClaimHint("record_effect", "acme", None, 0)


@pytest.mark.postgres
def test_a_hinted_claim_reads_no_call_and_returns_the_row_as_a_read_would(
    queued: tuple[ToolCall, list[Any]],
) -> None:
    # given a queued call and its message's hint
    call, sent = queued

    # when a worker claims it under the hint
    with CaptureQueriesContext(connection) as captured:
        claimed = tool_call_claim(call_id=call.pk, worker="w1", hint=ClaimHint.from_message(sent[0]))

    # then one statement claimed it, with no read of the call, and the instance is the row as stored
    assert claimed is not None
    assert _call_reads(captured.captured_queries) == []
    assert len(captured.captured_queries) == 1
    stored = ToolCall.objects.get(pk=call.pk)
    names = [field.attname for field in ToolCall._meta.concrete_fields]
    assert {name: getattr(claimed, name) for name in names} == {name: getattr(stored, name) for name in names}
    assert stored.status == CallStatus.RUNNING and stored.attempts == 1 and stored.worker == "w1"
    assert json.loads(_claim_event(call.pk).data) == {"attempt": 1}
    assert verify_audit_chains()[1] == []


@pytest.mark.postgres
def test_the_hinted_delivery_runs_the_call_once(queued: tuple[ToolCall, list[Any]]) -> None:
    call, sent = queued

    # when the message is delivered twice
    execute_tool_call_task(str(call.pk), hint=sent[0])
    execute_tool_call_task(str(call.pk), hint=sent[0])

    # then the tool ran once, and the trail verifies
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED and call.attempts == 1
    assert SideEffect.objects.filter(call_id=str(call.pk)).count() == 1
    assert [event.event_type for event in AuditEvent.objects.filter(call_id=call.pk).order_by("seq")] == [
        "call.requested",
        "call.queued",
        "call.running",
        "call.succeeded",
    ]
    assert verify_audit_chains()[1] == []


@pytest.mark.parametrize(
    "wrong",
    [
        {"attempts": 1},
        {"tool_name": "slow_effect"},
        {"tenant": "globex"},
        {"run_id": uuid.uuid4()},
    ],
    ids=["attempt", "tool", "tenant", "run"],
)
def test_a_hint_that_does_not_hold_claims_the_call_as_it_is(
    queued: tuple[ToolCall, list[Any]], wrong: dict[str, Any]
) -> None:
    # given a hint that says something else of the call than its row
    call, sent = queued
    sent_hint = ClaimHint.from_message(sent[0])
    assert sent_hint is not None
    hint = dataclasses.replace(sent_hint, **wrong)

    # when a worker claims under it
    claimed = tool_call_claim(call_id=call.pk, worker="w1", hint=hint)

    # then the call is claimed once, as the row says, and the claim's event records the row's values
    assert claimed is not None
    assert (claimed.tool_name, claimed.tenant, claimed.run_id, claimed.attempts) == ("record_effect", "acme", None, 1)
    event = _claim_event(call.pk)
    assert (event.tool_name, event.tenant, event.run_id) == ("record_effect", "acme", None)
    assert json.loads(event.data) == {"attempt": 1}
    assert AuditEvent.objects.filter(call_id=call.pk, event_type="call.running").count() == 1
    assert verify_audit_chains()[1] == []


def test_a_hinted_claim_of_a_call_already_claimed_takes_nothing(queued: tuple[ToolCall, list[Any]]) -> None:
    call, sent = queued
    hint = ClaimHint.from_message(sent[0])
    assert tool_call_claim(call_id=call.pk, worker="w1", hint=hint) is not None

    assert tool_call_claim(call_id=call.pk, worker="w2", hint=hint) is None
    assert ToolCall.objects.get(pk=call.pk).worker == "w1"
    assert AuditEvent.objects.filter(call_id=call.pk, event_type="call.running").count() == 1


@pytest.mark.parametrize(
    "message",
    [
        None,
        [],
        ["record_effect", "acme", None],
        ["record_effect", "acme", None, "0"],
        ["record_effect", "acme", None, True],
        ["record_effect", "acme", "not-a-uuid", 0],
        ["record_effect", 7, None, 0],
        {"tool_name": "record_effect"},
        "record_effect",
    ],
)
def test_a_malformed_hint_is_no_hint(message: Any) -> None:
    assert ClaimHint.from_message(message) is None


def test_a_hint_round_trips_through_its_message() -> None:
    hint = ClaimHint("record_effect", "acme", uuid.uuid4(), 3)
    assert ClaimHint.from_message(hint.message()) == hint


# --- a run's call: the claim returns the agent's tools the re-check needs ------------------------------


@pytest.fixture
def queued_run_call(
    alice: User, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> tuple[ToolCall, Any, Agent]:
    """A run's low-risk call queued for a worker, the hint its message carries, and the run's agent."""
    agent = Agent.objects.create(name="claimer", script=[], tools=["record_effect"])
    run = AgentRun.objects.create(agent=agent, user=alice, tenant="acme", input="hi", messages=[])
    sent: list[Any] = []
    monkeypatch.setattr(execute_tool_call_task, "delay", lambda call_id, hint=None: sent.append(hint))
    request = CallRequest(
        tool_name="record_effect",
        arguments={"note": "from the run"},
        principal=principal_for(alice, tenant="acme", agent_name="claimer", agent_tools=frozenset({"record_effect"})),
        context=ToolContext({"tenant": "acme", "user": alice.username, "user_id": alice.pk}),
        run_id=run.pk,
    )
    with for_a_worker(), django_capture_on_commit_callbacks(execute=True):
        call = tool_call_request(request=request)
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.QUEUED
    return call, sent[0], agent


def _agent_reads(statements: list[dict[str, Any]]) -> list[str]:
    return [
        query["sql"] for query in statements if query["sql"].startswith("SELECT") and "agents_app_agent" in query["sql"]
    ]


@pytest.mark.postgres
def test_a_hinted_claim_of_a_runs_call_reads_neither_the_call_nor_its_agent(
    queued_run_call: tuple[ToolCall, Any, Agent],
) -> None:
    call, hint, _ = queued_run_call

    # when the worker takes the message
    with CaptureQueriesContext(connection) as captured:
        execute_tool_call_task(str(call.pk), hint=hint)

    # then it ran, re-checked against the agent's tools the claim returned: no read of the call or the agent
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED
    assert _call_reads(captured.captured_queries) == []
    assert _agent_reads(captured.captured_queries) == []
    assert verify_audit_chains()[1] == []


@pytest.mark.parametrize("hinted", [True, False], ids=["claim-hint", "no-hint"])
def test_a_tool_taken_from_the_agent_while_its_call_is_queued_is_denied(
    queued_run_call: tuple[ToolCall, Any, Agent], hinted: bool
) -> None:
    # given the run's agent loses the tool after the call was queued
    call, hint, agent = queued_run_call
    agent.tools = ["calculate"]
    agent.save()

    # when the worker takes the message
    execute_tool_call_task(str(call.pk), hint=hint if hinted else None)

    # then the re-check sees the agent as it is now: nothing ran
    call.refresh_from_db()
    assert call.status == CallStatus.DENIED
    assert SideEffect.objects.filter(call_id=str(call.pk)).count() == 0
    assert verify_audit_chains()[1] == []


@pytest.mark.postgres
@pytest.mark.parametrize("tool_search, group_switching", [(False, False), (True, True)])
def test_the_claims_read_of_the_agents_tools_is_the_resolvers(
    queued_run_call: tuple[ToolCall, Any, Agent], tool_search: bool, group_switching: bool
) -> None:
    # given the run's agent with its meta tools switched on or off
    call, _, agent = queued_run_call
    agent.tool_search, agent.group_switching = tool_search, group_switching
    agent.save()

    # when the SQL read and the resolver each answer for the call's row
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT {run_call_agent_tools_sql(TABLE)} FROM {TABLE} WHERE {TABLE}."id" = %s', [call.pk])
        (value,) = cursor.fetchone()

    # then they agree
    assert run_call_agent_tools(value) == agent_tools("claimer", tenant="acme", run_id=call.run_id)
    assert ("tool_search" in run_call_agent_tools(value)) is tool_search  # type: ignore[operator]
