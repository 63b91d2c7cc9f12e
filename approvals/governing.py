"""What governs a request's approvers as governance stands now: the tool's groups and the operators' rules.

A request copies these when it opens; a decision is judged on them as they are when it is made too, so a tool
added to a restricted group, a group given approvers or a rule raised to more approvers reaches requests already
pending (``approvals.deciders``). Both are read through the governance cache: no query per request or row.
"""

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.rules import database_rule_verdict
from toolhub.authorization import CallPrincipal, tool_group_names
from toolhub.disclosure.groups import rules_seen_from
from toolhub.governance import governance_cached
from toolhub.models import ToolGroup
from toolhub.tools.registry import registry

__all__ = ["governing_groups", "required_approvals_now", "restricts"]


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

    A pending request needs what the operators' rules ask for its version now (a rule raised to two approvers, a
    stricter one added), judged at the risk it was held at; never fewer than it needed (a rule lowered or switched
    off asks nothing less of it). The tool's own ``needs_approval`` code is not run again here (it is the
    user's hook, judged once per version); a decided request keeps its count.
    """
    needed = request.required_approvals
    tool = registry.get(request.tool_name) if request.status == ApprovalStatus.PENDING else None
    if tool is None or not request.risk:
        return needed
    principal = CallPrincipal(user_id=request.requested_by_id, username="", tenant=request.tenant)
    verdict = database_rule_verdict(tool, request.risk, request.arguments or {}, principal)
    return max(needed, verdict.required_approvals if verdict else 0)
