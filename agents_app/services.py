"""Agent and run services: create agents, start, retry and cancel runs."""

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from agents_app.models import Agent, AgentRun, Provider, RunStatus, StopReason
from toolhub.exceptions import ToolhubError
from toolhub.models import TenantMembership
from toolhub.storable import json_storage_problem
from toolhub.tools.context import RESERVED_CONTEXT_KEYS
from toolhub.tools.registry import registry

__all__ = ["agent_create", "run_start", "run_retry", "RunInputError"]


class RunInputError(ToolhubError):
    """A run or agent request that cannot be accepted as given."""


@transaction.atomic
def agent_create(
    *,
    name: str,
    provider: str,
    system_prompt: str = "",
    tools: list[str] | None = None,
    max_tool_calls: int = 10,
    base_url: str = "",
    model_name: str = "",
    api_key_env: str = "",
    script: list[Any] | None = None,
    created_by: AbstractBaseUser | None = None,
    **options: Any,
) -> Agent:
    """Create an agent after checking that its tools exist and its model settings are complete."""
    tools = list(tools or [])
    unknown = [name_ for name_ in tools if name_ not in registry]
    if unknown:
        raise RunInputError(f"Unknown tool(s): {', '.join(unknown)}. Known tools: {', '.join(registry.names())}.")
    if provider == Provider.OPENAI and not model_name:
        raise RunInputError("An OpenAI-compatible agent needs model.model (the model's name).")
    if provider == Provider.SCRIPTED and not isinstance(script, list):
        raise RunInputError("A scripted agent needs model.script, a JSON list of turns.")
    problem = json_storage_problem({"model.script": script, "system_prompt": system_prompt})
    if problem:
        raise RunInputError(f"The agent cannot be stored: {problem}.")
    return Agent.objects.create(
        name=name,
        provider=provider,
        system_prompt=system_prompt,
        tools=tools,
        max_tool_calls=max_tool_calls,
        base_url=base_url,
        model_name=model_name,
        api_key_env=api_key_env,
        script=script or [],
        created_by=created_by if created_by is not None and created_by.pk else None,
        **options,
    )


def run_start(
    *, agent: Agent, user: AbstractBaseUser, input: str, context: Mapping[str, Any] | None = None
) -> AgentRun:
    """Start a run for ``user``; the tenant and identity come from the user, never from the model."""
    context = dict(context or {})
    tenant = _run_tenant(user, context.pop("tenant", None))
    reserved = sorted(set(context) & RESERVED_CONTEXT_KEYS)
    if reserved:
        raise RunInputError(f"Context keys {', '.join(reserved)} are set by toolhub, not by the request.")
    problem = json_storage_problem({"input": input, "context": context})
    if problem:
        raise RunInputError(f"The run cannot be stored: {problem}.")
    messages: list[dict[str, Any]] = []
    if agent.system_prompt:
        messages.append({"role": "system", "content": agent.system_prompt})
    messages.append({"role": "user", "content": input})
    with transaction.atomic():
        run = AgentRun.objects.create(
            agent=agent, user=user, tenant=tenant, context=context, input=input, messages=messages
        )
        _schedule_advance(run)
    return run


def run_retry(*, run: AgentRun) -> AgentRun:
    """Resume a run that failed for a retryable reason (the model endpoint was down or answered garbage)."""
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update().get(pk=run.pk)
        if locked.status != RunStatus.FAILED or not locked.retryable:
            raise RunInputError(
                f"Only a run that failed for a retryable reason can be retried; this one is {locked.status}."
            )
        locked.status = RunStatus.RUNNING
        locked.stop_reason = StopReason.NONE
        locked.error = ""
        locked.retryable = False
        locked.finished_at = None
        locked.save()
        _schedule_advance(locked)
    return locked


def _schedule_advance(run: AgentRun) -> None:
    from agents_app.tasks import advance_run_task

    run_id = str(run.id)
    transaction.on_commit(lambda: advance_run_task.delay(run_id), robust=True)


def _run_tenant(user: AbstractBaseUser, requested: Any) -> str:
    tenants = list(TenantMembership.objects.filter(user_id=user.pk).values_list("tenant__slug", flat=True))
    if requested is None:
        if len(tenants) > 1:
            raise RunInputError(
                f"You belong to several tenants; say which in context.tenant ({', '.join(sorted(tenants))})."
            )
        return tenants[0] if tenants else ""
    if str(requested) not in tenants:
        raise RunInputError(f"You are not a member of tenant {str(requested)[:100]!r}.")
    return str(requested)
