"""Reads of agents and runs."""

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from agents_app.models import Agent, AgentRun
from approvals.models import ApprovalRequest, ApprovalStatus


def runs_visible_to(user: AbstractBaseUser) -> QuerySet[AgentRun]:
    """A user sees their own runs; staff see all."""
    runs = AgentRun.objects.all()
    if getattr(user, "is_staff", False):
        return runs
    return runs.filter(user_id=user.pk)


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
