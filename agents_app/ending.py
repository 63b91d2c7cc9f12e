"""How a run ends: its final status, stop reason and time, written in one guarded move of the locked run.

Shared by the loop (answered, budget spent, model failed) and by cancellation (``agents_app.cancelling``).
"""

from typing import Any

from agents_app.models import AgentRun, RunStatus, StopReason
from agents_app.subagents import subagent_run_ended
from agents_app.transitions import run_transition

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
    siblings may have been given since, so a child run never ends retryable.
    """
    run.stop_reason = stop_reason
    run.finished_at = now
    run.retryable = retryable and run.parent_call_id is None
    run_transition(run, status, update_fields=END_FIELDS)
    subagent_run_ended(run)


def run_end_with_error(
    run: AgentRun, error: str, *, status: RunStatus, stop_reason: StopReason, now: Any, retryable: bool = False
) -> None:
    """End the locked run with ``error``, releasing its step: any answer still on its way is dropped."""
    run.step_lease_until = None
    run.step_token = None
    run.partial_output = ""
    run.error = error
    run_finish(run, status=status, stop_reason=stop_reason, now=now, retryable=retryable)
