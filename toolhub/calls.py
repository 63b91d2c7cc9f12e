"""State transitions of tool calls: one guarded function, one audit event per transition.

A call's write and its audit events go together: the row's INSERT or guarded UPDATE runs in the same
statement as the audit chain head's advance (``audit_call_events(change=...)``), then one statement
inserts the events and moves the head's hash.
"""

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from toolhub.audit import EventSpec, Write, audit_call_change, audit_call_events
from toolhub.governance import GOVERNANCE_STAMP_CHECK
from toolhub.models import SETTLED_STATUSES, CallStatus, ToolCall
from toolhub.rowread import assign_row, columns_sql
from toolhub.rowwrite import insert_params, insert_sql
from toolhub.signals import SettledTogether, call_settled
from toolhub.transitions import TransitionTable, guarded_update_sql

__all__ = [
    "CALL_TABLE",
    "CALL_TRANSITIONS",
    "call_insert",
    "call_transition",
    "notify_settled",
    "one_write",
    "settling_together",
]


_S = CallStatus

#: Every move a call's status may make after its row is written (``tool_call_request`` writes the first).
CALL_TRANSITIONS = TransitionTable(
    "call status",
    {
        # an operator decides; an approved external call waits for its result, or is denied when its checks
        # fail where it goes out (no worker checks it: ``toolhub.execution_checks``)
        _S.PENDING_APPROVAL: {_S.QUEUED, _S.AWAITING_RESULT, _S.DENIED, _S.REJECTED, _S.EXPIRED, _S.CANCELLED},
        # a worker claims; a cancelled run withdraws what it asked for and nothing has started yet
        _S.QUEUED: {_S.RUNNING, _S.CANCELLED},
        # the outcome; the reconciler's retry or hand-over; a changed tool asks for approval again;
        # a tool that suspends itself (``ToolSuspend``) waits for its result from outside
        _S.RUNNING: {
            _S.SUCCEEDED,
            _S.FAILED,
            _S.DENIED,
            _S.QUEUED,
            _S.NEEDS_ATTENTION,
            _S.PENDING_APPROVAL,
            _S.AWAITING_RESULT,
        },
        _S.AWAITING_RESULT: {_S.SUCCEEDED, _S.FAILED, _S.EXPIRED, _S.CANCELLED},
        # a compensation retried by the sagas (an external one waits for its result again); a compensated step
        _S.FAILED: {_S.QUEUED, _S.AWAITING_RESULT},
        _S.NEEDS_ATTENTION: {_S.QUEUED, _S.COMPENSATED},
        _S.SUCCEEDED: {_S.COMPENSATED},
    },
)


def call_insert(
    call: ToolCall, events: list[EventSpec], *, stamp: int | None = None, decided_stamp: int | None = None
) -> bool:
    """Write a new call row with its audit events (the row and the chain head's advance in one statement).

    ``stamp``: the governance stamp the call was decided under; the row is written only while it is still
    current, else nothing is written and False returned (decide again under the new governance). When a
    change committed while the write waited for its locks, the row is written and ``call.governance_moved``
    set: a call run in process is checked again first (``tool_call_run_claimed``). ``decided_stamp``: the
    stamp of a decision the write does not check (the last try, so that changes cannot starve a call), so
    that ``governance_moved`` still tells whether it held.
    """
    connection = transaction.get_connection()
    # As the ORM's INSERT prepares each value (``auto_now_add`` included), without building the query per call.
    params = insert_params(call, connection)
    if stamp is not None:
        params.append(stamp)
    change = (insert_sql(ToolCall, where=GOVERNANCE_STAMP_CHECK if stamp is not None else ""), params)
    expected = stamp if stamp is not None else decided_stamp
    if audit_call_events(call, events, change=change, instances=False, stamp_after=expected is not None) is None:
        return False
    _note_governance_moved(call, expected)
    call._state.adding = False
    call._state.db = connection.alias
    return True


