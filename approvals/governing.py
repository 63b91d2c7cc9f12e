"""What governs a request's approvers as governance stands now: the tool's groups and the operators' rules.

A request copies these when it opens; a decision is judged on them as they are when it is made too, so a tool
added to a restricted group, a group given approvers, a rule raised to more approvers or a tool raised to
``critical`` reaches requests already pending (``approvals.deciders``), and a worker sends back an approved call that
governance asks more approvals of before it runs (``approvals.shortfall``). Both are read through the governance
cache: no query per request or row.
"""

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.rules import database_rule_verdict
from toolhub.authorization import CallPrincipal, tool_definitions, tool_group_names
from toolhub.catalogue import effective_risk
from toolhub.disclosure.groups import rules_seen_from
from toolhub.governance import governance_cached
from toolhub.models import ToolGroup
from toolhub.policy import minimum_approvals
from toolhub.tools.definition import Risk, Tool
from toolhub.tools.registry import registry

__all__ = [
    "governing_groups",
    "required_approvals_now",
    "required_under_rules_now",
    "restricts",
    "risk_now",
]


def governing_groups(tool_name: str, tenant: str) -> list[ToolGroup]:
    """The tool's groups that govern its approvals in ``tenant``: those restricting approvers first, by name.

    Only groups whose rules bind them to ``tenant`` (or to no tenant) count, as they do for the tenant's
    runs: a group of another tenant never decides who approves this one's calls, nor shows on its desk.
    The first names the request's approver group and escalation; every restricting one's restriction holds.
    Cached until the next governance change (read-only rows).
    """
    return governance_cached(("approval_governing_groups", tool_name, tenant), lambda: _governing(tool_name, tenant))


def _governing(tool_name: str, tenant: str) -> list[ToolGroup]:
    names = tool_group_names([tool_name])[tool_name]
    if not names:
        return []
    groups = ToolGroup.objects.filter(name__in=names).select_related("approver_group", "escalation_group")
    applying = [group for group in groups if rules_seen_from(group.activation_rules, [tenant]) is not None]
    return sorted(applying, key=lambda group: (not restricts(group), group.name))


def restricts(group: ToolGroup) -> bool:
    """Whether ``group`` limits who may approve its calls."""
    return bool(group.approver_group_id or group.approver_permission)


def required_approvals_now(request: ApprovalRequest) -> int:
    """The approvals ``request`` needs: what it needed when opened, or more if governance asks for more now.

    A pending request is held to the stricter of the rules at request and at decision: at the risk that governs it
    now (``risk_now``: a tool raised to ``critical`` needs two distinct approvers), and what the operators' rules ask
    for its version at that risk (a rule raised to two approvers, a stricter one added); never fewer than it needed
    (a rule lowered or switched off, a risk lowered, asks nothing less of it). The tool's own ``needs_approval`` code
    is not run again here: it decides whether a call is held, not by how many (that is its risk's and the rules'),
    and a change to it is a new tool version, which sends an approved call back for a new decision. A decided request
    keeps its count.
    """
    tool = registry.get(request.tool_name) if request.status == ApprovalStatus.PENDING else None
    return request.required_approvals if tool is None else required_under_rules_now(request, tool)


def required_under_rules_now(request: ApprovalRequest, tool: Tool) -> int:
    """What ``request`` needs under the risk and the operators' rules of now, never fewer than it needed."""
    needed = request.required_approvals
    risk = risk_now(request, tool)
    minimum = minimum_approvals(risk)
    principal = CallPrincipal(user_id=request.requested_by_id, username="", tenant=request.tenant)
    verdict = database_rule_verdict(tool, risk, request.arguments or {}, principal)
    return max(needed, minimum, verdict.required_approvals if verdict else 0)


def risk_now(request: ApprovalRequest, tool: Tool) -> str:
    """The risk that governs ``request`` now: the higher of the one it was held at and its tool's now.

    An operator's risk override raised while the call waits reaches it; one lowered leaves it at its old risk.
    Read through the governance cache (the catalogue), so a list of requests costs no query per row.
    """
    now = effective_risk(tool, tool_definitions().get(tool.name))
    held = request.risk if request.risk in set(Risk) else now
    return max(held, now, key=lambda name: Risk(name).rank)
