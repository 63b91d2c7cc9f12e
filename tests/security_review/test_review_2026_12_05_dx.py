"""Review dx (2026-12-05): regression review of the runs sweep's SQL selection (``runs_to_wake``, ad087ea) and of
the webhook attempt's total deadline (``approvals.webhooks._exchange_within``, e71168a, 4326d4e, d6aa836).

Findings:
- The deadline's cut reached only a socket a connection already held: a connection still opening when the
  attempt's time was up (a slow DNS answer or SYN; a TLS handshake, during which ``wrap_socket`` has detached the
  plain socket and the connection holds the TLS one only after it) was not cut, so the helper thread went on after
  the attempt had been recorded as failed and sent the signed POST outside the attempt's lease (the duplicate the
  deadline was for), then could be held by a dripping receiver without end. Fixed in ``_CuttableRequest``: the
  cut is sticky, and a connection that finishes opening after it is shut before anything is sent
  (``test_a_connection_still_opening_at_the_deadline_sends_nothing_after_it``).
- The waiting thread cut only when its wait timed out: an exception there (Celery's soft time limit) left the
  helper's exchange running. It now cuts whenever the wait did not see the answer
  (``test_an_interrupted_wait_still_cuts_the_connection``).
- ``runs_to_wake`` selected a compensating run whose turn's call failed while another rollback of its saga (asked
  on demand) was under way: ``saga_rollback`` hands that rollback back when the failed call has none of its own and
  nothing is left to compensate, so ``run_advance`` returned IDLE and wrote nothing, and the run, the longest idle,
  took a place in every sweep's batch (dq's test expected it woken). Fixed in the selector: while a call of the turn
  failed, the run is held by its failed call's rollback under way or, when that call has none, by any rollback of
  its saga under way; it is woken once that finishes
  (``test_a_run_held_by_an_unrelated_rollback_under_way_is_not_woken_on_every_sweep``; dq's test updated). Such a
  run with steps still to compensate would have had its own rollback created by the loop; it now waits for the
  rollback under way to finish first (its finish makes the run selectable again), a delay, not a loss.

Checked and holds:
- ``runs_to_wake`` against ``_begin_step``: it steps a running/waiting run only with no lease in force (a NULL lease
  and a lapsed one are both selected; a lapsed one is counted as a lost step), every kind=call call of ``run.turn``
  settled (``turn_calls`` reads kind=call only; inner calls of agentic tools and compensations do not hold a turn,
  a subagent's call stays ``awaiting_result`` until its child run ends and that settle wakes the parent, deferred
  serial calls are requested once the previous one settled, which the sweep selects), and no unfinished rollback
  whose failed call is a kind=call call of the turn while the agent compensates on error (``ROLLBACK_KINDS``
  excludes inner calls, matching). A run held by an open call, a lease or a rollback is left to what settles it
  (redispatch sweeper, decision/expiry, the lease's lapse, compensations), each of which moves the run out of the
  excluded set, so a lost wake-up after it is swept. There is no ``paused`` status (``RunStatus``). Oldest
  ``updated_at`` first means a run the loop cannot step writes nothing and is not selected again while held.
- On PostgreSQL with 4000 runs and 12000 calls, EXPLAIN ANALYZE shows one hash anti join against ``toolhub_toolcall``
  (no per-run subquery) and a hashed subplan for rollbacks (~5 ms); with few candidate runs the planner can use
  ``toolcall_run_turn``. After the fix the failed-call check is an index scan on ``toolcall_run_turn`` per candidate
  run and the rollback checks are hashed subplans (~20 ms for 4000 candidates). The run table is scanned as before
  the change (no status/updated_at index).
- Webhooks: a TLS handshake is bounded as a whole by CPython (``_ssl`` applies the socket timeout as one deadline
  to ``do_handshake``), so a handshake under way at the cut ends within ``timeout`` and is then refused; the helper
  thread touches no database (``_exchange`` reads only the request), so it opens no
  connection; an exception of the helper is re-raised in the caller with the helper's frames in its traceback;
  ``webhook_secret_key`` refuses ``whsec_`` alone and ``approvals.W002`` warns on it (it calls the same function);
  errors are stored through ``storable_text`` after the URL's secrets are scrubbed; Celery's task limits (300 s soft
  by default) are far above the 10 s deadline. ``timeout`` is a float (``None`` fails in the lease arithmetic,
  ``0`` gives up at once): no caller passes either.

Noted, not fixed: an answer that arrives in the instant between the wait's timeout and the cut is recorded as a
timeout and the delivery is sent again later (receivers dedupe by ``webhook-id``, at-least-once as Standard Webhooks
allows).
"""

