"""No page of the console issues more SQL queries for more rows: change lists and the pages that list related rows.

Every admin registered on ``admin.site`` is either measured here or left out with a reason (a test fails
when a newly registered admin is neither). Each change list is rendered as a tenant-scoped operator of
acme, once with a few rows of acme and once with several more, and must issue the same number of
queries both times; pages shown only to people who cross the tenant boundary are rendered as a member
of the platform team. Rows are built through the project's services where that is practical (the
governed call path, agent runs, saga rollbacks), and with direct creates where a service would only add
noise. The same is done for the change pages that list related rows: a request's decisions, a run's
calls, a saga's compensations and rollbacks, a call's audit events.
"""

import re
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.db.models import Model
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token, TokenProxy

from agents_app.models import Agent, AgentRun, ModelProvider, ProviderKind, RunStatus
from agents_app.services import agent_create, run_start
from approvals.models import (
    ApprovalDecision,
    ApprovalRequest,
    ApprovalRule,
    ApprovalStatus,
    DecisionKind,
    WebhookDelivery,
)
from demo.models import Account, LedgerEntry, Order
from tests.helpers import RequestCall, console
from toolhub.adapters.openai_agents.models import PausedAgentRun
from toolhub.admin_helpers import CrossTenantOnly
from toolhub.audit import audit_call_event
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool, RemoteToolStatus
from toolhub.models import (
    AuditEvent,
    CallStatus,
    Grant,
    Tenant,
    TenantMembership,
    ToolCall,
    ToolDefinition,
    ToolGroup,
)
from toolhub.sagas.models import Compensation, Rollback, RollbackTrigger, Saga
from toolhub.sagas.services import saga_rollback_on_demand

pytestmark = pytest.mark.postgres

#: Rows of acme on the first rendering, and how many more on the second.
FEW, MORE = 2, 5


@dataclass(frozen=True)
class World:
    """Who the rows belong to and how to build them through the project's own paths."""

    tenant: Tenant  # whose rows the makers make
    alice: User  # a member of ``tenant`` who asks for calls and runs
    staff: User
    request_call: RequestCall
    committed: Callable[..., Any]


Make = Callable[[World, int], None]


# --- rows of one tenant (``world.tenant``: acme here, another in the tenant-boundary sweeps), one admin each --


def _tenant(world: World, index: int) -> None:
    # Tenant-scoped staff see the tenants they are members of.
    tenant = Tenant.objects.create(slug=f"tenant-{index}", name=f"Tenant {index}")
    TenantMembership.objects.create(user=world.staff, tenant=tenant)


def _member(world: World, index: int) -> None:
    user = User.objects.create_user(f"member-{index}", f"member-{index}@example.com")
    TenantMembership.objects.create(user=user, tenant=world.tenant)


def _group(world: World, index: int) -> None:
    Group.objects.create(name=f"role-{index}")


def _token(world: World, index: int) -> None:
    Token.objects.create(user=User.objects.create_user(f"token-holder-{index}"))


def _tool_definition(world: World, index: int) -> None:
    ToolDefinition.objects.create(name=f"listed_tool_{index}", group="listed", risk_override="high")


def _tool_group(world: World, index: int) -> None:
    ToolGroup.objects.create(
        name=f"group-{index}",
        extra_tools=["record_effect"],
        approver_group=Group.objects.create(name=f"approvers-{index}"),
        escalation_group=Group.objects.create(name=f"escalation-{index}"),
    )


def _grant(world: World, index: int) -> None:
    Grant.objects.create(tool_group=ToolGroup.objects.create(name=f"granted-{index}"), tenant=world.tenant)


def _tool_call(world: World, index: int) -> None:
    # The governed path writes the call and its audit events (requested, started, succeeded).
    world.request_call(
        "record_effect", {"note": f"row {index}"}, world.alice, tenant=world.tenant.slug, agent_name="bot"
    )


