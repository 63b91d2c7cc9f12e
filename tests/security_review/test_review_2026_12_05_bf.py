"""Review of 2026-12-05 (bf): agentic tools (``toolhub.agentic``) run by the agent loop, attacked through nesting.

Each test fails on the reviewed code (main at 39118dc); its docstring says "Found: ..." and "Expect: ...".

Findings:

1. An agentic tool's inner calls were never saga steps (``STEP_KINDS`` left out ``inner``): an inner model's
   succeeded call of a compensable tool (a booking, a debit) was not recorded as a step of its run's saga, so
   when a later step failed in a run whose agent compensates on error, the rollback undid the run's own calls
   and left the inner one standing, silently. Now an inner call is a step of the saga its outer call belongs
   to (its run's, or the outer direct call's saga id) and is compensated with it, newest first; a failed inner
   call alone triggers no rollback (the inner model is told and goes on; the outer call's failure triggers it).
2. An agentic tool could sit among another's tools: each of the outer's inner calls of it ran a whole inner loop
   of its own, so one call of an outer with ``max_calls=1`` executed any number of tools (the nested tool's
   ``max_calls`` times the outer's), and ``max_iterations`` multiplied alike; outside a budgeted child run nothing
   else counts inner calls. Now an agentic tool called as an inner call fails at once with a clear message and
   runs nothing (``inner.refuse_nested``), as a subagent tool does there.

Checked and holding:
- inner calls go through the pipeline with the outer call's principal (``principal_of_context``), are authorized
  per tool (a member the principal is not granted is not offered and reads as unknown), held for approval by
  their own rules (no exemption for an approved outer call; an operator's approval binds the inner call's own
  arguments), audited in the run's tenant chain with sensitive arguments redacted, and cancelled with the run;
  their idempotency key is their own (``_OWN_KEYS``); the outer result lists ids, tools and statuses, no arguments;
- an agentic tool cannot list itself (``unique_members``), a subagent tool refuses to start from an inner call, and
  a member is run only by name through the gate (``InnerState.gate``: members only);
- in a budgeted child run every inner model turn and inner call is charged to the run (``_ChargedToRun``), and an
  ended run's inner model takes no turn; timeouts nest (``timeouts._alarm`` keeps the outer limit);
- resumption: a state machine's stored state is checked against its enum (``current``), a playbook's ``done`` is
  written only by code from succeeded calls, ``InnerState.load`` replays only succeeded ``inner`` rows of the run,
  tenant and tool, a chained object is rebuilt from a producer call's stored result validated as its class;
- errors the outer model reads: inner results are the pipeline's sanitized ``model_text``; a model failure is a
  ``ModelError`` whose text names no endpoint or key; anything else is sanitized by the pipeline.
"""

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import RunStatus
from agents_app.services import agent_create, run_start
from tests.sagas.sample_tools import LOG, RELEASE_FAILS, TOOLS, book, explode, reserve
from toolhub.agentic import SimpleAgenticTool, inner_calls_of
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.sagas.models import Saga, SagaStatus
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

#: An agentic tool whose inner model books through a compensable tool.
TRAVEL_DESK = SimpleAgenticTool(
    "travel_desk", "Book what the traveller needs.", tools=[book, explode], max_iterations=3, agent="travel-brain"
)

#: An agentic tool nested in another: each of the outer's inner calls of it runs a whole inner loop of its own.
SEAT_DESK = SimpleAgenticTool(
    "seat_desk", "Reserve seats.", tools=[reserve], max_iterations=5, max_calls=5, agent="seat-brain"
)
TRIP_PLANNER = SimpleAgenticTool(
    "trip_planner", "Plan a trip.", tools=[SEAT_DESK.tool], max_iterations=3, max_calls=1, agent="planner-brain"
)


@pytest.fixture(autouse=True)
def _tools(settings: Any) -> Iterator[None]:
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 2, "SAGA_RETRY_BASE_SECONDS": 0.0}
    LOG.clear()
    RELEASE_FAILS["on"] = False
    with registry.temporarily(*TOOLS, TRAVEL_DESK, SEAT_DESK, TRIP_PLANNER):
        yield


def _step(name: str, **arguments: Any) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": name, "arguments": arguments}]}


def test_an_inner_calls_compensable_step_is_rolled_back_with_its_run(alice: User) -> None:
    """Found: an inner model's ``book`` succeeded inside ``travel_desk``; the run's next step failed and its agent
    compensates on error, yet the rollback cancelled nothing: the inner booking was no saga step.
    Expect: the inner booking is a step of the run's saga and is cancelled by the rollback (its call compensated).
    """
    # given an inner model that books a flight, and a run that calls the desk and then fails a step
    agent_create(name="travel-brain", provider="scripted", script=[_step("book", item="flight"), {"content": "ok"}])
    agent = agent_create(
        name="trip-desk",
        provider="scripted",
        script=[
            _step("travel_desk", task="book a flight"),
            _step("explode", reason="card declined"),
            {"content": "Sorry: {last_tool_result}"},
        ],
        tools=["travel_desk", "explode"],
        compensate_on_error=True,
    )

    # when the run goes
    run = run_start(agent=agent, user=alice, input="book my trip")
    run.refresh_from_db()

    # then the inner booking was undone by the run's rollback
    assert run.status == RunStatus.COMPLETED, run.error
    outer = ToolCall.objects.get(run_id=run.id, kind=CallKind.CALL, tool_name="travel_desk")
    (inner,) = inner_calls_of(outer.id, user=alice)
    assert ("book", "flight") in LOG
    assert ("cancel", "B-flight") in LOG
    inner.refresh_from_db()
    assert inner.status == CallStatus.COMPENSATED
    assert Saga.objects.get(key=str(run.id)).status == SagaStatus.COMPENSATED
    assert "book" in run.messages[-2]["content"] and "rolled back" in run.messages[-2]["content"]


