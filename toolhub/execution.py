"""The governed call pipeline, worker side: claim a queued call once, execute it, record the outcome."""

import contextvars
import functools
import hashlib
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from toolhub.audit import chain_for
from toolhub.authorization import authorization_denial, principal_of_call, tenant_argument_denial
from toolhub.calls import call_transition, one_write
from toolhub.claims import tool_calls_claim
from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolSuspend
from toolhub.feedback import exception_detail, execution_error
from toolhub.governance import governance_scope
from toolhub.interceptors import (
    INTERCEPTOR_FAILED_MESSAGE,
    InterceptedCall,
    InterceptorFailed,
    configured_interceptors,
    interceptors_after,
)
from toolhub.models import CallStatus, ToolCall, ToolCallArtifact
from toolhub.pipeline import approval_hash, dispatch_call, tool_call_require_reapproval
from toolhub.signals import call_suspended, task_seconds_left
from toolhub.storable import json_storage_problem, storable_text
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Tool
from toolhub.tools.progress import Progress
from toolhub.tools.results import ToolResult, artifact_content, to_json_value
from toolhub.tools.secrets import NO_SECRETS, SecretScrubber

__all__ = ["tool_call_execute", "tool_call_run_claimed"]

logger = logging.getLogger(__name__)


def tool_call_execute(*, call_id: uuid.UUID, worker: str) -> ToolCall | None:
    """Claim and run one call, or a batch of queued calls with it (``WORKER_CLAIM_BATCH``); outcomes are stored.

    With a batch, the claims commit together before anything runs, and the outcomes are recorded
    together after the last one ran (one commit each instead of one per call). A claimed call that no
    longer has time to run within its lease or the task's time limit is handed back, unstarted.
    Returns ``call_id``'s call when this delivery ran it.
    """
    limit = max(1, toolhub_settings().WORKER_CLAIM_BATCH)
    calls = tool_calls_claim(call_id=call_id, worker=worker, limit=limit)
    if len(calls) <= 1:
        for call in calls:
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
    """Re-check a claimed call (tool version, permissions, approval binding, arguments), then run it.

    ``stamp_checked``: the claim checked the governance stamp the cache holds; the re-check reads none.
    """
    from toolhub.tools.registry import registry

    tool = registry.get(call.tool_name)
    if call.approval_hash and tool is not None and tool.version != call.tool_version:
        # What was approved is not what would run: a fresh decision is needed.
        tool_call_require_reapproval(call=call, tool=tool, actor=f"worker:{worker}")
        return
    with governance_scope(checked_by_write=stamp_checked):
        refusal = _refusal_at_execution(call, tool)
    if refusal is None:
        assert tool is not None
        try:
            arguments = tool.validate_arguments(call.arguments)
        except ValidationError:
            refusal = f"The stored arguments no longer match tool {call.tool_name!r}; nothing was executed."
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
    with transaction.atomic():
        for _, write in sorted(pending, key=lambda item: chain_for(item[0].id)):
            write()


def tool_call_run_claimed(*, call: ToolCall, tool: Tool, arguments: dict[str, Any], worker: str) -> ToolCall:
    """Run a call this process holds the claim of (``running``, committed) and record its outcome.

    A worker gets here after claiming and re-checking a queued call; the process that asked for a call
    and runs it itself gets here straight after the commit that wrote it claimed.
    """
    secrets = SecretScrubber.for_presets(tool.presets)
    with secrets.scope():
        _run(call, tool, arguments, worker=worker, secrets=secrets)
    return call