def _held_call(world: World, index: int) -> None:
    # A high-risk call is held: the pipeline opens its approval request.
    world.request_call(
        "risky_effect", {"note": f"pay {index}"}, world.alice, tenant=world.tenant.slug, agent_name="bot"
    )


def _approval_rule(world: World, index: int) -> None:
    ApprovalRule.objects.create(
        name=f"rule-{index}",
        tenant=world.tenant,
        tool_group=ToolGroup.objects.create(name=f"ruled-{index}"),
        argument="amount",
        operator=">",
        value=1000,
    )


def _webhook_delivery(world: World, index: int) -> None:
    WebhookDelivery.objects.create(
        event="approval.requested",
        payload={"tenant": world.tenant.slug, "index": index},
        next_attempt_at=timezone.now(),
    )


def _model_provider(world: World, index: int) -> None:
    ModelProvider.objects.create(name=f"provider-{index}", kind=ProviderKind.SCRIPTED, tenant=world.tenant)


def _agent(world: World, index: int) -> None:
    provider = ModelProvider.objects.create(name=f"agent-provider-{index}", kind=ProviderKind.SCRIPTED)
    agent_create(name=f"agent-{index}", tenant=world.tenant.slug, provider=provider.name, script=[{"content": "hi"}])


def _agent_run(world: World, index: int) -> None:
    agent = agent_create(name=f"runner-{index}", tenant=world.tenant.slug, script=[{"content": "done"}])
    run = world.committed(run_start, agent=agent, user=world.alice, input=f"run {index}")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.error


def _saga(world: World, index: int) -> None:
    Saga.objects.create(key=f"saga-{index}", tenant=world.tenant.slug, run_id=uuid.uuid4(), last_sequence=1)


def _compensation(world: World, index: int) -> None:
    saga = Saga.objects.create(key=f"compensated-{index}", tenant=world.tenant.slug, last_sequence=1)
    step = ToolCall.objects.create(tool_name="saga_step", status=CallStatus.SUCCEEDED, tenant=world.tenant.slug)
    Compensation.objects.create(
        saga=saga, sequence=1, step_call=step, step_tool="saga_step", tool_name="undo_saga_step"
    )


def _remote_server(index: int) -> RemoteMcpServer:
    return RemoteMcpServer.objects.create(name=f"server-{index}", url=f"https://tools-{index}.example.com/mcp")


def _remote_mcp_server(world: World, index: int) -> None:
    _remote_server(index)


def _remote_mcp_tool(world: World, index: int) -> None:
    RemoteMcpTool.objects.create(
        server=_remote_server(index),
        remote_name="lookup",
        tool_name=f"server_{index}__lookup",
        status=RemoteToolStatus.ACTIVE,
        accepted_by=User.objects.create_user(f"accepter-{index}"),
        accepted_at=timezone.now(),
    )


def _remote_mcp_credential(world: World, index: int) -> None:
    RemoteMcpCredential.objects.create(
        server=_remote_server(index), tenant=world.tenant.slug, credential_env=f"CRM_TOKEN_{world.tenant.slug.upper()}"
    )


def _account(world: World, index: int) -> None:
    Account.objects.create(
        account_id=f"ACC-{index}", owner=world.alice.username, tenant=world.tenant.slug, balance=Decimal("10")
    )


def _ledger_entry(world: World, index: int) -> None:
    account = Account.objects.create(account_id=f"LEDGER-{index}", owner=world.alice.username, tenant=world.tenant.slug)
    LedgerEntry.objects.create(account=account, amount=Decimal("5"), kind="debit")


def _order(world: World, index: int) -> None:
    Order.objects.create(
        product=f"widget {index}", amount=Decimal("3"), tenant=world.tenant.slug, created_by=world.alice.username
    )


def _paused_agent_run(world: World, index: int) -> None:
    PausedAgentRun.objects.create(
        run_key=f"sdk-run-{index}", tenant=world.tenant.slug, user=world.alice, agent_name="sdk-bot", state={}
    )


