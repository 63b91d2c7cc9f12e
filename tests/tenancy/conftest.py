"""Two tenants and the people around them, and tenant acme's data for the boundary tests.

acme: alice (a plain member who starts runs), an operator. globex: a staff auditor, an operator and a
plain user, none of whom may see or touch acme's rows. Across the boundary: a superuser and a
platform user holding ``toolhub.cross_tenant``. Roles come from ``manage.py toolhub_roles``.
"""

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command

from agents_app.models import AgentRun, RunStatus
from agents_app.services import agent_create, run_start
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus, WebhookDelivery
from demo.models import Account, LedgerEntry
from tests.helpers import RequestCall
from toolhub import Tool, ToolResult, registry, tool
from toolhub.models import AuditEvent, CallStatus, Tenant, TenantMembership, ToolCall, ToolCallArtifact
from toolhub.sagas.models import Compensation, Saga

PASSWORD = "tenancy-password"

CRM_LOOKUP = Tool.external(
    "crm_lookup",
    "Look a customer up in the CRM (answered by the CRM connector).",
    {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]},
)


@tool
def export_file(name: str) -> ToolResult:
    """Export a report as a file."""
    return ToolResult.artifact(f"acme report {name}", name=f"{name}.txt", media_type="text/plain")


LEDGER_SCRIPT = [
    {"tool_calls": [{"name": "debit", "arguments": {"account_id": "ACC-ACME", "amount": "100"}}]},
    {"content": "Debited: {last_tool_result}"},
]
ORDER_SCRIPT = [
    {"tool_calls": [{"name": "create_order", "arguments": {"product": "Laptop", "amount": "5000"}}]},
    {"content": "Order placed: {last_tool_result}"},
]
EXTERNAL_SCRIPT = [
    {"tool_calls": [{"name": "crm_lookup", "arguments": {"email": "ada@acme.example"}}]},
    {"content": "CRM says: {last_tool_result}"},
]


@pytest.fixture(autouse=True)
def _tenancy_tools() -> Iterator[None]:
    with registry.temporarily(CRM_LOOKUP, export_file):
        yield


@pytest.fixture
def roles(db: None) -> dict[str, Group]:
    """The groups operators, auditors and developers, made by the management command."""
    call_command("toolhub_roles", verbosity=0)
    return {group.name: group for group in Group.objects.filter(name__in=["operators", "auditors", "developers"])}


def make_user(
    username: str,
    *,
    tenant: Tenant | None = None,
    staff: bool = False,
    groups: tuple[Group, ...] = (),
    permissions: tuple[str, ...] = (),
) -> User:
    """A user with a password, staff status, groups, extra permissions and one tenant, as asked."""
    user = User.objects.create_user(username, f"{username}@example.com", PASSWORD, is_staff=staff)
    user.groups.add(*groups)
    for name in permissions:
        app_label, codename = name.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    if tenant is not None:
        TenantMembership.objects.create(user=user, tenant=tenant)
    return user