def test_an_inner_calls_step_joins_the_direct_saga_its_outer_call_was_made_in(alice: User) -> None:
    """Found: an agentic tool called over ``POST /api/v1/calls/`` with a ``saga_id`` made its inner calls outside
    that saga (no saga id), so rolling the saga back left the inner model's booking standing.
    Expect: the inner call carries its outer call's saga id and the saga's rollback cancels its booking.
    """
    from rest_framework.test import APIClient

    # given the desk called directly, in saga trip-1, whose inner model books a flight
    agent_create(name="travel-brain", provider="scripted", script=[_step("book", item="flight"), {"content": "ok"}])
    client = APIClient()
    client.force_authenticate(alice)
    called = client.post(
        "/api/v1/calls/", {"tool": "travel_desk", "arguments": {"task": "fly"}, "saga_id": "trip-1"}, format="json"
    )
    assert called.status_code == 200, called.content
    inner = ToolCall.objects.get(kind=CallKind.INNER, tool_name="book")
    assert inner.saga_id == "trip-1"

    # when the saga is rolled back
    rolled = client.post("/api/v1/sagas/trip-1/rollback/")

    # then the inner booking is cancelled
    assert rolled.status_code == 202, rolled.content
    assert ("cancel", "B-flight") in LOG
    inner.refresh_from_db()
    assert inner.status == CallStatus.COMPENSATED


def test_an_agentic_tool_nested_in_another_does_not_multiply_its_max_calls(alice: User) -> None:
    """Found: ``trip_planner`` (``max_calls=1``) has ``seat_desk`` among its tools; its inner model's one call of
    ``seat_desk`` ran a whole inner loop of its own, so one call of ``trip_planner`` executed four tools (three
    reservations) past its declared limit of one inner call: nesting multiplies ``max_calls`` and
    ``max_iterations`` (outside a budgeted child run nothing else counts them).
    Expect: an agentic tool called as another's inner call fails with a clear message and runs nothing, as a
    subagent tool does there; the outer inner model is told and the run goes on.
    """
    # given a planner whose inner model calls the seat desk, whose own inner model reserves three seats
    agent_create(
        name="planner-brain", provider="scripted", script=[_step("seat_desk", task="3 seats"), {"content": "ok"}]
    )
    agent_create(
        name="seat-brain",
        provider="scripted",
        script=[
            {"content": "", "tool_calls": [{"name": "reserve", "arguments": {"item": s}} for s in ("1A", "1B", "1C")]},
            {"content": "reserved"},
        ],
    )
    agent = agent_create(
        name="planner-run",
        provider="scripted",
        script=[_step("trip_planner", task="plan"), {"content": "{last_tool_result}"}],
        tools=["trip_planner", "seat_desk"],
    )

    # when the run calls the planner once
    run = run_start(agent=agent, user=alice, input="plan my trip")
    run.refresh_from_db()

    # then the nested desk ran nothing, and the planner's inner model read why
    assert run.status == RunStatus.COMPLETED, run.error
    assert [entry for entry in LOG if entry[0] == "reserve"] == []
    nested = ToolCall.objects.get(run_id=run.id, kind=CallKind.INNER, tool_name="seat_desk")
    assert nested.status == CallStatus.FAILED
    assert "inside another agentic tool" in nested.model_text()
    assert not ToolCall.objects.filter(run_id=run.id, tool_name="reserve").exists()


def test_a_failed_inner_call_alone_does_not_roll_back_the_direct_saga(alice: User) -> None:
    """Guards the fix of finding 1: inner calls now carry their outer call's saga id, and a failed direct step
    rolls its saga back. Expect: an inner call that fails (its inner model is told and answers) rolls nothing
    back; the saga's booking made before stays, and the outer call succeeds.
    """
    from rest_framework.test import APIClient

    # given a booking in saga trip-2, then the desk whose inner model's step fails before it answers
    agent_create(
        name="travel-brain",
        provider="scripted",
        script=[_step("explode", reason="no seats"), {"content": "no seats left"}],
    )
    client = APIClient()
    client.force_authenticate(alice)
    booked = client.post(
        "/api/v1/calls/", {"tool": "book", "arguments": {"item": "hotel"}, "saga_id": "trip-2"}, format="json"
    )
    assert booked.status_code == 200, booked.content

    # when the desk is called in the same saga
    called = client.post(
        "/api/v1/calls/", {"tool": "travel_desk", "arguments": {"task": "fly"}, "saga_id": "trip-2"}, format="json"
    )

    # then its inner failure is its inner model's to handle: nothing was rolled back
    assert called.status_code == 200, called.content
    assert ToolCall.objects.get(kind=CallKind.INNER, tool_name="explode").status == CallStatus.FAILED
    assert ToolCall.objects.get(kind=CallKind.API, tool_name="travel_desk").status == CallStatus.SUCCEEDED
    assert ("cancel", "B-hotel") not in LOG
    assert Saga.objects.get(key="trip-2").status == SagaStatus.OPEN
