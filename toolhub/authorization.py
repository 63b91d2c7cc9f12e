"""Who may call what: checked when tools are listed, when a call is requested, and again on the worker.

A call is allowed when the operator has not disabled the tool, the user's side (the user, their
Django groups, their tenant) holds an allow grant and the agent's side (the agent's tool list or an
allow grant to the agent) does too, and no deny grant matches either side: deny wins. Without any
grant, ``TOOLHUB["DEFAULT_TOOL_ACCESS"]`` decides for the user's side (``deny`` by default).
"""

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q

from toolhub.conf import toolhub_settings
from toolhub.governance import governance_cached, governance_cached_many, governance_scope
from toolhub.models import Grant, GrantEffect, RetiredTenantSlug, TenantMembership, ToolDefinition, ToolGroup
from toolhub.tenancy import CROSS_TENANT_PERMISSION
from toolhub.tools.registry import registry
from toolhub.tools.tenant_arguments import TENANT_ARGUMENT_NAMES, is_tenant_argument

__all__ = [
    "CATALOGUE_PERMISSION",
    "AgentToolsSql",
    "CallPrincipal",
    "agent_tools_sql",
    "register_agent_tools_resolver",
    "principal_of_call",
    "authorization_denial",
    "authorize_tools",
    "grants_preload",
    "standing_refusal",
    "tool_group_names",
    "tool_definitions",
    "tenant_argument_denial",
    "TENANT_ARGUMENT_NAMES",
]

#: Who may see the whole catalogue (the roles, and superusers); anyone else sees the tools they may call.
CATALOGUE_PERMISSION = "toolhub.view_tooldefinition"


@dataclass(frozen=True)
class CallPrincipal:
    """Who a call is made for, as established at the boundary (never by the model)."""

    user_id: int | None
    username: str
    tenant: str
    agent_name: str = ""
    #: The tools the agent was given; ``None`` when the call does not come from an agent.
    agent_tools: frozenset[str] | None = None
    #: A saga's compensation: it undoes what the user did, so it runs although they may no longer act in the
    #: tenant (left it, deactivated); their grants and the approval policy still apply.
    undoing: bool = False
    #: The agents of the runs that started this one (a subagent's), root first: an operator's explicit deny of a
    #: tool to any of them holds here too, so a parent denied a tool does not get it called through a child. Only
    #: denies carry: the child keeps its own tools and its user's grants.
    delegated_by: tuple[str, ...] = ()


#: ``resolver(agent_name, *, tenant, run_id)``: agent names are unique only within a tenant, so it gets both.
AgentToolsResolver = Callable[..., frozenset[str] | None]


@dataclass(frozen=True)
class AgentToolsSql:
    """The agents app's read of a run call's agent tools as one SQL expression, for a statement over the call row.

    ``expression(table)``: a scalar over the call row's ``run_id`` and ``agent_name`` columns of ``table``,
    NULL when the run does not name that agent. ``tools(value)``: its value as the tools, None for NULL (the
    resolver is asked then). A worker's claim returns it with the claimed row, so the re-check reads nothing.
    """

    expression: Callable[[str], str]
    tools: Callable[[Any], frozenset[str] | None]
    #: The same value's ``CallPrincipal.delegated_by`` (None for NULL: the resolver is asked then).
    delegated_by: Callable[[Any], tuple[str, ...] | None] = lambda value: None


#: ``delegators(run_id)``: the run's ``CallPrincipal.delegated_by`` (``()`` for a run nobody else's run started).
DelegatorsResolver = Callable[[uuid.UUID], tuple[str, ...]]

_agent_tools_resolver: AgentToolsResolver | None = None
_agent_tools_sql: AgentToolsSql | None = None
_delegators_resolver: DelegatorsResolver | None = None


def register_agent_tools_resolver(
    resolver: AgentToolsResolver, *, sql: AgentToolsSql | None = None, delegators: DelegatorsResolver | None = None
) -> None:
    """Let the agents app say which tools an agent has, so workers re-check it without importing it.

    It is called as ``resolver(agent_name, tenant=..., run_id=...)`` with the call's tenant and run; ``sql``
    reads the same for a run's call inside another statement (the claim); ``delegators`` the agents whose runs
    started the run (``CallPrincipal.delegated_by``).
    """
    global _agent_tools_resolver, _agent_tools_sql, _delegators_resolver
    _agent_tools_resolver = resolver
    _agent_tools_sql = sql
    _delegators_resolver = delegators


