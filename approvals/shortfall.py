"""Whether the approval an approved call was released on still suffices when a worker is about to run it.

Asked through ``toolhub.signals.approval_shortfall`` (``approvals.receivers``), under the worker's governance scope.
Two things make it fall short, and both send the call back to the desk for a new round (``rules_changed``):
governance asks more approvals of the call now (its tool raised to ``critical``, a rule raised or added while it sat
in the queue), or some of the approvals it was released on no longer count because their givers may no longer
decide it (deactivated, deleted, removed from its tenant, stripped of the right or of the tool groups' approver
group, or outside the approvers a tool group names since): a call never runs on the word of someone who could not
give it now, as a pending request's quorum counts only approvals whose givers still stand
(``approvals.deciders.ApproverStanding``).
"""

from approvals.deciders import ApproverStanding
from approvals.governing import required_under_rules_now
from approvals.models import ApprovalRequest
from approvals.rows import ASKERS_READ, released_request
from approvals.rules import rules_ask_several_approvers
from toolhub.authorization import tool_definitions
from toolhub.catalogue import effective_risk
from toolhub.models import ToolCall
from toolhub.policy import decision_stamp
from toolhub.sagas.selectors import compensation_askers
from toolhub.tools.definition import Risk
from toolhub.tools.registry import registry

__all__ = ["approval_shortfall"]

#: Names quoted in a send-back's reason at most (the rest are counted): the reason stays bounded.
NAMED_AT_MOST = 3


def approval_shortfall(call: ToolCall) -> str | None:
    """Why the approval ``call`` was released on no longer suffices, or ``None``: asked before a worker runs it.

    Nothing is read when the worker's governance is the one the approvals were judged under at release
    (``ToolCall.approved_under``, ``toolhub.policy.decision_stamp``): every change that could lapse one, or change
    a rule or a risk override, stamps a new governance version (a tool's code risk and rule are its version, its code
    group is in the stamp compared: review gm), so the release counted what governance asks now. An
    approved call's hot path costs no statement, whatever rules other tenants or tools have (a two-approver rule
    anywhere, a critical tool: review gb).

    Otherwise the released round's approvals are read with their request and its askers in one statement
    (``approvals.rows.released_request``); their givers are judged as the worker's governance has them
    (``ApproverStanding(released=True)``: read once per process until governance changes), held to the approver
    restrictions of the tool's groups now as a pending request's deciders are. The rules are read again only when
    they could ask more than one approval of the call now (its tool is critical now, or some rule asks several).
    """
    tool = registry.get(call.tool_name)
    if tool is None:
        return None
    if call.approved_under is not None and call.approved_under == decision_stamp(call.tool_name):
        return None
    several_now = effective_risk(tool, tool_definitions().get(tool.name)) == Risk.CRITICAL or (
        rules_ask_several_approvers()
    )
    request, givers = released_request(call.id)
    if request is None:
        return None
    # Who asked for a compensation since its release (a retrier, ``Compensation.retried_by``) decides it no more than
    # its first askers: the same call queued again never runs on its retrier's own approval (review gm).
    request.__dict__[ASKERS_READ] = request.__dict__[ASKERS_READ] | frozenset(compensation_askers(call))
    if several_now:
        needed = required_under_rules_now(request, tool)
        if needed > request.required_approvals:
            return (
                f"the approval rules changed after approval (the call now needs {needed} approvals, it was released "
                f"on {request.required_approvals}); the earlier approval no longer applies"
            )
    return _lapsed(request, givers)


def _lapsed(request: ApprovalRequest, givers: list[tuple[int | None, str]]) -> str | None:
    """Why the approvals standing now fall short of those ``request`` was released on, naming whose lapsed."""
    counted = ApproverStanding(released=True).counted(request, (pk for pk, _ in givers))
    if len(counted) >= request.required_approvals:
        return None
    lapsed = [name for pk, name in givers if pk not in counted]
    named = ", ".join(lapsed[:NAMED_AT_MOST]) + (
        f" and {len(lapsed) - NAMED_AT_MOST} more" if lapsed[NAMED_AT_MOST:] else ""
    )
    return (
        f"the approval of {named} no longer counts: they may no longer decide this call (deactivated, deleted, "
        f"removed from its tenant, without the right, not among its tool groups' approvers, or among those who asked "
        f"for it) since it was approved; "
        f"{len(counted)} of the "
        f"{request.required_approvals} approvals it was released on still count, so it needs a new decision"
    )
