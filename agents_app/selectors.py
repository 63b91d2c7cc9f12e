"""Reads of agents and runs."""

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from agents_app.models import Agent, AgentRun
from approvals.models import ApprovalRequest, ApprovalStatus
from toolhub.tenancy import has_tenant_wide_role, visible_rows


def runs_visible_to(user: AbstractBaseUser) -> QuerySet[AgentRun]:
    """Staff (operators, auditors) see every run of their tenants; anyone else their own runs."""
    return visible_rows(AgentRun.objects.all(), user, tenant_wide=has_tenant_wide_role(user))


def run_pending_approval_ids(run: AgentRun) -> list[int]:
    """Ids of the approval requests the run waits on."""
    return list(
        ApprovalRequest.objects.filter(call__run_id=run.id, status=ApprovalStatus.PENDING)
        .order_by("id")
        .values_list("id", flat=True)
    )


def agent_tools(name: str) -> frozenset[str]:
    """The tools an agent has now (empty when the agent no longer exists)."""
    tools = Agent.objects.filter(name=name).values_list("tools", flat=True).first()
    return frozenset(tools or ())
