"""Review of 2026-12-05 (ai): outbound requests to configured URLs (SSRF, credentials sent elsewhere, echoes).

Every place toolhub sends a request to a URL someone configured: model providers (``agents_app``, the ``openai``
SDK), remote MCP servers (``toolhub/mcp_client``), the approval webhook (``approvals/webhooks.py``), built-in tools,
and links in approval e-mails. Each test fails on the reviewed code (main at d0e1730) and states what was found and
what is expected; every server is a local one on a free port of 127.0.0.1, nothing reaches the network.

Findings:

1. The model client followed any redirect its endpoint answered (the SDK's default): a 307 re-sent the run's whole
   conversation, and a 302 a GET, to wherever ``Location`` pointed (``127.0.0.1:6379``, ``169.254.169.254``, an
   internal gateway), and what answered there became the model's turn, stored on the run and read by its user. Whoever
   runs a provider's endpoint (a vendor, a tenant's own model server the platform registered for it, a compromised
   gateway) steered the workers at internal services and read the answer back. The remote MCP client already follows
   redirects only within the endpoint's origin; the model client now follows none: a redirect fails the turn.
2. The SDK reads ``OPENAI_CUSTOM_HEADERS``, ``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID`` and ``OPENAI_BASE_URL`` from the
   process environment by itself and applied them to every provider: an ``Authorization`` in ``OPENAI_CUSTOM_HEADERS``
   replaced each provider's own key and went, with every other header listed there, to every provider's endpoint
   (another vendor's, a tenant's); a provider with no base URL went to ``OPENAI_BASE_URL`` with its key. A provider's
   requests now carry only what its row names (``openai_chat.provider_client``).
3. The approval webhook followed redirects too (``urllib``: a POST answered 301/302/303 becomes a GET to any host,
   with the delivery's headers), so its receiver steered the workers likewise.
4. A webhook delivery's error quoted the configured URL: one typed without its scheme failed with ``unknown url type:
   '<the whole URL, its ?token= too>'``, stored on every delivery, and each tenant's staff read their deliveries in
   the admin (``approvals.view_webhookdelivery`` is in every role). A URL with a user name and password
   (``https://user:password@host/hook``) failed in ``http.client`` with ``InvalidURL: nonnumeric port:
   'password@host'``, which is no ``URLError``: it escaped the worker and no attempt recorded anything (nor did a
   receiver answering something that is not HTTP, ``BadStatusLine``). Both are caught now, and the error is
   scrubbed of the URL and its secret parts as the remote MCP client's are, by the same rule (``toolhub.url_secrets``).

Checked and found holding (no test here; probes d, e, f, h, w and reviews b, z hold most as tests):

- Who sets each URL: model providers and remote MCP servers are ``CrossTenantOnly`` admin pages (add, change and the
  change page of an existing row refuse tenant staff); the API refuses ``base_url``, ``credential_env``, ``url`` and
  ``webhook_url`` keys with 400; the webhook URL and its secret are settings and environment only. An agent names a
  provider among ``providers_usable_by`` its tenant (API, admin form, PATCH). ``URLField`` admits http(s) and ftp(s)
  only, so no ``file://`` endpoint can be saved; nothing resolves or pins addresses, which is the platform's choice
  where the URL is the platform's alone.
- Remote MCP credentials: tenant staff may change only a credential's header and scheme (``server``, ``tenant`` and
  ``credential_env`` are read-only to them, adding one is the platform's): the token still goes only to the server's
  configured URL whatever header carries it, and echoes are scrubbed. The SDK client follows redirects only within the
  origin and names a refused location without its query.
- Secrets shown back: the admin shows only environment variable names, never their values, to the platform only; the
  model client's key is scrubbed from answers; the webhook secret is only an HMAC key (never sent); model errors name
  the provider and an HTTP status, never the URL.
- Built-in tools fetch nothing themselves; the shell runs only commands the platform lists, with no ``HOME``/proxy
  configuration a tool could write. No other outbound client exists (``toolhub/search`` takes code-registered hooks).
- Host header: approval e-mails link to ``TOOLHUB["CONSOLE_URL"]``, never to the request's host; nothing builds an
  absolute URL from ``Host`` (no ``build_absolute_uri``; ``USE_X_FORWARDED_HOST`` is off; Django checks
  ``ALLOWED_HOSTS``); the audit console's ``next`` accepts only this site's host.
"""

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents_app.models import ModelProvider, ProviderKind
from agents_app.models_adapters.base import adapter_for
from agents_app.services import agent_create
from approvals.models import DeliveryStatus, WebhookDelivery
from approvals.webhooks import webhook_deliver
from tests.unit.fake_openai import completion
from toolhub.exceptions import ModelError

pytestmark = pytest.mark.django_db

ANSWER = completion(content="what the internal service answered").body


