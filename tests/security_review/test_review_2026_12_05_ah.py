"""Review of 2026-12-05 (ah): the Celery worker path, with the broker trusted less than the database.

What a message in Redis (forged by someone who can write there, or sent by a buggy client, duplicated, redelivered)
makes a worker do: ``toolhub.tasks``, ``toolhub.execution``, ``toolhub.claims``, ``toolhub.dispatch``, the agent
loop's tasks, the approvals' tasks, the sweeper and the beat tasks. Each test fails on the reviewed code (main at
d0e1730); its docstring says what was found ("Found: ...") and what is expected ("Expect: ...").

Findings:

1. A call of an idempotent or atomic tool whose worker dies while running it is queued again by the reconciler
   every time its lease ends, without a bound: a poison call (one that runs the worker out of memory, crashes
   a native library, or trips a kill) takes a worker down once per lease, forever, as the real worker below
   shows. Fixed: the reconciler runs such a call again only while it has been claimed fewer than
   ``TOOLHUB["CALL_MAX_ATTEMPTS"]`` times (3); then it needs attention, as a call of any other tool does at
   once (its error says whether its outcome is unknown or, atomic, nothing it did was kept) (``toolhub.sweeper``).
2. A claim hint the claim's statement cannot carry (an attempt beyond the column's integer range, a NUL or a
   lone surrogate in the tool name or tenant) made the delivery raise (``OverflowError``, ``DataError``,
   ``UnicodeEncodeError``, whose log line quotes the whole forged string) instead of being read as no hint, as the
   README promises for a malformed one: the call waited for the sweeper. Fixed: ``ClaimHint.from_message``
   takes only values the call's columns store; anything else is no hint (``toolhub.claims``).
3. A message's own time limits (the ``timelimit`` header any client of the broker may set: ``apply_async(
   soft_time_limit=1)``) were obeyed by Celery's pool for ``execute_tool_call_task`` and ``advance_run_task``,
   whose limits toolhub derives from the longest tool timeout and the longest model deadline: a queued call of a
   3-second tool, delivered with a 1-second soft limit, failed ("internal error (SoftTimeLimitExceeded) ... do
   not retry") well within its own timeout, and a run's step would fail the same way. Fixed: both tasks run
   their deliveries under their own limits (``toolhub.tasks.OwnTimeLimits``, a Celery ``Request`` that drops
   the header); the tool task's follow-up budget reads the task's limit, not the message's.

Checked and found holding (no test here): an execute message (no hint, the call's true hint, a hint naming
another tenant) for a call ``pending_approval``, ``rejected``, ``cancelled``, ``expired``, ``succeeded``,
``failed``, ``denied``, ``invalid``, ``awaiting_result``, ``needs_attention`` or ``running`` changes nothing and
appends no audit event (the claim is a guarded UPDATE from ``queued`` only; every move to ``queued`` is a
database decision: policy, an approval, the reconciler, a batch's hand-back, the sagas' retry); a hint grants
nothing (the UPDATE also matches the hinted tool, tenant, run and attempt, the head of the audit chain moves
only when the row did, and the re-check reads the call's own user, tenant and agent); a random uuid claims
nothing; five deliveries of one queued call run it once; extra keyword arguments (``tenant=``, ``user=``) fail
the delivery with a ``TypeError`` before anything is read, and a malformed call id with a bounded
``ValueError``/``TypeError`` line that quotes no value; both are acknowledged (not redelivered). The messages
carry ids only (``execute_tool_call_task(call_id, hint)``, ``advance_run_task(run_id)``, the approvals' row
ids); only JSON is accepted (Celery's default ``accept_content``; no pickle). A tool no longer registered is
claimed and denied ("no longer exists; nothing was executed"). Read in the code, not run: a worker killed
mid-tool: the redelivered message (``acks_late``, ``reject_on_worker_lost``) finds the claim committed and does
nothing. An advance
message for a run waiting on approval or on an external result, cancelled, completed, failed, or unknown does
nothing (``run_advance`` locks the run and checks its status, its step lease, its turn's calls and its user's
standing); its tenant and user are the run's, never the message's. Webhook deliveries are claimed by a guarded
UPDATE (pending, due, attempts below the maximum), so a forged or duplicated id posts nothing extra; approval
e-mails go only for a pending request, to recipients read from the database. The beat tasks take no arguments
but ``sweep_runs_task(idle_seconds)``, whose runs are still stepped only if ``run_advance`` finds them ready.

Found, not fixed: ``email_approvers_task(request_id, event)`` takes the event from the message, so a duplicated
or forged message e-mails the approvers again, or says "escalated" of a request that never escalated (the
recipients and the request's details are read from the database); an agent run's step whose worker dies while
the model answers is stepped again by the run sweep once its lease ends, without a bound on such retries.
"""

