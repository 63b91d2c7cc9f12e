"""Tool groups at run time: which are active for a run (rules on role, tenant, agent, context) and their prompts.

A group's ``activation_rules`` is a list of rules; a rule is an object whose keys must all match:
``roles`` (Django groups of the run's user), ``tenants``, ``agents`` and ``context`` (run context
attribute -> a value or a list of values). A group with rules is *eligible* for a run only when one
matches, and then active at the start; a group without rules is eligible, and active at the start
when ``active_by_default``. ``reset_equipped_tools`` switches among the eligible groups that hold a
tool the principal is granted, never beyond. A tool in no group is never filtered by groups.
"""

from collections.abc import Iterable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group

from toolhub.governance import governance_cached
from toolhub.models import ToolGroup
from toolhub.tenancy import tenant_scope
from toolhub.withheld_names import Namer, names_withheld, withheld_label

__all__ = [
    "GroupFacts",
    "RULE_KEYS",
    "activation_rules_problem",
    "group_facts",
    "user_roles",
    "eligible_groups",
    "group_eligibility",
    "initially_active",
    "group_names_read",
    "reader_group_namer",
    "rules_seen_from",
    "tenant_group_namer",
]

RULE_KEYS = frozenset({"roles", "tenants", "agents", "context"})


@dataclass(frozen=True)
class GroupFacts:
    """What run-time disclosure reads of one ``ToolGroup`` row."""

    name: str
    active_by_default: bool
    rules: tuple[Mapping[str, Any], ...]
    system_prompt_addition: str
    capabilities: tuple[str, ...]


def group_facts() -> dict[str, GroupFacts]:
    """Every group row by name, cached until the next governance change."""

    def load() -> dict[str, GroupFacts]:
        rows = ToolGroup.objects.values_list(
            "name", "active_by_default", "activation_rules", "system_prompt_addition", "capabilities"
        )
        return {
            name: GroupFacts(
                name,
                bool(default),
                tuple(rule for rule in (rules or ()) if isinstance(rule, Mapping)),
                addition or "",
                tuple(str(c) for c in (capabilities or ())),
            )
            for name, default, rules, addition, capabilities in rows
        }

    return governance_cached(("disclosure.groups",), load)


def user_roles(user_id: int | None) -> frozenset[str]:
    """The names of the user's Django groups (the roles activation rules name)."""
    if user_id is None:
        return frozenset()

    def load() -> frozenset[str]:
        return frozenset(Group.objects.filter(user__id=user_id).values_list("name", flat=True))

    return governance_cached(("disclosure.roles", user_id), load)


def activation_rules_problem(rules: Any) -> str | None:
    """Why ``rules`` is not a valid list of activation rules (``None``: it is)."""
    if not isinstance(rules, list):
        return 'Activation rules are a JSON list of objects, e.g. [{"roles": ["operators"]}].'
    for position, rule in enumerate(rules):
        if not isinstance(rule, dict) or not rule:
            return f"Rule {position + 1} must be a non-empty object with keys among {sorted(RULE_KEYS)}."
        unknown = sorted(set(rule) - RULE_KEYS)
        if unknown:
            return f"Rule {position + 1}: unknown key(s) {unknown}; use {sorted(RULE_KEYS)}."
        for key in ("roles", "tenants", "agents"):
            if key in rule and not (isinstance(rule[key], list) and all(isinstance(v, str) for v in rule[key])):
                return f"Rule {position + 1}: {key} is a list of names."
        if "context" in rule and not isinstance(rule["context"], dict):
            return f"Rule {position + 1}: context is an object of attribute -> value (or list of values)."
    return None


def rules_seen_from(rules: Any, tenants: Iterable[str]) -> list[Mapping[str, Any]] | None:
    """A group's rules as staff of ``tenants`` read them; ``None`` when the group is only for other tenants.

    Groups are shared by every tenant, and a rule naming tenants names them: a rule for none of ``tenants``
    is left out, and a rule's tenant list keeps only theirs. A group without rules is for everyone.
    """
    mine = set(tenants)
    if not isinstance(rules, list) or not rules:
        return []
    seen = []
    for rule in rules:
        if not isinstance(rule, Mapping):
            continue
        if "tenants" not in rule:
            seen.append(dict(rule))
        elif mine & set(rule["tenants"]):
            seen.append({**rule, "tenants": [t for t in rule["tenants"] if t in mine]})
    return seen or None


