"""The beat schedule's audit checkpoint interval, taken from toolhub's settings when Celery finalizes the app.

``settings.py`` can only read ``TOOLHUB_AUDIT_CHECKPOINT_SECONDS`` from the environment: a deployment's own
settings module sets ``TOOLHUB`` after importing it, so ``TOOLHUB["AUDIT_CHECKPOINT_SECONDS"]`` was validated
and then ignored (beat kept signing every 300 s). ``toolhub.celery`` applies this when the app is finalized
(beat and ``worker -B`` do so before reading their schedule), with the one rule every key follows.
"""

from typing import Any

from toolhub.conf import toolhub_settings

__all__ = ["AUDIT_CHECKPOINT_TASK", "audit_checkpoint_schedule_apply"]

AUDIT_CHECKPOINT_TASK = "toolhub.tasks.audit_checkpoint_task"


def audit_checkpoint_schedule_apply(schedule: dict[str, dict[str, Any]]) -> None:
    """Set every entry of the checkpoint task to ``AUDIT_CHECKPOINT_SECONDS`` (settings, else environment, else 300)."""
    seconds = float(toolhub_settings().AUDIT_CHECKPOINT_SECONDS)
    for entry in schedule.values():
        if entry.get("task") == AUDIT_CHECKPOINT_TASK:
            entry["schedule"] = seconds
