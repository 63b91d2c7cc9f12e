"""Agents and runs over the REST API, up to the whole governed flow with an operator's approval."""

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents_app.models import Agent, AgentRun
from agents_app.services import agent_create
from demo.models import Order
from toolhub.models import Tenant, ToolCall

pytestmark = pytest.mark.django_db

Committed = Callable[..., Any]

SCRIPT = [{"content": "Hello from the script."}]


def _create_agent(client: APIClient, **overrides: Any) -> Any:
    payload = {"name": "greeter", "model": {"provider": "scripted", "script": SCRIPT}, "tools": ["calculate"]}
    payload.update(overrides)
    return client.post("/api/v1/agents/", payload, format="json")


@pytest.fixture
def greeter(tenant: Tenant) -> Agent:
    """An agent of alice's tenant that greets."""
    return agent_create(name="greeter", tenant="acme", script=SCRIPT, tools=["calculate"])


# --- agents ------------------------------------------------------------------------------------------


def test_create_and_list_agents(developer_client: APIClient, alice_client: APIClient, developer: User) -> None:
    # when a developer creates an agent
    created = _create_agent(developer_client, system_prompt="Be brief.", max_tool_calls=3)

    # then it belongs to their tenant and names its provider, nothing more
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["name"], body["tenant"]) == ("greeter", "acme")
    assert body["model"] == {"provider": "scripted", "kind": "scripted", "script": SCRIPT}
    assert (body["tools"], body["max_tool_calls"], body["system_prompt"]) == (["calculate"], 3, "Be brief.")
    assert Agent.objects.get(name="greeter").created_by == developer
    # and the tenant's users list it (a page of results)
    listed = alice_client.get("/api/v1/agents/")
    assert listed.status_code == 200
    assert [agent["name"] for agent in listed.json()["results"]] == ["greeter"]


def test_an_agent_with_an_unknown_tool_is_refused(developer_client: APIClient) -> None:
    response = _create_agent(developer_client, tools=["calculate", "launch_rockets"])

    assert response.status_code == 400
    # named to a developer (the catalogue's roles) with the tools they may choose from
    detail = response.json()["detail"]
    assert detail.startswith("Unknown tool 'launch_rockets'.") and "calculate" in detail
    assert not Agent.objects.filter(name="greeter").exists()
    assert not Agent.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": "not a slug"}, "name"),
        ({"model": {"provider": "not a slug"}}, "model"),
        ({"model": {"provider": "scripted", "api_key_env": "sk-live-123"}}, "model"),
        ({"max_tool_calls": 0}, "max_tool_calls"),
        ({"tools": "calculate"}, "tools"),
    ],
)
def test_malformed_agent_input_is_refused(developer_client: APIClient, overrides: dict[str, Any], field: str) -> None:
    response = _create_agent(developer_client, **overrides)

    assert response.status_code == 400
    assert field in response.json()
    assert not Agent.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        (
            {"model": {"provider": "scripted", "script": [{"content": "a\u0000b"}]}},
            "model.script[0].content contains a NUL",
        ),
        ({"model": {"provider": "scripted", "script": [{"content": "\ud800"}]}}, "contains an invalid character"),
        ({"system_prompt": "\ud800"}, "system_prompt contains an invalid character"),
    ],
    ids=["nul-in-script", "surrogate-in-script", "surrogate-in-prompt"],
)
def test_agent_text_the_database_cannot_store_is_refused(
    developer_client: APIClient, overrides: dict[str, Any], problem: str
) -> None:
    payload = {"name": "greeter", "model": {"provider": "scripted", "script": SCRIPT}, **overrides}

    # sent as ASCII JSON text, the way a client escapes what it cannot encode
    response = developer_client.post("/api/v1/agents/", json.dumps(payload), content_type="application/json")

    assert response.status_code == 400
    assert problem in str(response.json())
    assert not Agent.objects.exists()


