"""Interceptors seen through the API: a run's model reads the refusal and the redacted result."""

from typing import Any

import pytest
from rest_framework.test import APIClient

from agents_app.services import agent_create
from tests.interceptors.conftest import Configure
from tests.testapp.models import SideEffect

pytestmark = pytest.mark.django_db

SCRIPT = [
    {
        "content": "",
        "tool_calls": [
            {"name": "send_email", "arguments": {"to": "ceo@rival-corp.com", "body": "hi"}},
            {"name": "lookup_customer", "arguments": {"name": "Ada"}},
        ],
    },
    {"content": "Done."},
]


def test_a_run_reads_the_refusal_and_the_redacted_result(
    interceptors: Configure, alice_client: APIClient, committed: Any
) -> None:
    interceptors(
        "toolhub.interceptors.PIIRedaction",
        {
            "class": "toolhub.interceptors.ArgumentPolicy",
            "options": {"rules": [{"tool": "send_*", "path": "$.to", "allow": [r"re:[^@]+@example\.com"]}]},
        },
    )
    agent_create(name="mailer", tenant="acme", tools=["send_email", "lookup_customer"], script=SCRIPT)

    started = committed(alice_client.post, "/api/v1/runs/", {"agent": "mailer", "input": "go"}, format="json")

    assert started.status_code == 201, started.content
    body = alice_client.get(f"/api/v1/runs/{started.json()['id']}/").json()
    assert body["status"] == "completed", body
    calls = {call["tool"]: call for call in body["tool_calls"]}
    assert calls["send_email"]["status"] == "denied"
    assert list(SideEffect.objects.values_list("tool", flat=True)) == ["lookup_customer"]
    tool_messages = [message["content"] for message in body["messages"] if message["role"] == "tool"]
    assert any("not allowed" in text and "$.to" in text for text in tool_messages), tool_messages
    shown = str(body)
    assert "[email redacted]" in shown and "[card redacted]" in shown
    assert "ada.lovelace@example.org" not in shown and "4111 1111 1111 1111" not in shown
    detail = alice_client.get(f"/api/v1/calls/{calls['lookup_customer']['id']}/").json()
    assert "ada.lovelace" not in str(detail) and "[phone redacted]" in str(detail)
