"""Celery tasks of the core: thin wrappers that take ids and call one service each."""

import logging
import uuid
from typing import Any

from celery import Task, shared_task
from celery.worker.request import Request

from toolhub.audit_proof import UnknownTenantError, audit_trail_verify
from toolhub.checkpoints import CheckpointKeyError, CheckpointRefusedError, audit_checkpoint_create
from toolhub.claims import ClaimHint
from toolhub.conf import toolhub_settings
from toolhub.execution import tool_call_execute
from toolhub.session_store import sessions_clear_expired
from toolhub.signals import running_after_task
from toolhub.sweeper import calls_expire_awaiting_results, calls_reconcile_expired_leases, calls_redispatch_stale

logger = logging.getLogger(__name__)

#: Seconds the execute task's soft limit leaves beyond the longest tool timeout (claiming, storing, audit).
TOOL_TASK_MARGIN_SECONDS = 60


class OwnTimeLimits(Request):
    """A delivery of a task with its own time budget runs under the task's limits, never under a message's.

    Any client of the broker may set a message's ``timelimit`` header, and Celery's pool obeys it: a tighter
    one would cut a tool, or a run's model step, still within its time (the call failed, the run failed). The
    tasks that carry this (``execute_tool_call_task``, ``advance_run_task``) are sent by toolhub without one.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.time_limits = (None, None)  # the pool then applies the task's own


class _ToolCallTask(Task):
    """Time limits that follow the longest tool timeout, read when the worker starts (the registry is frozen).

    The tool's own ``timeout`` (``toolhub.tools.timeouts``) stops a tool; Celery's limits are only the
    backstop for a worker stuck elsewhere, so they must never cut a tool that is still within its time.
    """

    _limit_for_size: tuple[int, float] | None = None

    @property
    def soft_time_limit(self) -> float:  # type: ignore[override]
        from toolhub.tools.registry import registry

        # Read on every dispatch too (Celery compares the two limits): cached per registry size.
        size = len(registry)
        if self._limit_for_size is None or self._limit_for_size[0] != size:
            # Code tools only (no query per dispatch); remote tools' timeouts stay within the default.
            timeouts = [tool.effective_timeout for tool in registry.code_tools()]
            longest = max([toolhub_settings().DEFAULT_TOOL_TIMEOUT_SECONDS, *timeouts])
            self._limit_for_size = (size, longest + TOOL_TASK_MARGIN_SECONDS)
        return self._limit_for_size[1]

    @property
    def time_limit(self) -> float:  # type: ignore[override]
        return self.soft_time_limit + 30


@shared_task(
    name="toolhub.tasks.execute_tool_call_task",
    acks_late=True,
    ignore_result=True,
    bind=True,
    base=_ToolCallTask,
    Request=OwnTimeLimits,
)
def execute_tool_call_task(self, call_id: str, hint: list[Any] | None = None) -> None:  # type: ignore[no-untyped-def]
    """Execute one queued tool call; a second delivery of the same call does nothing.

    ``hint`` (``ClaimHint.message``): what the claim needs to know of the call without reading it first.

    Follow-up work of the settled call (the run's next step) runs here afterwards, within what is left
    of this task's soft time limit, instead of going through the broker again (``after_task``).
    """
    worker = "eager" if self.request.is_eager else (self.request.hostname or "worker")
    # Celery's soft limit (the task's own: ``OwnTimeLimits``) counts from just before this function.
    with running_after_task(seconds=float(self.soft_time_limit)):
        tool_call_execute(call_id=uuid.UUID(call_id), worker=worker, hint=ClaimHint.from_message(hint))


@shared_task(name="toolhub.tasks.sweep_task", ignore_result=True)
def sweep_task() -> None:
    """Re-dispatch lost calls and reconcile calls whose worker died."""
    calls_redispatch_stale()
    calls_reconcile_expired_leases()
    calls_expire_awaiting_results()


@shared_task(name="toolhub.tasks.sessions_clear_task", ignore_result=True)
def sessions_clear_task() -> None:
    """Delete expired console sessions (beat, every 15 minutes): nothing else does, and they pile up for ever."""
    sessions_clear_expired()


@shared_task(name="toolhub.tasks.audit_verify_tenant_task", ignore_result=True)
def audit_verify_tenant_task(tenant: str) -> None:
    """Verify one tenant's own audit chains (asked for from the console) and record the result for it."""
    try:
        audit_trail_verify(tenant=tenant)
    except UnknownTenantError:
        logger.warning("Audit verification of tenant %r not run: the tenant no longer exists.", tenant)


@shared_task(name="toolhub.tasks.audit_checkpoint_task", ignore_result=True)
def audit_checkpoint_task() -> None:
    """Store a signed checkpoint of every audit chain's head (beat, every AUDIT_CHECKPOINT_SECONDS)."""
    try:
        audit_checkpoint_create()
    except CheckpointKeyError as exc:
        logger.warning("Audit checkpoint not written: %s", exc)
    except CheckpointRefusedError as exc:
        # Every interval until someone investigates and acknowledges: the trail contradicts what was signed.
        logger.error("Audit checkpoint refused: %s", exc)
