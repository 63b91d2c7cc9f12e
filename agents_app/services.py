"""Agent and run services: create and change agents, start, retry and cancel runs."""

from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from agents_app.cancelling import run_cancel
from agents_app.models import (
    MAX_TOOL_CALLS_LIMIT,
    SCRIPTED_PROVIDER_NAME,
    Agent,
    AgentRun,
    ProviderKind,
    RunStatus,
    StopReason,
    default_max_tool_calls,
    default_provider_id,
    tool_choice_problem,
)
from agents_app.selectors import agent_for_run, providers_usable_by
from agents_app.transitions import run_transition
from toolhub.audit import audit_append
from toolhub.audit_hash import canonical_json
from toolhub.authorization import CATALOGUE_PERMISSION, CallPrincipal
from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolhubError
from toolhub.feedback import unknown_tool_message
from toolhub.governance_trail import DEFAULT_EXCLUDED, Recorded, governance_append, governance_recorded
from toolhub.models import Tenant, TenantMembership
from toolhub.pipeline import nameable_tool_names
from toolhub.storable import json_storage_problem
from toolhub.tenancy import tenant_scope
from toolhub.tools.context import RESERVED_CONTEXT_KEYS
from toolhub.tools.registry import registry
from toolhub.waiting import cancel_reason_problem

__all__ = [
    "agent_create",
    "agent_update",
    "agent_default_tenant",
    "run_start",
    "run_start_by_reference",
    "run_retry",
    "run_cancel_by",
    "RunInputError",
    "RunStateError",
    "AgentPermissionError",
    "AGENT_FIELDS",
    "AGENT_AUDIT_EXCLUDED",
    "AGENT_TENANT_FIXED",
    "tool_provider_problem",
    "unknown_tools_problem",
]


class RunInputError(ToolhubError):
    """A run or agent request that cannot be accepted as given."""


class RunStateError(RunInputError):
    """The run is not in a state that allows what was asked (e.g. a retry of a run that did not fail); 409."""

    status_code = 409


class AgentPermissionError(ToolhubError):
    """The person may not create or change this agent (a permission, or a global agent they may not touch)."""

    status_code = 403


#: What ``agent_update`` may change, in the order forms show it; the tenant stays (a new agent is created
#: in another tenant instead).
AGENT_FIELDS = (
    "name",
    "description",
    "provider",
    "script",
    "system_prompt",
    "tools",
    "max_tool_calls",
    "compensate_on_error",
    "parallel_tool_calls",
    "serial_tool_execution",
    "stream",
    "tool_choice",
    "temperature",
    "max_tokens",
    "tool_search",
    "group_switching",
    "tool_provider",
)

#: What no governance event of an agent holds (``{"changed": true}`` only): a scripted model's turns carry tool
#: arguments, sensitive ones among them, which the pipeline redacts everywhere else.
AGENT_AUDIT_EXCLUDED = (*DEFAULT_EXCLUDED, "script")

#: Why no door (the API's PATCH, the admin's change page) moves an existing agent to another tenant: its runs,
#: its grants and its tenant's developers stay with it, so the agent is created again in the other tenant.
AGENT_TENANT_FIXED = "An agent's tenant cannot be changed; create the agent in the other tenant instead."


def tool_provider_problem(path: str) -> str | None:
    """Why an agent may not name ``path`` as its tool provider hook (``None``: it may).

    Hooks are code that runs on every turn: administrators list the ones agents may name in
    ``TOOLHUB["TOOL_PROVIDERS"]``, so an API user never makes toolhub call an arbitrary function.
    """
    if not path:
        return None
    allowed = list(toolhub_settings().TOOL_PROVIDERS)
    if path not in allowed:
        return (
            f"Unknown tool provider {path[:200]!r}; an agent may name one of TOOLHUB['TOOL_PROVIDERS']: "
            f"{', '.join(allowed) or 'none configured'}."
        )
    return None


