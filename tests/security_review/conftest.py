"""The people and data of the security review: the tenancy suite's two tenants, reused as they are.

acme holds alice's rows (a run that moved money, one waiting for approval, one waiting for an
external result, an artifact); globex holds staff who must not reach them. See tests/tenancy/conftest.py.
"""

from typing import Any

from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.audit.conftest import audit_key  # noqa: F401 - a fixture, registered by being imported here
from tests.profiles.conftest import fake_model  # noqa: F401 - the fake OpenAI-compatible endpoint, a fixture
from tests.security_review.direct_sagas import saga_tools  # noqa: F401 - the sample saga tools, a fixture
from tests.security_review.while_running import report_tool  # noqa: F401 - tools during which the world changes
from tests.subagents.conftest import make_agent, start  # noqa: F401 - scripted agents and runs, fixtures
from tests.tenancy.conftest import (  # noqa: F401 - fixtures, registered by being imported here
    _tenancy_tools,
    acme,
    acme_operator,
    carol,
    globex_auditor,
    globex_developer,
    globex_operator,
    globex_people,
    globex_user,
    platform_user,
    roles,
    superuser,
)
from toolhub.models import CallStatus, ToolCall

__all__ = ["client_for", "provider_form", "server_form"]


def client_for(user: User) -> APIClient:
    """An API client logged in as ``user``."""
    client = APIClient()
    client.force_authenticate(user)
    return client


def rolled_back_step(user: User, saga_id: str, tool_name: str, arguments: dict[str, Any], committed: Any) -> ToolCall:
    """``user``'s direct saga ``saga_id``: one step of ``tool_name`` that succeeded, then rolled back by ``user``."""
    client = client_for(user)
    with committed(execute=True):
        assert client.post("/api/v1/sagas/", {"saga_id": saga_id}, format="json").status_code == 201
        step = client.post(
            "/api/v1/calls/", {"tool": tool_name, "arguments": arguments, "saga_id": saga_id}, format="json"
        )
    assert ToolCall.objects.get(pk=step.json()["id"]).status == CallStatus.SUCCEEDED, step.content
    with committed(execute=True):
        rolled = client.post(f"/api/v1/sagas/{saga_id}/rollback/", format="json")
    assert rolled.status_code == 202, rolled.content
    return ToolCall.objects.get(pk=step.json()["id"])


def provider_form(**fields: Any) -> dict[str, Any]:
    """The model provider admin page's form as posted: acme's provider (bound to no tenant), ``fields`` over it."""
    form = {
        "name": "acme-llm",
        "kind": "openai",
        "tenant": "",
        "enabled": "on",
        "base_url": "https://llm.acme.example/v1",
        "model_name": "small",
        "credential_env": "ACME_LLM_KEY",
        "request_timeout_seconds": "30",
        "deadline_seconds": "120",
        "schema_profile": "",
        "note_placement": "tool_result",
    }
    return {**form, **fields}


def server_form(**fields: Any) -> dict[str, Any]:
    """The remote MCP server admin page's form as posted: a ``crm`` server, ``fields`` over it."""
    form = {
        "name": "crm",
        "description": "",
        "url": "https://crm.example.com/mcp",
        "transport": "streamable_http",
        "enabled": "on",
        "credential_required": "on",
        "select_names": "[]",
        "select_regex": "",
        "select_predicate": "",
        "meta_mode": "none",
        "meta_keys": "[]",
        "risk": "high",
        "timeout_seconds": "30",
        "unfold_notes": "",
    }
    return {**form, **fields}
