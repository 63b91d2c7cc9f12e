"""The governed call pipeline, worker side: claim a queued call once, execute it, record the outcome."""

import contextvars
import dataclasses
import functools
import logging
import uuid
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone
from pydantic import ValidationError

from toolhub.audit import EventSpec
from toolhub.audit_hash import chain_for
from toolhub.calls import call_insert, call_transition, notify_settled, one_write
from toolhub.claims import ClaimHint, tool_calls_claim
from toolhub.conf import toolhub_settings
from toolhub.db_timeouts import transaction_idle_at_least, written_past_bound
from toolhub.dispatch import EAGER_WORKER, dispatch_call
from toolhub.execution_checks import approval_no_longer_suffices, refusal_at_execution, unbuildable_problem
from toolhub.feedback import exception_detail
from toolhub.governance import governance_scope
from toolhub.models import CallStatus, ToolCall, ToolCallArtifact
from toolhub.outcomes import Outcome, run_outcome
from toolhub.policy import ApprovalVerdict, policy_moved_verdict
from toolhub.signals import call_suspended, task_seconds_left
from toolhub.storable import storable_text
from toolhub.tools.definition import Tool
from toolhub.tools.progress import Progress
from toolhub.tools.secrets import NO_SECRETS, SecretScrubber
from toolhub.waiting import tool_call_require_reapproval

__all__ = ["tool_call_execute", "tool_call_run_claimed", "tool_call_run_with_intent"]

logger = logging.getLogger(__name__)


def tool_call_execute(*, call_id: uuid.UUID, worker: str, hint: ClaimHint | None = None) -> ToolCall | None:
    """Claim and run one call, or a batch of queued calls with it (``WORKER_CLAIM_BATCH``); outcomes are stored.

    With a batch, the claims commit together before anything runs, and the outcomes are recorded
    together after the last one ran (one commit each instead of one per call). A claimed call that no
    longer has time to run within its lease or the task's time limit is handed back, unstarted.
    Returns ``call_id``'s call when this delivery ran it. ``hint``: what the delivery says of the call.
    """
    limit = max(1, toolhub_settings().WORKER_CLAIM_BATCH)
    calls = tool_calls_claim(call_id=call_id, worker=worker, limit=limit, hint=hint)
    if len(calls) <= 1:
        for call in calls:
            # A governance change committed while the claim waited for its locks: the re-check reads it.
            _execute_claimed(call, worker, stamp_checked=limit == 1)
        return next((call for call in calls if call.id == call_id), None)
    pending: list[tuple[ToolCall, Callable[[], None]]] = []
    token = _outcomes.set(pending)
    try:
        for index, call in enumerate(calls):
            # The first runs as a single claim would; a later one only with time left for it.
            if index == 0 or _has_time_for(call):
                _execute_claimed(call, worker)
            else:
                pending.append((call, functools.partial(_hand_back, call, worker)))
    finally:
        _outcomes.reset(token)
        _record_outcomes(pending)
    return next((call for call in calls if call.id == call_id), None)


def _execute_claimed(call: ToolCall, worker: str, *, stamp_checked: bool = False) -> None:
    """Re-check a claimed call (tool version, permissions, approval binding and count, arguments), then run it.

    A call queued as needing no approval is judged by the policy again when governance moved since (a rule added, a
    risk raised while it waited): held now, it goes to the desk instead of running (``policy_moved_verdict``).

    ``stamp_checked``: the claim checked the governance stamp the cache holds; the re-check reads none, unless
    a governance change committed while the claim waited for its locks (``call.governance_moved``). It decides under
    the very governance the claim checked (``call.claim_hold``), not the process's cache as it is by then: another
    thread may have put back a stamp it read before the change, or read a newer one (which stays the process's).
    """
    claimed_under = call.claim_hold if stamp_checked and not call.governance_moved else None
    call.governance_moved = False  # checked here, under the governance as it is now: not again when it runs
    from toolhub.tools.registry import registry

    tool = registry.get(call.tool_name)
    # A tool whose schema cannot be built has no version to compare: ``refusal_at_execution`` denies its call.
    if (
        call.approval_hash
        and tool is not None
        and unbuildable_problem(tool) is None
        and tool.version != call.tool_version
    ):
        # What was approved is not what would run: a fresh decision is needed.
        tool_call_require_reapproval(call=call, tool=tool, actor=f"worker:{worker}")
        return
    held: ApprovalVerdict | None = None
    with governance_scope(hold=claimed_under):  # none: read now
        refusal = refusal_at_execution(call, tool)
        shortfall = approval_no_longer_suffices(call) if refusal is None else None
        if refusal is None and not shortfall:
            assert tool is not None
            try:
                arguments = tool.validate_arguments(call.arguments)
            except ValidationError:
                refusal = f"The stored arguments no longer match tool {call.tool_name!r}; nothing was executed."
            # Queued as needing no approval: the policy of now may hold it (a rule added while it waited).
            held = policy_moved_verdict(call, tool) if refusal is None else None
    if shortfall:
        # Governance asks more approvals of it now than it was released on: a fresh decision is needed.
        assert tool is not None
        tool_call_require_reapproval(call=call, tool=tool, actor=f"worker:{worker}", reason=shortfall)
        return
    if held is not None:
        assert tool is not None
        reason = f"the approval policy changed after the call was queued: it needs approval now ({held.reason})"
        tool_call_require_reapproval(call=call, tool=tool, actor=f"worker:{worker}", reason=reason, verdict=held)
        return
    if refusal:
        _finish(call, status=CallStatus.DENIED, error=refusal, worker=worker)
        return
    assert tool is not None
    tool_call_run_claimed(call=call, tool=tool, arguments=arguments, worker=worker)