@pytest.fixture
def acme_operator(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-operator", tenant=tenant, staff=True, groups=(roles["operators"],))


@pytest.fixture
def acme_auditor(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-auditor", tenant=tenant, staff=True, groups=(roles["auditors"],))


@pytest.fixture
def carol(tenant: Tenant) -> User:
    """A plain member of acme who is not alice: sees none of alice's rows."""
    return make_user("carol", tenant=tenant)


@pytest.fixture
def globex_auditor(other_tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("globex-auditor", tenant=other_tenant, staff=True, groups=(roles["auditors"],))


@pytest.fixture
def globex_operator(other_tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("globex-operator", tenant=other_tenant, staff=True, groups=(roles["operators"],))


@pytest.fixture
def globex_developer(other_tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("globex-developer", tenant=other_tenant, staff=True, groups=(roles["developers"],))


@pytest.fixture
def globex_user(other_tenant: Tenant) -> User:
    return make_user("globex-user", tenant=other_tenant)


@pytest.fixture
def superuser(db: None) -> User:
    return User.objects.create_superuser("root", "root@example.com", PASSWORD)


@pytest.fixture
def platform_user(roles: dict[str, Group]) -> User:
    """A platform team member: staff, operator and developer, with the cross-tenant permission and no tenant."""
    return make_user(
        "platform",
        staff=True,
        groups=(roles["operators"], roles["developers"]),
        permissions=("toolhub.cross_tenant",),
    )


@pytest.fixture
def globex_people(globex_auditor: User, globex_operator: User, globex_user: User) -> dict[str, User]:
    return {"auditor": globex_auditor, "operator": globex_operator, "user": globex_user}


@dataclass(frozen=True)
class AcmeData:
    ledger_run: AgentRun
    saga: Saga
    compensation: Compensation
    waiting_run: AgentRun
    approval: ApprovalRequest
    external_run: AgentRun
    external_call: ToolCall
    artifact_call: ToolCall
    artifact: ToolCallArtifact


def pending_copies(acme: AcmeData, count: int, *, key: str) -> list[ApprovalRequest]:
    """``count`` pending requests of alice's like acme's waiting one, each with its own call (keys ``<key>-call-N``):
    for pages that list many requests at once."""
    calls = []
    for i in range(count):
        call = ToolCall.objects.get(pk=acme.approval.call_id)
        call.id, call.key = uuid.uuid4(), f"{key}-call-{i}"
        calls.append(call)
    ToolCall.objects.bulk_create(calls)
    requests = []
    for call in calls:
        request = ApprovalRequest.objects.get(pk=acme.approval.pk)
        request.pk, request.call = None, call
        requests.append(request)
    return ApprovalRequest.objects.bulk_create(requests)


def _run(alice: User, name: str, tools: list[str], script: list[dict[str, Any]]) -> AgentRun:
    agent = agent_create(name=name, provider="scripted", tools=tools, script=script)
    run = run_start(agent=agent, user=alice, input=f"{name} for acme")
    run.refresh_from_db()
    return run


@pytest.fixture
def acme(alice: User, tenant: Tenant, request_call: RequestCall) -> AcmeData:
    """acme's data, all alice's: a completed run that debited money (its saga has a compensable step), a run
    waiting for an operator's approval, a run waiting for an external result, a call that stored an artifact."""
    Account.objects.create(account_id="ACC-ACME", owner="alice", tenant="acme", balance=Decimal("1000"))
    ledger_run = _run(alice, "acme-ledger", ["debit"], LEDGER_SCRIPT)
    assert ledger_run.status == RunStatus.COMPLETED, ledger_run.error
    saga = Saga.objects.get(key=str(ledger_run.id))
    compensation = saga.compensations.get()
    assert compensation.status == "recorded" and saga.tenant == "acme"

    waiting_run = _run(alice, "acme-orders", ["create_order"], ORDER_SCRIPT)
    approval = ApprovalRequest.objects.get(call__run_id=waiting_run.id)
    assert waiting_run.status == RunStatus.WAITING and approval.status == ApprovalStatus.PENDING
    assert approval.tenant == "acme"

    external_run = _run(alice, "acme-crm", ["crm_lookup"], EXTERNAL_SCRIPT)
    external_call = ToolCall.objects.get(run_id=external_run.id)
    assert external_call.status == CallStatus.AWAITING_RESULT and external_call.tenant == "acme"

    artifact_call = request_call("export_file", {"name": "q3"}, alice, tenant="acme")
    artifact = artifact_call.artifacts.get()
    return AcmeData(
        ledger_run=ledger_run,
        saga=saga,
        compensation=compensation,
        waiting_run=waiting_run,
        approval=approval,
        external_run=external_run,
        external_call=external_call,
        artifact_call=artifact_call,
        artifact=artifact,
    )


def database_state() -> dict[str, Any]:
    """Everything an out-of-tenant request could have changed: statuses, decisions, money, audit, webhooks."""
    return {
        "calls": sorted((str(pk), status) for pk, status in ToolCall.objects.values_list("id", "status")),
        "runs": sorted((str(pk), status) for pk, status in AgentRun.objects.values_list("id", "status")),
        "approvals": sorted(ApprovalRequest.objects.values_list("id", "status", "round")),
        "decisions": ApprovalDecision.objects.count(),
        "sagas": sorted(Saga.objects.values_list("id", "status")),
        "compensations": sorted(Compensation.objects.values_list("id", "status", "attempts")),
        "balances": sorted(Account.objects.values_list("account_id", "balance")),
        "ledger": LedgerEntry.objects.count(),
        "audit_events": AuditEvent.objects.count(),
        "webhooks": WebhookDelivery.objects.count(),
        "memberships": sorted(TenantMembership.objects.values_list("user_id", "tenant_id")),
    }


def random_uuid() -> str:
    return str(uuid.uuid4())