def test_an_unknown_provider_is_refused(developer_client: APIClient) -> None:
    response = _create_agent(developer_client, model={"provider": "gpt-of-my-own"})

    assert response.status_code == 400
    assert response.json()["detail"] == (
        "Unknown model provider 'gpt-of-my-own'; providers this agent may use: scripted. "
        "Administrators configure model providers."
    )
    assert not Agent.objects.exists()


def test_agent_names_are_unique_within_a_tenant(developer_client: APIClient) -> None:
    assert _create_agent(developer_client).status_code == 201

    again = _create_agent(developer_client)

    assert again.status_code == 400
    assert again.json() == {"detail": "An agent named 'greeter' exists already in this tenant; choose another name."}


def test_agents_need_authentication(api_client: APIClient, db: None) -> None:
    assert api_client.get("/api/v1/agents/").status_code in (401, 403)
    assert _create_agent(api_client).status_code in (401, 403)
    assert not Agent.objects.exists()


# --- runs --------------------------------------------------------------------------------------------


def test_start_a_run_and_read_it(alice_client: APIClient, committed: Committed, greeter: Agent) -> None:

    started = committed(alice_client.post, "/api/v1/runs/", {"agent": "greeter", "input": "hi"}, format="json")

    assert started.status_code == 201, started.content
    run_id = started.json()["id"]
    body = alice_client.get(f"/api/v1/runs/{run_id}/").json()
    assert body["status"] == "completed"
    assert body["stop_reason"] == "answered"
    assert body["output"] == "Hello from the script."
    assert body["agent"] == "greeter"
    assert body["tenant"] == "acme"
    assert body["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello from the script."},
    ]
    assert body["tool_calls"] == [] and body["pending_approvals"] == []
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"] > 0


def test_an_agent_can_be_named_by_id(alice_client: APIClient, committed: Committed, greeter: Agent) -> None:
    started = committed(alice_client.post, "/api/v1/runs/", {"agent_id": greeter.pk, "input": "hi"}, format="json")

    assert started.status_code == 201, started.content
    assert started.json()["agent"] == "greeter"


def test_an_unknown_agent_is_refused(alice_client: APIClient) -> None:
    response = alice_client.post("/api/v1/runs/", {"agent": "ghost", "input": "hi"}, format="json")

    assert response.status_code == 400
    assert response.json() == {"detail": "Unknown agent 'ghost' among your tenant's agents and the global ones."}
    assert not AgentRun.objects.exists()


@pytest.mark.parametrize("key", ["user", "user_id", "run_id", "call_id", "agent", "idempotency_key"])
def test_reserved_context_keys_are_refused(alice_client: APIClient, key: str, greeter: Agent) -> None:

    response = alice_client.post(
        "/api/v1/runs/", {"agent": "greeter", "input": "hi", "context": {key: "someone-else"}}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["detail"] == f"Context keys {key} are set by toolhub, not by the request."
    assert not AgentRun.objects.exists()


def test_a_tenant_the_user_is_not_a_member_of_is_refused(
    alice_client: APIClient, other_tenant: Any, greeter: Agent
) -> None:

    response = alice_client.post(
        "/api/v1/runs/", {"agent": "greeter", "input": "hi", "context": {"tenant": "globex"}}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["detail"] == "You are not a member of tenant 'globex'."
    assert not AgentRun.objects.exists()


def test_own_tenant_and_custom_context_are_accepted(
    alice_client: APIClient, committed: Committed, greeter: Agent
) -> None:

    started = committed(
        alice_client.post,
        "/api/v1/runs/",
        {"agent": "greeter", "input": "hi", "context": {"tenant": "acme", "locale": "fr"}},
        format="json",
    )

    assert started.status_code == 201, started.content
    assert (started.json()["tenant"], started.json()["context"]) == ("acme", {"locale": "fr"})


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"input": "hi", "context": {"locale": "a\u0000"}}, "context.locale contains a NUL character"),
        ({"input": "hi", "context": {"nested": [{"x": "\ud800"}]}}, "context.nested[0].x contains an invalid"),
        ({"input": "\udfff"}, "input contains an invalid character"),
    ],
    ids=["nul-in-context", "surrogate-in-context", "surrogate-in-input"],
)
def test_run_text_the_database_cannot_store_is_refused(
    alice_client: APIClient, payload: dict[str, Any], problem: str, greeter: Agent
) -> None:

    response = alice_client.post(
        "/api/v1/runs/", json.dumps({"agent": "greeter", **payload}), content_type="application/json"
    )

    assert response.status_code == 400
    assert problem in str(response.json())
    assert not AgentRun.objects.exists()