def agent_default_tenant(user: AbstractBaseUser) -> str:
    """The tenant a new agent of ``user`` belongs to when the request names none: their only tenant."""
    tenants = sorted(TenantMembership.objects.filter(user_id=user.pk).values_list("tenant__slug", flat=True))
    if len(tenants) == 1:
        return tenants[0]
    if tenants:
        raise RunInputError(f"You belong to several tenants; say which in tenant ({', '.join(tenants)}).")
    raise RunInputError("You belong to no tenant; name the agent's tenant in tenant (or null for a global agent).")


@transaction.atomic
def agent_create(
    *,
    name: str,
    provider: str = SCRIPTED_PROVIDER_NAME,
    tenant: str | None = None,
    description: str = "",
    system_prompt: str = "",
    tools: list[str] | None = None,
    max_tool_calls: int | None = None,
    script: list[Any] | None = None,
    compensate_on_error: bool = False,
    parallel_tool_calls: bool = True,
    serial_tool_execution: bool = False,
    stream: bool = False,
    tool_choice: str = "",
    temperature: float | None = None,
    max_tokens: int | None = None,
    tool_search: bool = False,
    group_switching: bool = False,
    tool_provider: str = "",
    created_by: AbstractBaseUser | None = None,
) -> Agent:
    """Create an agent of ``tenant`` (a slug; ``None``: global) on the model provider named ``provider``.

    ``created_by`` is the person asking: they need ``agents_app.add_agent`` and may only create agents
    in their tenants (global ones only if they cross the boundary). Without one, the caller is
    trusted code (the demo loader, an administrator's script). The addition is a governance event, the same
    as one made in the admin (``_audit``).
    """
    if created_by is not None:
        _check_may_manage(created_by, "add", tenant)
    tenant_row = _tenant_row(tenant)
    agent = Agent(
        tenant=tenant_row,
        description=description,
        system_prompt=system_prompt,
        max_tool_calls=max_tool_calls if max_tool_calls is not None else default_max_tool_calls(),
        compensate_on_error=compensate_on_error,
        parallel_tool_calls=parallel_tool_calls,
        serial_tool_execution=serial_tool_execution,
        stream=stream,
        created_by=created_by if created_by is not None and created_by.pk else None,
    )
    _apply(
        agent,
        by=created_by,
        changes={
            "name": name,
            "provider": provider,
            "tools": tools or [],
            "script": script,
            "tool_choice": tool_choice,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "tool_search": tool_search,
            "group_switching": group_switching,
            "tool_provider": tool_provider,
        },
    )
    _save(agent)
    _audit(agent, "added", created_by)
    return agent


@transaction.atomic
def agent_update(*, agent: Agent, changes: Mapping[str, Any], changed_by: AbstractBaseUser | None) -> Agent:
    """Change an agent's settings (see ``AGENT_FIELDS``); the same checks as ``agent_create`` apply."""
    unknown = sorted(set(changes) - set(AGENT_FIELDS))
    if unknown:
        raise RunInputError(f"These agent fields cannot be changed: {', '.join(unknown)}.")
    locked = Agent.objects.select_for_update(of=("self",)).select_related("tenant", "provider").get(pk=agent.pk)
    if changed_by is not None:
        _check_may_manage(changed_by, "change", locked.tenant.slug if locked.tenant else None)
    before = governance_recorded(locked, tenants=_agent_tenants(locked), excluded=AGENT_AUDIT_EXCLUDED)
    _apply(locked, changes, by=changed_by)
    _save(locked)
    _audit(locked, "changed", changed_by, before)
    return locked


def _agent_tenants(agent: Agent) -> list[str]:
    """The chains an agent's governance events go to: its tenant's (none: the platform's, for a global agent)."""
    return [agent.tenant.slug] if agent.tenant_id is not None and agent.tenant is not None else []


def _audit(agent: Agent, action: str, by: AbstractBaseUser | None, before: Recorded | None = None) -> None:
    """The agent's change as the admin's ``GovernanceAudited`` records it, so either door reads the same."""
    actor = f"user:{by.get_username()}" if by is not None else "system"
    governance_append(
        agent, action, actor=actor, tenants=_agent_tenants(agent), excluded=AGENT_AUDIT_EXCLUDED, before=before
    )


