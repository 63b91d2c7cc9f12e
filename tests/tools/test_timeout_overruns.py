"""A tool that catches its time limit's interruption and carries on still fails with the time-limit message."""

import asyncio
import time
from typing import Annotated

import pytest
from django.contrib.auth.models import User

from tests.helpers import RequestCall, event_types
from tests.testapp.models import SideEffect
from toolhub import Param, ToolContext, registry, tool
from toolhub.models import CallStatus
from toolhub.tools.timeouts import ToolTimeoutError, await_with_timeout, call_with_timeout

pytestmark = pytest.mark.django_db

ATTEMPTS: list[int] = []


@pytest.fixture(autouse=True)
def _attempts() -> object:
    ATTEMPTS.clear()
    yield
    ATTEMPTS.clear()


def _retrying(seconds: float, attempts: int = 3) -> str:
    """A client library's retry loop: any error, including the time limit's, is one more attempt."""
    for attempt in range(attempts):
        ATTEMPTS.append(attempt)
        try:
            time.sleep(seconds)
            return "answered"
        except Exception:  # noqa: BLE001, S112 - what the tool author wrote
            continue
    return "gave up"


@tool(risk="low", timeout=0.2)
def retrying_backend(query: Annotated[str, Param("What to ask.")]) -> str:
    """Ask a slow backend, retrying on any error."""
    return _retrying(0.3)


@tool(risk="low", timeout=0.2)
async def swallowing_backend(query: Annotated[str, Param("What to ask.")]) -> str:
    """Ask a slow backend asynchronously, ignoring its cancellation."""
    try:
        await asyncio.sleep(0.3)
    except asyncio.CancelledError:
        await asyncio.sleep(0.1)
    return "answered anyway"


@tool(risk="low", atomic=True, timeout=0.2)
def retrying_writer(ctx: ToolContext) -> str:
    """Write a row once the backend answers, retrying on any error."""
    answer = _retrying(0.3)
    SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="retrying_writer", note=answer)
    return answer


def test_a_tool_that_retries_past_its_timeout_fails_with_the_time_limit_message(
    request_call: RequestCall, alice: User
) -> None:
    with registry.temporarily(retrying_backend):
        call = request_call("retrying_backend", {"query": "status"}, alice)

    assert call.status == CallStatus.FAILED and call.result is None
    assert call.error.startswith("Tool 'retrying_backend' did not finish within its time limit of 0.2 s")
    assert event_types(call)[-1] == "call.failed"
    assert ATTEMPTS == [0, 1]  # interrupted once, then answered late: the answer is not taken


def test_an_async_tool_that_swallows_its_cancellation_fails_with_the_time_limit_message(
    request_call: RequestCall, alice: User
) -> None:
    with registry.temporarily(swallowing_backend):
        call = request_call("swallowing_backend", {"query": "status"}, alice)

    assert call.status == CallStatus.FAILED and "time limit of 0.2 s" in call.error


def test_an_atomic_tool_that_writes_after_catching_its_timeout_keeps_nothing(
    request_call: RequestCall, alice: User
) -> None:
    with registry.temporarily(retrying_writer):
        call = request_call("retrying_writer", {}, alice)

    assert call.status == CallStatus.FAILED and "time limit" in call.error
    assert not SideEffect.objects.filter(tool="retrying_writer").exists()


@pytest.mark.parametrize("in_this_thread", [False, True])
def test_call_with_timeout_refuses_a_result_returned_past_the_limit(in_this_thread: bool) -> None:
    with pytest.raises(ToolTimeoutError, match="time limit of 0.1 s"):
        call_with_timeout(lambda: _retrying(0.15), seconds=0.1, tool_name="late", in_this_thread=in_this_thread)


def test_call_with_timeout_returns_a_result_within_the_limit() -> None:
    assert call_with_timeout(lambda: _retrying(0.01), seconds=1, tool_name="quick") == "answered"
    assert ATTEMPTS == [0]


def test_await_with_timeout_refuses_a_result_returned_past_the_limit() -> None:
    async def ignoring_cancellation() -> str:
        try:
            await asyncio.sleep(0.2)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)
        return "late"

    with pytest.raises(ToolTimeoutError):
        await_with_timeout(ignoring_cancellation(), seconds=0.1, tool_name="late")