def call_transition(
    call: ToolCall,
    *,
    to: CallStatus,
    allowed_from: Iterable[CallStatus],
    actor: str,
    event: str | None = None,
    data: Mapping[str, Any] | None = None,
    preceding: Sequence[EventSpec] = (),
    checked_stamp: int | None = None,
    decided_stamp: int | None = None,
    attempt: int | None = None,
    lease_expired_by: datetime | None = None,
    writes: Sequence[Write] = (),
    refresh: bool = False,
    also_returned: Sequence[str] = (),
    **fields: Any,
) -> bool:
    """Move ``call`` to ``to`` if it is still in one of ``allowed_from``; return whether it moved.

    The move is a conditional UPDATE, so of two racing writers exactly one wins; the audit event is
    written in the same transaction; a settled call notifies listeners after commit. ``preceding``
    events (what caused the move, e.g. the deciding approval) go before it in the same append.
    ``checked_stamp``: move only while the governance stamp is still this one (``call.governance_moved`` is set
    when a change committed while the move waited for its locks: check again before acting); ``decided_stamp``:
    the stamp of a decision the move does not check, for ``governance_moved`` alone. ``attempt``: only while the
    call is still in this attempt (the claim of the worker that ran it, not a later one's); ``lease_expired_by``: only
    while the claim's lease ended before this time (a batch's handed-back call is claimed again under the same
    attempt number, and that live claim's lease lies ahead). ``writes``: rows of
    the same decision (an operator's decision row), written in the same statement whether or not the call moves.
    ``refresh`` (PostgreSQL): every field of ``call`` is set from the moved row, returned by the same statement,
    for a writer that holds only the columns its events hash (the move is also guarded by them: they are
    what the events were hashed with); ``also_returned``: SQL expressions over the moved row that the statement
    returns too, their values set as ``call.also_returned`` (a read that goes with the move, e.g. the agent's tools).
    """
    values = {"status": to, "updated_at": timezone.now(), **fields}
    sql, params = guarded_update_sql(
        ToolCall,
        call.id,
        table=CALL_TRANSITIONS,
        to=to,
        allowed_from=allowed_from,
        values=values,
        condition=_conditions(checked_stamp, attempt, call if refresh else None, lease_expired_by),
    )
    previous = {name: getattr(call, name) for name in values}
    for name, value in values.items():
        setattr(call, name, value)
    if (refresh and writes) or (also_returned and not refresh):
        raise ValueError("a refreshed move writes no other rows; only a refreshed move returns more")
    events = [*preceding, EventSpec(event or f"call.{to}", actor, data)]
    expected = checked_stamp if checked_stamp is not None else decided_stamp
    with one_write():
        if refresh:
            returning = ", ".join([_returned_columns(), *also_returned])
            row = audit_call_change(
                call, events, change=(sql, params), returning=returning, stamp_after=expected is not None
            )
            if row is not None:
                width = len(ToolCall._meta.concrete_fields)
                assign_row(call, row[:width])
                call.also_returned = tuple(row[width:])
            written = None if row is None else []
        else:
            written = audit_call_events(
                call,
                events,
                change=(sql, params),
                instances=False,
                writes=writes,
                stamp_after=expected is not None,
            )
        if written is None:
            for name, value in previous.items():
                setattr(call, name, value)
            return False
        _note_governance_moved(call, expected)
        if to in SETTLED_STATUSES:
            _notify_after_commit(call)
    return True


def _conditions(
    checked_stamp: int | None,
    attempt: int | None,
    hashed: ToolCall | None = None,
    lease_expired_by: datetime | None = None,
) -> tuple[str, list[Any]] | None:
    """The guarded UPDATE's extra conditions: the governance stamp, the attempt, the columns events hash, the lease.

    ``checked_stamp``: the governance stamp checked; ``attempt``: the attempt that holds the claim; ``hashed``:
    the row still holds the columns its events are hashed with, as ``hashed`` has them; ``lease_expired_by``: the
    claim's lease ended before this time.
    """
    sql, params = [], []
    if checked_stamp is not None:
        sql.append(GOVERNANCE_STAMP_CHECK)
        params.append(checked_stamp)
    if attempt is not None:
        sql.append(f'"{ToolCall._meta.get_field("attempts").column}" = %s')
        params.append(attempt)
    if lease_expired_by is not None:
        lease = ToolCall._meta.get_field("lease_expires_at")
        sql.append(f'"{lease.column}" < %s')
        params.append(lease.get_db_prep_value(lease_expired_by, transaction.get_connection()))
    if hashed is not None:
        sql.append(_HASHED_COLUMNS_UNCHANGED)
        params.extend([hashed.tool_name, hashed.tenant, hashed.run_id])
    return (" AND ".join(sql), params) if sql else None