def _save(agent: Agent) -> None:
    """Save; a name taken by a concurrent request meanwhile is refused like one taken before."""
    try:
        with transaction.atomic():
            agent.save()
    except IntegrityError:
        where = "among global agents" if agent.tenant_id is None else "in this tenant"
        raise RunInputError(f"An agent named {agent.name!r} exists already {where}; choose another name.") from None


def _check_may_manage(user: AbstractBaseUser, action: str, tenant: str | None) -> None:
    if not user.has_perm(f"agents_app.{action}_agent"):
        raise AgentPermissionError(
            f"You may not {action} agents; ask an administrator for the developers role (agents_app.{action}_agent)."
        )
    scope = tenant_scope(user)
    if tenant is None and not scope.everything:
        raise AgentPermissionError(
            f"Only administrators who act on every tenant may {action} global agents; name one of your tenants."
        )
    if tenant is not None and not scope.allows(tenant):
        raise RunInputError(f"Unknown tenant {tenant[:100]!r} among yours.")


def unknown_tools_problem(
    tools: list[str], *, by: AbstractBaseUser | None, tenant: str | None, kept: Iterable[str] = ()
) -> str | None:
    """Why an agent of ``tenant`` may not list ``tools`` (``None``: every name is one ``by`` may name).

    Every door that sets an agent's tools (the API through the service, the admin's form) answers with this:
    the shared unknown-tool message, suggesting among the tools ``by`` may see (``None``: trusted code, and
    the catalogue's roles, see the catalogue), never every registered tool. A tool outside those is answered
    the same as one that does not exist, so setting an agent's tools tells nobody what the catalogue holds;
    ``kept``, the names the agent lists already, stay accepted.
    """
    nameable = set(_tools_nameable_by(by, tenant or ""))
    kept = set(kept) & set(registry.names())
    unknown = [name for name in tools if name not in nameable and name not in kept]
    if not unknown:
        return None
    return " ".join(unknown_tool_message(name, nameable) for name in unknown[:5])


def _tools_nameable_by(user: AbstractBaseUser | None, tenant: str) -> list[str]:
    """The tools ``user`` may list on an agent: the catalogue for its roles and trusted code, else their own.

    Their own are ``nameable_tool_names``: as their runs of the agent would use them (the agent read shows the same).
    """
    if user is None or user.has_perm(CATALOGUE_PERMISSION):
        return registry.names()
    return nameable_tool_names(CallPrincipal(user_id=user.pk, username=user.get_username(), tenant=tenant))


def _tenant_row(slug: str | None) -> Tenant | None:
    if slug is None:
        return None
    row = Tenant.objects.filter(slug=slug).first()
    if row is None:
        raise RunInputError(f"Unknown tenant {slug[:100]!r} among yours.")
    return row


