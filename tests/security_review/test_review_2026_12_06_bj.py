"""Review of 2026-12-06 (bj): an agent read costs the same whatever the number of tenants its reader belongs to.

Findings:
- ``CallerView.tools_seen`` (the agents list and detail) authorized the candidate tools once per tenant of the
  reader, each time in its own governance read and with its own read of the grants (aq made it twice per tenant,
  ``nameable_tool_names``): 5 global agents read by someone in 1/10/30 tenants cost 23/77/197 queries right after
  a governance change (6/51/151 warm), one agent's detail 20/74/194 (6/51/151), on SQLite and PostgreSQL alike;
  now 19 (2) and 16 (2) whatever the tenants. The view now authorizes under one governance read per response,
  and the grants of all the reader's tenants load in one query (``authorization.grants_preload``, each tenant's
  share cached under its own key); ``_visible_in`` (the call list's answers and status filter) reads through it.

Checked and found holding:
- each tenant is still authorized with its own grants only: ``grants_preload`` selects the union of the
  principals' own filters and hands each the rows its own filter selects (tenant, user, groups, agent with or
  without a tenant), so verdicts match those of a principal authorized alone (tests below, agents included);
- what a reader sees of global and tenant agents (grants, denies, facades, playbooks, state machines) and the
  tools their denied calls are answered with are those of the per-tenant computation.
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from rest_framework.test import APIClient

import tests.agentic.conftest as agentic_fixtures
import tests.disclosure.conftest as disclosure_fixtures
from agents_app.models import Agent
from agents_app.services import agent_create
from toolhub.authorization import CallPrincipal, authorize_tools, grants_preload
from toolhub.caller_view import CallerView
from toolhub.governance import governance_scope
from toolhub.models import Grant, GrantEffect, Tenant, TenantMembership
from toolhub.pipeline import nameable_tool_names, visible_tool_names
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

disclosure_tools = disclosure_fixtures.disclosure_tools
agentic_tools = agentic_fixtures.agentic_tools

#: Plain tools, facades (their context tools), a playbook and a state machine: what agents are given here.
TOOLS = [
    "clock",
    "get_weather",
    "send_email",
    "refund_payment",
    "query_table",
    "insert_record",
    "delete_record",
    "database_operations",
    "change_personality",
    "file_operations",
    "api_operations",
    "admin_operations",
    "researcher",
    "search",
    "order_processor",
    "add_item",
]

#: Bound on an agents list of 5 global agents and on one agent's detail, whatever the reader's tenants.
LIST_QUERIES = 19
DETAIL_QUERIES = 16


def _fresh_governance() -> None:
    """A governance change: every process's cached lookups are dropped, as after an operator's edit."""
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="bj-none", agent_name="bj-none").delete()


def _reader(tenants: list[str]) -> User:
    user = User.objects.create_user("bj-reader", "bj@example.com", "pw")
    user.user_permissions.add(Permission.objects.get(codename="view_agent"))
    for slug in tenants:
        tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": slug.upper()})
        TenantMembership.objects.create(user=user, tenant=tenant)
    return User.objects.get(pk=user.pk)


def _client(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _grants(reader: User) -> None:
    """Different grants per tenant: tenant, user and group grants, denies, facades' and guides' tools."""
    t1, t2, t3 = (Tenant.objects.get(slug=slug) for slug in ("bj1", "bj2", "bj3"))
    team = Group.objects.create(name="bj-team")
    reader.groups.add(team)
    allow, deny = GrantEffect.ALLOW, GrantEffect.DENY
    Grant.objects.create(effect=allow, tool_name="clock", user=reader)
    Grant.objects.create(effect=allow, tool_name="query_table", tenant=t1)
    Grant.objects.create(effect=deny, tool_name="query_table", tenant=t2)
    Grant.objects.create(effect=allow, tool_name="insert_record", tenant=t2)
    Grant.objects.create(effect=deny, tool_name="change_personality", tenant=t2)
    Grant.objects.create(effect=allow, tool_name="search", tenant=t3)
    Grant.objects.create(effect=deny, tool_name="clock", tenant=t3)
    Grant.objects.create(effect=allow, tool_name="get_weather", group=team)
    Grant.objects.create(effect=deny, tool_name="send_email", group=team)
    Grant.objects.create(effect=allow, tool_name="send_email", tenant=t1)
    Grant.objects.create(effect=allow, tool_name="add_item", tenant=t3)
    # Grants of others: another tenant, another user, an agent (never the reader's side).
    other = Tenant.objects.create(slug="bj-other", name="Other")
    Grant.objects.create(effect=allow, tool_name="refund_payment", tenant=other)
    Grant.objects.create(effect=allow, tool_name="delete_record", agent_name="helper")
    Grant.objects.create(effect=allow, tool_name="delete_record", user=User.objects.create_user("bj-other"))


def _per_tenant(reader: User, names: list[str], tenant: str | None) -> list[str]:
    """What the reader saw before: ``nameable_tool_names`` asked tenant by tenant, each authorized on its own."""
    tenants = [tenant] if tenant is not None else ["bj1", "bj2", "bj3"]
    seen: set[str] = set()
    for each in tenants:
        seen |= set(nameable_tool_names(CallPrincipal(user_id=reader.pk, username="bj-reader", tenant=each)))
    return [name for name in names if name in seen]


def test_an_agent_read_shows_what_the_per_tenant_authorization_shows(settings: Any) -> None:
    """Found: (equivalence kept by the fix) a reader in three tenants with different grants, denies, group grants,
    facades, a playbook and a state machine. Expect: the list and each detail show, for global and tenant agents,
    exactly the tools each tenant's own authorization gives (the union over their tenants for a global agent)."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    reader = _reader(["bj1", "bj2", "bj3"])
    _grants(reader)
    agents = [agent_create(name="bj-global", tenant=None, script=[], tools=TOOLS)]
    agents += [agent_create(name=f"bj-{slug}", tenant=slug, script=[], tools=TOOLS) for slug in ("bj1", "bj2", "bj3")]
    expected = {agent.pk: _per_tenant(reader, TOOLS, agent.tenant.slug if agent.tenant else None) for agent in agents}
    _fresh_governance()

    listed = _client(reader).get("/api/v1/agents/?page_size=50").json()["results"]
    _fresh_governance()
    details = {agent.pk: _client(reader).get(f"/api/v1/agents/{agent.pk}/").json()["tools"] for agent in agents}

    assert {row["id"]: row["tools"] for row in listed} == expected
    assert details == expected
    # Spelled out: t1 allows query_table (t2 denies it), so the global agent and t1's show it, t2's does not.
    assert "query_table" in expected[agents[0].pk] and "query_table" in expected[agents[1].pk]
    assert "query_table" not in expected[agents[2].pk] and "database_operations" in expected[agents[2].pk]
    assert "send_email" not in expected[agents[0].pk]  # the group's deny wins in every tenant
    assert "researcher" in expected[agents[3].pk] and "researcher" not in expected[agents[1].pk]
    assert "clock" not in expected[agents[3].pk] and "refund_payment" not in expected[agents[0].pk]


