"""Pydantic AI on toolhub: a toolset of the principal's tools whose approvals are toolhub's (extra ``pydantic-ai``).

Pydantic AI's deferred tools put a human between a call and its execution, but record nobody and
bind nothing ("approval is not an authorization boundary"). Here every call of a
:class:`ToolhubToolset` tool is a governed toolhub call made for the toolset's user, so policy (not
the agent) decides what needs an operator:

1. A call toolhub holds for approval raises ``ApprovalRequired``: the run ends with
   ``DeferredToolRequests`` whose metadata names the toolhub call and its approval request, which the
   operators see (tool, arguments, requester) and decide in the admin or over the approvals API.
2. :func:`operator_decisions` turns their decisions into ``DeferredToolResults``: approved becomes
   ``ToolApproved`` (an operator's edited arguments as ``override_args``, sensitive values redacted: the
   call runs as toolhub released it), rejected ``ToolDenied(<the operator's comment>)``; who answered is
   in ``answered_by``.
3. The run resumes with ``message_history`` + ``deferred_tool_results``; the approved call is the
   call toolhub already released to its worker, so its result is read, never run a second time.

A ``True`` approval given to Pydantic AI without toolhub's metadata approves nothing: the call is
requested from toolhub again under the same key (the run's ``conversation_id`` and the model's
``tool_call_id``), so it joins the first call and its decision: still waiting, rejected, or released and run
once. Other arguments for the same tool call are refused (nothing runs).
"""

import copy
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractBaseUser
from django.db import close_old_connections
from pydantic_ai import DeferredToolRequests, DeferredToolResults, RunContext, ToolApproved, ToolDenied
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, ToolFailed
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from toolhub.adapters._pydantic_ai_bridge import (
    BridgeError,
    CallState,
    call_state,
    granted_tools,
    request_call,
    request_key,
    unknown_tool_text,
)
from toolhub.direct import caller_principal
from toolhub.models import CallStatus

__all__ = [
    "METADATA_KEY",
    "OperatorDecisions",
    "PendingApproval",
    "ToolhubDeferralError",
    "ToolhubToolset",
    "aoperator_decisions",
    "operator_decisions",
    "pending_approvals",
]

#: The key of toolhub's part of a deferred call's metadata: ``{"call_id": ..., "approval_id": ...}``.
METADATA_KEY = "toolhub"

# toolhub validates arguments itself (the pipeline's intake, with its bounded messages to the model).
_ANY_ARGUMENTS = SchemaValidator(core_schema.dict_schema(keys_schema=core_schema.str_schema()))

ToolhubDeferralError = BridgeError


def _in_thread(fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """``fn`` (ORM work) in a worker thread, its connection handled as around a Django request."""

    def managed(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(managed, thread_sensitive=False)


class ToolhubToolset(AbstractToolset[Any]):
    """The toolhub tools ``user`` may use, each call governed (authorized, approved, executed once, audited).

    ``tenant`` names the tenant for a member of several; ``tools`` narrows the catalogue to those names;
    ``context`` holds client context keys (``TOOLHUB["CLIENT_CONTEXT_KEYS"]``) sent with every call;
    a released call is followed for up to ``wait_seconds`` before the run is handed a deferred call.
    """

    def __init__(
        self,
        *,
        user: AbstractBaseUser,
        tenant: str | None = None,
        tools: Iterable[str] | None = None,
        context: Mapping[str, Any] | None = None,
        wait_seconds: float = 30.0,
        max_retries: int = 1,
        id: str = "toolhub",
    ) -> None:
        self.user = user
        self.tenant = tenant
        self.only = frozenset(tools) if tools is not None else None
        self.context = dict(context or {})
        self.wait_seconds = wait_seconds
        self.max_retries = max_retries
        self._id = id

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await _in_thread(self._granted)()
        return {
            tool.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=tool.name,
                    description=tool.description,
                    parameters_json_schema=copy.deepcopy(dict(tool.json_schema)),  # the registry's stays intact
                    metadata={METADATA_KEY: {"risk": str(tool.risk)}},
                ),
                max_retries=self.max_retries,
                args_validator=_ANY_ARGUMENTS,
            )
            for tool in tools
        }

    def _granted(self) -> list[Any]:
        return granted_tools(caller_principal(self.user, tenant=self.tenant), self.only)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        toolhub = _toolhub_metadata(ctx.tool_call_metadata) if ctx.tool_call_approved else None
        try:
            if toolhub is None:
                state = await _in_thread(request_call)(
                    user=self.user,
                    tenant=self.tenant,
                    tool_name=name,
                    arguments=tool_args,
                    tool_call_id=ctx.tool_call_id or "",
                    context=self.context,
                    wait_seconds=self.wait_seconds,
                    idempotency_key=request_key(getattr(ctx, "conversation_id", None), ctx.tool_call_id),
                )
            else:
                state = await _in_thread(self._approved_state)(toolhub.get("call_id"), name)
        except BridgeError as exc:
            raise ToolFailed(str(exc)) from None
        if state.hidden:
            raise ToolFailed(await _in_thread(unknown_tool_text)(self.user, self.tenant or "", name))
        return _outcome(state)

    def _approved_state(self, call_id: Any, name: str) -> CallState:
        principal = caller_principal(self.user, tenant=self.tenant)
        return call_state(
            user=self.user, principal=principal, call_id=call_id, tool_name=name, wait_seconds=self.wait_seconds
        )


