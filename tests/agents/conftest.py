"""Fixtures of the agent tests: developers of two tenants, an administrator, providers and clients."""

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from rest_framework.test import APIClient

from agents_app.models import Agent, AgentRun, ModelProvider, ProviderKind
from agents_app.services import agent_create, run_start
from tests.tenancy.conftest import (  # noqa: F401 - fixtures, registered by being imported here
    acme_auditor,
    acme_operator,
    carol,
    globex_operator,
    roles,
)
from toolhub.models import Tenant, TenantMembership

SCRIPT = [{"content": "Hello from the script."}]

MakeClient = Callable[[User], APIClient]


def client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def developers_group() -> Group:
    """The developers role, as ``manage.py toolhub_roles`` sets it up."""
    call_command("toolhub_roles", verbosity=0)
    return Group.objects.get(name="developers")


def _member(username: str, tenant: Tenant, *, developer: bool = False, **extra: Any) -> User:
    user = User.objects.create_user(username, f"{username}@example.com", f"{username}-password", **extra)
    if developer:
        user.groups.add(developers_group())
    TenantMembership.objects.create(user=user, tenant=tenant)
    return user


def make_developer(username: str, tenant: Tenant) -> User:
    """A member of ``tenant`` in the developers group, who may create and change its agents."""
    return _member(username, tenant, developer=True)


@pytest.fixture
def developer(tenant: Tenant) -> User:
    """A developer of acme (staff, so that the admin opens for them too)."""
    return _member("dev-acme", tenant, developer=True, is_staff=True)


@pytest.fixture
def globex_developer(other_tenant: Tenant) -> User:
    return _member("dev-globex", other_tenant, developer=True, is_staff=True)


@pytest.fixture
def bob(other_tenant: Tenant) -> User:
    """A plain user of globex."""
    return _member("bob", other_tenant)


@pytest.fixture
def admin_user(db: None) -> User:
    return User.objects.create_superuser("root", "root@example.com", "root-password")


@pytest.fixture
def developer_client(developer: User) -> APIClient:
    return client_for(developer)


@pytest.fixture
def globex_client(globex_developer: User) -> APIClient:
    return client_for(globex_developer)


@pytest.fixture
def bob_client(bob: User) -> APIClient:
    return client_for(bob)


@pytest.fixture
def admin_client_api(admin_user: User) -> APIClient:
    return client_for(admin_user)


@pytest.fixture
def acme_agent(tenant: Tenant) -> Agent:
    """An agent of acme with a prompt and a script nobody outside acme may read."""
    return agent_create(
        name="acme-secret-agent",
        tenant="acme",
        system_prompt="ACME internal prompt",
        script=SCRIPT,
        tools=["calculate"],
    )


@pytest.fixture
def secret_provider(db: None) -> ModelProvider:
    """A provider whose endpoint and credential reference only administrators may see."""
    return ModelProvider.objects.create(
        name="corp-gpt",
        kind=ProviderKind.OPENAI,
        base_url="http://10.1.2.3:8080/v1",
        model_name="corp-model",
        credential_env="CORP_GPT_API_KEY",
    )


@pytest.fixture
def start_run(db: None, django_capture_on_commit_callbacks: Any) -> Callable[..., AgentRun]:
    """Start a run and let it go as far as it can in-process; return the fresh row."""

    def start(agent: Agent, user: User, text: str = "go", context: Mapping[str, Any] | None = None) -> AgentRun:
        with django_capture_on_commit_callbacks(execute=True):
            run = run_start(agent=agent, user=user, input=text, context=context)
        run.refresh_from_db()
        return run

    return start
