"""Review 2026-12-06 (f): an adversarial regression review of credential references and URL secrets.

Findings (each fails on c76a846, passes after the fix):

1. ``toolhub.credential_env.credential_env_problem`` refused the platform's prefixes and the secrets its settings
   name, but not the variables its own registered tools' ``Secret`` presets read (``Secret("CRM_API_KEY")``): a
   model provider or remote MCP credential naming one sent the platform's key to that tool's service to whatever
   endpoint the row names. Those names are the platform's secrets too; refused where typed and where read.
2. ``toolhub.url_secrets``: a key-like path segment was matched percent-decoded against an alphabet without ``/``,
   so a base64 key in a path (``/hooks/wJalrXUtnFEMI%2FK7MDENG%2FbPxRfiCY1EXAMPLEKEY``) was no secret part: written
   whole in the governance trail (``url_redacted`` of a URL column) and left in a webhook's or MCP server's error.
3. ``credential_env`` could name the cloud identity the host's runtime gives the workers (``AWS_SECRET_ACCESS_KEY``,
   ``AWS_SESSION_TOKEN``, ECS's ``AWS_CONTAINER_AUTHORIZATION_TOKEN``, ``AZURE_CLIENT_SECRET``): the platform's
   credentials to its cloud, sent as a bearer key to the row's endpoint. Now among ``PLATFORM_ENV_NAMES`` (any
   case); a vendor's own key variable (``AWS_BEARER_TOKEN_BEDROCK``, ``AZURE_OPENAI_API_KEY``) is still accepted.

Checked and holds:
- env names: lowercase and mixed case of a platform prefix or name (``django_secret_key``, ``Http_Proxy``) are
  refused; a name with spaces or a Unicode look-alike reads a different variable (``os.environ`` is exact on Linux),
  so it cannot read the platform's; ``CREDENTIAL_ENV_PREFIXES`` is matched case-sensitively (stricter);
- ``GOOGLE_APPLICATION_CREDENTIALS`` holds a file's path, not the key (not refused); a generic ``*_PASSWORD`` is not
  refused (an endpoint's Basic credential may be named so): ``CREDENTIAL_ENV_PREFIXES`` narrows names further;
- ``PATH``, ``HOME``, ``LD_PRELOAD``, ``PYTHONPATH`` are not secrets (read, they send a path); ``CELERY_*``,
  ``REDIS_URL``, ``EMAIL_HOST_PASSWORD``, ``DATABASE_URL`` are refused by prefix;
- every read of ``os.environ`` for a credential an administrator names goes through ``credential_from_env``
  (``agents_app.models_adapters.base.adapter_for``, ``mcp_client.services.credential_headers``); the other reads are
  the platform's own settings and keys (settings, checkpoint key, webhook secret, ``toolhub_db_roles``) or a
  developer's ``Secret`` preset named in code;
- ``url_secret_parts``/``url_redacted``: a percent-encoded parameter name (``%74oken=``), matrix parameters, ``;``
  as a query separator, bare key-like parameters, a fragment, user info before an IPv6 host
  (``u:pw@[::1]:8080``, ``u:p@[fe80::1%25eth0]``), a URL that does not parse (redacted whole);
- model provider errors name the HTTP status or the error's class only, never the endpoint's text (a 401 quoting
  the key); an adapter bug is logged with its traceback, the run told its type only; answers are scrubbed of the key;
- remote MCP errors: the server's text is scrubbed of the credential (``CredentialHeaders.secrets``) and the URL's
  secret parts before it is stored (``last_error``) or raised to the model; log lines under ``_log_scope``;
- Celery: every ``delay`` passes ids (and a call's claim hint: tool name, tenant, run id, attempts), never a
  credential or a URL, and ``CELERY_TASK_IGNORE_RESULT`` is on (no result in Redis).
"""

from urllib.parse import quote

import pytest
from django.core.exceptions import ValidationError