def _apply(agent: Agent, changes: Mapping[str, Any], *, by: AbstractBaseUser | None) -> None:
    """Check and set ``changes`` on ``agent``: tools that exist, a provider its tenant may use, a storable script.

    ``by``: who asks (``None``: trusted code); a refused tool name is answered with suggestions among the
    tools they may see, never the whole catalogue.
    """
    for field in set(AGENT_FIELDS) - {"provider", "tools", "script", "name"}:
        if field in changes:
            setattr(agent, field, changes[field])
    if "name" in changes and changes["name"] != agent.name:
        others = Agent.objects.filter(name=changes["name"], tenant_id=agent.tenant_id).exclude(pk=agent.pk)
        if others.exists():
            where = "among global agents" if agent.tenant_id is None else "in this tenant"
            raise RunInputError(f"An agent named {changes['name']!r} exists already {where}; choose another name.")
        agent.name = changes["name"]
    if "tools" in changes:
        tools = list(changes["tools"] or [])
        tenant = agent.tenant.slug if agent.tenant_id else None
        unknown = unknown_tools_problem(tools, by=by, tenant=tenant, kept=agent.tools if agent.pk else ())
        if unknown:
            raise RunInputError(unknown)
        agent.tools = tools
    if "provider" in changes:
        if changes["provider"] == SCRIPTED_PROVIDER_NAME:
            default_provider_id()  # every database has the scripted provider (unless an administrator disabled it)
        usable = providers_usable_by(agent.tenant_id)
        provider = usable.filter(name=changes["provider"]).first()
        if provider is None:
            names = ", ".join(usable.values_list("name", flat=True)) or "none"
            raise RunInputError(
                f"Unknown model provider {str(changes['provider'])[:100]!r}; providers this agent may use: {names}. "
                "Administrators configure model providers."
            )
        agent.provider = provider
    if "script" in changes:
        agent.script = changes["script"] if changes["script"] is not None else []
    if agent.tool_choice is None:
        agent.tool_choice = ""
    agent.tool_provider = agent.tool_provider or ""
    provider_problem = tool_provider_problem(agent.tool_provider)
    if provider_problem:
        raise RunInputError(provider_problem)
    choice_problem = tool_choice_problem(agent.tool_choice, agent.tools)
    if choice_problem:
        raise RunInputError(choice_problem)
    if agent.temperature is not None and not 0 <= agent.temperature <= 2:
        raise RunInputError(f"temperature must be between 0 and 2, not {agent.temperature}.")
    if not 1 <= agent.max_tool_calls <= MAX_TOOL_CALLS_LIMIT:
        raise RunInputError(f"max_tool_calls must be between 1 and {MAX_TOOL_CALLS_LIMIT}, not {agent.max_tool_calls}.")
    if agent.max_tokens is not None and not 1 <= agent.max_tokens <= 1_000_000:
        raise RunInputError(f"max_tokens must be between 1 and 1000000, not {agent.max_tokens}.")
    if agent.provider.kind == ProviderKind.SCRIPTED and not isinstance(agent.script, list):
        raise RunInputError("An agent on a scripted provider needs model.script, a JSON list of turns.")
    problem = json_storage_problem({"model.script": agent.script, "system_prompt": agent.system_prompt})
    if problem:
        raise RunInputError(f"The agent cannot be stored: {problem}.")


def run_start(
    *, agent: Agent, user: AbstractBaseUser, input: str, context: Mapping[str, Any] | None = None
) -> AgentRun:
    """Start a run for ``user``; the tenant and identity come from the user, never from the model.

    The agent must belong to the run's tenant or be global.
    """
    context = dict(context or {})
    tenant = _run_tenant(user, context.pop("tenant", None))
    if agent.tenant_id is not None and (agent.tenant is None or agent.tenant.slug != tenant):
        raise RunInputError(f"Unknown agent {agent.name!r} in tenant {tenant or '(none)'!r}.")
    reserved = sorted(set(context) & RESERVED_CONTEXT_KEYS)
    if reserved:
        raise RunInputError(f"Context keys {', '.join(reserved)} are set by toolhub, not by the request.")
    problem = json_storage_problem({"input": input, "context": context})
    if problem:
        raise RunInputError(f"The run cannot be stored: {problem}.")
    limit = toolhub_settings().MAX_RUN_CONTEXT_BYTES
    if len(canonical_json(context).encode()) > limit:
        raise RunInputError(
            f"The run's context is larger than {limit} bytes: every call of the run stores it again, with its "
            "audit trail. Pass identifiers in it, and documents in the input or through a tool."
        )
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