#: Outcomes of a claimed batch waiting to be recorded together (None: each is recorded at once).
_outcomes: contextvars.ContextVar[list[tuple[ToolCall, Callable[[], None]]] | None] = contextvars.ContextVar(
    "toolhub_batched_outcomes", default=None
)

#: Seconds kept free beyond a batched call's timeout, to record the batch's outcomes within the task's time limit.
_BATCH_MARGIN_SECONDS = 30.0


def _has_time_for(call: ToolCall) -> bool:
    """Whether a batched call can still run to its timeout within its lease and the task's time limit."""
    from toolhub.tools.registry import registry

    tool = registry.get(call.tool_name)
    timeout = tool.effective_timeout if tool else 0.0
    task_left = task_seconds_left()
    lease_left = (call.lease_expires_at - timezone.now()).total_seconds() if call.lease_expires_at else 0.0
    return lease_left >= timeout and (task_left is None or task_left >= timeout + _BATCH_MARGIN_SECONDS)


def _hand_back(call: ToolCall, worker: str) -> None:
    """Queue again a batched call that never started (another delivery runs it), with the batch's outcomes."""
    if call_transition(
        call,
        to=CallStatus.QUEUED,
        allowed_from={CallStatus.RUNNING},
        attempt=call.attempts,  # this batch's claim, not a later one's (after the lease expired meanwhile)
        actor=f"worker:{worker}",
        data={"reason": "handed back unstarted: no time left in this worker's batch", "attempt": call.attempts},
        attempts=call.attempts - 1,
        worker="",
        started_at=None,
        lease_expires_at=None,
        queued_at=timezone.now(),
    ):
        dispatch_call(call)


def _record_outcomes(pending: list[tuple[ToolCall, Callable[[], None]]]) -> None:
    """Write a batch's outcomes in one transaction, chain by chain in chain order (no deadlock on the heads)."""
    if not pending:
        return

    def write_all() -> None:
        with transaction.atomic():
            for _, write in sorted(pending, key=lambda item: chain_for(item[0].id, item[0].tenant)):
                write()

    written_past_bound(write_all)


def tool_call_run_claimed(*, call: ToolCall, tool: Tool, arguments: dict[str, Any], worker: str) -> ToolCall:
    """Run a call this process holds the claim of (``running``, committed) and record its outcome.

    A worker gets here after claiming and re-checking a queued call; the process that asked for a call
    and runs it itself gets here straight after the commit that wrote it claimed. Either way, when a
    governance change committed while that claim was written (``call.governance_moved``), the call is
    checked again under the current governance first, and refused if it no longer holds.
    """
    if call.governance_moved:
        call.governance_moved = False
        _execute_claimed(call, worker)
        return call
    secrets = SecretScrubber.for_call(tool, arguments)
    with secrets.scope():
        progress = _progress_of(call, secrets) if tool.needs_progress else None
        run = functools.partial(run_outcome, call, tool, arguments, progress=progress, secrets=secrets)
        record = functools.partial(_record, call, worker=worker, secrets=secrets)
        if tool.atomic:
            _run_atomically(run, record, timeout=tool.effective_timeout)
        else:
            outcome = run()
            written_past_bound(lambda: record(outcome))
    return call