import os
import signal
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from celery import Task
from celery.utils.imports import symbol_by_name
from celery.worker.strategy import create_request_cls
from django.contrib.auth.models import User
from django.utils import timezone

from agents_app.tasks import advance_run_task
from tests.helpers import for_a_worker, principal_for
from tests.integration.workers import Worker, wait_for
from tests.testapp.models import SideEffect
from toolhub import pipeline, sweeper
from toolhub.celery import app as celery_app
from toolhub.claims import ClaimHint, tool_call_claim
from toolhub.models import CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.sweeper import calls_reconcile_expired_leases
from toolhub.tasks import execute_tool_call_task
from toolhub.tools.context import ToolContext


def _request(user: User, tool_name: str, arguments: dict[str, Any]) -> ToolCall:
    return tool_call_request(
        request=CallRequest(
            tool_name=tool_name,
            arguments=arguments,
            principal=principal_for(user, tenant="acme"),
            context=ToolContext(tenant="acme"),
        )
    )


def _row(call: ToolCall) -> ToolCall:
    return ToolCall.objects.get(pk=call.pk)


def _expire_lease(call: ToolCall) -> None:
    """Let the call's lease run out now, as time would once its worker died."""
    ToolCall.objects.filter(pk=call.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


# --- 1. a call that kills its worker every time ----------------------------------------------------------------


@pytest.fixture
def own_queue() -> Iterator[str]:
    """Route this test's tasks to a queue only its own worker consumes."""
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = f"{previous}-review-ah"
    yield celery_app.conf.task_default_queue
    celery_app.control.purge()
    celery_app.conf.task_default_queue = previous


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_an_idempotent_call_that_kills_its_worker_every_time_is_not_retried_forever(
    own_queue: str, alice: User
) -> None:
    """Found: ``sweeper.calls_reconcile_expired_leases`` queues a ``running`` call of an idempotent (or atomic) tool
    again whenever its lease has ended, whatever its attempts: a call whose every run takes its worker process
    down (here: the pool process is SIGKILLed each time it runs it, as the OOM killer would) is claimed, kills a
    worker, and is queued again by every sweep after its lease, with no end (5 attempts and still going).
    Expect: the reconciler runs it again only while it has been claimed fewer than ``CALL_MAX_ATTEMPTS`` (3)
    times; after the third lost attempt it needs attention, with a reason naming the attempts.
    """
    worker = Worker("review-ah-poison", concurrency=1).start()
    try:
        call = _request(alice, "slow_idempotent", {"seconds": 60.0})
        reconciled: list[dict[str, int]] = []
        for attempt in range(1, 6):
            wait_for(
                lambda attempt=attempt: (_row(call).status, _row(call).attempts) == (CallStatus.RUNNING, attempt),
                timeout=30,
                what=f"attempt {attempt} running",
            )
            for pid in worker.child_pids():  # the poison: its pool process dies while running it
                os.kill(pid, signal.SIGKILL)
            _expire_lease(call)
            reconciled.append(calls_reconcile_expired_leases())
            if _row(call).status != CallStatus.QUEUED:
                break
    finally:
        worker.stop()
    row = _row(call)
    assert (row.status, row.attempts) == (CallStatus.NEEDS_ATTENTION, 3), (row.status, row.attempts, reconciled)
    assert reconciled[-1] == {"requeued": 0, "needs_attention": 1}
    assert SideEffect.objects.filter(call_id=str(call.pk)).count() == 0


@pytest.mark.django_db(transaction=True)
def test_an_atomic_call_whose_worker_keeps_dying_needs_attention_after_its_last_attempt(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: the same unbounded retry for an atomic tool's call (its lost attempts leave no effect, so the
    reconciler always ran it again): attempt after attempt, for as long as its workers keep dying.
    Expect: after its third lost attempt the call needs attention, with an error saying that nothing it did was
    kept (its lost attempts rolled back), and it is not queued again.
    """
    monkeypatch.setattr(sweeper, "dispatch_call", lambda call: None)
    with for_a_worker():
        call = _request(alice, "atomic_effect", {"note": "poison"})
    for attempt in range(1, 4):
        claimed = tool_call_claim(call_id=call.pk, worker=f"w{attempt}")
        assert claimed is not None and claimed.attempts == attempt
        _expire_lease(call)  # its worker died running it
        counts = calls_reconcile_expired_leases()
        if attempt < 3:
            assert counts == {"requeued": 1, "needs_attention": 0}
    row = _row(call)
    assert (row.status, row.attempts) == (CallStatus.NEEDS_ATTENTION, 3), (row.status, row.attempts)
    assert "nothing it did was kept" in row.error
    assert counts == {"requeued": 0, "needs_attention": 1}
    assert tool_call_claim(call_id=call.pk, worker="w4") is None


# --- 2. a claim hint the claim cannot carry --------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "hint",
    [
        pytest.param(["record_effect", "acme", None, 10**30], id="attempt-beyond-integer"),
        pytest.param(["record_effect", "ac\x00me", None, 0], id="nul-in-tenant"),
        pytest.param(["record_effect\ud800" + "x" * 50_000, "acme", None, 0], id="lone-surrogate-in-tool"),
    ],
)
def test_a_hint_the_claim_cannot_carry_is_read_as_no_hint(
    alice: User, hint: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Found: ``ClaimHint.from_message`` checks the hint's types only; the claim's statement then raised on its
    values (``OverflowError`` for an attempt beyond the integer column, ``DataError`` for a NUL,
    ``UnicodeEncodeError`` for a lone surrogate, whose log line quotes the whole forged string), so the delivery
    failed and the queued call waited for the sweeper, although "a stale or malformed hint claims nothing under
    it and the worker reads the call first" (README).
    Expect: such a hint is no hint: the delivery reads the call, runs it once, and logs no error.
    """
    with for_a_worker():
        call = _request(alice, "record_effect", {"note": "hinted"})
    assert _row(call).status == CallStatus.QUEUED
    result = execute_tool_call_task.apply(args=[str(call.pk)], kwargs={"hint": hint})
    assert result.state == "SUCCESS", repr(result.result)[:300]
    assert _row(call).status == CallStatus.SUCCEEDED
    assert SideEffect.objects.filter(call_id=str(call.pk)).count() == 1
    assert not [record for record in caplog.records if record.levelname == "ERROR"]
    assert ClaimHint.from_message(hint) is None


# --- 3. a message's own time limits ------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_message_with_a_tighter_time_limit_does_not_cut_a_tool_within_its_timeout(
    own_queue: str, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: Celery's pool obeys a message's ``timelimit`` header; any client of the broker may set it. A queued
    call of ``slow_effect`` (3 s, its timeout the default 300 s), delivered with ``soft_time_limit=1``, failed
    with "The tool failed with an internal error (SoftTimeLimitExceeded) ... do not retry", although the task's own
    limits "must never cut a tool that is still within its time" (``toolhub.tasks._ToolCallTask``).
    Expect: the delivery runs under the task's own limits; the call succeeds, with its one effect.
    """
    monkeypatch.setattr(pipeline, "dispatch_call", lambda call: None)  # the test sends the only message
    call = _request(alice, "slow_effect", {"seconds": 3.0})
    assert _row(call).status == CallStatus.QUEUED
    worker = Worker("review-ah-limits", concurrency=1).start()
    try:
        execute_tool_call_task.apply_async(
            args=[str(call.pk)], kwargs={"hint": ClaimHint.of(call).message()}, soft_time_limit=1, time_limit=2
        )
        wait_for(lambda: _row(call).status not in (CallStatus.QUEUED, CallStatus.RUNNING), timeout=30, what="settled")
    finally:
        worker.stop()
    row = _row(call)
    assert row.status == CallStatus.SUCCEEDED, (row.status, row.error)
    assert SideEffect.objects.filter(call_id=str(call.pk)).count() == 1


@pytest.mark.parametrize("task", [execute_tool_call_task, advance_run_task], ids=["execute", "advance"])
def test_a_worker_runs_a_budgeted_task_under_its_own_limits_whatever_the_message_says(task: Task) -> None:
    """Found: the worker's request for ``advance_run_task`` (as for the tool task) takes the message's ``timelimit``
    header as the limits the pool enforces: a message with a 1-second soft limit cuts a run's model step within
    its provider's deadline (the adapter's ``SoftTimeLimitExceeded`` fails the run, "Model adapter error").
    Expect: the request the worker builds hands the pool the task's own soft and hard limits.
    """
    pool = mock.Mock()
    request_cls = create_request_cls(symbol_by_name(task.Request), task, pool, "review-ah@host", None, app=celery_app)
    headers = {"id": "forged", "task": task.name, "timelimit": [2, 1]}
    message = mock.Mock(headers=headers, body=(["00000000-0000-0000-0000-000000000000"], {}, {}))
    request = request_cls(message, app=celery_app, task=task, headers=headers, body=message.body, decoded=True)
    request.execute_using_pool(pool)
    limits = pool.apply_async.call_args.kwargs
    assert (limits["soft_timeout"], limits["timeout"]) == (task.soft_time_limit, task.time_limit)