def run_start_by_reference(
    *,
    user: AbstractBaseUser,
    agent_id: int | None,
    agent_name: str | None,
    input: str,
    context: Mapping[str, Any] | None = None,
) -> AgentRun:
    """Start a run of the agent named by id or by name (exactly one) among those of the run's tenant and the globals.

    A name is only ever a name (one that looks like a number too); another tenant's agent answers
    exactly like a missing one.
    """
    if (agent_id is None) == (agent_name is None):
        raise RunInputError("Name the agent by exactly one of agent_id (its id) or agent (its name).")
    tenant = _run_tenant(user, dict(context or {}).get("tenant"))
    agent = agent_for_run(tenant=tenant, agent_id=agent_id, name=agent_name)
    if agent is None:
        shown = f"id {agent_id}" if agent_id is not None else repr(str(agent_name)[:100])
        raise RunInputError(f"Unknown agent {shown} among your tenant's agents and the global ones.")
    return run_start(agent=agent, user=user, input=input, context=context)


def run_retry(*, run: AgentRun, user: AbstractBaseUser) -> AgentRun:
    """Resume a run that failed for a retryable reason (the model endpoint was down or answered garbage).

    ``user`` asked (its own user or an operator, checked by the caller): the retry spends model turns in the run's
    user's name, so it is a ``run.retried`` event naming who asked, in the transaction that moves the run, as a
    cancellation is ``run.cancelled``. Anyone but the run's user is kept in ``retried_by``: they may not approve the
    calls the run (or its subagents) makes after.
    """
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update().get(pk=run.pk)
        if locked.status != RunStatus.FAILED or not locked.retryable:
            raise RunStateError(
                f"Only a run that failed for a retryable reason can be retried; this one is {locked.status}."
            )
        if locked.parent_call_id is not None:
            # Kept for runs that ended retryable before a child's end was made final (``ending.run_finish``).
            raise RunStateError(
                f"This run was a subagent of run {locked.parent_run_id}, whose call its failure settled; "
                "retry or restart that run instead."
            )
        audit_append(
            event_type="run.retried",
            actor=f"user:{user.get_username()}",
            data={"stop_reason": str(locked.stop_reason), "lost_steps": locked.lost_steps},
            run_id=locked.id,
            tenant=locked.tenant,
        )
        if user.pk != locked.user_id:
            # The model's next calls are asked for in the run's user's name, but set in motion by ``user``:
            # four eyes bar them from approving those calls (``agents_app.receivers``' answer to ``call_askers``).
            locked.retried_by.add(user)
        locked.stop_reason = StopReason.NONE
        locked.error = ""
        locked.retryable = False
        locked.finished_at = None
        locked.lost_steps = 0  # a fresh start: the steps its failure counted are not held against it
        run_transition(locked, RunStatus.RUNNING)
        _schedule_advance(locked)
    return locked


def run_cancel_by(*, run: AgentRun, user: AbstractBaseUser, reason: str = "") -> AgentRun:
    """Cancel a run still going; 409 (``RunStateError``) when it has ended.

    For its own user or an operator of its tenant (``run_may_operate``, checked by the caller); what stops and
    what is withdrawn: ``agents_app.cancelling``.
    """
    problem = cancel_reason_problem(reason)
    if problem:
        raise RunInputError(problem)
    if not run_cancel(run_id=run.id, actor=f"user:{user.get_username()}", reason=reason.strip() or "no reason given"):
        run.refresh_from_db(fields=["status"])
        raise RunStateError(f"Only a run still going (running or waiting) can be cancelled; this one is {run.status}.")
    run.refresh_from_db()
    return run


def _schedule_advance(run: AgentRun) -> None:
    from agents_app.tasks import advance_run_task

    run_id = str(run.id)
    transaction.on_commit(lambda: advance_run_task.delay(run_id), robust=True)


def _run_tenant(user: AbstractBaseUser, requested: Any) -> str:
    if requested is None:
        tenants = list(TenantMembership.objects.filter(user_id=user.pk).values_list("tenant__slug", flat=True))
        if len(tenants) > 1:
            raise RunInputError(
                f"You belong to several tenants; say which in context.tenant ({', '.join(sorted(tenants))})."
            )
        return tenants[0] if tenants else ""
    if not tenant_scope(user).allows(str(requested)) or not Tenant.objects.filter(slug=str(requested)).exists():
        raise RunInputError(f"You are not a member of tenant {str(requested)[:100]!r}.")
    return str(requested)