def _login_attempt(world: World, index: int) -> None:
    where = {"ip_address": "203.0.113.9", "user_agent": "bot", "http_accept": "*/*", "path_info": "/admin/login/"}
    AccessAttempt.objects.create(username=f"guess-{index}", get_data="", post_data="", failures_since_start=5, **where)


def _login_log(world: World, index: int) -> None:
    AccessLog.objects.create(username=f"member-{index}", ip_address="198.51.100.7", user_agent="browser")


def _login_failure(world: World, index: int) -> None:
    AccessFailureLog.objects.create(username=f"guess-{index}", ip_address="203.0.113.9", user_agent="bot")


#: How to add one more row of acme to each measured change list.
ROWS: dict[type[Model], Make] = {
    Tenant: _tenant,
    TenantMembership: _member,
    User: _member,
    Group: _group,
    TokenProxy: _token,
    ToolDefinition: _tool_definition,
    ToolGroup: _tool_group,
    Grant: _grant,
    ToolCall: _tool_call,
    AuditEvent: _tool_call,
    ApprovalRequest: _held_call,
    ApprovalRule: _approval_rule,
    WebhookDelivery: _webhook_delivery,
    ModelProvider: _model_provider,
    Agent: _agent,
    AgentRun: _agent_run,
    Saga: _saga,
    Compensation: _compensation,
    RemoteMcpServer: _remote_mcp_server,
    RemoteMcpTool: _remote_mcp_tool,
    RemoteMcpCredential: _remote_mcp_credential,
    Account: _account,
    LedgerEntry: _ledger_entry,
    Order: _order,
    PausedAgentRun: _paused_agent_run,
    AccessAttempt: _login_attempt,
    AccessLog: _login_log,
    AccessFailureLog: _login_failure,
}

#: A list whose page would hold rows besides the ones made here (the catalogue's own tools) shows only these.
LIST_QUERY: dict[type[Model], str] = {ToolDefinition: "?group=listed"}

#: Registered admins this test does not measure, and why (none today: every registered admin is measured).
LEFT_OUT: dict[type[Model], str] = {}


def _label(model: type[Model]) -> str:
    return model._meta.label


# --- who looks ---------------------------------------------------------------------------------------------


def _view_permissions() -> list[Permission]:
    """The view permission of every registered admin's model, so that a newly registered one is visible too."""
    types = ContentType.objects.get_for_models(*admin.site._registry, for_concrete_models=False).values()
    return list(Permission.objects.filter(content_type__in=types, codename__startswith="view_"))


@pytest.fixture
def staff(tenant: Tenant) -> User:
    """An operator of acme (the operators role, staff, no cross-tenant permission) who may view every page."""
    call_command("toolhub_roles", verbosity=0)
    user = User.objects.create_user("console-operator", "console-operator@example.com", is_staff=True)
    user.groups.add(Group.objects.get(name="operators"))
    user.user_permissions.add(*_view_permissions())
    TenantMembership.objects.create(user=user, tenant=tenant)
    return user


@pytest.fixture
def platform_staff(db: None) -> User:
    """A member of the platform team (the cross-tenant permission): the only staff pages of credentials show to."""
    user = User.objects.create_user("platform", "platform@example.com", is_staff=True)
    user.user_permissions.add(
        *_view_permissions(), Permission.objects.get(content_type__app_label="toolhub", codename="cross_tenant")
    )
    return user


@pytest.fixture
def world(tenant: Tenant, alice: User, staff: User, request_call: RequestCall, committed: Callable[..., Any]) -> World:
    return World(tenant=tenant, alice=alice, staff=staff, request_call=request_call, committed=committed)


@dataclass(frozen=True)
class Rendering:
    url: str
    queries: list[str]
    rows: int


