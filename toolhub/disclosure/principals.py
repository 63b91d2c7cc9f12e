"""The principal of a call, rebuilt from its context on whichever process runs it."""

import uuid
from typing import Any

from toolhub.authorization import CallPrincipal, principal_of_call
from toolhub.models import is_undoing
from toolhub.tools.context import ToolContext

__all__ = ["principal_of_context"]


def principal_of_context(ctx: ToolContext) -> CallPrincipal:
    """Who a call is made for, from the boundary's keys of its context (never the model's say).

    A call made on behalf of a compensation (its context names the step it ``compensates``: a compensation's own, an
    agentic compensation's inner calls) is governed as the compensation is (``sagas.compensating``): no agent (the
    step's agent's tool list and its delegators' denies do not limit the undo) and ``undoing`` (it runs although the
    step's user may no longer act). Their grants and the approval policy still apply.
    """
    run_id: Any = ctx.run_id
    try:
        run = uuid.UUID(str(run_id)) if run_id else None
    except ValueError:
        run = None
    undoing = is_undoing("", ctx.as_dict())
    return principal_of_call(
        user_id=ctx.user_id,
        tenant=ctx.tenant or "",
        agent_name="" if undoing else str(ctx.get("agent") or ""),
        run_id=run,
        undoing=undoing,
    )