def tool_call_run_with_intent(
    *,
    call: ToolCall,
    intent: list[EventSpec],
    stamp: int | None,
    tool: Tool,
    arguments: dict[str, Any],
    decided_stamp: int | None = None,
) -> bool:
    """Run an atomic tool for a call not written yet: its effects, the row and every event commit together.

    The process that asked for the call runs it here, in one transaction: the intent (``intent``'s events,
    the call decided ``running``) needs no commit of its own, since nothing the tool does outlives a
    rollback. Returns False, with nothing kept, when governance changed since the decision (``stamp``):
    the caller decides again.
    """
    secrets = SecretScrubber.for_call(tool, arguments)

    def record(outcome: Outcome) -> bool:
        if outcome.suspension is not None:
            written = call_insert(call, intent, stamp=stamp, decided_stamp=decided_stamp)
            if not written or not _holds_after_write(call, tool, checked=stamp is not None):
                return False
            return _suspend(call, outcome.suspension, worker=EAGER_WORKER)
        change = _outcome_change(call, outcome, worker=EAGER_WORKER, secrets=secrets)
        for name, value in change.values.items():
            setattr(call, name, value)
        with transaction.atomic(savepoint=False) if change.artifact is not None else one_write():
            # Governance changed meanwhile (before or while the write waited for its locks): roll back, decide again.
            written = call_insert(call, [*intent, change.event], stamp=stamp, decided_stamp=decided_stamp)
            if not written or not _holds_after_write(call, tool, checked=stamp is not None):
                return False
            if change.artifact is not None:
                ToolCallArtifact.objects.create(call=call, **change.artifact)
        transaction.on_commit(lambda: notify_settled(call), robust=True)
        return True

    with secrets.scope():
        return _run_atomically(
            functools.partial(run_outcome, call, tool, arguments, progress=None, secrets=secrets),
            record,
            timeout=tool.effective_timeout,
        )


def _holds_after_write(call: ToolCall, tool: Tool, *, checked: bool) -> bool:
    """Whether an atomic call written with its outcome may keep it: no governance change committed meanwhile.

    When one did (``call.governance_moved``), a write that checked the stamp is undone and decided again; the
    last, unchecked try (which a stream of changes must not starve) is checked again under the current
    governance instead, and undone only when the call is refused now.
    """
    if not call.governance_moved:
        return True
    if checked:
        return False
    with governance_scope():
        return refusal_at_execution(call, tool) is None


class _Undo(Exception):
    """Leaves an atomic tool's transaction, so that its effects roll back; ``outcome`` is recorded after."""

    def __init__(self, outcome: Outcome | None) -> None:
        super().__init__()
        self.outcome = outcome


def _run_atomically(run: Callable[[], Outcome], record: Callable[[Outcome], bool], *, timeout: float) -> bool:
    """Run an atomic tool and record its outcome in one transaction; return whether an outcome was recorded.

    The tool's effects commit with a success and never without one: a failure (raised, timed out, a
    result that cannot be stored) rolls them back before it is recorded, and so does a success that can
    no longer be recorded (the call was taken from this attempt, or governance changed). The transaction may stay
    idle for the tool's ``timeout`` (``toolhub.db_timeouts``).
    """
    token = _outcomes.set(None)  # recorded in the tool's own transaction, not with a claimed batch
    try:
        with transaction.atomic():
            transaction_idle_at_least(timeout)
            outcome = run()
            if outcome.status == CallStatus.FAILED:
                raise _Undo(outcome)
            try:
                recorded = record(outcome)
            except DatabaseError as exc:
                # The tool caught a database error and went on: its transaction can only be rolled back.
                raise _Undo(Outcome.failed(ATOMIC_ABORTED_MESSAGE, detail=exception_detail(exc))) from None
            if not recorded:
                raise _Undo(None)
        return True
    except _Undo as undo:
        failed = undo.outcome
        return failed is not None and written_past_bound(lambda: record(failed))
    finally:
        _outcomes.reset(token)


#: What the model reads when an atomic tool left its transaction unusable (nothing it wrote was kept).
ATOMIC_ABORTED_MESSAGE = (
    "The tool's database work failed and was rolled back; nothing it wrote was kept. Try again, or tell the user."
)


def _record(call: ToolCall, outcome: Outcome, *, worker: str, secrets: SecretScrubber) -> bool:
    """Record a claimed call's outcome: suspended, or settled by ``_finish``; whether it was recorded."""
    if outcome.suspension is not None:
        return _suspend(call, outcome.suspension, worker=worker)
    return _finish(call, status=outcome.status, worker=worker, secrets=secrets, **outcome.values)


