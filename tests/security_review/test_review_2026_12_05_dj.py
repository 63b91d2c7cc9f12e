"""Review of 2026-12-05 (dj): a review of reviews db and de (export ``to_hash``, ``credential_env``, ``url_secrets``).

Each test failed on the reviewed code (main at 7e78cac) and passes now.

Findings:

1. ``url_redacted`` and ``url_secret_parts`` raised ``ValueError`` on a URL ``urlsplit`` cannot read
   (``http://[::1/hook``, an unclosed IPv6 bracket): the webhook sender, scrubbing a failed delivery's error with
   them, crashed instead of recording the failure, and the governance trail would stop the save recording such a
   URL. An unreadable URL is now ``[redacted]`` whole, and secret whole for the scrubbers.
2. A query's ``;`` separator (``?format=json;token=<key>``, which many servers read as two parameters) hid the key
   behind a setting's name: ``format``'s value ``json;token=<key>`` was kept readable and not a secret part. Query
   parameters are now split at ``&`` and ``;``.
3. A key with no name (``?<key>`` or a matrix parameter ``/mcp;<key>``, as some hosted endpoints take it) was
   neither redacted nor a secret part: a remote MCP server added with it wrote the key into ``governance.added``.
   A bare parameter that looks like a key (the rule path segments follow) is now secret.
4. ``credential_env`` could name the platform's outbound proxy (``HTTPS_PROXY``, ``https_proxy``, ``ALL_PROXY``:
   ``http://user:password@proxy``, read by every HTTP client the platform runs), which no refused prefix covers:
   a provider or remote MCP credential sent the proxy's password to an endpoint of one's choosing. Those names
   (any case) and Django's conventional ``SECRET_KEY`` are now refused (``PLATFORM_ENV_NAMES``), typed or read.

Checked and holding (no test here):
- Export (review db): ``_end_hashes`` reads the event at each span's last seq with the same filter the lines use
  (chain, tenant, seq); a span's last seq is a tenant event of its own chain (a tenant's chains hold only its
  events, shared bases refused), so ``to_hash: ""`` is not written for a real span, and a range past the head is no
  span at all (an empty, signed file that verifies). The heads are read first, spans are cut at them and events are
  immutable, so a head moving during the export changes neither lines nor header. ``--until`` (exclusive) ranges
  end at the last event before it and a consistent rewrite inside one fails with ``--public-key``. The console's
  **Export trail** and ``manage.py audit_export`` both go through ``audit_export_open``. A forger who deletes
  ``to_hash`` from a signed header breaks its signature (TAMPERED); without a signature ``--public-key`` fails.
  An old signed file without ``to_hash`` whose span ends short of the head verifies with a note that its lines are
  the file's own word. README describes ``to_hash``.
- ``credential_env`` (review de): the only readers of an administrator-typed variable name are the model adapter
  and ``credential_headers``, both through ``credential_from_env``. Other environment reads take names from
  settings or code (``Secret(...)`` presets, ``AUDIT_KEY_ENV``, ``WEBHOOK_SECRET_ENV``, ``DB_APP_PASSWORD_ENV``,
  libpq), not from rows. Every secret ``toolhub/settings.py`` reads (``DJANGO_SECRET_KEY``, ``DATABASE_URL``,
  ``EMAIL_HOST_PASSWORD``, ``CELERY_BROKER_URL``, ``DJANGO_CACHE_URL``, the ``TOOLHUB_*`` overrides) falls under a
  refused prefix; lower or mixed case (``django_secret_key``) is refused too (it is a different variable on Linux,
  so this only over-refuses); the settings-named secrets are compared exactly, which on a case-sensitive OS is the
  variable itself. Names the platform does not read (``AWS_SECRET_ACCESS_KEY``, ``OPENAI_API_KEY``) stay allowed:
  they may be an endpoint's own key; ``CREDENTIAL_ENV_PREFIXES`` narrows further. The demo's
  ``OLLAMA_API_KEY`` and the README's examples (``CRM_MCP_TOKEN_ACME``) pass; the admin page shows the message.
- ``url_redacted`` on ``""``, a URL with no scheme, an IPv6 host with a zone (``[fe80::1%25eth0]``), and 1 MB URLs
  of letters, digits or semicolons: no exception, linear time (``_KEY_LIKE`` is anchored, one lookahead).
Not changed: user info written with an unencoded ``/``, ``?`` or ``#`` (``http://u:12/pw@host``) is, by the URL's
own grammar, a host and a path, shown as such; a key-like segment with a percent-encoded ``/`` (``%2F``) is not
recognised as a key (the heuristic's alphabet).
"""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from agents_app.models import ModelProvider
from approvals.models import WebhookDelivery
from approvals.webhooks import _post
from tests.helpers import console
from tests.security_review.conftest import provider_form, server_form
from toolhub.exceptions import ToolError
from toolhub.models import AuditEvent
from toolhub.url_secrets import REDACTED, url_redacted, url_secret_parts

KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"


def test_an_unreadable_url_is_redacted_whole_not_an_exception() -> None:
    """Found: ``url_redacted`` / ``url_secret_parts`` raised ValueError on ``http://[::1/...`` (urlsplit).

    Expect: the URL redacted whole, and secret whole for a scrubber."""
    url = f"http://[::1/hook?token={KEY}"

    assert url_redacted(url) == REDACTED
    assert url in url_secret_parts(url)


@pytest.mark.django_db
def test_a_webhook_url_that_does_not_parse_fails_the_delivery_not_the_sender(settings: Any) -> None:
    """Found: a delivery to an unreadable WEBHOOK_URL raised ValueError while its error was scrubbed.

    Expect: a failed attempt whose error names no key."""
    url = f"http://[::1/hook?token={KEY}"
    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "WEBHOOK_URL": url}
    delivery = WebhookDelivery(event="approval.requested", payload={}, next_attempt_at=timezone.now())

    ok, error = _post(delivery, timeout=1)

    assert not ok
    assert error
    assert KEY not in error


@pytest.mark.parametrize("url", [f"https://h.example/mcp?format=json;token={KEY}", f"https://h.example/?v=1;k={KEY}"])
def test_a_semicolon_in_the_query_does_not_hide_a_key_behind_a_setting(url: str) -> None:
    """Found: ``?format=json;token=<key>`` was kept whole (``format`` is a setting) and named no secret part.

    Expect: the key redacted and a secret part, the setting kept."""
    redacted = url_redacted(url)

    assert KEY not in redacted
    assert redacted.endswith(f"token={REDACTED}") or redacted.endswith(f"k={REDACTED}")
    assert "json" in redacted or "v=1" in redacted
    assert KEY in url_secret_parts(url)


@pytest.mark.parametrize("url", [f"https://h.example/mcp?{KEY}", f"https://h.example/mcp;{KEY}/tools"])
def test_a_key_with_no_name_is_secret(url: str) -> None:
    """Found: a bare key as a query or matrix parameter (``?<key>``, ``/mcp;<key>``) was shown and not scrubbed.

    Expect: redacted, and a secret part; a bare word that is no key stays readable."""
    assert KEY not in url_redacted(url)
    assert KEY in url_secret_parts(url)
    assert url_redacted("https://h.example/mcp;stream?debug") == "https://h.example/mcp;stream?debug"


@pytest.mark.django_db
def test_a_server_url_with_a_bare_matrix_key_never_reaches_the_trail(superuser: User) -> None:
    """Found: a remote MCP server added at ``/mcp;<key>`` wrote the key into ``governance.added``.

    Expect: the URL recorded with the key redacted, the key in no event."""
    added = console(superuser).post(
        "/admin/toolhub/remotemcpserver/add/", server_form(url=f"https://mcp.crm.example/mcp;{KEY}")
    )

    assert added.status_code == 302, added.content[:3000]
    assert AuditEvent.objects.filter(event_type="governance.added").exists()
    for event in AuditEvent.objects.all():
        assert KEY not in json.dumps(event.payload)


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "SECRET_KEY"])
def test_a_provider_cannot_name_the_platforms_proxy(superuser: User, name: str) -> None:
    """Found: ``credential_env=HTTPS_PROXY`` (``http://user:password@proxy``) was accepted on the provider's page.

    Expect: refused with the platform-variable message, nothing saved."""
    page = console(superuser).post(
        "/admin/agents_app/modelprovider/add/",
        provider_form(base_url="https://attacker.example/v1", credential_env=name),
    )

    assert page.status_code == 200
    assert "one of the platform&#x27;s own" in page.content.decode()
    assert not ModelProvider.objects.filter(name="acme-llm").exists()


@pytest.mark.django_db
def test_a_remote_credential_saved_naming_the_proxy_is_never_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: a remote MCP credential naming ``https_proxy`` sent the proxy's password as the bearer token.

    Expect: refused where read ("unset or refused"), the proxy's password in no header or message."""
    from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer
    from toolhub.mcp_client.services import credential_headers

    proxy = "http://platform:proxy-password-never-sent@proxy.internal:3128"
    monkeypatch.setenv("https_proxy", proxy)
    server = RemoteMcpServer.objects.create(name="crm", url="https://attacker.example/mcp")
    RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="https_proxy")

    with pytest.raises(ToolError, match="unset or refused") as refused:
        credential_headers(server, "acme")
    assert "proxy-password" not in str(refused.value)
