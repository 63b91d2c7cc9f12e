"""The Django side of the Pydantic AI adapter: governed calls requested, found and read for one principal.

Plain synchronous functions (the ORM), run in a worker thread by ``toolhub.adapters.pydantic_ai``. A
framework's call becomes a direct governed call (kind ``api``, client channel ``pydantic-ai``), so the
pipeline validates, authorizes, holds for approval, executes once and audits it like any other; a call
is only ever looked up among the principal's own (their user, their tenant).
"""

import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from toolhub.adapters._common import NOT_RUN_STATUSES, RELEASED_STATUSES, edited_arguments, offered_tools
from toolhub.authorization import CallPrincipal
from toolhub.direct import (
    WAITING_STATUSES,
    IdempotencyConflictError,
    call_approval_id,
    call_hidden_from,
    call_wait,
    caller_principal,
    direct_call_request,
)
from toolhub.feedback import unknown_tool_message
from toolhub.models import AuditEvent, CallKind, CallStatus, ToolCall
from toolhub.pipeline import visible_tool_names
from toolhub.selectors import displayed_arguments
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

__all__ = [
    "CHANNEL",
    "DECISION_EVENTS",
    "NOT_RUN_STATUSES",
    "BridgeError",
    "CallState",
    "call_state",
    "granted_tools",
    "request_call",
    "request_key",
    "unknown_tool_text",
]

#: How the adapter's calls are named in the audit trail (``call.requested``'s ``client.channel``).
CHANNEL = "pydantic-ai"
#: The audit events of an operator's decision on a call; their actor is who answered.
DECISION_EVENTS = ("approval.approve", "approval.edit", "approval.reject")


class BridgeError(Exception):
    """A deferred request or result names no call of this principal (nothing was run or changed)."""


@dataclass(frozen=True)
class CallState:
    """What the framework needs of a governed call: where it stands, what runs, what the model reads."""

    call_id: uuid.UUID
    tool_name: str
    status: str
    #: As the caller may see them (``displayed_arguments``): sensitive values redacted.
    arguments: dict[str, Any]
    result: Any
    model_text: str
    approval_id: int | None = None
    hidden: bool = False
    answered_by: str = ""
    #: An operator's edit, as the caller may see it (``edited_arguments``); ``None`` when nobody edited the call.
    edited: dict[str, Any] | None = None

    @property
    def waiting_for_operator(self) -> bool:
        return self.status == CallStatus.PENDING_APPROVAL

    @property
    def settled(self) -> bool:
        return self.status not in WAITING_STATUSES

    @property
    def released(self) -> bool:
        """Released to run (by an operator's approval, or by policy): only such a call is answered as approved."""
        return self.status in RELEASED_STATUSES


def granted_tools(principal: CallPrincipal, only: frozenset[str] | None = None) -> list[Tool]:
    """The tools ``principal`` is offered (``offered_tools``: as every adapter lists them), or those named."""
    return [tool for tool in offered_tools(principal) if only is None or tool.name in only]


def request_key(conversation_id: str | None, tool_call_id: str | None) -> str:
    """The idempotency key of one model tool call: its conversation (kept across a deferred-tools resume) and id.

    Not ``run_id``: each run gets a new one, so the resume would. ``""`` (no key: a new call each time) when
    either is missing (a Pydantic AI without ``RunContext.conversation_id``). Keys are scoped to the caller's tenant and
    user by ``direct_call_request``, so ids from a shared or forged history never reach another's call.
    """
    if not conversation_id or not tool_call_id:
        return ""
    digest = hashlib.sha256(f"{conversation_id}\x1f{tool_call_id}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"{CHANNEL}:{digest}"


def request_call(
    *,
    user: AbstractBaseUser,
    tenant: str | None,
    tool_name: str,
    arguments: Mapping[str, Any],
    tool_call_id: str,
    context: Mapping[str, Any] | None,
    wait_seconds: float,
    idempotency_key: str = "",
) -> CallState:
    """Request a governed call as ``user`` and follow it for up to ``wait_seconds`` unless an operator must decide.

    Under ``idempotency_key`` (:func:`request_key`) a repeated request of the same tool call joins the first call
    and its decision (a Pydantic-AI-only approval asks nothing of toolhub twice); the same tool call with other
    arguments raises :class:`BridgeError` and nothing is requested or run.
    """
    try:
        made = direct_call_request(
            user=user,
            tool_name=tool_name,
            arguments=dict(arguments),
            context=context,
            tenant=tenant,
            idempotency_key=idempotency_key,
            kind=CallKind.API,
            client={"channel": CHANNEL, "tool_call_id": str(tool_call_id)[:200]},
        )
    except IdempotencyConflictError as exc:
        raise BridgeError(
            f"This tool call was already requested from toolhub (call {exc.call_id}) with other arguments; "
            "nothing was run. Ask for the call again as a new tool call."
        ) from None
    call = made.call
    if call.status in (CallStatus.QUEUED, CallStatus.RUNNING) and wait_seconds > 0:
        call = call_wait(call=call, seconds=wait_seconds)
    return _state(call, user)


def call_state(
    *, user: AbstractBaseUser, principal: CallPrincipal, call_id: Any, tool_name: str, wait_seconds: float = 0.0
) -> CallState:
    """The state of the principal's call ``call_id`` of ``tool_name``, followed up to ``wait_seconds`` once released.

    Raises :class:`BridgeError` when no such call belongs to the principal: a call id from a message
    history is the client's word, so it is checked against the user, the tenant and the tool.
    """
    try:
        pk = uuid.UUID(str(call_id))
    except ValueError:
        raise BridgeError("The deferred tool call carries no valid toolhub call id; ask for the call again.") from None
    call = ToolCall.objects.filter(
        pk=pk, user_id=principal.user_id, tenant=principal.tenant, tool_name=tool_name
    ).first()
    if call is None:
        raise BridgeError(f"There is no call {pk} of {tool_name[:200]} among yours; ask for the call again.")
    if call.status in (CallStatus.QUEUED, CallStatus.RUNNING) and wait_seconds > 0:
        call = call_wait(call=call, seconds=wait_seconds)
    return _state(call, user)


def _state(call: ToolCall, user: AbstractBaseUser) -> CallState:
    hidden = False
    if call.status in (CallStatus.INVALID, CallStatus.DENIED):
        principal = caller_principal(user, tenant=call.tenant or None)
        hidden = registry.get(call.tool_name) is None or call_hidden_from(call, principal)
    answered_by = ""
    if call.status != CallStatus.PENDING_APPROVAL:
        actor = (
            AuditEvent.objects.filter(call_id=call.pk, event_type__in=DECISION_EVENTS)
            .order_by("-id")
            .values_list("actor", flat=True)
            .first()
        )
        answered_by = actor or ""
    return CallState(
        call_id=call.pk,
        tool_name=call.tool_name,
        status=str(call.status),
        arguments=displayed_arguments(call),
        result=call.result,
        model_text=call.model_text(),
        approval_id=call_approval_id(call) if call.status == CallStatus.PENDING_APPROVAL else None,
        hidden=hidden,
        answered_by=answered_by,
        edited=edited_arguments(call) if call.status in RELEASED_STATUSES else None,
    )


def unknown_tool_text(user: AbstractBaseUser, tenant: str, name: str) -> str:
    """What the model reads for a tool it may not see: exactly what a missing tool gets."""
    return unknown_tool_message(name, visible_tool_names(caller_principal(user, tenant=tenant or None)))