def agent_tools_sql() -> AgentToolsSql | None:
    """The registered SQL read of a call's agent tools, if the agents app gave one."""
    return _agent_tools_sql


def principal_of_call(
    *,
    user_id: int | None,
    tenant: str,
    agent_name: str,
    run_id: uuid.UUID | None = None,
    agent_tools: frozenset[str] | None = None,
    delegated_by: tuple[str, ...] | None = None,
    undoing: bool = False,
) -> CallPrincipal:
    """Rebuild a call's principal from its row, with the agent's tools as they are now.

    ``agent_tools``: the agent's tools as read just now with the call (``AgentToolsSql``), else they are read;
    ``delegated_by`` likewise (``CallPrincipal.delegated_by``). ``undoing``: the call is a saga's compensation
    (``CallPrincipal.undoing``).
    """
    if agent_name and agent_tools is None:
        resolver = _agent_tools_resolver
        agent_tools = resolver(agent_name, tenant=tenant, run_id=run_id) if resolver else frozenset()
    elif not agent_name:
        agent_tools = None
    if delegated_by is None:
        delegators = _delegators_resolver
        delegated_by = delegators(run_id) if agent_name and run_id is not None and delegators else ()
    return CallPrincipal(
        user_id=user_id,
        username="",
        tenant=tenant,
        agent_name=agent_name,
        agent_tools=agent_tools,
        undoing=undoing,
        delegated_by=delegated_by,
    )


def tool_group_names(tool_names: Iterable[str]) -> dict[str, set[str]]:
    """The groups each tool belongs to: declared in code (``group=``) or added by operators."""
    names = set(tool_names)
    memberships: dict[str, set[str]] = {name: set() for name in names}
    for name in names:
        tool = registry.get(name)
        if tool is not None and tool.group:
            memberships[name].add(tool.group)
    for group_name, extra in _extra_tools():
        for name in extra & names:
            memberships[name].add(group_name)
    return memberships


def tool_definitions() -> Mapping[str, ToolDefinition]:
    """The catalogue by tool name, cached until the next governance change (read-only rows)."""
    return governance_cached(("tool_definitions",), lambda: {row.name: row for row in ToolDefinition.objects.all()})


def _group_capabilities() -> dict[str, tuple[str, ...]]:
    """Each group's capabilities (only groups that name some)."""
    return governance_cached(
        ("group_capabilities",),
        lambda: {
            name: tuple(str(c) for c in capabilities)
            for name, capabilities in ToolGroup.objects.values_list("name", "capabilities")
            if capabilities
        },
    )


def _extra_tools() -> tuple[tuple[str, frozenset[str]], ...]:
    return governance_cached(
        ("tool_groups",),
        lambda: tuple(
            (name, frozenset(extra or ())) for name, extra in ToolGroup.objects.values_list("name", "extra_tools")
        ),
    )


@dataclass(frozen=True)
class _UserFacts:
    is_superuser: bool
    group_ids: frozenset[int]
    permissions: frozenset[str] = frozenset()
    is_active: bool = True
    #: The tenants the user may act in (their memberships); ``everywhere``: superusers and the cross-tenant permission.
    tenants: frozenset[str] = frozenset()
    everywhere: bool = False


#: A user that no longer exists (the call's row still names them).
_GONE = _UserFacts(is_superuser=False, group_ids=frozenset(), is_active=False)


def _user_facts(user_id: int | None) -> _UserFacts | None:
    """What authorization reads of a user: standing (active, tenants), the superuser flag, groups, capabilities.

    ``None`` for a principal without a user; ``_GONE`` for a user deleted since the call was made.
    """
    if user_id is None:
        return None

    def load() -> _UserFacts:
        user = get_user_model().objects.filter(pk=user_id).only("id", "is_superuser", "is_active").first()
        if user is None:
            return _GONE
        permissions = user.get_all_permissions()  # empty for an inactive user, as Django's backends answer
        tenants = TenantMembership.objects.filter(user_id=user_id).values_list("tenant__slug", flat=True)
        return _UserFacts(
            is_superuser=user.is_superuser,
            group_ids=frozenset(user.groups.values_list("id", flat=True)),
            permissions=frozenset(p for p in permissions if p.startswith("toolhub.capability_")),
            is_active=user.is_active,
            tenants=frozenset(tenants),
            everywhere=user.is_superuser or CROSS_TENANT_PERMISSION in permissions,
        )

    return governance_cached(("user", user_id), load)


