"""The principal of a call, rebuilt from its context on whichever process runs it."""

import uuid
from typing import Any

from toolhub.authorization import CallPrincipal, principal_of_call
from toolhub.tools.context import ToolContext

__all__ = ["principal_of_context"]


def principal_of_context(ctx: ToolContext) -> CallPrincipal:
    """Who a call is made for, from the boundary's keys of its context (never the model's say)."""
    run_id: Any = ctx.run_id
    try:
        run = uuid.UUID(str(run_id)) if run_id else None
    except ValueError:
        run = None
    principal = principal_of_call(
        user_id=ctx.user_id, tenant=ctx.tenant or "", agent_name=str(ctx.get("agent") or ""), run_id=run
    )
    return principal
