"""An operator's edit of the arguments under approval: taken in as the model's were, then judged again.

An edit makes the version that runs. It goes through the intake every version of a call's arguments
goes through (the parser's bounds, the schema, the ``before`` interceptors, as the call's user and in
its context), so an edit runs nothing the model could not have asked for. Policy then judges the new
version as it would have judged the model asking for it: an edit into what the rules hold for two
approvers needs two, whoever edits. An edit never lowers what the request already needs.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from approvals.models import ApprovalRequest
from toolhub.arguments import ArgumentsRefused, parse_arguments
from toolhub.authorization import principal_of_call
from toolhub.call_arguments import prepared_version
from toolhub.exceptions import ApprovalError, EditedArgumentsError
from toolhub.policy import recorded_call_verdict
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Risk
from toolhub.tools.registry import registry

__all__ = ["EditedVersion", "edited_version"]


@dataclass(frozen=True)
class EditedVersion:
    """The version an edit makes, and the terms it is approved on."""

    arguments: dict[str, Any]
    #: at least the request's; more when policy holds the new version for more approvers
    required_approvals: int
    #: the higher of the request's risk and the new version's
    risk: str
    #: why policy holds the new version ("" when it would not hold it)
    policy_reason: str
    #: the interceptors that rewrote the edit, in order
    rewritten_by: list[str]


def edited_version(request: ApprovalRequest, edit: Mapping[str, Any]) -> EditedVersion | None:
    """The version ``edit`` (changes over the current version) makes, or ``None`` if it changes nothing.

    Raises ``EditedArgumentsError`` (nothing recorded) when the intake refuses it: a bound, the schema, an
    interceptor (whose message never quotes a sensitive value).
    """
    tool = registry.get(request.tool_name)
    if tool is None:
        raise ApprovalError(f"Tool {request.tool_name!r} no longer exists; the call cannot be edited.")
    try:
        changes = parse_arguments(edit, tool)
    except ArgumentsRefused as refused:
        raise EditedArgumentsError(f"The edited arguments cannot be used; nothing was recorded. {refused}") from None
    call = request.call
    principal = principal_of_call(
        user_id=call.user_id, tenant=call.tenant, agent_name=call.agent_name, run_id=call.run_id
    )
    prepared = prepared_version(tool, {**request.arguments, **changes}, principal, ToolContext(call.context))
    if prepared.refusal is not None:
        raise EditedArgumentsError(
            f"The edited arguments cannot be used; nothing was recorded. {prepared.refusal.message}"
        )
    if prepared.stored == request.arguments:
        return None
    verdict = recorded_call_verdict(call=call, tool=tool, arguments=prepared.stored)
    required = max(request.required_approvals, verdict.required_approvals if verdict else 0)
    risk = max(request.risk, verdict.risk if verdict else request.risk, key=lambda name: Risk(name).rank)
    return EditedVersion(
        arguments=prepared.stored,
        required_approvals=required,
        risk=risk,
        policy_reason=verdict.reason if verdict else "",
        rewritten_by=[rewrite.data["interceptor"] for rewrite in prepared.rewrites],
    )
