"""Review 2026-12-07 (c): calls settled together (``toolhub.calls.settling_together``), one wake per run.

Reviews ge and gk (tests/security_review/test_review_2026_12_06_{ge,gk}.py) made a run's cancel, a failed
compensation's withdrawn inner calls and the calls admin's bulk cancel wake each run once; this review tried the
block's edges (main at 8711560).

Each finding's test fails on the code as found and says what was found and what is expected.

Findings:

1. A context copied inside a ``settling_together`` block (an asyncio task, ``copy_context``) still named the block
   after it had finished; a ``settling_together`` block entered there later took it for an enclosing block and
   registered no follow-up of its own, so every call it settled did its follow-ups at once: three calls of one run
   withdrawn together in it woke the run three times. A block now yields to an enclosing one only while that one has
   not finished (``SettledTogether.finished``); otherwise it is a block of its own, told together, its run woken once
   (``test_a_block_entered_in_a_context_copied_from_a_finished_block_tells_its_calls_together``).

Checked and holding:

- The calls admin's "Cancel selected calls" over the held calls of two runs: one ``advance_run_task`` per run (two in
  all), every call with exactly one ``call.cancelled`` and one ``approval.cancelled`` event, the trail intact
  (``test_bulk_cancel_over_two_runs_wakes_each_once_and_sends_one_webhook_per_request``).
- The left item "one ``approval.cancelled`` webhook is sent per request" is the documented contract, not a storm:
  README (Approvals, "Expiry, escalation, notifications"; "Cancelling a run") names the webhook event of each
  withdrawn request, and each delivery carries its own request, call and run, is retried and signed on its own. It
  is kept: N requests withdrawn together are N deliveries, each written in the withdrawal's transaction and handed to
  a worker only after commit (N ``deliver_webhook_task`` messages, sent nowhere before it); the README now says so
  in as many words (same test).
- A withdrawal rolled back in a savepoint inside a block sends nothing of its own: no webhook delivery row, no
  ``approval_cancelled`` signal, no delivery task; the committed one sends one of each
  (``test_a_withdrawal_rolled_back_in_the_block_sends_no_webhook_nor_signal``).
- A block inside a Celery task (``running_after_task``, as a tool worker's): the run's one wake goes to the
  after-task hook (advanced in that worker after its task), no broker message, and it is done once however many of
  the run's calls the block settled (``test_a_block_in_a_tool_task_hands_the_runs_one_wake_to_after_task``).
- A run cancelled while a worker finishes one of its calls: the cancel withdraws the held call, leaves the running
  one (its claim, ``running``) to finish; the worker then records ``succeeded`` with its own events, the run stays
  ``cancelled`` and the wake of each commit is harmless (``run_advance`` finds it ended): one wake for the cancel,
  one for the finished call (``test_a_run_cancelled_while_a_worker_finishes_a_call_stays_cancelled``).
- A block outside any transaction (the admin's loop, one commit per call, PostgreSQL's one-statement writes): each
  call's notice is told at its own commit, inside the block, its follow-up parked; the block's end (its ``finally``)
  does it once, also when it raises (gk's ``test_calls_settled_before_the_block_raised_...`` covers the raising
  case inside a transaction; the admin test above covers the loop outside one).
- Nested blocks: the inner one registers nothing, the outermost tells; a call settled (outside any block) in a
  context copied in a block and run after it is told at once (gk's tests). A block entered in such a context before
  the enclosing block's follow-ups ran (same connection, same transaction) still joins it: they are done once, at
  its commit.
- A wake lost when the process dies between the commit and the block's end (or the send): the README (Agents, "When
  a tool worker settles ...") promises the runs sweep (every 60 s) wakes a running or waiting run idle for a
  minute with every call of its turn settled (``runs_to_wake``), cancelled calls count as settled: a bulk cancel of a
  run's calls that died before its one wake is advanced by the sweep; a cancelled run has ended and needs no wake.
  Process death was not simulated (no timed tests).
- Two runs in one block are two keys (``("agents_app.wake", run_id)``), each woken once; a call of no run wakes
  nothing. The sagas' listener catches its own errors, so a failure there costs no call its run's wake.
"""