def _matches(rule: Mapping[str, Any], *, roles: frozenset[str], tenant: str, agent: str, context: Mapping) -> bool:
    if "roles" in rule and not roles & set(rule["roles"]):
        return False
    if "tenants" in rule and tenant not in rule["tenants"]:
        return False
    if "agents" in rule and agent not in rule["agents"]:
        return False
    for key, wanted in (rule.get("context") or {}).items():
        allowed = wanted if isinstance(wanted, list) else [wanted]
        if key not in context or context[key] not in allowed:
            return False
    return True


def eligible_groups(
    names: Iterable[str], *, roles: frozenset[str], tenant: str, agent: str, context: Mapping[str, Any]
) -> dict[str, bool]:
    """For each eligible group among ``names``: whether it is active at the start (ineligible ones are left out).

    A group named only in code (no row) has no rules and is active by default.
    """
    facts = group_facts()
    eligible: dict[str, bool] = {}
    for name in names:
        row = facts.get(name)
        if row is None:
            eligible[name] = True
        elif not row.rules:
            eligible[name] = row.active_by_default
        elif any(_matches(r, roles=roles, tenant=tenant, agent=agent, context=context) for r in row.rules):
            eligible[name] = True
    return eligible


def group_eligibility(
    names: Iterable[str], *, principal: Any, context: Mapping[str, Any]
) -> tuple[dict[str, set[str]], dict[str, bool]]:
    """The groups of each of ``names``, and the groups eligible for ``principal`` among them (``eligible_groups``)."""
    from toolhub.authorization import tool_group_names

    memberships = tool_group_names(set(names))
    all_groups = set().union(*memberships.values()) if memberships else set()
    eligible = eligible_groups(
        sorted(all_groups),
        roles=user_roles(principal.user_id),
        tenant=principal.tenant,
        agent=principal.agent_name,
        context=context,
    )
    return memberships, eligible


def initially_active(eligible: Mapping[str, bool]) -> set[str]:
    return {name for name, active in eligible.items() if active}


def tenant_group_namer(tenants: str | Iterable[str] | None) -> Namer:
    """What staff of ``tenants`` read for a row (``toolhub.withheld_names``): a tool group only others see, by its kind.

    As their admin pages name it (``ToolGroupAdmin.get_queryset``), for a text composed for those readers outside a
    page (a governance event in one tenant's chain, the API's answer to one person); ``None`` or ``""``, the
    platform, reads every name.
    """
    seen = None if tenants is None or tenants == "" else [tenants] if isinstance(tenants, str) else sorted(tenants)

    def name(row: Any) -> str | None:
        if seen is None or not isinstance(row, ToolGroup) or rules_seen_from(row.activation_rules, seen) is not None:
            return None
        return withheld_label(ToolGroup)

    return name


def reader_group_namer(user: Any) -> Namer:
    """:func:`tenant_group_namer` for one person: their tenants' names, every name for those who cross tenants."""
    scope = tenant_scope(user)
    return tenant_group_namer(None if scope.everything else scope.tenants)


def group_names_read(names: Iterable[str], namer: Namer | None = None) -> dict[str, str]:
    """Each of ``names`` (tool groups named by name: a tool's ``group``) as ``namer``'s reader reads it.

    Without ``namer``, as the reader bound now reads it (an admin page's viewer, ``toolhub.withheld_names``; nobody
    bound: every name). A group with no row is named only in code, has no rules and is everyone's: its name.
    """
    rows = governance_cached(("disclosure.group_rows",), lambda: {row.name: row for row in ToolGroup.objects.all()})
    with names_withheld(namer) if namer is not None else nullcontext():
        return {name: str(rows[name]) if name in rows else name for name in names if name}
