"""What the framework adapters share, so that Pydantic AI, LangGraph and the OpenAI Agents SDK answer alike.

No framework is imported here: each adapter translates these answers into its own types.
"""

import uuid
from dataclasses import dataclass
from typing import Any

from toolhub.authorization import CallPrincipal
from toolhub.disclosure.meta import META_TOOL_NAMES
from toolhub.disclosure.unfolding import tool_seen_by
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.pipeline import visible_tool_names
from toolhub.selectors import displayed_arguments
from toolhub.tools.definition import Tool
from toolhub.tools.export import listable
from toolhub.tools.registry import registry

__all__ = [
    "EDIT_EVENT",
    "NOT_RUN_STATUSES",
    "RELEASED_STATUSES",
    "Decision",
    "edited_arguments",
    "offered_tools",
    "own_call",
    "pause_decision",
]

#: The audit event of an operator's edit: the version under approval replaced by the operator's.
EDIT_EVENT = "approval.edit"
#: A call released to run: by an operator's approval once held (the only way out of ``pending_approval`` to
#: these), or by policy that held nothing. An allowlist: any other status never maps to an approval.
RELEASED_STATUSES = frozenset(
    {
        CallStatus.QUEUED,
        CallStatus.RUNNING,
        CallStatus.AWAITING_RESULT,
        CallStatus.SUCCEEDED,
        CallStatus.FAILED,
        CallStatus.NEEDS_ATTENTION,
        CallStatus.COMPENSATED,
    }
)
#: A call that never ran and never will: refused, rejected, expired unanswered, or withdrawn (``cancelled``, by
#: its requester or an operator, before it started). Nobody approved it.
NOT_RUN_STATUSES = frozenset(set(CallStatus) - RELEASED_STATUSES - {CallStatus.PENDING_APPROVAL})


@dataclass(frozen=True)
class Decision:
    """A framework's approval pause on a governed call answered: approve, or reject with what the model reads."""

    approve: bool
    message: str = ""


def pause_decision(call: ToolCall) -> Decision | None:
    """The answer to a framework's approval pause on ``call``; ``None`` while it waits for an operator.

    Only a released call is approved: a framework's approval is its record that someone approved the call, so a
    call withdrawn by its requester (no operator decided: the four-eyes rule) is rejected with what the model
    reads of it ("Not executed: cancelled by user:alice: ..."), like one rejected, expired or refused.
    """
    if call.status == CallStatus.PENDING_APPROVAL:
        return None
    if call.status in RELEASED_STATUSES:
        return Decision(approve=True)
    return Decision(approve=False, message=call.model_text())


def edited_arguments(call: ToolCall) -> dict[str, Any] | None:
    """The arguments an operator's edit released, as the caller may see them; ``None`` when nobody edited the call.

    What a framework hands back to its model as "a reviewer changed the call": redacted exactly as the approvals
    API shows them (``displayed_arguments``). An interceptor's rewrite is no operator's edit, and a value it put
    in (a rotated token) is not the model's to read.
    """
    if not AuditEvent.objects.filter(call_id=call.pk, event_type=EDIT_EVENT).exists():
        return None
    return displayed_arguments(call)


def offered_tools(principal: CallPrincipal) -> list[Tool]:
    """The tools a framework's agent is given for ``principal``, by name, each as the principal sees it.

    ``visible_tool_names`` is the one listing rule (runs, MCP, the catalogue): a facade holding no tool the
    principal may use is left out with its context tool. The meta tools are left out too: they change a run's
    tool list from one turn to the next, which a framework's fixed list of tools does not do. ``tool_seen_by``
    gives the schema: a by-category facade offers only the categories holding a tool the principal may use, as
    a run, MCP and the catalogue offer it (a category of denied tools reads like one that does not exist). One whose
    schema cannot be built is left out (``listable``), as every listing leaves it out, not every tool refused.
    """
    offered = []
    for name in visible_tool_names(principal):
        tool = registry.get(name) if name not in META_TOOL_NAMES else None
        seen = tool_seen_by(tool, principal) if tool is not None else None
        if seen is not None:
            offered.append(seen)
    return listable(offered)


def own_call(call_id: uuid.UUID, principal: CallPrincipal, tool_name: str) -> ToolCall | None:
    """The call of this derived id if it is ``principal``'s, of ``tool_name``; ``None`` if no call has the id.

    Adapters derive a call's id from ids the client picks (a thread or run key and the model's tool call id),
    so the id may be taken by another user's call, or by a call of another tool (a model reusing a call id):
    such a call is never joined nor shown. Raises ``LookupError``; each adapter refuses it in its own error.
    """
    call = ToolCall.objects.filter(pk=call_id).first()
    if call is None:
        return None
    if (call.tenant, call.user_id, call.tool_name) != (principal.tenant, principal.user_id, tool_name):
        raise LookupError(call_id)
    return call
