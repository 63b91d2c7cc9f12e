"""What running a tool came to, before anything of it is written.

``run_outcome`` invokes the tool and turns what it returned or raised into an ``Outcome``: a status and
the values ``toolhub.execution`` records. Nothing here writes, so the worker can decide where the
write goes: on its own, with a batch, or in the tool's own transaction (atomic tools).
"""

import dataclasses
import hashlib
import json
import logging
from typing import Any

from toolhub.audit_hash import canonical_json
from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolSuspend
from toolhub.feedback import default_error_handler, exception_detail, execution_error
from toolhub.interceptors import (
    INTERCEPTOR_FAILED_MESSAGE,
    InterceptedCall,
    InterceptorFailed,
    configured_interceptors,
    interceptors_after,
)
from toolhub.models import CallStatus, ToolCall, ToolCallArtifact
from toolhub.storable import json_storage_problem, storable_text
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Tool
from toolhub.tools.progress import Progress
from toolhub.tools.results import ToolResult, artifact_content, to_json_value
from toolhub.tools.secrets import SecretScrubber, is_text_media_type

__all__ = ["Outcome", "run_outcome"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A run's result: ``succeeded`` or ``failed`` with ``_finish``'s values, or ``awaiting_result``.

    ``awaiting_result`` carries the suspension (reason and payload, scrubbed and storable) of a tool that
    suspended itself.
    """

    status: CallStatus
    values: dict[str, Any] = dataclasses.field(default_factory=dict)
    suspension: dict[str, Any] | None = None

    @classmethod
    def failed(cls, error: str, **values: Any) -> "Outcome":
        return cls(CallStatus.FAILED, {"error": error, **values})


#: What a tool's own code may raise that is not an ``Exception`` and still only ends the tool: ``sys.exit()`` (a
#: command-line library's ``main``, a careless ``exit()``) and a stray ``GeneratorExit``. Escaping, either left the
#: call ``running`` with its outcome lost, and ``SystemExit`` ended the worker process. ``KeyboardInterrupt`` (the
#: process is being stopped) still escapes: the lease and the reconciler settle what it interrupted.
TOOL_EXITS: tuple[type[BaseException], ...] = (SystemExit, GeneratorExit)

#: Everything a tool's code may raise, running or while what it handed back is read: one tuple for both guards.
_TOOL_FAILURES: tuple[type[BaseException], ...] = (Exception, *TOOL_EXITS)


def run_outcome(
    call: ToolCall, tool: Tool, arguments: dict[str, Any], *, progress: Progress | None, secrets: SecretScrubber
) -> Outcome:
    """Run the tool on ``call``'s behalf; every failure of the tool becomes a ``failed`` outcome, none escapes.

    That includes what the tool raised or returned failing again when it is read (an exception or a
    ``ToolResult.error`` value whose ``__str__`` raises, a hand-built ``ToolResult`` with a name that is not text):
    escaping, it left the call ``running`` with its outcome lost, since the tool has run by then.
    """
    try:
        return _run_outcome(call, tool, arguments, progress=progress, secrets=secrets)
    except _TOOL_FAILURES as exc:  # what the tool handed back could not be read: still its failure
        logger.info("tool %s failed on call %s, unreadably", call.tool_name, call.id, exc_info=True)
        return Outcome.failed(default_error_handler(exc), detail=exception_detail(exc))


def _run_outcome(
    call: ToolCall, tool: Tool, arguments: dict[str, Any], *, progress: Progress | None, secrets: SecretScrubber
) -> Outcome:
    ctx = ToolContext(call.context).with_values(call_id=str(call.id), idempotency_key=str(call.id))
    try:
        returned = tool.invoke(arguments, ctx, progress=progress, timeout=tool.effective_timeout)
    except ToolSuspend as suspend:
        return _suspended(suspend, secrets)
    except _TOOL_FAILURES as exc:  # every failure of a tool is recorded, none escapes
        logger.info("tool %s failed on call %s", call.tool_name, call.id, exc_info=True)
        return Outcome.failed(execution_error(exc), detail=exception_detail(exc))
    finally:
        _flush_progress(progress)
    if isinstance(returned, ToolResult) and returned.kind == "error":
        return Outcome.failed(str(returned.value))
    artifact = _artifact_of(returned, secrets)
    if isinstance(artifact, str):
        return Outcome.failed(artifact)
    try:
        result = _result_value(returned, artifact)
        problem = json_storage_problem(result)
        if problem:
            raise ValueError(f"The result cannot be stored as JSON: {problem}")
    except Exception as exc:  # noqa: BLE001
        return Outcome.failed(
            "The tool returned a value that cannot be serialized to JSON.", detail=exception_detail(exc)
        )
    try:
        result, intercepted = _intercepted_result(call, secrets.value(result))
    except InterceptorFailed as failed:
        return Outcome.failed(INTERCEPTOR_FAILED_MESSAGE, detail=failed.detail, failed_by=failed.name)
    oversized = _oversized(result)
    if oversized:
        return Outcome.failed(oversized, detail=_OVERSIZED_HINT)
    return Outcome(CallStatus.SUCCEEDED, {"result": result, "artifact": artifact, "intercepted": intercepted})


#: What the operator reads beside an oversized result's failure; the model reads only the message.
_OVERSIZED_HINT = (
    "A result is stored with the call, hashed into the audit trail and sent to the model whole. Return large data "
    "as an artifact (ToolResult.artifact: stored with the call, summarized to the model), or raise "
    "TOOLHUB['MAX_RESULT_BYTES']."
)


def _oversized(result: Any) -> str | None:
    """Why a result is too large to keep (``MAX_RESULT_BYTES``, measured as JSON like a remote answer), or ``None``.

    The tool has run: its effect stands, but nothing of an unbounded result reaches the row, the audit trail or
    the model's context (which it would fill, or make the provider refuse every later turn).
    """
    limit = toolhub_settings().MAX_RESULT_BYTES
    if isinstance(result, str) and len(result) * 6 <= limit:
        return None  # a character is at most 6 bytes of JSON (``\u001f``): short text is not measured
    size = len(canonical_json(result).encode("utf-8"))
    if size <= limit:
        return None
    return (
        f"The tool returned {size:,} bytes of result, more than the {limit:,} a result may hold "
        "(TOOLHUB['MAX_RESULT_BYTES']); nothing of it was kept. Ask for less at a time."
    )


def _suspended(suspend: ToolSuspend, secrets: SecretScrubber) -> Outcome:
    """A tool's suspension, scrubbed like its output; a payload that cannot be stored fails the call instead.

    The model is then told, so that nothing waits for a result that could never be delivered.
    """
    reason = storable_text(secrets.text(str(suspend.reason)))[: toolhub_settings().MAX_STRING_LENGTH]
    try:
        payload = secrets.value(to_json_value(suspend.payload))
        problem = json_storage_problem(payload)
    except Exception as exc:  # noqa: BLE001
        problem = str(exc) or type(exc).__name__
    if problem:
        return Outcome.failed(
            "The tool suspended itself with a payload that cannot be stored as JSON; nothing awaits a result.",
            detail=problem,
        )
    suspension = {"reason": reason, "payload": payload}
    if not suspend.expires:
        suspension["expires"] = False  # read by ``sweeper.calls_expire_awaiting_results``
    return Outcome(CallStatus.AWAITING_RESULT, suspension=suspension)


def _flush_progress(progress: Progress | None) -> None:
    if progress is None:
        return
    try:
        progress.flush()
    except Exception:  # noqa: BLE001 - losing the last progress note must not lose the outcome
        logger.warning("could not store the last progress updates", exc_info=True)


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


def _column_length(name: str) -> int:
    """The length of ``ToolCallArtifact``'s column ``name``."""
    return int(ToolCallArtifact._meta.get_field(name).max_length)  # type: ignore[arg-type]


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
    if not (outcome.name and isinstance(outcome.name, str)) or not isinstance(outcome.media_type or "", str):
        # Built by hand (``ToolResult(kind="artifact", ...)``), not by ``ToolResult.artifact``: the row needs text.
        return "The tool returned an artifact without a name or with a media type that is not text; nothing was stored."
    # Storable and within the row's columns: a name a remote system gave may hold a NUL (PostgreSQL refused the row,
    # and the outcome was never recorded); escaped, then cut (``within``), as a scrubbed secret may lengthen it.
    name = storable_text(secrets.text(outcome.name), within=_column_length("name"))
    media_type = storable_text(
        secrets.text(outcome.media_type or "application/octet-stream"), within=_column_length("media_type")
    )
    try:
        content = artifact_content(outcome)
    except Exception:  # noqa: BLE001
        return "The tool returned an artifact that cannot be serialized; nothing was stored."
    limit = toolhub_settings().MAX_ARTIFACT_BYTES
    if len(content) > limit:
        return f"The tool's artifact {name!r} is larger than {limit} bytes; it was not stored."
    scrubbed = secrets.artifact(content, media_type)
    if scrubbed is None:
        what = (
            "holds a secret value that could not be replaced (an unknown charset, or text not in its declared one)"
            if is_text_media_type(media_type)
            else "is binary and contains a secret value"
        )
        return (
            f"The tool's artifact {name!r} ({media_type}) {what}; it was not stored. "
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