@dataclass
class Endpoint:
    """A local HTTP server: records every request; answers a redirect to ``location`` if set, else ``body``."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    location: str = ""
    status: int = 200
    body: bytes = ANSWER


@contextmanager
def serve(endpoint: Endpoint, path: str = "") -> Iterator[Endpoint]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            endpoint.requests.append(
                {"method": self.command, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
            )
            self.send_response(endpoint.status)
            if endpoint.location:
                self.send_header("Location", endpoint.location)
            answer = b"" if endpoint.location else endpoint.body
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        do_GET = do_POST = _answer  # noqa: N815 - http.server's naming

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint.url = f"http://127.0.0.1:{server.server_port}{path}"
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _adapter(base_url: str, credential_env: str = "") -> Any:
    """The adapter a run of an agent on a provider with ``base_url`` would use."""
    provider = ModelProvider.objects.create(
        name="vendor", kind=ProviderKind.OPENAI, base_url=base_url, model_name="m", credential_env=credential_env
    )
    return adapter_for(agent_create(name="helper", provider=provider.name))


MESSAGES = [{"role": "user", "content": "the customer's order history"}]


# --- 1. the model client follows no redirect -----------------------------------------------------------------------


@pytest.mark.parametrize("status", [302, 307])
def test_a_model_endpoints_redirect_is_not_followed_and_nothing_reaches_its_target(status: int) -> None:
    """Found: the SDK followed the endpoint's redirect to any host (a 307 re-sending the conversation) and the
    target's answer became the model's turn, read back by the run's user.
    Expect: the turn fails saying the endpoint redirected; the target receives nothing."""
    with serve(Endpoint()) as internal:
        with serve(Endpoint(status=status), "/v1") as vendor:
            vendor.location = f"{internal.url}/latest/meta-data"
            adapter = _adapter(vendor.url)
            with pytest.raises(ModelError) as refused:
                adapter.complete(messages=MESSAGES, tools=[])
    assert len(vendor.requests) == 1
    assert internal.requests == []
    assert f"HTTP {status}" in str(refused.value) and "redirect" in str(refused.value)
    assert internal.url not in str(refused.value)


# --- 2. nothing from the process environment reaches a provider ------------------------------------------------------


def test_a_providers_requests_carry_its_own_key_and_nothing_the_sdk_reads_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: ``OPENAI_CUSTOM_HEADERS`` (its ``Authorization`` replacing the provider's key), ``OPENAI_ORG_ID`` and
    ``OPENAI_PROJECT_ID`` went with every provider's requests, and an empty base URL meant ``OPENAI_BASE_URL``.
    Expect: the provider's key alone, none of those headers, and ``https://api.openai.com/v1`` for an empty URL."""
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "Authorization: Bearer platform-gateway-key\nX-Gateway-Key: gw-secret")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-platform")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-platform")
    monkeypatch.setenv("VENDOR_KEY", "sk-vendor-key")
    with serve(Endpoint(), "/v1") as vendor:
        adapter = _adapter(vendor.url, "VENDOR_KEY")
        assert adapter.complete(messages=MESSAGES, tools=[]).content == "what the internal service answered"
    [request] = vendor.requests
    headers = request["headers"]
    assert headers["authorization"] == "Bearer sk-vendor-key"
    assert not {"x-gateway-key", "openai-organization", "openai-project"} & set(headers)
    assert "gw-secret" not in json.dumps(headers) and "platform-gateway-key" not in json.dumps(headers)

    # and a provider without a base URL is OpenAI's, not whatever OPENAI_BASE_URL says (no request is sent here)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    ModelProvider.objects.create(name="openai", kind=ProviderKind.OPENAI, model_name="m", credential_env="VENDOR_KEY")
    client = adapter_for(agent_create(name="plain", provider="openai"))._client
    assert str(client.base_url).rstrip("/") == "https://api.openai.com/v1"


# --- 3. and 4. the webhook -------------------------------------------------------------------------------------------


def _delivery() -> WebhookDelivery:
    return WebhookDelivery.objects.create(
        event="approval.requested", payload={"request": 7, "tenant": "acme"}, next_attempt_at=timezone.now()
    )


@pytest.mark.parametrize("status", [301, 302, 303])
def test_the_webhook_follows_no_redirect(settings: Any, status: int) -> None:
    """Found: a receiver answering 301/302/303 had the worker send a GET, with the delivery's headers, to any host.
    Expect: the delivery is not delivered, its error says the receiver redirected; the target receives nothing."""
    with serve(Endpoint()) as internal:
        with serve(Endpoint(status=status, location=f"{internal.url}/latest/meta-data"), "/hook") as receiver:
            settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": receiver.url}
            delivery = _delivery()
            assert webhook_deliver(delivery_id=delivery.pk, timeout=5) is False
    delivery.refresh_from_db()
    assert len(receiver.requests) == 1 and internal.requests == []
    assert delivery.status == DeliveryStatus.PENDING
    assert f"HTTP {status}" in delivery.last_error and "redirect" in delivery.last_error


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("https://hooks-user:hook-password-7f3a@127.0.0.1/hook", "hook-password-7f3a"),
        ("127.0.0.1/hook?token=whk-token-5c1e9", "whk-token-5c1e9"),
    ],
)
def test_a_webhook_error_shown_to_tenant_staff_holds_no_secret_part_of_the_url(
    settings: Any, acme_operator: User, url: str, secret: str
) -> None:
    """Found: the whole URL with its token (``unknown url type: '...'``) was stored as the delivery's error, on
    acme's delivery page; a URL with a password raised ``InvalidURL`` (quoting it) out of the attempt, unrecorded.
    Expect: the attempt fails with an error whose URL secret parts are replaced; acme's operator reads no secret."""
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": url}
    delivery = _delivery()
    assert webhook_deliver(delivery_id=delivery.pk, timeout=5) is False
    delivery.refresh_from_db()
    assert delivery.last_error and secret not in delivery.last_error
    # The quoted URL is written as url_redacted writes it (review 2026-12-05 ea).
    assert "[redacted]" in delivery.last_error
    client = Client()
    client.force_login(acme_operator)
    page = client.get(reverse("admin:approvals_webhookdelivery_change", args=[delivery.pk]))
    assert page.status_code == 200
    assert secret not in page.content.decode()
