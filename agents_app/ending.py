"""How a run ends: its final status, stop reason and time, written in one guarded move of the locked run.

Shared by the loop (answered, budget spent, model failed) and by cancellation (``agents_app.cancelling``).
"""

from typing import Any

from agents_app.models import AgentRun, RunStatus, StopReason
from agents_app.subagents import subagent_run_ended
from agents_app.transitions import run_transition
from toolhub.audit import audit_append

__all__ = ["STEP_FIELDS", "END_FIELDS", "run_finish", "run_end_with_error"]

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


def run_finish(run: AgentRun, *, status: RunStatus, stop_reason: StopReason, now: Any, retryable: bool = False) -> None:
    """End the locked run; a child run's outcome settles its parent's waiting call in the same transaction.

    That outcome is final: with the call settled, a retry would resume work nobody waits for, on a budget its
    siblings may have been given since, so a child run never ends retryable. A run that fails leaves a
    ``run.failed`` event in its tenant's chain (why, and whether it may be retried), as a cancelled one leaves
    ``run.cancelled``: an auditor reads from the trail why a run stopped, not only from a row anyone may update.
    """
    run.stop_reason = stop_reason
    run.finished_at = now
    run.retryable = retryable and run.parent_call_id is None
    if not run.retryable:
        # A serial turn's calls not yet requested hold the model's arguments as sent, sensitive values included:
        # nothing requests them once the run ended for good (a retry resumes them, so a retryable run keeps them).
        run.deferred_calls = []
    run_transition(run, status, update_fields=END_FIELDS)
    if status == RunStatus.FAILED:
        audit_append(
            event_type="run.failed",
            actor=LOOP_ACTOR,
            data={"stop_reason": str(stop_reason), "error": run.error[:_ERROR_CHARS], "retryable": run.retryable},
            run_id=run.id,
            tenant=run.tenant,
        )
    subagent_run_ended(run)


#: Who ends a run that failed: the loop, on what the model, a budget or governance left it.
LOOP_ACTOR = "agent-loop"
#: Characters of a failed run's error kept in its event (the row keeps the whole message).
_ERROR_CHARS = 2000


def run_end_with_error(
    run: AgentRun, error: str, *, status: RunStatus, stop_reason: StopReason, now: Any, retryable: bool = False
) -> None:
    """End the locked run with ``error``, releasing its step: any answer still on its way is dropped."""
    run.step_lease_until = None
    run.step_token = None
    run.partial_output = ""
    run.error = error
    run_finish(run, status=status, stop_reason=stop_reason, now=now, retryable=retryable)
