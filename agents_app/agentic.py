"""The models of agentic tools (``toolhub.agentic``): the core asks through a resolver this app registers."""

import copy
import uuid

from agents_app.models import AgentRun
from agents_app.models_adapters import adapter_for
from agents_app.selectors import agent_for_run, providers_usable_by
from toolhub.agentic.models import InnerModel
from toolhub.exceptions import ModelError, ToolError
from toolhub.tools.context import ToolContext

__all__ = ["agentic_model"]


def agentic_model(ctx: ToolContext, *, agent: str = "", provider: str = "") -> InnerModel:
    """The model of an agentic tool's call.

    The named agent's (of the call's tenant, else global), the named provider's with the run's agent's
    settings, or the run's agent's. Errors name no setting, only what to ask.
    """
    tenant = str(ctx.tenant or "")
    if agent:
        chosen = agent_for_run(tenant=tenant, name=agent)
        if chosen is None:
            raise ToolError(f"The model of this agentic tool (agent {agent!r}) is not available; ask an administrator.")
    else:
        run = _run_of(ctx)
        if run is None:
            raise ToolError("This agentic tool uses its run's model; call it from an agent run.")
        chosen = run.agent
        if provider:
            # As if the run's agent named it: an enabled provider of its tenant or a global one; another
            # tenant's endpoint and key answer like a missing provider.
            named = providers_usable_by(chosen.tenant_id).filter(name=provider).first()
            if named is None:
                raise ToolError(
                    f"Model provider {provider!r} of this agentic tool is not configured; ask an administrator."
                )
            chosen = copy.copy(chosen)
            chosen.provider = named
    try:
        adapter = adapter_for(chosen)
    except ModelError as exc:
        raise ToolError(str(exc)) from None
    return InnerModel(adapter=adapter, profile=chosen.provider.effective_schema_profile)


def _run_of(ctx: ToolContext) -> AgentRun | None:
    try:
        run_id = uuid.UUID(str(ctx.run_id)) if ctx.run_id else None
    except ValueError:
        return None
    if run_id is None:
        return None
    return (
        AgentRun.objects.select_related("agent", "agent__provider").filter(id=run_id, tenant=ctx.tenant or "").first()
    )