def _run(call: ToolCall, tool: Tool, arguments: dict[str, Any], *, worker: str, secrets: SecretScrubber) -> None:
    ctx = ToolContext(call.context).with_values(call_id=str(call.id), idempotency_key=str(call.id))
    progress = _progress_of(call, secrets) if tool.needs_progress else None
    finish = functools.partial(_finish, call, worker=worker, secrets=secrets)
    try:
        outcome = tool.invoke(arguments, ctx, progress=progress, timeout=tool.effective_timeout)
    except ToolSuspend as suspend:
        _flush_progress(progress)
        _suspend(call, suspend, worker=worker, secrets=secrets)
        return
    except Exception as exc:  # noqa: BLE001 - every failure of a tool is recorded, none escapes
        logger.info("tool %s failed on call %s", call.tool_name, call.id, exc_info=True)
        _flush_progress(progress)
        finish(status=CallStatus.FAILED, error=execution_error(exc), detail=exception_detail(exc))
        return
    _flush_progress(progress)
    if isinstance(outcome, ToolResult) and outcome.kind == "error":
        finish(status=CallStatus.FAILED, error=str(outcome.value))
        return
    artifact = _artifact_of(outcome, secrets)
    if isinstance(artifact, str):
        finish(status=CallStatus.FAILED, error=artifact)
        return
    try:
        result = _result_value(outcome, artifact)
        problem = json_storage_problem(result)
        if problem:
            raise ValueError(f"The result cannot be stored as JSON: {problem}")
    except Exception as exc:  # noqa: BLE001
        finish(
            status=CallStatus.FAILED,
            error="The tool returned a value that cannot be serialized to JSON.",
            detail=exception_detail(exc),
        )
        return
    try:
        result, intercepted = _intercepted_result(call, secrets.value(result))
    except InterceptorFailed as failed:
        finish(status=CallStatus.FAILED, error=INTERCEPTOR_FAILED_MESSAGE, detail=failed.detail, failed_by=failed.name)
        return
    finish(status=CallStatus.SUCCEEDED, result=result, artifact=artifact, intercepted=intercepted)


def _intercepted_result(call: ToolCall, result: Any) -> tuple[Any, list[str]]:
    """The ``after`` interceptors' view of a result (secrets already scrubbed), and who changed it."""
    if not configured_interceptors():
        return result, []
    seen = InterceptedCall(
        tool_name=call.tool_name,
        arguments=call.arguments,
        tenant=call.tenant,
        user_id=call.user_id,
        agent_name=call.agent_name,
        context=call.context,
    )
    result, changed = interceptors_after(call=seen, result=result)
    try:
        json.dumps(result)  # what an interceptor returns is not checked by the tool's serializer
        problem = json_storage_problem(result)
    except (TypeError, ValueError, RecursionError) as exc:
        problem = str(exc)
    if problem:
        raise InterceptorFailed(changed[-1], f"its result cannot be stored as JSON: {problem}")
    return result, changed