def _retired_tenants() -> frozenset[str]:
    """The slugs of deleted tenants (``RetiredTenantSlug``), cached behind the governance stamp."""
    return governance_cached(
        ("retired_tenants",), lambda: frozenset(RetiredTenantSlug.objects.values_list("slug", flat=True))
    )


def _standing_refusal(
    principal: CallPrincipal, user: _UserFacts | None, retired: frozenset[str] = frozenset()
) -> str | None:
    """Why nothing may run for ``principal``'s user now, whatever the tool: deactivated, deleted, or out of the tenant.

    Checked when a call is requested and again when it executes, as grants are: an approval granted after the
    requester left, or a run that goes on after its user was removed, runs nothing more in their name. Nor does
    anything run in a tenant deleted meanwhile (``retired``), whoever asked: someone who acts in every tenant
    keeps no tenant alive, and its deny grants and approval rules went with it; a saga's compensation included (an
    agentic one's inner model would choose tools there unbound by them; its saga needs an operator). A compensation
    (``undoing``) is exempt from its user's standing only: undoing what they did is the saga's work, not theirs.
    """
    if principal.tenant and principal.tenant in retired:
        return f"Tenant {principal.tenant!r}, this call's, no longer exists; nothing is run in it."
    if principal.undoing:
        return None
    if user is None:
        return None
    if user is _GONE:
        return "The user this call is made for no longer exists; nothing is run in their name."
    if not user.is_active:
        return "The account this call is made for is deactivated; nothing is run in its name."
    if principal.tenant and not user.everywhere and principal.tenant not in user.tenants:
        return f"The user this call is made for no longer belongs to tenant {principal.tenant!r}; nothing is run."
    return None


def standing_refusal(principal: CallPrincipal, *, stamp: int | None = None) -> str | None:
    """Why nothing may run for ``principal``'s user now (inactive, deleted, out of the tenant, it gone), or ``None``.

    For what goes on in a user's name besides calls: the agent loop asks it before every model turn, under the
    governance ``stamp`` it read with the run (``toolhub.governance.governance_scope``).
    """
    with governance_scope(stamp=stamp):
        user = _user_facts(principal.user_id)
        retired = _retired_tenants()
    return _standing_refusal(principal, user, retired)


#: What authorization reads of a grant.
_GRANT_FIELDS = ("effect", "tool_name", "tool_group__name", "agent_name")
#: What says whom a grant names (``_names_principal``): read when several principals' grants load together.
_GRANT_TARGET_FIELDS = ("tenant__slug", "user_id", "group_id", "agent_tenant_id", "agent_tenant__slug")


def _grants_key(principal: CallPrincipal, user: _UserFacts | None) -> tuple[Any, ...]:
    """The cache key of ``principal``'s grants: the call's tenant also selects the agent grants bound to a tenant."""
    return (
        "grants",
        principal.tenant,
        principal.user_id if user else None,
        principal.agent_name,
        principal.delegated_by,
    )


def _grants_filter(principal: CallPrincipal, user: _UserFacts | None) -> Q:
    """The grants naming the principal's tenant, user, user's groups or agent, whatever the tool."""
    principal_filter = Q(tenant__slug=principal.tenant) if principal.tenant else Q(pk__in=[])
    if user is not None:
        principal_filter |= Q(user_id=principal.user_id) | Q(group_id__in=user.group_ids)
    if principal.agent_name:
        # Agent names are unique only within a tenant: a grant naming a tenant holds for calls in it only.
        in_tenant = Q(agent_tenant__isnull=True)
        if principal.tenant:
            in_tenant |= Q(agent_tenant__slug=principal.tenant)
        principal_filter |= Q(agent_name=principal.agent_name) & in_tenant
        if principal.delegated_by:
            delegators = Q(agent_name__in=principal.delegated_by, effect=GrantEffect.DENY)
            principal_filter |= delegators & in_tenant
    return principal_filter


