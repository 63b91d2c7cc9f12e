"""Sensitive arguments reach the tool, but never the stored conversation, the API or the audit trail."""

import json

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents_app.models import Agent
from agents_app.services import run_start
from toolhub.models import AuditEvent, ToolCall
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "correct-horse-battery-staple"
received: list[str] = []


def login(username: str, password: str) -> str:
    """Log a user in to the legacy system."""
    received.append(password)
    return f"logged in as {username}"


def test_the_model_sent_password_is_used_but_not_kept(alice: User, alice_client: APIClient) -> None:
    # given a tool with a sensitive parameter, and a model that fills it in
    tool = Tool.from_function(login, sensitive=("password",))
    script = [
        {"content": "", "tool_calls": [{"name": "login", "arguments": {"username": "ada", "password": SECRET}}]},
        {"content": "done: {last_tool_result}"},
    ]
    with registry.temporarily(tool):
        agent = Agent.objects.create(name="login-bot", script=script, tools=["login"])
        run = run_start(agent=agent, user=alice, input="log in")
        run.refresh_from_db()

        # then the tool got the real value and the run completed
        assert received[-1] == SECRET
        assert run.status == "completed" and run.output == "done: logged in as ada"

        # and the secret is nowhere people or the model will read it again
        assert SECRET not in json.dumps(run.messages)
        stored_call = next(m for m in run.messages if m.get("tool_calls"))["tool_calls"][0]
        assert json.loads(stored_call["function"]["arguments"]) == {"username": "ada", "password": "***redacted***"}
        api = alice_client.get(f"/api/v1/runs/{run.id}/")
        assert api.status_code == 200 and SECRET not in api.content.decode()
        call = ToolCall.objects.get(run_id=run.id)
        assert SECRET not in alice_client.get(f"/api/v1/calls/{call.id}/").content.decode()
        assert not any(SECRET in event.data for event in AuditEvent.objects.filter(run_id=run.id))


def test_a_password_sent_under_a_misspelt_name_is_kept_nowhere(alice: User, alice_client: APIClient) -> None:
    # given a model that gets the sensitive parameter's case wrong
    tool = Tool.from_function(login, sensitive=("password",))
    arguments = {"username": "ada", "Password": SECRET}
    script = [{"content": "", "tool_calls": [{"name": "login", "arguments": arguments}]}, {"content": "gave up"}]
    received.clear()
    with registry.temporarily(tool):
        agent = Agent.objects.create(name="login-typo-bot", script=script, tools=["login"])
        run = run_start(agent=agent, user=alice, input="log in")
        run.refresh_from_db()

        # then the call is refused and nothing ran
        call = ToolCall.objects.get(run_id=run.id)
        assert call.status == "invalid" and received == []

        # and the password is in neither the run's messages, the API, the raw arguments nor the audit trail
        stored_call = next(m for m in run.messages if m.get("tool_calls"))["tool_calls"][0]
        assert json.loads(stored_call["function"]["arguments"]) == {"username": "ada", "Password": "***redacted***"}
        assert SECRET not in json.dumps(run.messages) + call.raw_arguments + call.error
        assert SECRET not in alice_client.get(f"/api/v1/runs/{run.id}/").content.decode()
        assert SECRET not in alice_client.get(f"/api/v1/calls/{call.id}/").content.decode()
        assert not any(SECRET in event.data for event in AuditEvent.objects.filter(run_id=run.id))
