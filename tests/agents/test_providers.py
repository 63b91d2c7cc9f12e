"""Model providers: credentials stay on the server, their absence is no oracle, administrators alone configure them."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from rest_framework.test import APIClient

from agents_app.models import Agent, AgentRun, ModelProvider, ProviderKind, RunStatus
from agents_app.selectors import agent_tools
from agents_app.services import AGENT_TENANT_FIXED, RunInputError, agent_create, run_start
from tests.agents.conftest import SCRIPT
from tests.unit.fake_openai import FakeModel, completion, serve
from toolhub.authorization import principal_of_call
from toolhub.models import Tenant

pytestmark = pytest.mark.django_db


def _provider(base_url: str, credential_env: str, **options: Any) -> ModelProvider:
    return ModelProvider.objects.create(
        name=options.pop("name", "corp-gpt"),
        kind=ProviderKind.OPENAI,
        base_url=base_url,
        model_name="corp-model",
        credential_env=credential_env,
        **options,
    )


def test_the_key_is_sent_only_to_the_providers_endpoint(
    alice: User, start_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a provider whose key an administrator put in the environment
    monkeypatch.setenv("CORP_GPT_API_KEY", "sk-server-side")
    with serve(FakeModel()) as model:
        model.queue(completion(content="hi"))
        provider = _provider(model.base_url, "CORP_GPT_API_KEY")
        agent = agent_create(name="helper", provider=provider.name)

        # when a run talks to the model
        run = start_run(agent, alice)

    # then the provider's endpoint got the provider's model and key
    assert run.status == RunStatus.COMPLETED, run.error
    [request] = model.requests
    assert request["body"]["model"] == "corp-model"
    assert request["authorization"] == "Bearer sk-server-side"


@pytest.mark.parametrize("reason", ["unset-variable", "disabled-provider"])
def test_an_unusable_provider_fails_the_run_with_the_same_generic_message(
    alice_client: APIClient, committed: Any, tenant: Tenant, caplog: pytest.LogCaptureFixture, reason: str
) -> None:
    # given an agent whose provider cannot be used: its key variable is unset, or it is disabled
    with serve(FakeModel()) as model:
        if reason == "unset-variable":
            _provider(model.base_url, "TOOLHUB_NO_SUCH_VARIABLE_FOR_TESTS")
        else:
            _provider(model.base_url, "", enabled=True)
        agent = agent_create(name="helper", tenant="acme", provider="corp-gpt")
        if reason == "disabled-provider":
            ModelProvider.objects.update(enabled=False)

        # when alice runs it over the API
        started = committed(alice_client.post, "/api/v1/runs/", {"agent_id": agent.pk, "input": "hi"}, format="json")
        shown = alice_client.get(f"/api/v1/runs/{started.json()['id']}/")

    # then the run failed with a message naming only the provider; the reason is in the server log alone
    assert shown.json()["status"] == "failed"
    assert shown.json()["error"] == "Model provider 'corp-gpt' is not configured; ask an administrator."
    assert b"TOOLHUB_NO_SUCH_VARIABLE_FOR_TESTS" not in shown.content
    assert b"disabled" not in shown.content
    assert model.requests == []
    expected_log = "TOOLHUB_NO_SUCH_VARIABLE_FOR_TESTS" if reason == "unset-variable" else "is disabled"
    assert expected_log in caplog.text


def test_a_set_and_an_unset_variable_cannot_be_told_apart(
    alice: User, start_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an attacker who could name variables would compare answers; a provider with a key that is set but
    # an endpoint that is down and one whose key is unset must not differ in what they reveal about the key
    monkeypatch.setenv("LLM_KEY_SET_FOR_TESTS", "x")
    down = FakeModel()
    with serve(down):
        pass
    _provider(down.base_url, "LLM_KEY_SET_FOR_TESTS", name="with-key")
    _provider(down.base_url, "LLM_KEY_UNSET_FOR_TESTS", name="without-key")
    errors = [
        start_run(agent_create(name=f"uses-{name}", provider=name), alice).error for name in ("with-key", "without-key")
    ]

    assert errors[0] == "Model endpoint unreachable: APIConnectionError"
    assert errors[1] == "Model provider 'without-key' is not configured; ask an administrator."
    for error in errors:
        assert "TOOLHUB_" not in error and "environment" not in error


# --- the agent-tools hook, now that names repeat across tenants --------------------------------------


def test_the_worker_rechecks_a_calls_tools_against_its_own_agent(
    alice: User, other_tenant: Tenant, tenant: Tenant, start_run: Any
) -> None:
    # given two agents named "helper": globex's may record effects, acme's may only calculate
    agent_create(name="helper", tenant="globex", tools=["record_effect"], script=SCRIPT)
    acme = agent_create(name="helper", tenant="acme", tools=["calculate"], script=SCRIPT)
    agent_create(name="helper", tenant=None, tools=["current_time"], script=SCRIPT)
    run = start_run(acme, alice)

    # then the core's hook answers each tenant's (and each run's) own agent
    assert agent_tools("helper", tenant="acme", run_id=run.id) == frozenset({"calculate"})
    assert agent_tools("helper", tenant="globex", run_id=None) == frozenset({"record_effect"})
    assert agent_tools("helper", tenant="initech", run_id=None) == frozenset({"current_time"})
    principal = principal_of_call(user_id=alice.pk, tenant="acme", agent_name="helper", run_id=run.id)
    assert principal.agent_tools == frozenset({"calculate"})


def test_a_run_cannot_use_another_tenants_agent_even_through_the_service(
    alice: User, other_tenant: Tenant, tenant: Tenant
) -> None:
    globex = agent_create(name="globex-agent", tenant="globex", script=SCRIPT)

    with pytest.raises(RunInputError, match="Unknown agent 'globex-agent' in tenant 'acme'"):
        run_start(agent=globex, user=alice, input="hi")
    assert not AgentRun.objects.exists()


# --- the admin: providers for administrators only, agents scoped -------------------------------------


def _admin_client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_only_administrators_see_providers_in_the_admin(
    developer: User, admin_user: User, secret_provider: ModelProvider
) -> None:
    # given a staff developer who even holds every model permission on providers
    developer.user_permissions.add(*Permission.objects.filter(codename__endswith="_modelprovider"))
    developer = User.objects.get(pk=developer.pk)
    dev, root = _admin_client(developer), _admin_client(admin_user)

    # then the provider pages stay closed to them, and open to the superuser
    for url in (
        "/admin/agents_app/modelprovider/",
        f"/admin/agents_app/modelprovider/{secret_provider.pk}/change/",
        "/admin/agents_app/modelprovider/add/",
    ):
        assert dev.get(url).status_code == 403
        assert root.get(url).status_code == 200
    index = dev.get("/admin/")
    assert b"Model providers" not in index.content and b"CORP_GPT_API_KEY" not in index.content
    assert b"CORP_GPT_API_KEY" in root.get(f"/admin/agents_app/modelprovider/{secret_provider.pk}/change/").content


def test_the_agent_admin_shows_a_developer_their_tenants_and_the_global_agents(
    developer: User, other_tenant: Tenant, tenant: Tenant, secret_provider: ModelProvider
) -> None:
    agent_create(name="acme-agent", tenant="acme", script=SCRIPT)
    globex = agent_create(name="globex-agent", tenant="globex", system_prompt="GLOBEX PROMPT", script=SCRIPT)
    shared = agent_create(name="shared-agent", tenant=None, script=SCRIPT)
    client = _admin_client(developer)

    listed = client.get("/admin/agents_app/agent/")
    assert listed.status_code == 200
    assert b"acme-agent" in listed.content and b"shared-agent" in listed.content
    assert b"globex-agent" not in listed.content
    assert client.get(f"/admin/agents_app/agent/{globex.pk}/change/").status_code == 302  # "does not exist"
    # a global agent is read-only for them; the provider is shown by name, never with its endpoint
    shared_page = client.get(f"/admin/agents_app/agent/{shared.pk}/change/")
    assert shared_page.status_code == 200
    assert b'name="_save"' not in shared_page.content
    add_page = client.get("/admin/agents_app/agent/add/")
    assert b"corp-gpt" in add_page.content and b"10.1.2.3" not in add_page.content
    assert b">globex<" not in add_page.content


def test_the_agent_admin_refuses_a_global_agent_from_a_developer(developer: User, tenant: Tenant) -> None:
    client = _admin_client(developer)
    scripted = ModelProvider.objects.get(name="scripted")
    form = {
        "name": "sneaky",
        "tenant": "",
        "description": "",
        "provider": scripted.pk,
        "script": json.dumps(SCRIPT),
        "system_prompt": "",
        "tools": "[]",
        "max_tool_calls": 10,
        "parallel_tool_calls": "on",
    }

    response = client.post("/admin/agents_app/agent/add/", form)

    assert response.status_code == 200  # the form again, with an error
    assert list(response.context["adminform"].form.errors) == ["tenant"]
    assert not Agent.objects.filter(name="sneaky").exists()


def test_the_agent_admin_keeps_an_agents_tenant_as_the_api_does(
    admin_user: User, tenant: Tenant, other_tenant: Tenant
) -> None:
    # given an agent of acme and a superuser (who crosses every boundary) on its change page
    agent = agent_create(name="kept", tenant="acme", script=SCRIPT)
    client = _admin_client(admin_user)
    scripted = ModelProvider.objects.get(name="scripted")

    # the tenant is shown with the API's reason, not offered for change
    page = client.get(f"/admin/agents_app/agent/{agent.pk}/change/")
    assert page.context["adminform"].form.fields["tenant"].disabled
    assert "An agent's tenant cannot be changed" in page.content.decode()
    assert b'id="add_id_tenant"' not in page.content  # nor a link to add or change one from here

    fields = {
        "name": "kept",
        "description": "still acme's",
        "provider": scripted.pk,
        "script": json.dumps(SCRIPT),
        "system_prompt": "",
        "tools": "[]",
        "max_tool_calls": 10,
        "parallel_tool_calls": "on",
    }

    # when they post another tenant, it is refused in the API's words and nothing is saved
    moved = client.post(f"/admin/agents_app/agent/{agent.pk}/change/", {**fields, "tenant": other_tenant.pk})
    assert moved.status_code == 200
    assert moved.context["adminform"].form.errors["tenant"] == [AGENT_TENANT_FIXED]
    agent.refresh_from_db()
    assert (agent.tenant.slug, agent.description) == ("acme", "")

    # the page as a browser sends it (a disabled field is not posted) saves the rest, the agent still acme's
    assert client.post(f"/admin/agents_app/agent/{agent.pk}/change/", fields).status_code == 302
    agent.refresh_from_db()
    assert (agent.tenant.slug, agent.description) == ("acme", "still acme's")


def test_the_agent_admin_answers_an_unknown_tool_as_the_api_does(developer: User, tenant: Tenant) -> None:
    # given a developer who misspells a tool, in the admin and in the API
    scripted = ModelProvider.objects.get(name="scripted")
    admin_answer = _admin_client(developer).post(
        "/admin/agents_app/agent/add/",
        {
            "name": "typo",
            "tenant": tenant.pk,
            "description": "",
            "provider": scripted.pk,
            "script": json.dumps(SCRIPT),
            "system_prompt": "",
            "tools": '["calculat"]',
            "max_tool_calls": 10,
        },
    )
    api_client = APIClient()
    api_client.force_authenticate(developer)
    api_answer = api_client.post(
        "/api/v1/agents/",
        {"name": "typo", "tenant": "acme", "model": {"provider": "scripted", "script": SCRIPT}, "tools": ["calculat"]},
        format="json",
    )

    # then both refuse it with the same words, suggesting among the tools the developer may see
    assert api_answer.status_code == 400 and admin_answer.status_code == 200
    detail = api_answer.json()["detail"]
    assert detail.startswith("Unknown tool 'calculat'. Did you mean: calculate")
    assert admin_answer.context["adminform"].form.errors["tools"] == [detail]
    assert not Agent.objects.filter(name="typo").exists()
