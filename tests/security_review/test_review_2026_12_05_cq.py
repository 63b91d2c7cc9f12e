"""Review of 2026-12-05 (cq): keys carried in configured URLs, as the governance trail records them.

Each test fails on the reviewed code (main at 6b7a75b) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A remote MCP server's URL or a model provider's base URL holding a key (hosted endpoints put one in the user
   info, a query value or a path segment: ``toolhub.url_secrets``) was written whole into ``governance.added`` /
   ``changed`` events, so the key reached the tamper-evident trail (which nobody can edit afterwards), the audit
   console and a tenant's export, read by auditors who may not read the platform's configuration. Now
   ``governance_values`` records every URL column with its secret parts written as ``[redacted]`` (one rule,
   ``url_redacted``, beside ``url_secret_parts`` which outbound clients' errors are scrubbed with), and a change to
   those parts alone is recorded as ``{"changed": true}``, as a changed password is.

Checked and found holding (no test here): a URL with no secret part (``https://llm.acme.example/v1``) is recorded
as it is (review ce's test); ``credential_env`` holds a variable's name, never a key.
"""

import json

import pytest
from django.contrib.auth.models import User

from tests.helpers import assert_audit_intact, console
from tests.security_review.conftest import provider_form, server_form
from toolhub.models import AuditEvent, Tenant
from toolhub.url_secrets import url_redacted

pytestmark = pytest.mark.django_db

KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"


def _events(kind: str, model: str) -> list[AuditEvent]:
    events = AuditEvent.objects.filter(event_type=kind).order_by("id")
    return [event for event in events if event.payload.get("model") == model]


def _no_key_anywhere() -> None:
    for event in AuditEvent.objects.all():
        assert KEY not in json.dumps(event.payload), event.payload
    assert assert_audit_intact() >= 1


def test_a_remote_servers_key_in_its_url_never_reaches_the_trail(superuser: User) -> None:
    """Found: a remote MCP server added with its key in the URL's path, then given another key, wrote both keys
    into the platform's ``governance.added`` / ``changed`` events. Expect: the URL recorded as
    ``https://mcp.crm.example/servers/[redacted]/mcp``, the key's change recorded as ``{"changed": true}``, and
    neither key in any event."""
    from toolhub.mcp_client.models import RemoteMcpServer

    browser = console(superuser)
    added = browser.post(
        "/admin/toolhub/remotemcpserver/add/", server_form(url=f"https://mcp.crm.example/servers/{KEY}/mcp")
    )
    assert added.status_code == 302, added.content[:3000]
    server = RemoteMcpServer.objects.get(name="crm")
    other = "sk_live_9ZZ39HqLyjWDarjtT1zdp000"
    changed = browser.post(
        f"/admin/toolhub/remotemcpserver/{server.pk}/change/",
        server_form(url=f"https://mcp.crm.example/servers/{other}/mcp"),
    )
    assert changed.status_code == 302, changed.content[:3000]
    server.refresh_from_db()
    assert server.url.endswith(f"/{other}/mcp")  # stored as given: the client needs it

    (addition,) = _events("governance.added", "toolhub.remotemcpserver")
    assert addition.payload["values"]["url"] == "https://mcp.crm.example/servers/[redacted]/mcp"
    (change,) = _events("governance.changed", "toolhub.remotemcpserver")
    assert change.payload["changes"] == {"url": {"changed": True}}
    assert other not in json.dumps(change.payload)
    _no_key_anywhere()


def test_a_providers_key_in_its_base_url_never_reaches_its_tenants_trail(
    superuser: User, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: a provider bound to acme with a key as a segment of its base URL's path (a gateway's per-customer
    URL; user info and query strings are refused by the form since review o) wrote the key into acme's trail, which
    acme's auditors read and export. Expect: the host and the path's words readable, the key ``[redacted]``;
    repointing the host is recorded before and after, both redacted."""
    from agents_app.models import ModelProvider

    monkeypatch.setenv("ACME_LLM_KEY", "sk-acme")
    browser = console(superuser)
    added = browser.post(
        "/admin/agents_app/modelprovider/add/",
        provider_form(tenant=tenant.pk, base_url=f"https://llm.acme.example/gateway/{KEY}/v1"),
    )
    assert added.status_code == 302, added.content[:3000]
    provider = ModelProvider.objects.get(name="acme-llm")
    moved = f"https://eu.llm.acme.example/gateway/{KEY}/v1"
    changed = browser.post(
        f"/admin/agents_app/modelprovider/{provider.pk}/change/", provider_form(tenant=tenant.pk, base_url=moved)
    )
    assert changed.status_code == 302, changed.content[:3000]

    (addition,) = _events("governance.added", "agents_app.modelprovider")
    assert addition.tenant == "acme"
    assert addition.payload["values"]["base_url"] == "https://llm.acme.example/gateway/[redacted]/v1"
    (change,) = _events("governance.changed", "agents_app.modelprovider")
    assert change.payload["changes"] == {
        "base_url": {
            "before": "https://llm.acme.example/gateway/[redacted]/v1",
            "after": "https://eu.llm.acme.example/gateway/[redacted]/v1",
        }
    }
    _no_key_anywhere()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:pa55word@mcp.example/mcp", "https://[redacted]@mcp.example/mcp"),
        ("https://mcp.example/mcp?token=abc&format=json", "https://mcp.example/mcp?token=[redacted]&format=json"),
        ("https://llm.example/v1?api-version=2024-06-01", "https://llm.example/v1?api-version=2024-06-01"),
        ("https://mcp.example/mcp#access_token=abc", "https://mcp.example/mcp#[redacted]"),
        ("https://mcp.example/v1/customer-lookup", "https://mcp.example/v1/customer-lookup"),
        ("", ""),
    ],
)
def test_url_redacted_keeps_where_a_url_goes_and_hides_its_keys(url: str, shown: str) -> None:
    """Expect: user info, credential-like query values, key-like path segments and fragments hidden; host, words of
    the path and settings kept."""
    assert url_redacted(url) == shown