def _names_principal(row: Mapping[str, Any], principal: CallPrincipal, user: _UserFacts | None) -> bool:
    """Whether a grant row (with ``_GRANT_TARGET_FIELDS``) is one ``_grants_filter(principal, user)`` selects."""
    if principal.tenant and row["tenant__slug"] == principal.tenant:
        return True
    if user is not None and (row["user_id"] == principal.user_id or row["group_id"] in user.group_ids):
        return True
    if principal.agent_name and (
        row["agent_name"] == principal.agent_name
        or (row["agent_name"] in principal.delegated_by and row["effect"] == GrantEffect.DENY)
    ):
        bound_here = bool(principal.tenant) and row["agent_tenant__slug"] == principal.tenant
        return row["agent_tenant_id"] is None or bound_here
    return False


def _grants_of(principal: CallPrincipal, user: _UserFacts | None) -> tuple[dict[str, Any], ...]:
    """Every grant naming the principal's tenant, user, user's groups or agent, whatever the tool."""
    return governance_cached(
        _grants_key(principal, user),
        lambda: tuple(Grant.objects.filter(_grants_filter(principal, user)).values(*_GRANT_FIELDS)),
    )


def grants_preload(principals: Iterable[CallPrincipal]) -> None:
    """Load the grants of several principals (a reader in each of their tenants) in one query, for ``authorize_tools``.

    Each principal's share is what its own lookup would load (``_names_principal`` reads ``_grants_filter``'s
    condition), cached under its key until the next governance change: authorizing the same tools for a person in
    thirty tenants then costs one read of the grants, not thirty. Call it in the ``governance_scope`` the
    authorizations run in (outside one, or with nothing cached, they read their grants themselves).
    """
    principals = list(principals)
    with governance_scope():
        users = {principal.user_id: _user_facts(principal.user_id) for principal in principals}
        keyed = {_grants_key(principal, users[principal.user_id]): principal for principal in principals}

        def load(missing: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], tuple[dict[str, Any], ...]]:
            wanted = [keyed[key] for key in missing]
            where = Q(pk__in=[])
            for principal in wanted:
                where |= _grants_filter(principal, users[principal.user_id])
            rows = list(Grant.objects.filter(where).values(*_GRANT_FIELDS, *_GRANT_TARGET_FIELDS))
            return {
                key: tuple(
                    {field: row[field] for field in _GRANT_FIELDS}
                    for row in rows
                    if _names_principal(row, principal, users[principal.user_id])
                )
                for key, principal in zip(missing, wanted, strict=True)
            }

        governance_cached_many(keyed, load)


def authorize_tools(
    tool_names: Iterable[str],
    principal: CallPrincipal,
    *,
    definitions: Mapping[str, ToolDefinition | None] | None = None,
) -> dict[str, str | None]:
    """For each tool, why ``principal`` may not call it now, or ``None`` when it may.

    Lookups are cached behind the governance stamp (``toolhub.governance``): one read of the stamp
    when nothing changed. ``definitions`` are catalogue rows the caller loaded already.
    """
    names = sorted(set(tool_names))
    if not names:
        return {}
    with governance_scope():
        if definitions is None or not set(definitions) >= set(names):
            definitions = tool_definitions()
        disabled = {name for name in names if (row := definitions.get(name)) is not None and not row.enabled}
        memberships = tool_group_names(names)
        user = _user_facts(principal.user_id)
        grants = _grants_of(principal, user)
        capabilities = _group_capabilities()
        retired = _retired_tenants()
    standing = _standing_refusal(principal, user, retired)
    if standing:
        return dict.fromkeys(names, standing)
    default_allow = toolhub_settings().DEFAULT_TOOL_ACCESS == "allow"
    verdicts: dict[str, str | None] = {}
    for name in names:
        applicable = [g for g in grants if g["tool_name"] == name or g["tool_group__name"] in memberships[name]]
        user_side = [g for g in applicable if not g["agent_name"]]
        agent_side = [g for g in applicable if g["agent_name"] == principal.agent_name]
        # Only denies carry (``_grants_filter``); an ALLOW loaded for the run's own agent may share a delegator's name.
        delegator_denies = [
            g["agent_name"]
            for g in applicable
            if g["agent_name"] in principal.delegated_by and g["effect"] == GrantEffect.DENY
        ]
        verdict = _verdict(name, principal, user, disabled, user_side, agent_side, default_allow)
        if verdict is None and delegator_denies:
            verdict = (
                f"Tool {name!r} is denied to agent {delegator_denies[0]!r}, whose run started this one; do not call it."
            )
        if verdict is None:
            needed = sorted({c for group in memberships[name] for c in capabilities.get(group, ())})
            verdict = _capability_verdict(name, needed, user)
        verdicts[name] = verdict
    return verdicts


