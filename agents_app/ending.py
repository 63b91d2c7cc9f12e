"""How a run ends: its final status, stop reason and time, written in one guarded move of the locked run.

Shared by the loop (answered, budget spent, model failed) and by cancellation (``agents_app.cancelling``).
"""

from typing import Any

from agents_app.models import AgentRun, RunStatus, StopReason
from agents_app.subagents import subagent_run_ended
from agents_app.transitions import run_transition
from toolhub.audit import audit_append

__all__ = ["STEP_FIELDS", "END_FIELDS", "dropped_calls", "run_finish", "run_end_with_error"]

#: What a step changes on the run, written together when the step ends.
STEP_FIELDS = (
    "messages",
    "disclosure",
    "turn",
    "prompt_tokens",
    "completion_tokens",
    "partial_output",
    "deferred_calls",
    "step_lease_until",
    "step_token",
    "lost_steps",
)
#: What ending the run writes besides.
END_FIELDS = (*STEP_FIELDS, "output", "error", "stop_reason", "finished_at", "retryable")


def run_finish(
    run: AgentRun, *, status: RunStatus, stop_reason: StopReason, now: Any, retryable: bool = False
) -> dict[str, Any] | None:
    """End the locked run; a child run's outcome settles its parent's waiting call in the same transaction.

    That outcome is final: with the call settled, a retry would resume work nobody waits for, on a budget its
    siblings may have been given since, so a child run never ends retryable. A run that fails leaves a
    ``run.failed`` event in its tenant's chain (why, and whether it may be retried), as a cancelled one leaves
    ``run.cancelled``: an auditor reads from the trail why a run stopped, not only from a row anyone may update.
    Returns the calls of a serial turn it dropped unrequested (``dropped_calls``), which that event names.
    """
    run.stop_reason = stop_reason
    run.finished_at = now
    run.retryable = retryable and run.parent_call_id is None
    dropped = None
    if not run.retryable:
        # A serial turn's calls not yet requested hold the model's arguments as sent, sensitive values included:
        # nothing requests them once the run ended for good (a retry resumes them, so a retryable run keeps them).
        dropped = dropped_calls(run.deferred_calls)
        run.deferred_calls = []
    run_transition(run, status, update_fields=END_FIELDS)
    if status == RunStatus.FAILED:
        data: dict[str, Any] = {
            "stop_reason": str(stop_reason),
            "error": run.error[:_ERROR_CHARS],
            "retryable": run.retryable,
        }
        if dropped:
            data["dropped_calls"] = dropped
        audit_append(event_type="run.failed", actor=LOOP_ACTOR, data=data, run_id=run.id, tenant=run.tenant)
    subagent_run_ended(run)
    return dropped


def dropped_calls(deferred: list[Any]) -> dict[str, Any] | None:
    """What the trail says of a serial turn's calls dropped unrequested: how many, and their tool names (bounded).

    Never their arguments (the model's, sensitive values included); the names are the model's too, so cut.
    """
    if not deferred:
        return None
    names = [str(call.get("name", ""))[:_NAME_CHARS] if isinstance(call, dict) else "" for call in deferred]
    return {"count": len(names), "tools": names[:_DROPPED_NAMES]}


#: Who ends a run that failed: the loop, on what the model, a budget or governance left it.
LOOP_ACTOR = "agent-loop"
#: Characters of a failed run's error kept in its event (the row keeps the whole message).
_ERROR_CHARS = 2000
#: Dropped calls named in an event, and the characters of each name kept (a turn holds at most 1000 calls).
_DROPPED_NAMES = 50
_NAME_CHARS = 100


def run_end_with_error(
    run: AgentRun, error: str, *, status: RunStatus, stop_reason: StopReason, now: Any, retryable: bool = False
) -> dict[str, Any] | None:
    """End the locked run with ``error``, releasing its step: any answer still on its way is dropped.

    Returns the serial turn's calls it dropped unrequested (``run_finish``).
    """
    run.step_lease_until = None
    run.step_token = None
    run.partial_output = ""
    run.error = error
    return run_finish(run, status=status, stop_reason=stop_reason, now=now, retryable=retryable)
