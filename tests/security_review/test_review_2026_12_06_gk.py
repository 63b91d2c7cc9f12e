"""Review 2026-12-06 (gk): review ge's two fixes (calls settled together; one unbuildable tool left out of listings).

Each finding's test fails on the code as found (main at b4a99d8) and says what was found and what is expected.

Findings:

1. ``settling_together`` kept its own list of the calls settled in its block and told them all after commit, outside
   Django's savepoint bookkeeping: a call whose transition was made in a savepoint that rolled back inside the block
   was still told as settled (``call_settled`` with a ``ToolCall`` reading ``cancelled`` while its row stayed held:
   a run woken for nothing, the sagas' listener judging a state that never committed); and when the block raised
   and its caller committed anyway (or the block ran outside any transaction, where each transition commits by
   itself), the calls it had settled were never told at all (no wake for their run, no notice to the sagas) until a
   sweep; and a context copied inside the block (an asyncio task) kept its list after it was told, so a call
   settled there later was never told. Each settled call's notice is now its own ``transaction.on_commit`` again
   (kept or dropped with its savepoint by Django, as every other after-commit action), carrying the block's
   ``SettledTogether``; the block registers, even when it raises, the after-commit action that does the follow-ups
   once (one wake per run); a notice told after that does its follow-ups at once.
3. The calls admin's "Cancel selected calls" withdrew each call apart, outside ``settling_together``: cancelling the
   30 calls a run waited on sent 30 ``advance_run_task`` messages for it. The action's loop is now one block.
4. The unknown-tool message (REST, MCP, the agent loop, an agentic tool's inner model) suggested a tool whose schema
   cannot be built, one ``buildable`` leaves out of every listing: "Did you mean: <that tool>?", for a call it then
   refuses. The suggestions (and the "Available tools" list) now name only tools that can be listed.

Checked and holding:

- A call to a tool whose schema cannot be built is refused, never executed: ``invalid`` with "cannot validate its
  arguments (an error in its definition, logged for its developers); nothing was executed" (no builder internals).
- Nested ``settling_together`` blocks: the inner one tells nothing of its own, the outer one once.
- A listener of ``call_settled`` raising: logged (robust on-commit), the other calls' notices and the wake still done.
- The code tools' catalogue sync (``tool_catalogue_sync``) reads only code tools, kept from a deploy by E001.
"""

import contextvars
import logging
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from celery import Task
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client

from agents_app.models import AgentRun
from tests.agents.conftest import start_run  # noqa: F401 - a fixture, registered by being imported here
from tests.helpers import RequestCall, assert_audit_intact
from tests.security_review.test_review_2026_12_06_ge import _held_run, _unbuildable
from toolhub.calls import settling_together
from toolhub.feedback import unknown_tool_message
from toolhub.models import CallStatus, ToolCall
from toolhub.signals import call_settled, once_for_calls_settled_together
from toolhub.tools.registry import registry
from toolhub.waiting import tool_call_withdraw

pytestmark = pytest.mark.django_db


class _Heard:
    """What ``call_settled``'s listeners are told, and the follow-ups done for calls settled together."""

    def __init__(self) -> None:
        self.told: list[uuid.UUID] = []
        self.follow_ups: list[Any] = []

    def __call__(self, sender: type, call_id: uuid.UUID, run_id: uuid.UUID | None, **kwargs: Any) -> None:
        self.told.append(call_id)
        if not once_for_calls_settled_together(("gk", run_id), lambda: self.follow_ups.append(run_id)):
            self.follow_ups.append(run_id)


@pytest.fixture
def heard() -> Any:
    listener = _Heard()
    call_settled.connect(listener, weak=False, dispatch_uid="review-gk")
    yield listener
    call_settled.disconnect(dispatch_uid="review-gk")


def _held(request_call: RequestCall, user: User, count: int) -> list[ToolCall]:
    calls = [request_call("risky_effect", {"note": f"n{number}"}, user, tenant="acme") for number in range(count)]
    assert {call.status for call in calls} == {CallStatus.PENDING_APPROVAL}
    return calls