def _suspend(call: ToolCall, suspend: ToolSuspend, *, worker: str, secrets: SecretScrubber) -> None:
    """Park a call whose tool suspended itself: it awaits its result from outside, as an external tool's does.

    The reason and payload are what a tool hands out, so they are scrubbed like its output; a payload
    that cannot be stored fails the call instead (the model is told), so nothing waits for nothing.
    """
    reason = storable_text(secrets.text(str(suspend.reason)))[: toolhub_settings().MAX_STRING_LENGTH]
    try:
        payload = secrets.value(to_json_value(suspend.payload))
        problem = json_storage_problem(payload)
    except Exception as exc:  # noqa: BLE001
        problem = str(exc) or type(exc).__name__
    if problem:
        _finish(
            call,
            status=CallStatus.FAILED,
            worker=worker,
            error="The tool suspended itself with a payload that cannot be stored as JSON; nothing awaits a result.",
            detail=problem,
            secrets=secrets,
        )
        return
    suspension = {"reason": reason, "payload": payload}
    with transaction.atomic():
        moved = call_transition(
            call,
            to=CallStatus.AWAITING_RESULT,
            allowed_from={CallStatus.RUNNING},
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


def _refusal_at_execution(call: ToolCall, tool: Any) -> str | None:
    """Permissions and the approval binding are checked again when the call runs, not only when asked."""
    if tool is None:
        return f"Tool {call.tool_name!r} no longer exists; nothing was executed."
    principal = principal_of_call(
        user_id=call.user_id, tenant=call.tenant, agent_name=call.agent_name, run_id=call.run_id
    )
    denial = authorization_denial(call.tool_name, principal) or tenant_argument_denial(call.arguments, principal)
    if denial:
        return denial
    if call.approval_hash and approval_hash(call.tool_name, tool.version, call.arguments) != call.approval_hash:
        # An operator edit re-binds the hash; anything else changing the arguments voids the approval.
        return "The arguments differ from what was approved; nothing was executed."
    return None


def _result_value(outcome: Any, artifact: dict[str, Any] | None = None) -> Any:
    if isinstance(outcome, ToolResult):
        if outcome.kind == "text":
            return str(outcome.value)
        if outcome.kind == "artifact" and artifact is not None:
            # The model reads a summary; the data is stored with the call and listed on it.
            return outcome.summary or (
                f"Stored artifact {artifact['name']!r} ({artifact['media_type']}, {artifact['size']} bytes) "
                "with this call; its content is not shown here."
            )
    return to_json_value(outcome)


def _artifact_of(outcome: Any, secrets: SecretScrubber) -> dict[str, Any] | str | None:
    """The artifact row's values for an artifact result, or the error message when it cannot be stored.

    A text artifact is stored with its secrets replaced; a binary one that holds a secret is refused.
    """
    if not (isinstance(outcome, ToolResult) and outcome.kind == "artifact"):
        return None
    name = secrets.text(outcome.name)
    media_type = secrets.text(outcome.media_type or "application/octet-stream")[:100]
    try:
        content = artifact_content(outcome)
    except Exception:  # noqa: BLE001
        return "The tool returned an artifact that cannot be serialized; nothing was stored."
    limit = toolhub_settings().MAX_ARTIFACT_BYTES
    if len(content) > limit:
        return f"The tool's artifact {name!r} is larger than {limit} bytes; it was not stored."
    scrubbed = secrets.artifact(content, media_type)
    if scrubbed is None:
        return (
            f"The tool's artifact {name!r} ({media_type}) is binary and contains a secret value; it was not stored. "
            "A tool must never put its secrets in what it returns."
        )
    content = scrubbed
    return {
        "name": name,
        "media_type": media_type,
        "size": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
        "content": content,
    }


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


def _flush_progress(progress: Progress | None) -> None:
    if progress is None:
        return
    try:
        progress.flush()
    except Exception:  # noqa: BLE001 - losing the last progress note must not lose the outcome
        logger.warning("could not store the last progress updates", exc_info=True)


def _finish(
    call: ToolCall,
    *,
    status: CallStatus,
    worker: str,
    result: Any = None,
    error: str = "",
    detail: str = "",
    artifact: dict[str, Any] | None = None,
    secrets: SecretScrubber = NO_SECRETS,
    intercepted: list[str] | None = None,
    failed_by: str = "",
) -> None:
    """Record a call's outcome: the one place a worker writes what a tool returned, so its secrets are replaced here."""
    # What a tool raised may hold characters no text column stores.
    error, detail = storable_text(secrets.text(error)), storable_text(secrets.text(detail))
    result = secrets.value(result)
    data: dict[str, Any] = {"attempt": call.attempts}
    if error:
        data["error"] = error
    if intercepted:
        data["result_changed_by"] = [f"interceptor:{name}" for name in intercepted]
    if failed_by:
        data["interceptor"] = failed_by
    if artifact is not None:
        data["artifact"] = {key: artifact[key] for key in ("name", "media_type", "size", "sha256")}
    finished_at = timezone.now()

    def record() -> None:
        # No savepoint: inside a batch's outcome transaction a failure voids the batch (its calls stay
        # claimed for the reconciler), as a failure voids a single outcome. Without an artifact row the
        # outcome is one statement (``one_write``).
        with transaction.atomic(savepoint=False) if artifact is not None else one_write():
            moved = call_transition(
                call,
                to=status,
                allowed_from={CallStatus.RUNNING},
                actor=f"worker:{worker}",
                data=data,
                result=result,
                error=error,
                error_detail=detail,
                finished_at=finished_at,
                lease_expires_at=None,
            )
            if moved and artifact is not None:
                ToolCallArtifact.objects.create(call=call, **artifact)
        if not moved:
            logger.warning(
                "call %s was taken from this worker before it finished; outcome %s not recorded", call.id, status
            )

    batch = _outcomes.get()
    if batch is None:
        record()
    else:
        batch.append((call, record))