import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from agents_app.loop import Advance, run_advance
from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.selectors import runs_to_wake
from approvals.webhooks import _CuttableRequest, _exchange_within
from tests.security_review.direct_sagas import compensation_under_way
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.sagas.models import Rollback, RollbackTrigger, Saga

#: A conversation whose last turn asked for a tool call: its results are due before the model is asked again.
ASKED = [
    {"role": "user", "content": "x"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {}}]},
]


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[bytes]]]:
    """A receiver on 127.0.0.1 that records what it was sent and answers nothing for a while."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    received: list[bytes] = []

    def serve() -> None:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        with connection:
            connection.settimeout(3)
            try:
                # reads what comes and answers nothing: holds the exchange until the sender cuts it (or 3 s)
                while data := connection.recv(65536):
                    received.append(data)
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook", received
    listener.close()
    thread.join(timeout=6)


def _helpers() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "webhook-post"]


def test_a_connection_still_opening_at_the_deadline_sends_nothing_after_it(
    receiver: tuple[str, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: the cut shut only sockets already held by a connection; one still connecting at the deadline (slow
    DNS, SYN or TLS handshake) went on, and the helper sent the POST after the attempt was recorded as failed.
    Expect: after the deadline nothing is sent and the helper thread ends."""
    url, received = receiver
    real = socket.create_connection

    def slow_connection(*args: Any, **kwargs: Any) -> socket.socket:
        time.sleep(0.8)  # the name or the SYN answers late
        return real(*args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", slow_connection)
    request = _CuttableRequest(url, data=b"{}", headers={"Content-Type": "application/json"}, method="POST")

    ok, error = _exchange_within(request, timeout=0.3)

    assert ok is False and "TimeoutError" in error
    time.sleep(1.5)
    assert received == [], "the POST was sent after the attempt had ended"
    assert not _helpers(), "the helper thread outlived the attempt"


def test_an_interrupted_wait_still_cuts_the_connection(
    receiver: tuple[str, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: an exception in the waiting thread (Celery's soft time limit) left the helper's exchange uncut.
    Expect: the connection is cut and the helper ends."""
    url, received = receiver

    class SoftTimeLimit(Exception):
        pass

    class Interrupted(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            if timeout is None:  # ``Thread.start`` waiting for its thread
                return super().wait()
            super().wait(0.5)  # the POST is sent and its answer awaited
            raise SoftTimeLimit

    monkeypatch.setattr(threading, "Event", Interrupted)
    request = _CuttableRequest(url, data=b"{}", method="POST")
    with pytest.raises(SoftTimeLimit):
        _exchange_within(request, timeout=10)
    assert received, "the POST was not sent before the interruption"
    for thread in _helpers():
        thread.join(timeout=1.5)
    assert not _helpers(), "the helper thread outlived the interrupted attempt"


@pytest.mark.django_db
def test_a_run_held_by_an_unrelated_rollback_under_way_is_not_woken_on_every_sweep(alice: User) -> None:
    """Found: a compensating run whose turn's call failed while another rollback of its saga was under way (asked on
    demand) was selected by every sweep, first of all as it stays the longest idle, though ``run_advance`` does
    nothing for it (``saga_rollback`` hands back the rollback under way). Expect: it is left out until that rollback
    finishes, then woken."""
    agent = Agent.objects.create(name="compensating", script=[{"content": "ok"}], compensate_on_error=True)
    (run,) = AgentRun.objects.bulk_create(
        [AgentRun(agent=agent, user=alice, tenant="acme", input="x", turn=1, status=RunStatus.WAITING, messages=ASKED)]
    )
    ToolCall.objects.create(
        tool_name="record_effect", status=CallStatus.FAILED, run_id=run.pk, turn=1, kind=CallKind.CALL, tenant="acme"
    )
    saga = Saga.objects.create(key=str(run.pk), run_id=run.pk, tenant="acme")
    asked = Rollback.objects.create(saga=saga, trigger=RollbackTrigger.ON_DEMAND, requested_by="alice")
    compensation_under_way(saga, asked)
    AgentRun.objects.filter(pk=run.pk).update(updated_at=timezone.now() - timedelta(minutes=5))

    assert run_advance(run_id=run.pk) is Advance.IDLE  # the loop waits for the rollback under way
    assert run.pk not in runs_to_wake(idle_since=timezone.now())

    Rollback.objects.filter(pk=asked.pk).update(finished_at=timezone.now())
    assert runs_to_wake(idle_since=timezone.now()) == [run.pk]
