"""Review of 2026-12-05 (bc): agent runs and model providers through the admin and the REST API.

Each test fails on the reviewed code (main at 317e64f) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A model provider bound to a tenant ("only this tenant's agents may use it") was checked only when an agent
   named it: an administrator binding a provider that was global (or another tenant's) to globex left acme's
   agents on it, and their runs went on sending acme's conversations to globex's endpoint with globex's key.
   The provider's page accepted the change silently, and ``adapter_for`` built the model of any provider.
   Now a run's model is built only on a provider its agent may use (``adapter_for``: another tenant's answers
   "not configured"), and the provider's page refuses a tenant that agents of other tenants use.

Checked and found holding (no test here): starting a run in another tenant (``context.tenant`` checked against
the caller's scope and an existing tenant; another tenant's agent by id or name answers like a missing one);
reserved context keys and typed-context keys refused at run start, the context bounded; retry, cancel and rollback
need the run visible (404) and its own user or an operator of its tenant (403); a run whose user left the tenant or
was deactivated is cancelled at its next step (``standing_refusal``), retried or not; a removed user no longer sees
their runs of that tenant; an agent names only an enabled provider of its tenant or a global one (API and admin
form); the providers' page is for those who cross the boundary only, the agents' API shows a provider's name and
kind only; model errors name the provider, never its URL, key or variable; a scripted turn of the wrong shape fails
the run with a bounded message; a run's transcript and tool calls read only the run's own calls.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.admin import ModelProviderForm
from agents_app.models import ModelProvider, ProviderKind, RunStatus
from agents_app.services import agent_create
from tests.agents.conftest import start_run  # noqa: F401 - a fixture, registered by being imported here
from toolhub.models import Tenant

pytestmark = pytest.mark.django_db


def _shared_provider() -> ModelProvider:
    return ModelProvider.objects.create(name="shared-brain", kind=ProviderKind.SCRIPTED)


def test_a_run_of_acme_does_not_use_a_provider_bound_to_globex_since_its_agent_named_it(
    start_run: Any,  # noqa: F811
    alice: User,
    tenant: Tenant,
    other_tenant: Tenant,
) -> None:
    """Found: ``adapter_for`` builds the model of whatever provider the agent row points at; binding a global
    provider to globex afterwards left acme's agent on it, and acme's run completed on globex's provider.
    Expect: the run fails with "not configured" and nothing is asked of globex's provider."""
    provider = _shared_provider()
    agent = agent_create(name="helper", tenant="acme", provider="shared-brain", script=[{"content": "hello"}])
    provider.tenant = other_tenant
    provider.save()

    run = start_run(agent, alice)

    assert run.status == RunStatus.FAILED, (run.status, run.output)
    assert run.output == ""
    assert "'shared-brain' is not configured" in run.error


def test_the_provider_page_refuses_binding_a_provider_to_one_tenant_while_other_tenants_agents_use_it(
    tenant: Tenant, other_tenant: Tenant
) -> None:
    """Found: the model provider's change form saved ``tenant=globex`` on a provider acme's agents use, with no
    word; those agents were then on another tenant's endpoint and key (or, with the run check, broken).
    Expect: the form refuses the tenant and says which tenant's agents use the provider."""
    provider = _shared_provider()
    agent_create(name="helper", tenant="acme", provider="shared-brain", script=[])
    agent_create(name="globex-helper", tenant="globex", provider="shared-brain", script=[])
    data = {
        "name": provider.name,
        "kind": provider.kind,
        "tenant": str(other_tenant.pk),
        "enabled": "on",
        "base_url": "",
        "model_name": "",
        "credential_env": "",
        "request_timeout_seconds": "30",
        "deadline_seconds": "120",
        "schema_profile": "",
        "note_placement": provider.note_placement,
    }

    form = ModelProviderForm(data=data, instance=provider)

    assert not form.is_valid()
    assert "acme" in str(form.errors["tenant"])
    provider.refresh_from_db()
    assert provider.tenant_id is None