import contextvars
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from celery import Task
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client
from django.test.utils import override_settings

from agents_app.cancelling import run_cancel
from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.services import agent_create
from approvals.models import ApprovalRequest, WebhookDelivery
from approvals.signals import approval_cancelled
from tests.agents.conftest import start_run  # noqa: F401 - a fixture, registered by being imported here
from tests.helpers import RequestCall, assert_audit_intact, for_a_worker
from tests.security_review.test_review_2026_12_06_ge import _held_run
from tests.security_review.test_review_2026_12_06_gk import _Heard, _held, heard  # noqa: F401 - heard: a fixture
from toolhub.calls import settling_together
from toolhub.claims import tool_call_claim
from toolhub.execution import tool_call_run_claimed
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.signals import running_after_task
from toolhub.tools.registry import registry
from toolhub.waiting import tool_call_withdraw

pytestmark = pytest.mark.django_db

StartRun = Callable[..., AgentRun]


def _sent_messages(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """Every broker message sent from now on (task name, args); none is run."""
    sent: list[tuple[str, tuple[Any, ...]]] = []

    def apply_async(task: Task, args: Any = None, *more: Any, **options: Any) -> None:
        sent.append((task.name, tuple(args or ())))

    monkeypatch.setattr(Task, "apply_async", apply_async)
    return sent


def _with_webhook(settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": "https://hooks.example.invalid/toolhub"}


def test_bulk_cancel_over_two_runs_wakes_each_once_and_sends_one_webhook_per_request(
    start_run: StartRun,  # noqa: F811 - the imported fixture
    request_call: RequestCall,
    alice: User,
    acme_operator: User,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Holding: the admin's bulk cancel over two runs' held calls wakes each run once; each call keeps one
    ``call.cancelled`` and one ``approval.cancelled`` event; the webhook is one delivery per request (the documented
    contract), each handed to a worker after its withdrawal committed."""
    first = _held_run(start_run, request_call, alice, "acme", 2)
    second = start_run(Agent.objects.get(name="held-acme"), alice, context={"tenant": "acme"})
    assert ToolCall.objects.filter(run_id=second.pk, status=CallStatus.PENDING_APPROVAL).count() == 1
    calls = ToolCall.objects.filter(run_id__in=[first.pk, second.pk])
    ids = [str(pk) for pk in calls.values_list("pk", flat=True)]
    _with_webhook(settings)
    sent = _sent_messages(monkeypatch)
    selected = {"action": "cancel_selected", "_selected_action": ids, "apply": "1", "reason": "wrong customer"}

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        operator = Client()
        operator.force_login(acme_operator)
        done = operator.post("/admin/toolhub/toolcall/", selected, follow=True)
        assert sent == [], "a message went to the broker before the commit"

    assert "Cancelled 3 call(s)." in done.content.decode()
    assert callbacks, "nothing was left for after the commit"
    wakes = sorted(args for name, args in sent if name == "agents_app.tasks.advance_run_task")
    assert wakes == sorted([(str(first.pk),), (str(second.pk),)])
    deliveries = WebhookDelivery.objects.filter(event="approval.cancelled")
    requests = ApprovalRequest.objects.filter(call__run_id__in=[first.pk, second.pk])
    assert sorted(d.payload["request"] for d in deliveries) == sorted(requests.values_list("pk", flat=True))
    delivered = sorted(args for name, args in sent if name == "approvals.tasks.deliver_webhook_task")
    assert delivered == sorted((pk,) for pk in deliveries.values_list("pk", flat=True))
    assert len(sent) == 2 + 3
    for call in calls:
        assert call.status == CallStatus.CANCELLED
        events = AuditEvent.objects.filter(call_id=call.pk)
        assert events.filter(event_type="call.cancelled").count() == 1
        assert events.filter(event_type="approval.cancelled").count() == 1
    assert_audit_intact()


def test_a_withdrawal_rolled_back_in_the_block_sends_no_webhook_nor_signal(
    request_call: RequestCall,
    alice: User,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Holding: in a block, a withdrawal in a savepoint that rolls back leaves no webhook delivery, no
    ``approval_cancelled`` signal and no delivery task; the committed one gets one of each, after commit."""
    kept, undone = (request_call("risky_effect", {"note": f"n{n}"}, alice, tenant="acme") for n in range(2))
    _with_webhook(settings)
    sent = _sent_messages(monkeypatch)
    told: list[int] = []

    def listener(sender: type, request: ApprovalRequest, **kwargs: Any) -> None:
        told.append(request.call_id)

    approval_cancelled.connect(listener, weak=False, dispatch_uid="review-c")
    try:
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic(), settling_together():
            assert tool_call_withdraw(call=kept, actor="user:alice", reason="kept")
            try:
                with transaction.atomic():
                    assert tool_call_withdraw(call=undone, actor="user:alice", reason="undone")
                    raise RuntimeError("the savepoint rolls back")
            except RuntimeError:
                pass
            assert told == [] and sent == []
    finally:
        approval_cancelled.disconnect(dispatch_uid="review-c")

    assert told == [kept.pk]
    assert [d.payload["call"] for d in WebhookDelivery.objects.all()] == [str(kept.pk)]
    assert [name for name, _ in sent] == ["approvals.tasks.deliver_webhook_task"]
    assert ToolCall.objects.get(pk=undone.pk).status == CallStatus.PENDING_APPROVAL
    assert not AuditEvent.objects.filter(call_id=undone.pk, event_type="approval.cancelled").exists()


def test_a_block_in_a_tool_task_hands_the_runs_one_wake_to_after_task(
    start_run: StartRun,  # noqa: F811 - the imported fixture
    request_call: RequestCall,
    alice: User,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Holding: settled together inside a tool task, the run's three calls give one after-task advance (in that
    worker, after its task), no broker message."""
    run = _held_run(start_run, request_call, alice, "acme", 3)
    sent = _sent_messages(monkeypatch)
    advanced: list[tuple[uuid.UUID, float]] = []
    monkeypatch.setattr(
        "agents_app.receivers._advance_here", lambda run_id, seconds_left: advanced.append((run_id, seconds_left))
    )
    with running_after_task(seconds=600.0):
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic(), settling_together():
            for call in ToolCall.objects.filter(run_id=run.pk):
                assert tool_call_withdraw(call=call, actor="user:alice", reason="withdrawn")
        assert advanced == [], "advanced before the task's own work was done"
    assert [run_id for run_id, _ in advanced] == [run.pk]
    assert sent == []


def _mixed_agent() -> Agent:
    script = [
        {"tool_calls": [{"name": "risky_effect", "arguments": {"note": "held"}}]},
        {"content": "done"},
    ]
    return agent_create(
        name="mixed-c", provider="scripted", tools=["risky_effect", "record_effect"], tenant="acme", script=script
    )


@override_settings(CELERY_TASK_ALWAYS_EAGER=False)
def test_a_run_cancelled_while_a_worker_finishes_a_call_stays_cancelled(
    start_run: StartRun,  # noqa: F811 - the imported fixture
    request_call: RequestCall,
    alice: User,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Holding: a run cancelled while a worker runs one of its calls: the held call withdrawn, the running one left
    to finish; it then succeeds with its own events, the run stays cancelled; one wake per commit, harmless."""
    run = start_run(_mixed_agent(), alice, context={"tenant": "acme"})
    assert run.status == RunStatus.WAITING
    with for_a_worker():
        queued = request_call("record_effect", {"note": "busy"}, alice, run.pk, tenant="acme")
    assert queued.status == CallStatus.QUEUED
    claimed = tool_call_claim(call_id=queued.pk, worker="w1")
    assert claimed is not None and claimed.status == CallStatus.RUNNING
    sent = _sent_messages(monkeypatch)

    with django_capture_on_commit_callbacks(execute=True):
        assert run_cancel(run_id=run.pk, actor="user:alice", reason="stop")
    held = ToolCall.objects.get(run_id=run.pk, tool_name="risky_effect")
    assert held.status == CallStatus.CANCELLED
    assert ToolCall.objects.get(pk=queued.pk).status == CallStatus.RUNNING
    assert sent == [("agents_app.tasks.advance_run_task", (str(run.pk),))]

    tool = registry.get("record_effect")
    assert tool is not None
    with django_capture_on_commit_callbacks(execute=True):
        done = tool_call_run_claimed(call=claimed, tool=tool, arguments={"note": "busy"}, worker="w1")
    assert done.status == CallStatus.SUCCEEDED
    assert AuditEvent.objects.filter(call_id=queued.pk, event_type="call.succeeded").count() == 1
    assert [args for _, args in sent] == [(str(run.pk),), (str(run.pk),)]
    from agents_app.loop import run_advance

    run_advance(run_id=run.pk)  # the wake the worker's commit sent finds the run ended
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED
    assert_audit_intact()


def test_a_run_cancel_that_fails_mid_way_tells_and_sends_nothing(
    start_run: StartRun,  # noqa: F811 - the imported fixture
    request_call: RequestCall,
    alice: User,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Holding: a run's cancel that raises after withdrawing two of its four calls keeps nothing: the run still
    waiting, every call still held with its request, no webhook delivery, no wake, nothing told."""
    run = _held_run(start_run, request_call, alice, "acme", 4)
    _with_webhook(settings)
    sent = _sent_messages(monkeypatch)
    withdrawn: list[uuid.UUID] = []

    def failing_third(*, call: ToolCall, actor: str, reason: str) -> bool:
        if len(withdrawn) == 2:
            raise RuntimeError("the third withdrawal failed")
        withdrawn.append(call.pk)
        return tool_call_withdraw(call=call, actor=actor, reason=reason)

    monkeypatch.setattr("agents_app.cancelling.tool_call_withdraw", failing_third)
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError):
        run_cancel(run_id=run.pk, actor="user:alice", reason="stop")

    assert len(withdrawn) == 2
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    assert set(ToolCall.objects.filter(run_id=run.pk).values_list("status", flat=True)) == {CallStatus.PENDING_APPROVAL}
    assert not WebhookDelivery.objects.exists()
    assert sent == []
    assert not AuditEvent.objects.filter(run_id=run.pk, event_type__in=["call.cancelled", "run.cancelled"]).exists()


def test_a_block_entered_in_a_context_copied_from_a_finished_block_tells_its_calls_together(
    request_call: RequestCall,
    alice: User,
    heard: _Heard,  # noqa: F811 - the imported fixture
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: a context copied inside a ``settling_together`` block still named that block after it had finished; a
    block entered there later took it for an enclosing one and registered no follow-up of its own, so each call it
    settled did its follow-ups at once: three calls of one run withdrawn together there, three wakes for the run.

    Expect: such a block is one of its own: its calls told together, the run's follow-up done once.
    """
    first, *later = _held(request_call, alice, 4)
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic(), settling_together():
        copied = contextvars.copy_context()
        assert tool_call_withdraw(call=first, actor="user:alice", reason="first")
    assert heard.follow_ups == [None]

    def withdraw_together() -> None:
        with settling_together():
            for call in later:
                assert tool_call_withdraw(call=call, actor="user:alice", reason="later")

    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        copied.run(withdraw_together)
    assert heard.told == [first.id, *(call.id for call in later)]
    assert heard.follow_ups == [None, None], f"{len(heard.follow_ups) - 1} follow-ups for three calls settled together"
