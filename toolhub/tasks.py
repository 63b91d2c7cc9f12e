"""Celery tasks of the core: thin wrappers that take ids and call one service each."""

import logging
import uuid

from celery import shared_task

from toolhub.checkpoints import CheckpointKeyError, audit_checkpoint_create
from toolhub.execution import tool_call_execute
from toolhub.sweeper import calls_expire_awaiting_results, calls_reconcile_expired_leases, calls_redispatch_stale

logger = logging.getLogger(__name__)


@shared_task(name="toolhub.tasks.execute_tool_call_task", acks_late=True, ignore_result=True, bind=True)
def execute_tool_call_task(self, call_id: str) -> None:  # type: ignore[no-untyped-def]
    """Execute one queued tool call; a second delivery of the same call does nothing."""
    worker = "eager" if self.request.is_eager else (self.request.hostname or "worker")
    tool_call_execute(call_id=uuid.UUID(call_id), worker=worker)


@shared_task(name="toolhub.tasks.sweep_task", ignore_result=True)
def sweep_task() -> None:
    """Re-dispatch lost calls and reconcile calls whose worker died."""
    calls_redispatch_stale()
    calls_reconcile_expired_leases()
    calls_expire_awaiting_results()


@shared_task(name="toolhub.tasks.audit_checkpoint_task", ignore_result=True)
def audit_checkpoint_task() -> None:
    """Store a signed checkpoint of every audit chain's head (beat, every AUDIT_CHECKPOINT_SECONDS)."""
    try:
        audit_checkpoint_create()
    except CheckpointKeyError as exc:
        logger.warning("Audit checkpoint not written: %s", exc)
