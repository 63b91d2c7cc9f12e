r"""Review of 2026-12-05 (ce): gaps earlier reviews reported and left open (bu: providers and agents; bx: names).

Each test fails on the reviewed code (main at 5ecade2) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. Model providers (base URL, model, key variable name, deadlines: where every conversation of their agents goes)
   and agents (tools, ``max_tool_calls``, ``compensate_on_error``, provider: what runs may do) changed in the admin,
   or agents created and changed through the REST API, left no governance event. Now both admins are
   ``GovernanceAudited`` and ``agent_create`` / ``agent_update`` append the same event through the shared
   ``toolhub.governance_trail.governance_append`` (the agent's tenant's chains, the platform's for a global agent;
   a provider bound to a tenant, that tenant's). The provider's key is never stored, only its variable's name; an
   agent's ``script`` (a scripted model's turns, whose tool arguments may be sensitive) is recorded as
   ``{"changed": true}`` only (``AGENT_AUDIT_EXCLUDED``, the admin and the API alike).
2. A model's call of an unknown tool named with an invisible or bidi character (``add\u200b``, ``add\u202e``) was
   refused and stored as such, but the call list, its change page and the audit console drew it exactly as ``add``.
   Now every stored value the admin draws (``display_for_field`` / ``display_for_value``, wrapped once by
   ``toolhub.admin_visible``), ``admin_table`` cells (the ``visible`` filter) and the text of calls, events, approval
   requests and compensations go through one helper, ``toolhub.visible.visible_text`` (moved from the remote MCP
   definitions), which writes such characters out as ``\u200b``; stored values and hashes are unchanged.

Checked and found holding (no test here): ``ModelProvider`` stores no key (``credential_env`` is validated as a
variable name); the agent API has no DELETE (agents are deleted in the admin only, which now records it); agent names,
tenant slugs and tool group names are ``SlugField`` (ASCII, review bx); idempotency keys and actors are columns, drawn
through the helper in lists and read-only fields.
Not fixed: a username can hold a Hangul filler (``\w`` matches U+3164), and Django draws a related row (a call's
user, a list's foreign key cell, a link on a change page) from its ``__str__`` outside ``display_for_field``; Django's
``User.__str__`` is not ours to change, so such a username is still drawn as stored there. Form inputs keep what
is stored on purpose (escaping them would change the value on save).
"""

import json
import os
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from tests.helpers import assert_audit_intact, console
from tests.security_review.conftest import client_for, provider_form
from tests.tenancy.conftest import make_user
from toolhub.models import AuditEvent, Tenant

pytestmark = pytest.mark.django_db


def _governance(kind: str, tenant: str, model: str) -> list[AuditEvent]:
    events = AuditEvent.objects.filter(event_type=kind, tenant=tenant).order_by("id")
    return [event for event in events if event.payload.get("model") == model]


def _agent_form(provider: int, **fields: Any) -> dict[str, Any]:
    form = {
        "name": "helper",
        "description": "",
        "provider": provider,
        "script": "[]",
        "system_prompt": "",
        "tools": "[]",
        "max_tool_calls": "10",
        "parallel_tool_calls": "on",
        "tool_choice": "",
        "temperature": "",
        "max_tokens": "",
        "tool_provider": "",
    }
    return {**form, **fields}


