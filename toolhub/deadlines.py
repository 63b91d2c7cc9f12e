"""Run a blocking call on a helper thread and stop waiting for it at a deadline: one way, for every such wait.

Python cannot stop a thread, so at the deadline the caller goes on and the helper is abandoned: a daemon (it never
holds the process's exit), named by the caller (found by name when it lingers), after ``cut`` was called so that it
ends soon (its client closed, its socket shut). ``cut`` runs whenever the wait ends without the answer, the deadline
or an exception on the waiting thread (Celery's soft time limit, a failing ``tick``): an uncut helper would go on
working for a caller that gave it up.

The helper runs in a copy of the caller's context, so context variables (the secrets' log scope) hold there too,
and closes the database connections its work opened: Django's are per thread, and nobody else can close them.
Its exception is raised in the caller as is, with the helper's frames in its traceback.

A ``cut`` that closes a socket does not end a helper blocked reading it: the read goes on (and the peer sees the
connection open) until the next byte or the read timeout. ``shut`` is the one way a cut ends such a read at once.
"""

import contextlib
import contextvars
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import connections

__all__ = ["DeadlineExceeded", "run_within", "shut"]

T = TypeVar("T")


class DeadlineExceeded(Exception):
    """The helper did not answer within its ``seconds``; the caller says what that means for its work."""


def run_within(
    fn: Callable[[], T],
    *,
    seconds: float,
    name: str,
    cut: Callable[[], None] | None = None,
    tick: Callable[[], None] | None = None,
    every: float | None = None,
) -> T:
    """``fn()``, run on a daemon thread called ``name``; raise ``DeadlineExceeded`` after ``seconds`` without it.

    ``cut``: makes the abandoned helper end (called on the waiting thread, before ``DeadlineExceeded`` or the
    waiting thread's own exception is raised). ``tick``: called on the waiting thread every ``every`` seconds
    while the helper works (a stream's text so far).
    """
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = exc
        finally:
            try:
                connections.close_all()  # only this thread's connections, the ones its work opened
            finally:
                done.set()

    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(target,), name=name, daemon=True).start()
    give_up = time.monotonic() + seconds
    answered = False
    try:
        while not (
            answered := done.wait(max(0.0, min(every if every is not None else seconds, give_up - time.monotonic())))
        ):
            if time.monotonic() >= give_up:
                raise DeadlineExceeded(f"{name} did not finish within {seconds:g} s")
            if tick is not None:
                tick()
    finally:
        if not answered and cut is not None:
            cut()
    if "error" in outcome:
        raise outcome.pop("error")
    return outcome["value"]  # type: ignore[no-any-return]


def shut(sock: socket.socket | None) -> None:
    """Shut ``sock`` both ways: a thread blocked reading it gets end-of-file at once, and the peer sees the end.

    The plain socket's shutdown, also under TLS (the TLS object is left to its own thread); one already closed is
    left as it is.
    """
    if sock is not None:
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