def _capability_verdict(name: str, needed: list[str], user: _UserFacts | None) -> str | None:
    """A tool in a group with capabilities needs each capability's permission (``toolhub.disclosure.capabilities``)."""
    if not needed or (user is not None and user.is_superuser):
        return None
    held = user.permissions if user is not None else frozenset()
    missing = [c for c in needed if f"toolhub.capability_{c}" not in held]
    if not missing:
        return None
    return f"Tool {name!r} needs the capability {missing[0]!r}, which you do not hold; do not call it."


def authorization_denial(
    tool_name: str, principal: CallPrincipal, *, definition: ToolDefinition | None | type[Ellipsis] = ...
) -> str | None:
    """Why ``principal`` may not call ``tool_name`` now, or ``None`` when it may."""
    definitions = None if definition is ... else {tool_name: definition}
    return authorize_tools([tool_name], principal, definitions=definitions)[tool_name]


def tenant_argument_denial(arguments: Mapping[str, Any], principal: CallPrincipal) -> str | None:
    """Refuse arguments that name a tenant other than the principal's: tenants come from the boundary.

    A name counts in any spelling (``tenantId``: an input model's camelCase alias), since that is the
    name the arguments are validated and stored under while the tool reads the field ``tenant_id``; and at
    any depth (``target.tenant_id`` of a nested model). ``None`` names no tenant.
    """
    pending: list[tuple[str, Any]] = [("", arguments)]
    while pending:  # arguments are bounded in depth (MAX_NESTING) and size before they get here
        path, value = pending.pop()
        if isinstance(value, Mapping):
            for key, item in value.items():
                where = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and is_tenant_argument(key) and _names_other_tenant(item, principal):
                    return f"Argument {where!r} must be your own tenant; calls for other tenants are refused."
                pending.append((where, item))
        elif isinstance(value, list | tuple):
            pending.extend((f"{path}[{index}]", item) for index, item in enumerate(value))
    return None


def _names_other_tenant(value: Any, principal: CallPrincipal) -> bool:
    """Whether a tenant argument's value (or an item of a list of them) names a tenant other than the principal's.

    A mapping under such a name is walked on like any other.
    """
    if isinstance(value, list | tuple):
        return any(_names_other_tenant(item, principal) for item in value)
    return value is not None and not isinstance(value, Mapping) and str(value) != principal.tenant


def _is_navigation(name: str) -> bool:
    from toolhub.disclosure.visibility import is_navigation

    return is_navigation(name)


def _verdict(
    name: str,
    principal: CallPrincipal,
    user: _UserFacts | None,
    disabled: set[str],
    user_side: list[dict[str, Any]],
    agent_side: list[dict[str, Any]],
    default_allow: bool,
) -> str | None:
    if name in disabled:
        return f"Tool {name!r} is disabled by an operator; do not call it."
    refused = registry.refusal(name, principal.tenant)  # remote MCP tools: quarantined, no credential, ...
    if refused:
        return refused
    if any(g["effect"] == GrantEffect.DENY for g in user_side):
        return f"Tool {name!r} is denied to you; do not call it."
    if any(g["effect"] == GrantEffect.DENY for g in agent_side):
        return f"Tool {name!r} is denied to agent {principal.agent_name!r}; do not call it."
    if principal.agent_tools is not None and name not in principal.agent_tools:
        if not any(g["effect"] == GrantEffect.ALLOW for g in agent_side):
            return f"Tool {name!r} is not available to agent {principal.agent_name!r}; do not call it."
    # Navigation tools (meta tools, facades) only reveal tools the principal is granted: the agent's say suffices.
    navigation = principal.agent_tools is not None and name in principal.agent_tools and _is_navigation(name)
    user_allowed = (
        default_allow
        or navigation
        or (user is not None and user.is_superuser)
        or any(g["effect"] == GrantEffect.ALLOW for g in user_side)
    )
    if not user_allowed:
        return f"Tool {name!r} is not granted to you; do not call it."
    return None