#: The call row's columns its events hash beside its key and status (``toolhub.audit_hash.hash_parts``) still as given.
_HASHED_COLUMNS_UNCHANGED = '"tool_name" = %s AND "tenant" = %s AND "run_id" IS NOT DISTINCT FROM %s'


#: The call table, quoted as an UPDATE of it names its row (in RETURNING lists and expressions over the row).
CALL_TABLE = f'"{ToolCall._meta.db_table}"'


@functools.cache
def _returned_columns() -> str:
    """Every column of a call row, as an UPDATE of it returns them (``toolhub.rowread`` order)."""
    return columns_sql(ToolCall, CALL_TABLE)


def _note_governance_moved(call: ToolCall, expected: int | None) -> None:
    """Whether a governance change committed after the stamp ``expected`` while the write waited for its locks.

    The guard reads the stamp in the statement's snapshot, taken before those waits; the write also returns
    the stamp read after them (PostgreSQL), and one that differs means the decision may no longer hold.
    """
    after = call.stamp_after_write
    call.governance_moved = expected is not None and after is not None and after != expected


def one_write() -> AbstractContextManager[Any]:
    """What makes a row change and its audit events atomic: a transaction, except on PostgreSQL.

    On PostgreSQL they are one statement (``toolhub.audit_sql``), which outside a transaction commits
    by itself: a call's write costs one round trip. No savepoint elsewhere: a failure aborts the
    caller's transaction anyway, and the guarded UPDATE settles races.
    """
    if transaction.get_connection().vendor == "postgresql":
        return nullcontext()
    return transaction.atomic(savepoint=False)


def notify_settled(call: ToolCall) -> None:
    """Tell listeners (the agent loop, the sagas) that a call settled; call only after the commit."""
    call_settled.send(sender=ToolCall, call_id=call.id, run_id=call.run_id, call=call)


#: The block of ``settling_together`` the calls settled now belong to.
_settling: ContextVar[SettledTogether | None] = ContextVar("toolhub_settling_together", default=None)


def _notify_after_commit(call: ToolCall) -> None:
    """The call's notice, an after-commit action of its own: Django drops it with a savepoint rolled back."""
    together = _settling.get()
    transaction.on_commit(lambda: _notify(call, together), robust=True)  # a lambda: Django's log names it


def _notify(call: ToolCall, together: SettledTogether | None) -> None:
    if together is None:
        notify_settled(call)
        return
    with together.telling():
        notify_settled(call)


@contextmanager
def settling_together() -> Iterator[None]:
    """Calls settled in the block (many withdrawn at once: a cancelled run's) are told of together after commit.

    Each call's listeners still hear of it (the sagas follow each), but a follow-up serving many calls (a run's
    wake-up: ``once_for_calls_settled_together``) is done once: one broker message per run, not one per call. Waiters
    on a call read its row (``toolhub.direct.call_wait``), so none waits longer. Each call's notice is its own
    after-commit action (a savepoint rolled back drops its calls' notices, as it drops any), and the follow-ups' one
    is registered however the block ends: calls that committed before it raised (outside a transaction, or a caller
    that commits anyway) are told too. Nested blocks are told by the outermost; a block entered in a context copied
    from one that has finished (an asyncio task started in it) is a block of its own.
    """
    enclosing = _settling.get()
    if enclosing is not None and not enclosing.finished:  # an enclosing block tells them
        yield
        return
    together = SettledTogether()
    token = _settling.set(together)
    try:
        yield
    finally:
        _settling.reset(token)
        transaction.on_commit(together.finish, robust=True)