from toolhub import Secret, registry, tool
from toolhub.credential_env import credential_env_problem, credential_env_validator, credential_from_env
from toolhub.governance_trail import governance_values
from toolhub.mcp_client.models import RemoteMcpServer
from toolhub.url_secrets import url_quotes_redacted, url_redacted, url_secret_parts

#: A base64 key (AWS's documented example form): its ``/`` is ``%2F`` in a path segment.
_B64_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY1EXAMPLEKEY"
_B64_URL = f"https://hooks.example.com/hooks/{quote(_B64_KEY, safe='')}/mcp"


@tool(presets={"api_key": Secret("CRM_API_KEY")})
def review_f_crm_lookup(customer: str, api_key: str) -> str:
    """Look a customer up in the CRM with the platform's own CRM key."""
    return customer


def test_a_registered_tools_secret_preset_variable_is_refused_as_a_credential(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: a provider's or MCP credential's ``credential_env`` could name the variable a registered tool's
    ``Secret`` preset reads, sending the platform's key to that service to any endpoint.
    Expect: refused where typed (the fields' validator) and where read (``credential_from_env`` reads nothing)."""
    monkeypatch.setenv("CRM_API_KEY", "crm-live-key-0123456789")
    monkeypatch.setenv("crm_api_key", "crm-live-key-0123456789")
    with registry.temporarily(review_f_crm_lookup):
        for name in ("CRM_API_KEY", "crm_api_key"):
            assert credential_env_problem(name)
            with pytest.raises(ValidationError):
                credential_env_validator(name)
            assert credential_from_env(name) == ""
    # Not a registered tool's any more: an ordinary credential variable again.
    assert credential_env_problem("CRM_API_KEY") is None


def test_a_base64_key_in_a_path_segment_is_a_secret_part() -> None:
    """Found: a key-like path segment holding ``%2F`` (a base64 key's ``/``) was not matched, so the key stayed in
    ``url_redacted`` (the governance trail) and out of ``url_secret_parts`` (webhook and MCP error scrubbing).
    Expect: the segment is redacted, and named as a secret part in both forms."""
    assert _B64_KEY not in url_redacted(_B64_URL)
    assert quote(_B64_KEY, safe="") not in url_redacted(_B64_URL)
    assert url_redacted(_B64_URL) == "https://hooks.example.com/hooks/[redacted]/mcp"
    parts = url_secret_parts(_B64_URL)
    assert _B64_KEY in parts and quote(_B64_KEY, safe="") in parts
    error = f"URL can't contain control characters. '/hooks/{quote(_B64_KEY, safe='')}/mcp'"
    assert "EXAMPLEKEY" not in url_quotes_redacted(error, _B64_URL)
    # Path words still read as they are (an auditor sees where calls go).
    assert url_redacted("https://h/v1/customer-lookup/mcp") == "https://h/v1/customer-lookup/mcp"


def test_a_base64_key_in_a_servers_url_stays_out_of_the_governance_values() -> None:
    """Found: an MCP server's URL with a base64 key in its path was written whole in its governance event.
    Expect: the trail's values hold the URL with that segment redacted."""
    values = governance_values(RemoteMcpServer(name="crm", url=_B64_URL))
    assert "EXAMPLEKEY" not in str(values)
    assert values["url"] == "https://hooks.example.com/hooks/[redacted]/mcp"


@pytest.mark.parametrize(
    "name",
    ["AWS_SECRET_ACCESS_KEY", "aws_session_token", "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AZURE_CLIENT_SECRET"],
)
def test_the_hosts_cloud_credentials_are_refused_as_a_credential(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Found: ``credential_env`` could name the workers' cloud credentials, sending them to the row's endpoint.
    Expect: refused where typed and where read, as the platform's other secrets are."""
    monkeypatch.setenv(name, "cloud-credential-0123456789")
    assert credential_env_problem(name)
    with pytest.raises(ValidationError):
        credential_env_validator(name)
    assert credential_from_env(name) == ""
    # A vendor's own key variable stays usable.
    assert credential_env_problem("AWS_BEARER_TOKEN_BEDROCK") is None
    assert credential_env_problem("AZURE_OPENAI_API_KEY") is None
