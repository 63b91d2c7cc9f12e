"""Who a built-in tool acts for: the call's tenant (from the context, never the arguments), explicitly granted.

Built-in tools reach the server's file system and processes, so they ask more than other tools: an
allow grant naming them (or their group) for the call's user, one of the user's groups or the tenant.
A superuser or ``DEFAULT_TOOL_ACCESS = "allow"``, enough for other tools, is not enough for these.
"""

import re

from django.contrib.auth import get_user_model
from django.db.models import Q

from toolhub.authorization import tool_group_names
from toolhub.builtins.refusals import refuse
from toolhub.models import Grant, GrantEffect, ToolCall
from toolhub.tools.context import ToolContext

__all__ = ["builtin_tenant"]

#: A tenant slug, as ``Tenant.slug`` stores it: safe as one directory name.
_SLUG = re.compile(r"[A-Za-z0-9_-]{1,50}")


def builtin_tenant(ctx: ToolContext, *, tool_name: str) -> str:
    """The tenant the call acts for, once it is known to hold an explicit grant of ``tool_name``."""
    tenant = str(ctx.tenant or "")
    if not _SLUG.fullmatch(tenant):
        raise refuse(
            ctx,
            tool_name=tool_name,
            code="no_tenant",
            message="This tool works in a tenant's workspace and the call has no tenant; it cannot run here.",
        )
    row = ToolCall.objects.filter(id=ctx.call_id).values("tenant", "user_id").first() if ctx.call_id else None
    if row is None or row["tenant"] != tenant:
        raise refuse(
            ctx,
            tool_name=tool_name,
            code="tenant_mismatch",
            message="This call's context does not match the call's tenant; nothing was done.",
        )
    if not _explicitly_granted(tool_name, tenant=tenant, user_id=row["user_id"]):
        raise refuse(
            ctx,
            tool_name=tool_name,
            code="not_granted",
            message=f"Tool {tool_name!r} needs an explicit grant from an administrator; do not call it.",
        )
    return tenant


def _explicitly_granted(tool_name: str, *, tenant: str, user_id: int | None) -> bool:
    """Whether an allow grant names the tool (or one of its groups) for the user, their groups or the tenant."""
    holders = Q(tenant__slug=tenant)
    if user_id is not None:
        group_ids = list(
            get_user_model().groups.through.objects.filter(user_id=user_id).values_list("group_id", flat=True)
        )
        holders |= Q(user_id=user_id) | Q(group_id__in=group_ids)
    tools = Q(tool_name=tool_name) | Q(tool_group__name__in=tool_group_names([tool_name])[tool_name])
    # Only the platform's grants: a tenant's staff may not open the server's disk and processes to their tenant.
    granted = Grant.objects.filter(holders, tools, effect=GrantEffect.ALLOW, agent_name="", set_by_platform=True)
    return granted.exists()
