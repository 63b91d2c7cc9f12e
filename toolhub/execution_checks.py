"""What is checked again when a call goes out, not only when asked: by a worker, or at an external call's release.

An external tool's call has no worker: its release (approved) hands it to the outside system that acts on it,
so that is where it is checked as a worker checks what it runs.
"""

from typing import Any

from toolhub.authorization import authorization_denial, principal_of_call, tenant_argument_denial
from toolhub.feedback import unbuildable_tool_message
from toolhub.models import ToolCall, is_undoing
from toolhub.pipeline import approval_hash_matches
from toolhub.signals import approval_shortfall
from toolhub.tools.definition import Tool
from toolhub.tools.export import listed_schema

__all__ = ["approval_no_longer_suffices", "refusal_at_execution", "unbuildable_problem"]


def unbuildable_problem(tool: Tool | None) -> str | None:
    """Why a call of ``tool`` cannot go out now: its schema cannot be built (``None``: it can, or no such tool).

    Its arguments cannot be validated nor its version bound (``Tool.version`` hashes the schema): a worker denies
    its call, approving it is refused, its request's page says so; in bounded words (``unbuildable_tool_message``),
    the builder's own message only in the operators' log (``export.listed_schema``).
    """
    return unbuildable_tool_message(tool.name) if tool is not None and listed_schema(tool) is None else None


def refusal_at_execution(call: ToolCall, tool: Any) -> str | None:
    """Permissions, the user's standing and the approval binding, as they are now; the refusal's text, or None."""
    if tool is None:
        return f"Tool {call.tool_name!r} no longer exists; nothing was executed."
    unbuildable = unbuildable_problem(tool)
    if unbuildable:
        # A dynamic tool registered again with a broken definition: ``version`` and validation would raise.
        return f"Nothing was executed: {unbuildable}"
    principal = principal_of_call(
        user_id=_made_for(call),
        tenant=call.tenant,
        agent_name=call.agent_name,
        run_id=call.run_id,
        # read by the claim's own statement, when it returned them (``toolhub.claims``)
        agent_tools=getattr(call, "agent_tools_at_claim", None),
        delegated_by=getattr(call, "delegated_by_at_claim", None),
        undoing=is_undoing(call.kind, call.context),  # an agentic compensation's inner calls too
    )
    denial = authorization_denial(call.tool_name, principal) or tenant_argument_denial(call.arguments, principal)
    if denial:
        return denial
    if call.approval_hash and tool.version != call.tool_version:
        # A worker asks for a fresh decision before this (``_execute_claimed``); an external release is refused so.
        return (
            f"Tool {call.tool_name!r} changed after the call was asked (version {call.tool_version} -> "
            f"{tool.version}); the approval no longer applies and nothing was executed."
        )
    if call.approval_hash and not approval_hash_matches(
        call.approval_hash, call.tool_name, tool.version, call.arguments
    ):
        # An operator edit re-binds the hash; anything else changing the arguments voids the approval.
        return "The arguments differ from what was approved; nothing was executed."
    return None


def _made_for(call: ToolCall) -> int | None:
    """The user the call was made for: its row's, else the id the boundary recorded in its context.

    Deleting a user empties their calls' link to them; the recorded id then names someone gone, so nothing runs.
    """
    if call.user_id is not None:
        return call.user_id
    recorded = (call.context or {}).get("user_id")
    return recorded if type(recorded) is int else None


def approval_no_longer_suffices(call: ToolCall) -> str | None:
    """Why an approved call needs a new decision before it runs, or None.

    Governance asks more approvals of it now, or some of those it was released on no longer count (their givers may
    no longer decide it): the approvals app answers (``approvals.shortfall``).

    Asked under the caller's governance scope, after ``refusal_at_execution`` found nothing to refuse: a call
    that may not run at all is denied, not sent back to the desk. A call never held for approval is not asked about.
    """
    if not call.approval_hash:
        return None
    answers = approval_shortfall.send(sender=ToolCall, call=call)
    return next((str(answer) for _, answer in answers if answer), None)
