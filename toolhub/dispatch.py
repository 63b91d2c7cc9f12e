"""Who runs a call policy let through: a worker, once the transaction that queued it commits, or this process.

The pipeline decides a call; this module sends it on (``dispatch_call``), says whether it would run here (eager
tasks, or an agentic tool's inner loop inside ``inline_execution``) and how long a claim on it holds. It is apart
from the pipeline so the code that sends calls on (claims, sweeper, sagas, execution) needs none of the deciding.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta

from django.db import transaction

from toolhub.conf import toolhub_settings
from toolhub.models import ToolCall
from toolhub.tools.definition import Tool

__all__ = ["EAGER_WORKER", "call_lease", "dispatch_call", "inline_execution", "inline_worker", "runs_in_this_process"]


#: The worker name of calls executed by the process that asked for them.
EAGER_WORKER = "eager"


def call_lease(tool: Tool | None) -> timedelta:
    """How long a claim holds before the reconciler may take the call back: the tool's timeout plus a margin."""
    return timedelta(seconds=toolhub_settings().CALL_LEASE_SECONDS + (tool.effective_timeout if tool else 0.0))


def runs_in_this_process() -> bool:
    """Whether a dispatched call would run here, at commit (the embedded default's eager tasks)."""
    from toolhub.celery import app

    return bool(inline_worker.get()) or bool(app.conf.task_always_eager)


#: The worker name calls requested inside ``inline_execution`` are claimed for ("" outside it).
inline_worker: ContextVar[str] = ContextVar("toolhub_inline_execution", default="")


@contextmanager
def inline_execution(worker: str) -> Iterator[None]:
    """Calls requested in the block that may run now are written claimed by ``worker``, for the caller to run.

    An agentic tool's inner loop needs each inner result before its next model turn; it runs them with
    ``toolhub.execution.tool_call_run_claimed`` in the worker that runs the outer call (``worker`` names it).
    """
    token = inline_worker.set(worker[:200] or EAGER_WORKER)
    try:
        yield
    finally:
        inline_worker.reset(token)


def dispatch_call(call: ToolCall) -> None:
    """Send the call to a worker once the transaction that queued it has committed.

    A failed publish is not fatal: the row stays ``queued`` and the sweeper dispatches it again. The
    message carries the call's claim hint, so the worker's claim needs no read of the call.
    """
    from toolhub.claims import ClaimHint
    from toolhub.tasks import execute_tool_call_task

    call_id, hint = str(call.id), ClaimHint.of(call).message()
    transaction.on_commit(lambda: execute_tool_call_task.delay(call_id, hint=hint), robust=True)
