"""Signals through which the core tells other apps what happened, without importing them."""

import logging
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from django.dispatch import Signal

__all__ = [
    "approval_needed",
    "call_askers",
    "approval_withdrawing",
    "approval_shortfall",
    "call_settled",
    "call_suspended",
    "rollback_reopened",
    "saga_key_reserved",
    "after_task",
    "once_for_calls_settled_together",
    "running_after_task",
    "SettledTogether",
    "task_seconds_left",
]

logger = logging.getLogger(__name__)

#: A call became ``pending_approval``; kwargs: ``call`` (ToolCall), ``reason`` (str). Sent inside the
#: transaction, so the receiver's rows (the approval request) commit or roll back with the call.
approval_needed = Signal()

#: Asked (``send``) when a call's approval request opens or reopens; kwargs: ``call``. A receiver returns the ids of
#: the people who set the call in motion in its user's name (an operator who retried its run): four eyes bar them
#: from deciding it (``ApprovalRequest.askers``), as the requester is.
call_askers = Signal()

#: A call held for approval is being withdrawn (cancelled by its requester, an operator or with its run); kwargs:
#: ``call``, ``actor``, ``reason``. Sent inside the transaction: the receiver that holds the call's request ends it
#: and settles the call ``cancelled`` in one write, and returns True; with no such answer the core settles the call.
approval_withdrawing = Signal()

#: Asked (``send``) before a worker runs a call an operator approved; kwargs: ``call``. A receiver returns why the
#: approval no longer suffices (governance asks more approvals of the call now than it was released on), else None:
#: the worker then sends the call back for a new decision instead of running it (``toolhub.execution_checks``).
approval_shortfall = Signal()

#: A call reached a settled status; kwargs: ``call_id``, ``run_id`` (or None) and ``call`` (the ToolCall as that
#: transition left it, so a listener need not read it again). Sent after commit. A receiver whose follow-up
#: would be another broker message may hand it to ``after_task`` instead, and one whose follow-up serves many
#: calls at once (a run's wake-up) to ``once_for_calls_settled_together``.
call_settled = Signal()

#: A running call now waits for someone outside, and its run with it; kwargs: ``call``. Its tool suspended itself
#: (``ToolSuspend``: the call awaits its result, with its ``suspension``), or its worker sent it to the approval desk
#: (``toolhub.waiting.tool_call_require_reapproval``: no ``suspension``). Sent after commit, so work the tool left
#: for later (a subagent's child run) starts only once the call is parked and can be settled.
call_suspended = Signal()

#: A finished rollback of a run's saga was opened again (``toolhub.sagas.records.reopen_rollback``); kwargs: ``run_id``,
#: ``rollback_id``. Sent after commit. A held step or a resolution finishes it again at once with no call settling, so
#: nothing else would wake the run (one that ended, above all) to tell its conversation (``saga_rollback_notes``).
rollback_reopened = Signal()

#: Asked (``send``) before a direct call takes a saga id; kwargs: ``key``, ``tenant``. A receiver returns True when
#: the key is one an app keeps for its own sagas in that tenant (an agent run's id, before the run has made any
#: call), so no caller squats it.
saga_key_reserved = Signal()

#: What runs after a task's own work: called with the seconds left before the task's soft time limit.
AfterTaskAction = Callable[[float], None]


@dataclass
class _AfterTask:
    deadline: float  # time.monotonic() at which the task's soft time limit strikes
    actions: list[AfterTaskAction] = field(default_factory=list)


_after_task: ContextVar[_AfterTask | None] = ContextVar("toolhub_after_task", default=None)


def after_task(action: AfterTaskAction) -> bool:
    """Have ``action`` run in this process once the current worker task's own work is done.

    Saves a broker hop for follow-up work (the agent loop's next step after a run's last call
    settled). ``action`` is told how many seconds the task has left, and must send its own message
    instead when that is not enough. Returns False outside a task that offers this: the caller then
    does what it would have done without it.
    """
    scope = _after_task.get()
    if scope is None:
        return False
    scope.actions.append(action)
    return True


def task_seconds_left() -> float | None:
    """Seconds before the current worker task's soft time limit, or None outside such a task."""
    scope = _after_task.get()
    return None if scope is None else scope.deadline - time.monotonic()


@contextmanager
def running_after_task(*, seconds: float) -> Iterator[None]:
    """Collect ``after_task`` actions during the block and run them after it, in order.

    ``seconds``: how long the task may still run from now (up to its soft time limit). When the block
    raises, the actions are told no time is left, so they hand their work to the broker.
    """
    scope = _AfterTask(deadline=time.monotonic() + seconds)
    token = _after_task.set(scope)
    failed = True
    try:
        yield
        failed = False
    finally:
        _after_task.reset(token)
        for action in scope.actions:
            left = 0.0 if failed else scope.deadline - time.monotonic()
            try:
                action(left)
            except Exception:  # noqa: BLE001 - a follow-up must not undo the task's own recorded work
                logger.exception("an after-task action failed; the sweeps repair what it left undone")


#: The follow-ups of calls settled together (``SettledTogether.telling``), by key: each done once, after all were told.
_together: ContextVar[dict[Hashable, Callable[[], None]] | None] = ContextVar("toolhub_settled_together", default=None)


def once_for_calls_settled_together(key: Hashable, action: Callable[[], None]) -> bool:
    """Have ``action`` done once for every call told of with the same ``key`` while calls settled together are told.

    A cancelled run withdraws its 200 waiting calls in one transaction: its listeners hear of each, but the run is
    woken once (one broker message, not 200). Returns False outside such a telling: then do ``action`` now.
    """
    scope = _together.get()
    if scope is None:
        return False
    scope.setdefault(key, action)
    return True


class SettledTogether:
    """The follow-ups of several calls settled together: each call told in ``telling``, then ``finish`` does them.

    Each call's notice and the ``finish`` are after-commit actions of their own (``toolhub.calls.settling_together``),
    so Django keeps or drops each with its savepoint; a notice told after ``finish`` (a context copied while the
    calls were settling) does its follow-ups at once, lost to no one.
    """

    def __init__(self) -> None:
        self._actions: dict[Hashable, Callable[[], None]] = {}
        self._finished = False

    @contextmanager
    def telling(self) -> Iterator[None]:
        """Listeners told in the block hand their follow-ups (``once_for_calls_settled_together``) to ``finish``."""
        if self._finished:
            yield
            return
        token = _together.set(self._actions)
        try:
            yield
        finally:
            _together.reset(token)

    @property
    def finished(self) -> bool:
        """Whether ``finish`` ran: a notice told now, or a block entered in a context still naming it, is on its own."""
        return self._finished

    def finish(self) -> None:
        """Do the follow-ups, each key's once, in order; one that fails is logged and the others still done.

        What it left undone the sweeps repair (a run whose wake-up was lost is woken by ``sweep_runs_task``).
        """
        self._finished = True
        actions, self._actions = list(self._actions.values()), {}
        for action in actions:
            try:
                action()
            except Exception:  # noqa: BLE001 - one run's lost wake-up must not cost the others theirs
                logger.exception("a follow-up of calls settled together failed; the sweeps repair what it left undone")
