"""Per-call time limits, enforced where the tool runs.

Synchronous tools on the main thread (a Celery prefork worker process, or an eager call) are
interrupted with ``SIGALRM``: the exception is raised inside the tool, so its ``transaction.atomic``
blocks roll back. Elsewhere (a thread) the tool runs in a helper thread that is abandoned on
timeout, since Python cannot stop a thread. Async tools are cancelled with ``asyncio.wait_for``.

A tool can catch the interruption (``except Exception``, a retry loop; a coroutine swallowing its
cancellation) and go on: whatever it returns after its limit, the call still fails with
``ToolTimeoutError``, raised when it returns.
"""

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from toolhub.deadlines import DeadlineExceeded, run_within
from toolhub.exceptions import ToolhubError

__all__ = ["ToolTimeoutError", "call_with_timeout", "await_with_timeout"]

T = TypeVar("T")


class ToolTimeoutError(ToolhubError):
    """A tool ran longer than its ``timeout``; the call fails with this message."""

    def __init__(self, tool_name: str, seconds: float) -> None:
        super().__init__(
            f"Tool {tool_name!r} did not finish within its time limit of {seconds:g} s and was stopped; "
            "its work may be incomplete. Try smaller inputs, or tell the user it timed out."
        )
        self.tool_name = tool_name
        self.seconds = seconds


def call_with_timeout(fn: Callable[[], T], *, seconds: float | None, tool_name: str, in_this_thread: bool = False) -> T:
    """Run ``fn()``; raise ``ToolTimeoutError`` if it takes longer than ``seconds`` (``None``: no limit).

    ``in_this_thread``: ``fn`` must run on the caller's thread (its writes belong to the caller's
    transaction). Off the main thread it cannot be interrupted then: it runs to its end, and
    ``ToolTimeoutError`` is raised afterwards if it overran, so that the caller rolls its work back.
    """
    if not seconds:
        return fn()
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        started = time.monotonic()
        with _alarm(seconds, tool_name):
            result = fn()
        return _within_limit(result, started, seconds, tool_name)
    if in_this_thread:
        started = time.monotonic()
        return _within_limit(fn(), started, seconds, tool_name)
    return _in_thread(fn, seconds, tool_name)


def await_with_timeout(awaitable: Awaitable[T], *, seconds: float | None, tool_name: str) -> T:
    """Run a coroutine to completion in a fresh event loop, cancelling it after ``seconds``."""

    async def run() -> T:
        if not seconds:
            return await awaitable
        started = time.monotonic()
        try:
            # A coroutine that swallows its cancellation and returns is given back by ``wait_for``: timed below.
            result = await asyncio.wait_for(awaitable, timeout=seconds)
        except TimeoutError:
            raise ToolTimeoutError(tool_name, seconds) from None
        return _within_limit(result, started, seconds, tool_name)

    return asyncio.run(run())


def _within_limit(result: T, started: float, seconds: float, tool_name: str) -> T:
    """``result``, unless the tool returned it after its limit (it caught the interruption, or ran on unstopped)."""
    if time.monotonic() - started > seconds:
        raise ToolTimeoutError(tool_name, seconds)
    return result


@contextlib.contextmanager
def _alarm(seconds: float, tool_name: str) -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise ToolTimeoutError(tool_name, seconds)

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    started = time.monotonic()
    previous_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
    if previous_timer[0] and previous_timer[0] < seconds:
        # A tool called from within another (an agentic tool's inner call) never outlives the outer limit.
        signal.setitimer(signal.ITIMER_REAL, previous_timer[0])
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_timer[0]:
            # Someone else's alarm was pending: give it back what is left of it (at least a tick).
            left = previous_timer[0] - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), previous_timer[1])


def _in_thread(fn: Callable[[], T], seconds: float, tool_name: str) -> T:
    try:
        return run_within(fn, seconds=seconds, name=f"toolhub-{tool_name}")
    except DeadlineExceeded:
        raise ToolTimeoutError(tool_name, seconds) from None