def test_the_tools_a_denied_call_is_answered_with_are_each_tenants_own(settings: Any) -> None:
    """Found: (equivalence kept by the fix) ``_visible_in``, which answers a denied call and filters the call list
    by status, now reads the preloaded grants. Expect: per tenant, the same tools as ``visible_tool_names``."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    reader = _reader(["bj1", "bj2", "bj3"])
    _grants(reader)
    expected = {
        slug: visible_tool_names(CallPrincipal(user_id=reader.pk, username="bj-reader", tenant=slug))
        for slug in ("bj1", "bj2", "bj3", "bj-other")
    }
    _fresh_governance()

    view = CallerView(reader)
    shown = {slug: view._visible_in(slug) for slug in ("bj1", "bj2", "bj3", "bj-other")}

    assert shown == expected
    assert "query_table" in shown["bj1"] and "query_table" not in shown["bj2"]


def test_preloaded_grants_give_the_verdicts_of_principals_authorized_alone() -> None:
    """Found: (the mechanism) ``grants_preload`` loads several principals' grants in one query. Expect: each
    principal's verdicts are those it gets alone: tenant, user, group and agent grants (with or without the
    agent's tenant) go to the principals they name only."""
    reader = _reader(["bj1", "bj2", "bj3"])
    _grants(reader)
    t2 = Tenant.objects.get(slug="bj2")
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="clock", agent_name="helper", agent_tenant=t2)
    Grant.objects.create(effect=GrantEffect.ALLOW, tool_name="query_table", agent_name="helper")
    names = registry.names()
    principals = [
        CallPrincipal(user_id=reader.pk, username="bj-reader", tenant=slug, agent_name=agent, agent_tools=tools)
        for slug in ("bj1", "bj2", "bj3", "")
        for agent, tools in (("", None), ("helper", frozenset({"clock", "send_email"})))
    ]
    alone = {principal: authorize_tools(names, principal) for principal in principals}
    _fresh_governance()

    with governance_scope():
        grants_preload(principals)
        together = {principal: authorize_tools(names, principal) for principal in principals}

    assert together == alone
    assert alone[principals[3]]["clock"] is not None and alone[principals[1]]["clock"] is None


@pytest.mark.parametrize("tenants", [1, 30])
def test_the_agents_list_costs_the_same_in_one_tenant_as_in_thirty(
    tenants: int, settings: Any, django_assert_max_num_queries: Any
) -> None:
    """Found: 5 global agents read by someone in 1/10/30 tenants cost 23/77/197 queries (the detail 20/74/194):
    every tenant was authorized in its own governance read, with its own read of the grants.
    Expect: one bound for the list and one for the detail, whatever the number of tenants."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    reader = _reader([f"bj{number}" for number in range(tenants)])
    for tenant in Tenant.objects.filter(slug__startswith="bj"):
        Grant.objects.create(effect=GrantEffect.ALLOW, tool_name="query_table", tenant=tenant)
    for number in range(5):
        agent_create(name=f"bj-global-{number}", tenant=None, script=[], tools=TOOLS)
    agent = Agent.objects.get(name="bj-global-0")
    client = _client(reader)
    _fresh_governance()

    with django_assert_max_num_queries(LIST_QUERIES):
        listed = client.get("/api/v1/agents/")
    _fresh_governance()
    with django_assert_max_num_queries(DETAIL_QUERIES):
        detail = client.get(f"/api/v1/agents/{agent.pk}/")

    assert listed.status_code == 200 and len(listed.json()["results"]) == 5
    assert detail.json()["tools"] == ["query_table", "database_operations", "file_operations", "api_operations"]
