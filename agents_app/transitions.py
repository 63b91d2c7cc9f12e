"""A run's legal status moves, declared once, and the one helper that writes them (``toolhub.transitions``)."""

from collections.abc import Iterable

from agents_app.models import AgentRun, RunStatus
from toolhub.exceptions import InvalidTransitionError
from toolhub.transitions import TransitionTable, guarded_save

__all__ = ["RUN_TRANSITIONS", "run_transition"]

_R = RunStatus

#: Every move a run's status may make: it waits on held or external calls and resumes, it ends once;
#: a run that failed for a retryable reason runs again.
RUN_TRANSITIONS = TransitionTable(
    "run status",
    {
        _R.RUNNING: {_R.WAITING, _R.COMPLETED, _R.FAILED, _R.CANCELLED},
        _R.WAITING: {_R.RUNNING, _R.COMPLETED, _R.FAILED, _R.CANCELLED},
        _R.FAILED: {_R.RUNNING},
    },
)


def run_transition(run: AgentRun, to: RunStatus, *, update_fields: Iterable[str] | None = None) -> None:
    """Write ``run`` (locked by the caller) with its status moved to ``to``; ``update_fields`` go with it (all: None).

    The row lock already orders writers; the guarded UPDATE makes a move the table does not declare, or a
    row that is not in the status it was read with, an error instead of a silent overwrite.
    """
    fields = None if update_fields is None else [*update_fields, "updated_at"]
    if not guarded_save(run, table=RUN_TRANSITIONS, to=to, allowed_from={run.status}, update_fields=fields):
        raise InvalidTransitionError(f"run {run.pk} is no longer {run.status}; it was not moved to {to}")