def test_malformed_run_input_is_refused(alice_client: APIClient, greeter: Agent) -> None:

    missing = alice_client.post("/api/v1/runs/", {"agent": "greeter"}, format="json")
    bad_context = alice_client.post("/api/v1/runs/", {"agent": "greeter", "input": "x", "context": [1]}, format="json")

    assert missing.status_code == 400 and "input" in missing.json()
    assert bad_context.status_code == 400 and "context" in bad_context.json()


def test_runs_need_authentication(api_client: APIClient, db: None) -> None:
    response = api_client.post("/api/v1/runs/", {"agent": "greeter", "input": "hi"}, format="json")

    assert response.status_code in (401, 403)


def test_users_see_only_their_own_runs(
    alice_client: APIClient, bob_client: APIClient, operator_client: APIClient, committed: Committed, greeter: Agent
) -> None:
    run_id = committed(alice_client.post, "/api/v1/runs/", {"agent": "greeter", "input": "hi"}, format="json").json()[
        "id"
    ]

    assert bob_client.get(f"/api/v1/runs/{run_id}/").status_code == 404
    assert bob_client.post(f"/api/v1/runs/{run_id}/retry/").status_code == 404
    assert operator_client.get(f"/api/v1/runs/{run_id}/").status_code == 200


# --- the whole flow ----------------------------------------------------------------------------------


def test_order_flow_waits_for_approval_then_completes(
    alice_client: APIClient, operator_client: APIClient, order_agent: Agent, committed: Committed
) -> None:
    # given alice starts a run whose model orders a 5000 laptop
    started = committed(
        alice_client.post, "/api/v1/runs/", {"agent": "order-demo", "input": "Order a laptop"}, format="json"
    )
    assert started.status_code == 201, started.content
    run_id = started.json()["id"]

    # then the run waits on one pending approval, and nothing was ordered
    waiting = alice_client.get(f"/api/v1/runs/{run_id}/").json()
    assert waiting["status"] == "waiting"
    [pending_id] = waiting["pending_approvals"]
    [call] = waiting["tool_calls"]
    assert (call["tool"], call["status"], call["arguments"]) == (
        "create_order",
        "pending_approval",
        {"product": "Laptop", "amount": "5000"},
    )
    assert Order.objects.count() == 0
    queue = operator_client.get("/api/v1/approvals/?status=pending").json()["results"]
    assert [(item["id"], item["run"], item["requested_by"]) for item in queue] == [(pending_id, run_id, "alice")]

    # when the operator approves it
    approved = committed(
        operator_client.post, f"/api/v1/approvals/{pending_id}/approve/", {"comment": "ok"}, format="json"
    )

    # then the order was placed once and the run completed
    assert approved.status_code == 200, approved.content
    assert approved.json()["status"] == "approved"
    done = alice_client.get(f"/api/v1/runs/{run_id}/").json()
    assert done["status"] == "completed"
    assert done["pending_approvals"] == []
    assert done["tool_calls"][0]["status"] == "succeeded"
    assert done["output"].startswith("Order placed: ")
    order = Order.objects.get()
    assert (order.product, order.amount, order.tenant, order.created_by) == ("Laptop", 5000, "acme", "alice")
    assert ToolCall.objects.get().attempts == 1