def render(client: Client, url: str) -> Rendering:
    """GET ``url`` and keep the SQL it issued and, on a change list, how many rows it showed."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    changelist = response.context.get("cl") if response.context is not None else None
    rows = len(changelist.result_list) if changelist is not None else 0
    return Rendering(url, [query["sql"] for query in captured.captured_queries], rows)


def _shape(sql: str) -> str:
    """A query with its values left out, so that the same query for another row reads the same."""
    return re.sub(r"'[^']*'|\b\d+\b", "?", sql)


def growth(few: Rendering, many: Rendering) -> str:
    """The queries the larger rendering ran more often than the smaller: where a count grows with rows."""
    extra = Counter(map(_shape, many.queries)) - Counter(map(_shape, few.queries))
    repeated = "\n".join(f"{times} more x {sql[:400]}" for sql, times in extra.most_common(4))
    return f"{many.url}: {len(few.queries)} queries with fewer rows, {len(many.queries)} with more:\n{repeated}"


# --- the registry, all of it -------------------------------------------------------------------------------


def test_every_registered_admin_is_measured_or_left_out_with_a_reason() -> None:
    registered = set(admin.site._registry)

    assert not set(ROWS) & set(LEFT_OUT)
    assert registered - set(ROWS) - set(LEFT_OUT) == set(), "add a row maker to ROWS, or a reason to LEFT_OUT"
    assert set(ROWS) | set(LEFT_OUT) <= registered, "an admin named here is no longer registered"


@pytest.mark.parametrize("model", sorted(ROWS, key=_label), ids=_label)
def test_a_change_list_issues_as_many_queries_for_several_more_rows(
    model: type[Model], world: World, platform_staff: User
) -> None:
    # given a few rows of acme, and the page rendered once already (caches filled as in a running server)
    boundary_only = isinstance(admin.site._registry[model], CrossTenantOnly)
    client = console(platform_staff if boundary_only else world.staff)
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist") + LIST_QUERY.get(model, "")
    make = ROWS[model]
    for index in range(FEW):
        make(world, index)
    client.get(url)
    few = render(client, url)

    # when acme has several more (the page rendered once again: caches refilled after the governance change)
    for index in range(FEW, FEW + MORE):
        make(world, index)
    client.get(url)
    many = render(client, url)

    # then the page shows them with the same queries
    assert many.rows >= few.rows + MORE > MORE, (few.rows, many.rows)
    assert len(many.queries) == len(few.queries), growth(few, many)


# --- change pages that list related rows ---------------------------------------------------------------


def _measure_pages(client: Client, few_url: str, many_url: str) -> tuple[Rendering, Rendering]:
    client.get(few_url)
    return render(client, few_url), render(client, many_url)


def test_an_approval_requests_page_issues_as_many_queries_for_more_decisions(world: World) -> None:
    # given two pending requests of acme, one with a decision and one with several (an edit in each round)
    def held(decisions: int) -> ApprovalRequest:
        _held_call(world, decisions)
        request = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).latest("created_at")
        for round_ in range(1, decisions + 1):
            ApprovalDecision.objects.create(
                request=request,
                decided_by=world.staff,
                decided_by_name=world.staff.username,
                decision=DecisionKind.EDIT,
                comment=f"edit {round_}",
                diff={"note": {"before": "a", "after": "b"}},
                round=round_,
                arguments_hash=f"{round_:064x}",
            )
        ApprovalRequest.objects.filter(pk=request.pk).update(round=decisions + 1)
        return request

    few, many = held(1), held(1 + MORE)
    url = "/admin/approvals/approvalrequest/{}/change/"

    # when the operator opens each (the decision form is on both: pending, and the operator may decide)
    few_page, many_page = _measure_pages(console(world.staff), url.format(few.pk), url.format(many.pk))

    # then the page with more decisions costs no more
    assert many.decisions.count() == few.decisions.count() + MORE
    assert len(many_page.queries) == len(few_page.queries), growth(few_page, many_page)


@pytest.fixture
def trip(world: World) -> Callable[[int], AgentRun]:
    """A completed run of acme whose model booked ``steps`` compensable steps in one turn, then rolled back on demand.

    Its saga has one compensation per step (each run as a governed call, with its attempt) and, besides the
    on-demand rollback, one rollback per step naming it as failed, so that every table on the saga's page grows.
    """

    def run_with(steps: int) -> AgentRun:
        calls = [{"name": "saga_step", "arguments": {"label": f"step {n}"}} for n in range(steps)]
        agent = agent_create(
            name=f"trip-{steps}",
            tenant="acme",
            tools=["saga_step"],
            script=[{"content": "", "tool_calls": calls}, {"content": "booked: {last_tool_result}"}],
        )
        run = world.committed(run_start, agent=agent, user=world.alice, input="book it")
        run.refresh_from_db()
        assert run.status == RunStatus.COMPLETED, run.error
        world.committed(saga_rollback_on_demand, saga_key=str(run.id), actor="user:alice", run_id=run.id, tenant="acme")
        saga = Saga.objects.get(key=str(run.id))
        for call in ToolCall.objects.filter(run_id=run.id, tool_name="saga_step"):
            Rollback.objects.create(
                saga=saga, trigger=RollbackTrigger.STEP_FAILED, failed_call=call, requested_by="worker"
            )
        return run

    return run_with


def test_a_runs_page_issues_as_many_queries_for_more_calls(world: World, trip: Callable[[int], AgentRun]) -> None:
    # given a run of two steps and a run of several more
    few, many = trip(FEW), trip(FEW + MORE)
    url = "/admin/agents_app/agentrun/{}/change/"

    # when the operator opens each
    few_page, many_page = _measure_pages(console(world.staff), url.format(few.pk), url.format(many.pk))

    # then the page of the longer run costs no more
    assert ToolCall.objects.filter(run_id=many.pk).count() > ToolCall.objects.filter(run_id=few.pk).count() + MORE
    assert len(many_page.queries) == len(few_page.queries), growth(few_page, many_page)


def test_a_sagas_page_issues_as_many_queries_for_more_compensations(
    world: World, trip: Callable[[int], AgentRun]
) -> None:
    # given the sagas of a run of two steps and of a run of several more, each rolled back
    few, many = (Saga.objects.get(key=str(trip(steps).pk)) for steps in (FEW, FEW + MORE))
    url = "/admin/sagas/saga/{}/change/"

    # when the operator opens each (with the retry button: the operator may operate sagas)
    few_page, many_page = _measure_pages(console(world.staff), url.format(few.pk), url.format(many.pk))

    # then the saga with more compensations, attempts and rollbacks costs no more
    assert many.compensations.count() == few.compensations.count() + MORE
    assert len(many_page.queries) == len(few_page.queries), growth(few_page, many_page)


def test_a_calls_page_issues_as_many_queries_for_more_audit_events(world: World) -> None:
    # given two calls of acme, the second with several more events in its timeline
    few = world.request_call("record_effect", {"note": "few"}, world.alice, tenant="acme")
    many = world.request_call("record_effect", {"note": "many"}, world.alice, tenant="acme")
    for index in range(MORE):
        audit_call_event(many, "call.note", actor="operator:console-operator", data={"note": index})
    url = "/admin/toolhub/toolcall/{}/change/"

    # when the operator opens each (every event is re-verified on the page)
    few_page, many_page = _measure_pages(console(world.staff), url.format(few.pk), url.format(many.pk))

    # then the longer timeline costs no more
    events = AuditEvent.objects.filter(call_id=many.pk).count()
    assert events == AuditEvent.objects.filter(call_id=few.pk).count() + MORE
    assert len(many_page.queries) == len(few_page.queries), growth(few_page, many_page)


def test_the_index_issues_as_many_queries_for_more_calls_and_requests(world: World) -> None:
    # given a few calls and held requests of acme
    client = console(world.staff)
    for index in range(FEW):
        _tool_call(world, index)
        _held_call(world, index)
    client.get("/admin/")
    few = render(client, "/admin/")

    # when acme has several more
    for index in range(FEW, FEW + MORE):
        _tool_call(world, index)
        _held_call(world, index)
    many = render(client, "/admin/")

    # then the dashboard costs the same
    assert len(many.queries) == len(few.queries), growth(few, many)
