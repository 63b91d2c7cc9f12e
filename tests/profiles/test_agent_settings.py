"""Tool choice, temperature and max tokens per agent (API and admin); schema profile and note placement (admin)."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from agents_app.admin import AgentForm
from agents_app.models import Agent, ModelProvider
from tests.agents.conftest import client_for, make_developer
from toolhub.models import Tenant

pytestmark = pytest.mark.django_db


def _payload(**overrides: Any) -> dict[str, Any]:
    return {"name": "picky", "model": {"provider": "scripted", "script": []}, "tools": ["calculate"], **overrides}


def test_developers_set_tool_choice_temperature_and_max_tokens_over_the_api(tenant: Tenant) -> None:
    client = client_for(make_developer("dev", tenant))

    created = client.post(
        "/api/v1/agents/", _payload(tool_choice="calculate", temperature=0.3, max_tokens=500), format="json"
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["tool_choice"], body["temperature"], body["max_tokens"]) == ("calculate", 0.3, 500)

    changed = client.patch(f"/api/v1/agents/{body['id']}/", {"tool_choice": "auto", "temperature": None}, format="json")
    assert changed.status_code == 200, changed.content
    agent = Agent.objects.get(pk=body["id"])
    assert (agent.tool_choice, agent.temperature, agent.max_tokens) == ("auto", None, 500)


@pytest.mark.parametrize(
    ("settings_", "field", "message"),
    [
        ({"tool_choice": "send_email"}, "detail", "tool_choice must be empty, auto, required, none, or the name"),
        ({"temperature": 2.5}, "temperature", "less than or equal to 2"),
        ({"max_tokens": 0}, "max_tokens", "greater than or equal to 1"),
    ],
)
def test_bad_settings_are_refused_and_nothing_is_created(
    tenant: Tenant, settings_: dict[str, Any], field: str, message: str
) -> None:
    client = client_for(make_developer("dev", tenant))

    response = client.post("/api/v1/agents/", _payload(**settings_), format="json")

    assert response.status_code == 400
    assert message in str(response.json()[field])
    assert not Agent.objects.filter(name="picky").exists()


def test_the_admin_form_checks_the_tool_choice_against_the_agents_tools() -> None:
    provider = ModelProvider.objects.get(name="scripted")
    data = {"name": "a", "provider": provider.pk, "script": "[]", "tools": '["calculate"]', "max_tool_calls": 10}

    wrong = AgentForm(data={**data, "tool_choice": "get_order"})
    right = AgentForm(data={**data, "tool_choice": "calculate", "temperature": "0.5", "max_tokens": "100"})

    assert not wrong.is_valid()
    assert "the name of one of the agent's tools" in wrong.errors["tool_choice"][0]
    assert right.is_valid(), right.errors


def test_administrators_pick_a_providers_schema_profile_and_note_placement(db: None) -> None:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    provider = ModelProvider.objects.create(name="local", kind="openai", model_name="llama3.1")

    page = client.get(f"/admin/agents_app/modelprovider/{provider.pk}/change/")

    assert page.status_code == 200
    assert b'name="schema_profile"' in page.content and b'name="note_placement"' in page.content
    assert provider.effective_schema_profile == "openai" and provider.note_placement == "tool_result"
