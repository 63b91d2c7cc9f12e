"""Agents over the API: who may create and change them, what nobody but administrators sees, tenant scoping."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents_app.models import Agent, AgentRun, ModelProvider
from agents_app.services import agent_create
from tests.agents.conftest import SCRIPT
from toolhub.models import Tenant

pytestmark = pytest.mark.django_db


def _payload(**overrides: Any) -> dict[str, Any]:
    return {"name": "helper", "model": {"provider": "scripted", "script": SCRIPT}, "tools": ["calculate"], **overrides}


# --- who may create and change agents ----------------------------------------------------------------


def test_a_plain_user_can_neither_create_nor_change_agents(alice_client: APIClient, acme_agent: Agent) -> None:
    # when a user without the developers' permissions tries
    created = alice_client.post("/api/v1/agents/", _payload(), format="json")
    changed = alice_client.patch(f"/api/v1/agents/{acme_agent.pk}/", {"system_prompt": "obey me"}, format="json")

    # then both are refused and nothing changed
    assert created.status_code == 403
    assert changed.status_code == 403
    assert "developers role" in created.json()["detail"]
    assert list(Agent.objects.values_list("name", "system_prompt")) == [("acme-secret-agent", "ACME internal prompt")]


@pytest.mark.parametrize(
    "model",
    [
        {"provider": "scripted", "base_url": "http://127.0.0.1:6379/"},
        {"provider": "scripted", "api_key_env": "DJANGO_SECRET_KEY"},
        {"provider": "scripted", "credential_env": "TOOLHUB_AUDIT_KEY"},
        {"provider": "scripted", "model": "gpt-4o"},
    ],
    ids=["base_url", "api_key_env", "credential_env", "model"],
)
def test_nobody_chooses_a_url_or_a_credential_over_the_api(
    developer_client: APIClient, acme_agent: Agent, model: dict[str, Any]
) -> None:
    # when a developer sends endpoint settings on create and on change
    created = developer_client.post("/api/v1/agents/", _payload(model=model), format="json")
    changed = developer_client.patch(f"/api/v1/agents/{acme_agent.pk}/", {"model": model}, format="json")

    # then both are refused with a message that points at providers, and nothing was written
    for response in (created, changed):
        assert response.status_code == 400
        [message] = response.json()["model"]
        assert "belong to model providers, which administrators configure" in message
    assert list(Agent.objects.values_list("name", flat=True)) == ["acme-secret-agent"]
    assert list(ModelProvider.objects.values_list("name", flat=True)) == ["scripted"]


def test_a_developer_creates_and_changes_an_agent_of_their_tenant(developer_client: APIClient) -> None:
    created = developer_client.post("/api/v1/agents/", _payload(system_prompt="Be brief."), format="json")
    assert created.status_code == 201, created.content
    agent_id = created.json()["id"]

    changed = developer_client.patch(
        f"/api/v1/agents/{agent_id}/", {"system_prompt": "Be exact.", "max_tool_calls": 2}, format="json"
    )

    assert changed.status_code == 200, changed.content
    assert (changed.json()["tenant"], changed.json()["system_prompt"], changed.json()["max_tool_calls"]) == (
        "acme",
        "Be exact.",
        2,
    )
    assert Agent.objects.get(pk=agent_id).system_prompt == "Be exact."


def test_an_agent_cannot_move_to_another_tenant(developer_client: APIClient, acme_agent: Agent) -> None:
    response = developer_client.patch(f"/api/v1/agents/{acme_agent.pk}/", {"tenant": "globex"}, format="json")

    assert response.status_code == 400
    assert "tenant cannot be changed" in json.dumps(response.json())
    assert Agent.objects.get(pk=acme_agent.pk).tenant.slug == "acme"


@pytest.mark.parametrize("slug", ["globex", "no-such-tenant"])
def test_a_developer_cannot_create_agents_in_another_tenant(
    developer_client: APIClient, other_tenant: Tenant, slug: str
) -> None:
    response = developer_client.post("/api/v1/agents/", _payload(tenant=slug), format="json")

    # another tenant answers exactly like one that does not exist
    assert response.status_code == 400
    assert response.json() == {"detail": f"Unknown tenant {slug!r} among yours."}
    assert not Agent.objects.exists()


def test_only_administrators_create_and_change_global_agents(
    developer_client: APIClient, admin_client_api: APIClient
) -> None:
    # a developer may not create a global agent
    refused = developer_client.post("/api/v1/agents/", _payload(tenant=None), format="json")
    assert refused.status_code == 403
    assert "global agents" in refused.json()["detail"]
    assert not Agent.objects.exists()

    # an administrator may
    created = admin_client_api.post("/api/v1/agents/", _payload(tenant=None), format="json")
    assert created.status_code == 201, created.content
    assert created.json()["tenant"] is None

    # the developer sees it (global agents are for everyone) but may not change it
    agent_id = created.json()["id"]
    assert developer_client.get(f"/api/v1/agents/{agent_id}/").status_code == 200
    changed = developer_client.patch(f"/api/v1/agents/{agent_id}/", {"system_prompt": "mine now"}, format="json")
    assert changed.status_code == 403
    assert Agent.objects.get(pk=agent_id).system_prompt == ""


# --- providers: named, scoped, and never shown ------------------------------------------------------


def test_the_api_never_shows_a_providers_url_or_credential(
    developer_client: APIClient, alice_client: APIClient, secret_provider: ModelProvider
) -> None:
    created = developer_client.post("/api/v1/agents/", _payload(model={"provider": "corp-gpt"}), format="json")
    assert created.status_code == 201, created.content
    agent_id = created.json()["id"]

    shown = [
        created.content,
        developer_client.get(f"/api/v1/agents/{agent_id}/").content,
        alice_client.get("/api/v1/agents/").content,
    ]

    assert created.json()["model"] == {"provider": "corp-gpt", "kind": "openai", "script": []}
    for body in shown:
        assert b"10.1.2.3" not in body
        assert b"CORP_GPT_API_KEY" not in body
        assert b"corp-model" not in body


def test_another_tenants_provider_and_a_disabled_one_cannot_be_named(
    developer_client: APIClient, other_tenant: Tenant
) -> None:
    ModelProvider.objects.create(name="globex-gpt", tenant=other_tenant, base_url="http://x.invalid/v1", model_name="m")
    ModelProvider.objects.create(name="retired", enabled=False, base_url="http://x.invalid/v1", model_name="m")

    for name in ("globex-gpt", "retired"):
        response = developer_client.post("/api/v1/agents/", _payload(model={"provider": name}), format="json")
        assert response.status_code == 400
        # the refusal lists what the developer may use, never the other tenant's provider
        assert response.json()["detail"] == (
            f"Unknown model provider {name!r}; providers this agent may use: scripted. "
            "Administrators configure model providers."
        )
    assert not Agent.objects.exists()


# --- tenant scoping of reads and runs ---------------------------------------------------------------


def test_other_tenants_agents_answer_like_missing_ones(
    bob_client: APIClient, globex_client: APIClient, acme_agent: Agent
) -> None:
    missing_id = acme_agent.pk + 1000

    # listing: nothing of acme (neither the agent nor its prompt or script)
    listed = bob_client.get("/api/v1/agents/")
    assert listed.status_code == 200
    assert listed.json()["results"] == []
    assert b"ACME internal prompt" not in listed.content

    # reading and changing: 404 exactly as for an id that does not exist
    for client in (bob_client, globex_client):
        assert (
            client.get(f"/api/v1/agents/{acme_agent.pk}/").json() == client.get(f"/api/v1/agents/{missing_id}/").json()
        )
        assert client.get(f"/api/v1/agents/{acme_agent.pk}/").status_code == 404
    patched = globex_client.patch(f"/api/v1/agents/{acme_agent.pk}/", {"system_prompt": "x"}, format="json")
    assert patched.status_code == 404
    assert Agent.objects.get(pk=acme_agent.pk).system_prompt == "ACME internal prompt"

    # running: refused as an unknown agent, by id or by name
    by_id = bob_client.post("/api/v1/runs/", {"agent_id": acme_agent.pk, "input": "hi"}, format="json")
    by_missing_id = bob_client.post("/api/v1/runs/", {"agent_id": missing_id, "input": "hi"}, format="json")
    by_name = bob_client.post("/api/v1/runs/", {"agent": acme_agent.name, "input": "hi"}, format="json")
    assert by_id.status_code == by_missing_id.status_code == by_name.status_code == 400
    assert by_id.json()["detail"] == by_missing_id.json()["detail"].replace(str(missing_id), str(acme_agent.pk))
    assert by_name.json()["detail"].startswith("Unknown agent 'acme-secret-agent'")
    assert not AgentRun.objects.exists()


def test_a_name_that_looks_like_an_id_is_only_a_name(
    alice: User, alice_client: APIClient, committed: Any, other_tenant: Tenant, tenant: Tenant
) -> None:
    # given globex's agent named like the id of acme's agent
    acme = agent_create(name="acme-helper", tenant="acme", script=SCRIPT)
    agent_create(name=str(acme.pk), tenant="globex", script=[{"content": "globex speaking"}])

    # when alice names "<that id>" as a name, and then the id as an id
    by_name = alice_client.post("/api/v1/runs/", {"agent": str(acme.pk), "input": "hi"}, format="json")
    by_id = committed(alice_client.post, "/api/v1/runs/", {"agent_id": acme.pk, "input": "hi"}, format="json")

    # then the name finds no agent of hers (not globex's, not her agent with that id); the id finds hers
    assert by_name.status_code == 400
    assert by_name.json()["detail"] == f"Unknown agent '{acme.pk}' among your tenant's agents and the global ones."
    assert by_id.status_code == 201, by_id.content
    assert by_id.json()["agent"] == "acme-helper"
    assert alice_client.get(f"/api/v1/runs/{by_id.json()['id']}/").json()["output"] == "Hello from the script."


def test_a_run_names_its_agent_by_exactly_one_of_id_and_name(alice_client: APIClient, acme_agent: Agent) -> None:
    both = alice_client.post(
        "/api/v1/runs/", {"agent_id": acme_agent.pk, "agent": acme_agent.name, "input": "hi"}, format="json"
    )
    neither = alice_client.post("/api/v1/runs/", {"input": "hi"}, format="json")

    for response in (both, neither):
        assert response.status_code == 400
        assert response.json()["agent"] == ["Name the agent by exactly one of agent_id (its id) or agent (its name)."]
    assert not AgentRun.objects.exists()


def test_names_are_unique_within_a_tenant_not_across_tenants(
    developer_client: APIClient,
    globex_client: APIClient,
    alice_client: APIClient,
    bob_client: APIClient,
    committed: Any,
) -> None:
    # the same name in two tenants is fine; twice in one tenant is not
    assert developer_client.post("/api/v1/agents/", _payload(), format="json").status_code == 201
    globex_payload = _payload(model={"provider": "scripted", "script": [{"content": "globex speaking"}]})
    assert globex_client.post("/api/v1/agents/", globex_payload, format="json").status_code == 201
    again = developer_client.post("/api/v1/agents/", _payload(), format="json")
    assert again.status_code == 400
    assert again.json() == {"detail": "An agent named 'helper' exists already in this tenant; choose another name."}

    # each tenant's users run their own "helper"
    acme_run = committed(alice_client.post, "/api/v1/runs/", {"agent": "helper", "input": "hi"}, format="json")
    globex_run = committed(bob_client.post, "/api/v1/runs/", {"agent": "helper", "input": "hi"}, format="json")
    assert alice_client.get(f"/api/v1/runs/{acme_run.json()['id']}/").json()["output"] == "Hello from the script."
    assert bob_client.get(f"/api/v1/runs/{globex_run.json()['id']}/").json()["output"] == "globex speaking"


def test_a_tenants_own_agent_comes_before_a_global_one_of_the_same_name(
    alice_client: APIClient, committed: Any, tenant: Tenant
) -> None:
    agent_create(name="helper", tenant=None, script=[{"content": "global speaking"}])
    agent_create(name="helper", tenant="acme", script=[{"content": "acme speaking"}])

    started = committed(alice_client.post, "/api/v1/runs/", {"agent": "helper", "input": "hi"}, format="json")

    assert started.status_code == 201, started.content
    assert alice_client.get(f"/api/v1/runs/{started.json()['id']}/").json()["output"] == "acme speaking"


def test_the_agent_list_is_paginated(alice_client: APIClient, tenant: Tenant) -> None:
    for index in range(3):
        agent_create(name=f"agent-{index}", tenant="acme", script=SCRIPT)

    first = alice_client.get("/api/v1/agents/?page_size=2").json()
    second = alice_client.get(first["next"]).json()

    assert len(first["results"]) == 2
    assert len(second["results"]) == 1
    names = [agent["name"] for agent in first["results"] + second["results"]]
    assert sorted(names) == ["agent-0", "agent-1", "agent-2"]


def test_a_scripted_agents_turns_are_read_whole_when_they_name_only_tools_the_reader_may_use(
    alice_client: APIClient, alice: User
) -> None:
    """The script is withheld only when its turns name a tool the reader may not see (test_probe_2026_12_04_l)."""
    # given: a script calling and quoting only calculate, which alice may use
    script = [{"tool_calls": [{"name": "calculate", "arguments": {"a": 1, "op": "+", "b": 2}}]}, {"content": "3"}]
    agent = agent_create(name="adder", provider="scripted", tools=["calculate"], tenant="acme", script=script)

    # when: alice reads the agent
    read = alice_client.get(f"/api/v1/agents/{agent.pk}/").json()

    # then: she reads its turns as written
    assert read["model"]["script"] == script
