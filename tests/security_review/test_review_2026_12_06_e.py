"""Review e (2026-12-06): the three "blocking call on a helper thread, given up at a deadline" copies (tool timeouts,
the model call's deadline, the webhook attempt's total deadline) moved onto one function, ``toolhub.deadlines``.

Findings:
- The model call's copy (``OpenAIChatAdapter._within_deadline``) closed its client only when the deadline passed: an
  exception on the waiting thread (the stream's partial-text writer failing, Celery's soft time limit) left the helper
  thread reading the provider's answer to its end, holding the connection and spending the provider's tokens for a
  turn nobody would record. The webhook's copy had been fixed for the same case (review dx); the shared function now
  cuts whenever the wait ends without the answer
  (``test_an_interrupted_model_call_closes_its_client_and_its_helper_ends``).

Checked and holds:
- Exceptions of the helper reach the caller as the same object, with the helper's frames in their traceback, in all
  three copies (``test_an_exception_of_the_helper_is_raised_as_is_with_its_frames``).
- Only the tools' copy ran the helper in a copy of the caller's context and closed its database connections; the
  model's and the webhook's helpers touch neither the ORM nor a context variable (``_exchange`` reads the request
  only; the SDK call and ``_consume`` no model), so nothing leaked there; the shared function does both for every
  caller (``test_the_helper_runs_in_the_callers_context``, ``test_the_helpers_database_connection_is_closed``).
- Helper threads are daemons named by their caller (``toolhub-<tool>``, ``model-call-<provider>``, ``webhook-post``),
  so a helper given up never holds the process's exit and can be found by name.
"""

import contextvars
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections

from agents_app.models_adapters.openai_chat import OpenAIChatAdapter
from tests.unit.fake_openai import FakeModel, serve, streamed
from toolhub.deadlines import DeadlineExceeded, run_within
from toolhub.models import ToolCall


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    with serve(FakeModel()) as model:
        yield model


def _helpers(name: str) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == name]


def test_an_interrupted_model_call_closes_its_client_and_its_helper_ends(fake_model: FakeModel) -> None:
    """Found: an exception on the waiting thread (the partial-text writer failing) left the model call's client open,
    and its helper thread read the whole stream on. Expect: the client is closed and the helper ends soon after."""
    fake_model.queue(streamed(content=["slow "] * 40, chunk_delay=0.1))  # 4 s of answer
    adapter = OpenAIChatAdapter(
        provider_name="interrupted",
        base_url=fake_model.base_url,
        model="m",
        api_key="k",
        stream=True,
        flush_seconds=0.05,
        deadline=30.0,
    )

    def failing_writer(text: str) -> None:
        raise RuntimeError("the database went away")

    with pytest.raises(RuntimeError, match="went away"):
        adapter.complete(messages=[{"role": "user", "content": "hi"}], tools=[], on_partial=failing_writer)
    for thread in _helpers("model-call-interrupted"):
        thread.join(timeout=1.5)
    assert not _helpers("model-call-interrupted"), "the model call went on after its caller had given it up"


def test_the_result_is_returned_from_the_helper_thread() -> None:
    """Found: nothing (unit test of the shared function). Expect: the helper's value, computed on a named daemon."""
    seen: dict[str, Any] = {}

    def work() -> int:
        seen["thread"] = threading.current_thread()
        return 42

    assert run_within(work, seconds=5, name="unit-result") == 42
    assert seen["thread"].name == "unit-result" and seen["thread"].daemon
    assert seen["thread"] is not threading.current_thread()


def test_an_exception_of_the_helper_is_raised_as_is_with_its_frames() -> None:
    """Found: nothing (unit test). Expect: the helper's own exception object, its traceback naming the helper's
    function, no chaining added."""
    failure = ValueError("bad input")

    def failing_in_the_helper() -> None:
        raise failure

    with pytest.raises(ValueError) as caught:
        run_within(failing_in_the_helper, seconds=5, name="unit-error")
    assert caught.value is failure
    assert "failing_in_the_helper" in "".join(traceback.format_tb(caught.value.__traceback__))
    assert caught.value.__cause__ is None and caught.value.__context__ is None


def test_a_helper_past_its_deadline_is_given_up_and_cut() -> None:
    """Found: nothing (unit test). Expect: ``DeadlineExceeded`` at the deadline, the cut hook called once, and the
    helper (which the cut releases) ends."""
    release = threading.Event()
    cuts: list[float] = []

    def cut() -> None:
        cuts.append(time.monotonic())
        release.set()

    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        run_within(lambda: release.wait(10), seconds=0.3, name="unit-timeout", cut=cut)
    assert len(cuts) == 1 and 0.25 <= cuts[0] - started < 3
    for thread in _helpers("unit-timeout"):
        thread.join(timeout=2)
    assert not _helpers("unit-timeout")


def test_an_interrupted_wait_cuts_the_helper_and_raises_the_interruption() -> None:
    """Found: nothing (unit test; the model's copy lacked it, see above). Expect: an exception of ``tick`` on the
    waiting thread is raised to the caller after the cut hook ran."""
    release = threading.Event()

    def tick() -> None:
        raise KeyError("soft time limit")

    with pytest.raises(KeyError):
        run_within(lambda: release.wait(10), seconds=10, name="unit-tick", cut=release.set, tick=tick, every=0.05)
    assert release.is_set()


def test_no_cut_when_the_helper_answers_in_time() -> None:
    """Found: nothing (unit test). Expect: a helper that answers is not cut, and ``tick`` runs while it works."""
    cuts: list[int] = []
    ticks: list[int] = []

    def slow_answer() -> str:
        time.sleep(0.3)
        return "ok"

    answer = run_within(
        slow_answer, seconds=5, name="unit-ok", cut=lambda: cuts.append(1), tick=lambda: ticks.append(1), every=0.05
    )
    assert answer == "ok"
    assert cuts == [] and ticks


def test_the_helper_runs_in_the_callers_context() -> None:
    """Found: nothing (unit test). Expect: context variables set by the caller hold on the helper thread."""
    variable: contextvars.ContextVar[str] = contextvars.ContextVar("unit", default="unset")
    variable.set("caller's")
    assert run_within(variable.get, seconds=5, name="unit-context") == "caller's"


@pytest.mark.postgres  # SQLite's in-memory test database is one connection shared by every thread
@pytest.mark.django_db(transaction=True)
def test_the_helpers_database_connection_is_closed() -> None:
    """Found: nothing (unit test). Expect: the connection the helper's queries opened is closed when it returns, and
    also when it fails."""
    wrappers: list[Any] = []

    def query(fail: bool) -> int:
        wrappers.append(connections["default"])
        count = ToolCall.objects.count()
        if fail:
            raise LookupError("after a query")
        return count

    assert run_within(lambda: query(False), seconds=5, name="unit-db") == 0
    with pytest.raises(LookupError):
        run_within(lambda: query(True), seconds=5, name="unit-db")
    assert len(wrappers) == 2 and all(wrapper.connection is None for wrapper in wrappers)