def _suspend(call: ToolCall, suspension: dict[str, Any], *, worker: str) -> bool:
    """Park a call whose tool suspended itself: it awaits its result from outside, as an external tool's does.

    ``suspension`` (reason and payload) comes scrubbed and storable (``toolhub.outcomes``). Returns whether
    this attempt parked it.
    """
    with transaction.atomic():
        moved = call_transition(
            call,
            to=CallStatus.AWAITING_RESULT,
            allowed_from={CallStatus.RUNNING},
            attempt=call.attempts,
            actor=f"worker:{worker}",
            data={"attempt": call.attempts, "source": "suspended", **suspension},
            suspension=suspension,
            # The expiry (EXTERNAL_RESULT_TIMEOUT_SECONDS) counts from here.
            queued_at=timezone.now(),
            lease_expires_at=None,
        )
        if moved:
            transaction.on_commit(lambda: call_suspended.send(sender=ToolCall, call=call), robust=True)
    if not moved:
        logger.warning("call %s was taken from this worker before it suspended; suspension not recorded", call.id)
    return moved


def _progress_of(call: ToolCall, secrets: SecretScrubber) -> Progress:
    """A progress emitter whose updates are written to the running call (only while it runs), secrets replaced."""

    def store(updates: list[dict[str, Any]]) -> None:
        ToolCall.objects.filter(id=call.id, status=CallStatus.RUNNING).update(progress=updates)

    return Progress(
        store,
        min_interval=toolhub_settings().PROGRESS_MIN_INTERVAL_SECONDS,
        keep=toolhub_settings().PROGRESS_KEEP,
        redact=secrets.text,
    )


def _finish(
    call: ToolCall,
    *,
    status: CallStatus,
    worker: str,
    secrets: SecretScrubber = NO_SECRETS,
    **values: Any,
) -> bool:
    """Record a claimed call's outcome (``_outcome_change``'s ``values``); whether this attempt recorded it.

    With a claimed batch the write waits for the batch's outcome transaction (True: not refused yet).
    """
    change = _outcome_change(call, Outcome(status, values), worker=worker, secrets=secrets)

    def record() -> bool:
        # No savepoint: inside a batch's outcome transaction a failure voids the batch (its calls stay
        # claimed for the reconciler), as a failure voids a single outcome. Without an artifact row the
        # outcome is one statement (``one_write``).
        # Stamped as it is written, not when the tool returned: a batch writes its outcomes after its last call ran,
        # and a write may be retried past the statement bound; a call visible only long after its ``finished_at``
        # was behind the sweep's marks by then (``toolhub.sagas.unheard.ENDED_STEP_MARGIN``), never read.
        values = {**change.values, "finished_at": timezone.now()}
        with transaction.atomic(savepoint=False) if change.artifact is not None else one_write():
            moved = call_transition(
                call,
                to=status,
                allowed_from={CallStatus.RUNNING},
                attempt=call.attempts,
                actor=change.event.actor,
                data=change.event.data,
                **{name: value for name, value in values.items() if name != "status"},
            )
            if moved and change.artifact is not None:
                ToolCallArtifact.objects.create(call=call, **change.artifact)
        if not moved:
            logger.warning(
                "call %s was taken from this worker before it finished; outcome %s not recorded", call.id, status
            )
        return moved

    batch = _outcomes.get()
    if batch is None:
        return record()
    batch.append((call, record))
    return True


@dataclasses.dataclass(frozen=True)
class _OutcomeChange:
    """An outcome as written: the call's new values, its audit event, the artifact row's values."""

    values: dict[str, Any]
    event: EventSpec
    artifact: dict[str, Any] | None


def _outcome_change(call: ToolCall, outcome: Outcome, *, worker: str, secrets: SecretScrubber) -> _OutcomeChange:
    """The one place a worker's outcome becomes what is written, so a tool's secrets are replaced here."""
    values = outcome.values
    # What a tool raised may hold characters no text column stores.
    error = storable_text(secrets.text(values.get("error", "")))
    detail = storable_text(secrets.text(values.get("detail", "")))
    artifact, intercepted, failed_by = values.get("artifact"), values.get("intercepted"), values.get("failed_by")
    data: dict[str, Any] = {"attempt": call.attempts}
    if error:
        data["error"] = error
    if intercepted:
        data["result_changed_by"] = [f"interceptor:{name}" for name in intercepted]
    if failed_by:
        data["interceptor"] = failed_by
    if artifact is not None:
        data["artifact"] = {key: artifact[key] for key in ("name", "media_type", "size", "sha256")}
    written = {
        "status": outcome.status,
        "result": secrets.value(values.get("result")),
        "error": error,
        "error_detail": detail,
        "finished_at": timezone.now(),
        "lease_expires_at": None,
    }
    return _OutcomeChange(written, EventSpec(f"call.{outcome.status}", f"worker:{worker}", data), artifact)