def test_a_call_settled_in_a_rolled_back_savepoint_is_not_told_as_settled(
    request_call: RequestCall, alice: User, heard: _Heard, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: in a ``settling_together`` block, a call withdrawn inside a savepoint that then rolled back was told as
    settled after commit (its ``ToolCall`` reading ``cancelled``, its row still held): Django dropped nothing
    because the block's own list, not an on-commit action, held it.

    Expect: only the call whose withdrawal committed is told; the follow-up done once.
    """
    kept, undone = _held(request_call, alice, 2)
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic(), settling_together():
        assert tool_call_withdraw(call=kept, actor="user:alice", reason="kept")
        try:
            with transaction.atomic():
                assert tool_call_withdraw(call=undone, actor="user:alice", reason="undone")
                raise RuntimeError("the savepoint rolls back")
        except RuntimeError:
            pass
    assert ToolCall.objects.get(pk=undone.pk).status == CallStatus.PENDING_APPROVAL
    assert heard.told == [kept.id]
    assert heard.follow_ups == [None]


def test_calls_settled_before_the_block_raised_are_told_when_their_transaction_commits(
    request_call: RequestCall, alice: User, heard: _Heard, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: when a ``settling_together`` block raised and its caller went on and committed (as a loop over calls
    outside any transaction does: each withdrawal committed by itself), the calls settled before the exception were
    never told: no wake for their runs, no notice to the sagas, until a sweep found them.

    Expect: every call whose withdrawal committed is told, the follow-ups done once.
    """
    first, second = _held(request_call, alice, 2)
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        try:
            with settling_together():
                assert tool_call_withdraw(call=first, actor="user:alice", reason="first")
                assert tool_call_withdraw(call=second, actor="user:alice", reason="second")
                raise RuntimeError("the third one failed")
        except RuntimeError:
            pass
    assert set(ToolCall.objects.filter(pk__in=[first.pk, second.pk]).values_list("status", flat=True)) == {
        CallStatus.CANCELLED
    }
    assert sorted(heard.told) == sorted([first.id, second.id])
    assert heard.follow_ups == [None]


def test_a_context_copied_in_the_block_tells_a_call_it_settles_after_the_block(
    request_call: RequestCall, alice: User, heard: _Heard, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a context copied inside a ``settling_together`` block (an asyncio task, ``copy_context``) kept the
    block's list after the block had told it: a call that context settled later was appended to a list nobody read
    again, so its listeners (its run's wake, the sagas) never heard of it.

    Expect: such a call is told after its own commit, its follow-up done at once.
    """
    first, later = _held(request_call, alice, 2)
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic(), settling_together():
        copied = contextvars.copy_context()
        assert tool_call_withdraw(call=first, actor="user:alice", reason="first")
    assert heard.told == [first.id]
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        assert copied.run(tool_call_withdraw, call=later, actor="user:alice", reason="later")
    assert heard.told == [first.id, later.id]
    assert heard.follow_ups == [None, None]


def test_nested_blocks_and_a_raising_listener_still_tell_every_call_once(
    request_call: RequestCall,
    alice: User,
    heard: _Heard,
    django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Holding: nested blocks tell each call once and do the follow-up once; a listener raising for one call is
    logged and costs the others nothing."""
    calls = _held(request_call, alice, 3)

    def failing(sender: type, call_id: uuid.UUID, **kwargs: Any) -> None:
        if call_id == calls[0].id:
            raise RuntimeError("a listener failed")

    call_settled.connect(failing, weak=False, dispatch_uid="review-gk-failing")
    try:
        with caplog.at_level(logging.ERROR), django_capture_on_commit_callbacks(execute=True):
            with transaction.atomic(), settling_together():
                for call in calls:
                    with settling_together():
                        assert tool_call_withdraw(call=call, actor="user:alice", reason="nested")
    finally:
        call_settled.disconnect(dispatch_uid="review-gk-failing")
    assert sorted(heard.told) == sorted(call.id for call in calls)
    assert heard.follow_ups == [None]


def test_the_unknown_tool_message_names_no_tool_left_out_of_the_listings(
    request_call: RequestCall, alice: User
) -> None:
    """Found: a misspelt call was answered "Did you mean: <a tool whose schema cannot be built>?", a tool every
    listing leaves out (``buildable``) and whose calls are refused.

    Expect: the suggestion, and the list of available tools, name only tools that can be listed; a call to the
    broken tool itself refused as invalid, nothing executed, no builder internals in its error.
    """
    broken = _unbuildable("gk_unbuildable_probe")
    with registry.temporarily(broken):
        missed = request_call("gk_unbuildable_prob", {"pin": "aab"}, alice)
        called = request_call(broken.name, {"pin": "aab"}, alice)
        listed = unknown_tool_message("zzzzzzzz", [broken.name, "record_effect"])
    assert missed.status == CallStatus.INVALID and broken.name not in missed.error
    assert broken.name not in listed and "record_effect" in listed
    assert called.status == CallStatus.INVALID and "nothing was executed" in called.error
    assert "look-ahead" not in called.error and "regex" not in called.error


def test_an_operator_cancelling_many_calls_of_a_run_in_the_admin_wakes_it_once(
    start_run: Callable[..., AgentRun],  # noqa: F811 - the imported fixture
    request_call: RequestCall,
    alice: User,
    acme_operator: User,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: the calls admin's "Cancel selected calls" withdrew each selected call apart, so cancelling the 30 calls
    a run waited on sent 30 ``advance_run_task`` messages for that run (each a worker's run lock and read, all but
    the last finding calls still open): ``settling_together`` served a run's cancel, not the operators' bulk one.

    Expect: one wake for the run; every call withdrawn with its own audit events and approval request's end.
    """
    count = 30
    run = _held_run(start_run, request_call, alice, "acme", count)
    ids = [str(pk) for pk in ToolCall.objects.filter(run_id=run.pk).values_list("pk", flat=True)]
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(Task, "apply_async", lambda task, args=None, *more, **options: sent.append(tuple(args or ())))
    selected = {"action": "cancel_selected", "_selected_action": ids, "apply": "1", "reason": "wrong customer"}

    with django_capture_on_commit_callbacks(execute=True):
        operator = Client()
        operator.force_login(acme_operator)
        done = operator.post("/admin/toolhub/toolcall/", selected, follow=True)

    assert f"Cancelled {count} call(s)." in done.content.decode()
    assert set(ToolCall.objects.filter(run_id=run.pk).values_list("status", flat=True)) == {CallStatus.CANCELLED}
    assert sent == [(str(run.pk),)], f"{len(sent)} broker messages for one run"
    assert_audit_intact()