def test_a_model_provider_added_and_repointed_in_the_admin_is_in_its_tenants_trail(
    superuser: User, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: a provider bound to acme added in the admin, then pointed at another base URL and model (every
    conversation of acme's agents on it then goes there), left no audit event. Expect: ``governance.added`` and
    ``governance.changed`` (base URL and model before and after) in acme's chains, never the key itself."""
    from agents_app.models import ModelProvider

    monkeypatch.setenv("ACME_LLM_KEY", "sk-acme-very-secret-key")
    browser = console(superuser)
    added = browser.post("/admin/agents_app/modelprovider/add/", provider_form(tenant=tenant.pk))
    assert added.status_code == 302, added.content[:2000]
    provider = ModelProvider.objects.get(name="acme-llm")
    changed = browser.post(
        f"/admin/agents_app/modelprovider/{provider.pk}/change/",
        provider_form(tenant=tenant.pk, base_url="https://elsewhere.example/v1", model_name="big"),
    )
    assert changed.status_code == 302, changed.content[:2000]

    (addition,) = _governance("governance.added", "acme", "agents_app.modelprovider")
    assert addition.actor == f"user:{superuser.username}"
    assert addition.payload["values"]["credential_env"] == "ACME_LLM_KEY"
    (change,) = _governance("governance.changed", "acme", "agents_app.modelprovider")
    assert change.payload["changes"] == {
        "base_url": {"before": "https://llm.acme.example/v1", "after": "https://elsewhere.example/v1"},
        "model_name": {"before": "small", "after": "big"},
    }
    secret = os.environ["ACME_LLM_KEY"]
    for event in AuditEvent.objects.all():
        assert secret not in json.dumps(event.payload)
    assert assert_audit_intact() >= 2


def test_an_agents_tools_and_limits_changed_in_the_admin_are_in_its_tenants_trail(
    tenant: Tenant, roles: dict[str, Group]
) -> None:
    """Found: acme's developer added an agent in the admin, then gave it ``debit``, 50 tool calls and automatic
    compensation; acme's trail held nothing of it. Expect: ``governance.added`` and ``governance.changed`` (the
    fields before and after) in acme's chains, naming the developer; a global agent's, in the platform's."""
    from agents_app.models import Agent, ModelProvider

    developer = make_user("acme-dev", tenant=tenant, staff=True, groups=(roles["developers"],))
    scripted = ModelProvider.objects.get(name="scripted").pk
    browser = console(developer)
    added = browser.post("/admin/agents_app/agent/add/", _agent_form(scripted, tenant=tenant.pk))
    assert added.status_code == 302, added.content[:3000]
    agent = Agent.objects.get(name="helper", tenant=tenant)
    changed = browser.post(
        f"/admin/agents_app/agent/{agent.pk}/change/",
        _agent_form(scripted, tenant=tenant.pk, tools='["debit"]', max_tool_calls="50", compensate_on_error="on"),
    )
    assert changed.status_code == 302, changed.content[:3000]

    (addition,) = _governance("governance.added", "acme", "agents_app.agent")
    assert addition.actor == "user:acme-dev" and addition.payload["values"]["tools"] == []
    (change,) = _governance("governance.changed", "acme", "agents_app.agent")
    assert change.payload["changes"] == {
        "tools": {"before": [], "after": ["debit"]},
        "max_tool_calls": {"before": 10, "after": 50},
        "compensate_on_error": {"before": False, "after": True},
    }
    assert not _governance("governance.added", "", "agents_app.agent")


def test_an_agent_created_and_changed_through_the_api_is_in_the_trail_as_from_the_admin(
    tenant: Tenant, roles: dict[str, Group], superuser: User
) -> None:
    """Found: ``POST /api/v1/agents/`` and ``PATCH /api/v1/agents/{id}/`` (``agent_create`` / ``agent_update``)
    left no audit event: an agent given ``debit`` through the API was invisible to acme's auditors. Expect: the same
    ``governance.added`` / ``governance.changed`` an admin change writes (same values, same shape), in acme's chains;
    a global agent created by the platform, in the platform's chains."""
    from agents_app.models import Agent
    from agents_app.services import AGENT_AUDIT_EXCLUDED
    from toolhub.governance_trail import governance_values

    developer = make_user("acme-dev", tenant=tenant, staff=True, groups=(roles["developers"],))
    api = client_for(developer)
    created = api.post(
        "/api/v1/agents/",
        {"name": "api-helper", "tenant": "acme", "model": {"provider": "scripted", "script": []}},
        format="json",
    )
    assert created.status_code == 201, created.content
    agent_id = created.json()["id"]
    script = [{"tool_calls": [{"name": "debit", "arguments": {"card": "sk-card-never-in-the-trail"}}]}]
    patched = api.patch(
        f"/api/v1/agents/{agent_id}/",
        {"tools": ["debit"], "max_tool_calls": 40, "model": {"provider": "scripted", "script": script}},
        format="json",
    )
    assert patched.status_code == 200, patched.content

    (addition,) = _governance("governance.added", "acme", "agents_app.agent")
    assert addition.actor == "user:acme-dev" and addition.payload["id"] == agent_id
    agent = Agent.objects.get(pk=agent_id)
    assert set(addition.payload["values"]) == set(governance_values(agent, AGENT_AUDIT_EXCLUDED))
    assert "script" not in addition.payload["values"]  # a scripted model's turns carry tool arguments
    (change,) = _governance("governance.changed", "acme", "agents_app.agent")
    assert change.actor == "user:acme-dev"
    assert change.payload["changes"]["tools"] == {"before": [], "after": ["debit"]}
    assert change.payload["changes"]["max_tool_calls"]["after"] == 40
    assert change.payload["changes"]["script"] == {"changed": True}
    assert not any("sk-card-never-in-the-trail" in json.dumps(e.payload) for e in AuditEvent.objects.all())

    shared = client_for(superuser).post(
        "/api/v1/agents/", {"name": "shared", "tenant": None, "model": {"provider": "scripted"}}, format="json"
    )
    assert shared.status_code == 201, shared.content
    (platform,) = _governance("governance.added", "", "agents_app.agent")
    assert platform.payload["object"] == "shared"
    assert assert_audit_intact() >= 3


@pytest.mark.parametrize("hidden", ["\u200b", "\u202e"])
def test_an_unknown_tool_named_with_an_invisible_character_is_shown_distinguishably(
    hidden: str, request_call: Any, alice: User, superuser: User
) -> None:
    """Found: a model's call of ``add\\u200b`` (or ``add`` with a bidi control) is refused as unknown and stored as an
    ``invalid`` call, but the call list, its change page and the audit console drew its name exactly as ``add``: an
    auditor filtering on ``add`` was misled. Expect: the invisible character written out (``add\\u200b``) on every
    page, through one display helper (``toolhub.visible.visible_text``); the stored name and hashes untouched."""
    from toolhub.models import CallStatus, ToolCall

    call = request_call(f"add{hidden}", {"a": 1, "b": 2}, alice, tenant="acme")
    assert call.status == CallStatus.INVALID and call.tool_name == f"add{hidden}"
    escaped = f"add\\u{ord(hidden):04x}"
    browser = console(superuser)
    for page in (
        "/admin/toolhub/toolcall/",
        f"/admin/toolhub/toolcall/{call.pk}/change/",
        "/admin/toolhub/auditevent/",
    ):
        html = browser.get(page).content.decode()
        assert escaped in html, page
        assert hidden not in html, page
    assert ToolCall.objects.get(pk=call.pk).tool_name == f"add{hidden}"
    assert assert_audit_intact() >= 1