def _toolhub_metadata(metadata: Any) -> dict[str, Any] | None:
    part = metadata.get(METADATA_KEY) if isinstance(metadata, Mapping) else None
    return dict(part) if isinstance(part, Mapping) and part.get("call_id") else None


def _metadata(state: CallState) -> dict[str, Any]:
    return {METADATA_KEY: {"call_id": str(state.call_id), "approval_id": state.approval_id}}


def _outcome(state: CallState) -> Any:
    """The call's state as Pydantic AI takes a tool's outcome: a result, a deferral, a retry or a failure."""
    if state.waiting_for_operator:
        raise ApprovalRequired(metadata=_metadata(state))
    if not state.settled:
        raise CallDeferred(metadata=_metadata(state))
    if state.status == CallStatus.SUCCEEDED:
        return state.result
    if state.status == CallStatus.INVALID:
        raise ModelRetry(state.model_text)
    raise ToolFailed(state.model_text)


# --- operators' decisions → DeferredToolResults ----------------------------------------------------------


@dataclass(frozen=True)
class PendingApproval:
    """A deferred call toolhub holds for an operator: the framework's id, toolhub's call and approval request."""

    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    call_id: str
    approval_id: int | None


def pending_approvals(requests: DeferredToolRequests) -> list[PendingApproval]:
    """The approvals a run is waiting for, as toolhub approval requests (no database access).

    Raises :class:`ToolhubDeferralError` for an approval that is not toolhub's (another toolset's).
    """
    found = []
    for part in requests.approvals:
        toolhub = _toolhub_metadata(requests.metadata.get(part.tool_call_id))
        if toolhub is None:
            raise BridgeError(
                f"The deferred call {part.tool_call_id[:100]} of {part.tool_name[:200]} is not a toolhub call; "
                "decide it with the toolset that deferred it."
            )
        found.append(
            PendingApproval(
                tool_call_id=part.tool_call_id,
                tool_name=part.tool_name,
                arguments=part.args_as_dict(),
                call_id=str(toolhub["call_id"]),
                approval_id=toolhub.get("approval_id"),
            )
        )
    return found


@dataclass(frozen=True)
class OperatorDecisions:
    """What the operators decided so far: results to resume with, and the calls still waiting for them."""

    results: DeferredToolResults
    pending: tuple[str, ...] = field(default=())

    @property
    def complete(self) -> bool:
        """Whether every deferred call was answered, so the run can resume without deferring again."""
        return not self.pending


def operator_decisions(
    requests: DeferredToolRequests,
    *,
    user: AbstractBaseUser,
    tenant: str | None = None,
    wait_seconds: float = 0.0,
) -> OperatorDecisions:
    """Toolhub's decisions on a run's deferred calls (each followed up to ``wait_seconds``) as ``DeferredToolResults``.

    Only ``user``'s own calls in their tenant are read; an id from another toolset, user or tenant
    raises :class:`ToolhubDeferralError` and nothing is returned.
    """
    principal = caller_principal(user, tenant=tenant)
    results = DeferredToolResults()
    pending: list[str] = []
    for approval in pending_approvals(requests):
        state = call_state(
            user=user,
            principal=principal,
            call_id=approval.call_id,
            tool_name=approval.tool_name,
            wait_seconds=wait_seconds,
        )
        if state.waiting_for_operator:
            pending.append(approval.tool_call_id)
            continue
        if state.answered_by:
            results.answered_by[approval.tool_call_id] = state.answered_by
        if not state.released:
            # Never run: rejected, expired, refused, or withdrawn by its requester (no operator approved it).
            results.approvals[approval.tool_call_id] = ToolDenied(state.model_text)
            continue
        # Only an operator's edit overrides, as the caller may see it: never an interceptor's rewrite (the call
        # runs as toolhub released it, whatever these say).
        results.approvals[approval.tool_call_id] = ToolApproved(override_args=state.edited)
        results.metadata[approval.tool_call_id] = _metadata(state)
    for part in requests.calls:
        toolhub = _toolhub_metadata(requests.metadata.get(part.tool_call_id))
        if toolhub is None:
            continue  # another toolset's external call: its owner answers it
        state = call_state(
            user=user,
            principal=principal,
            call_id=toolhub["call_id"],
            tool_name=part.tool_name,
            wait_seconds=wait_seconds,
        )
        if not state.settled:
            pending.append(part.tool_call_id)
        elif state.status == CallStatus.SUCCEEDED:
            results.calls[part.tool_call_id] = state.result
        else:
            results.calls[part.tool_call_id] = ToolFailed(state.model_text)
    return OperatorDecisions(results=results, pending=tuple(pending))


async def aoperator_decisions(
    requests: DeferredToolRequests,
    *,
    user: AbstractBaseUser,
    tenant: str | None = None,
    wait_seconds: float = 0.0,
) -> OperatorDecisions:
    """:func:`operator_decisions` for async code (the ORM runs in a worker thread)."""
    return await _in_thread(operator_decisions)(requests, user=user, tenant=tenant, wait_seconds=wait_seconds)
