"""Review of 2026-12-06 (h): outbound URLs administrators configure reached private addresses (SSRF).

Findings (fixed in one shared mechanism, ``toolhub.outbound_addresses``, with ``TOOLHUB["OUTBOUND_ALLOWED_NETWORKS"]``;
production allows no private network, DEBUG and the test settings allow loopback explicitly):

1. A model provider's base URL naming a private address (cloud metadata 169.254.169.254, the broker on
   127.0.0.1:6379, 10.x, [::1], fd00::/8, 0.0.0.0, ::ffff:127.0.0.1, ``localhost``) was saved without a word.
2. A remote MCP server's URL naming a private address was saved without a word.
3. The model provider's client connected to a private address (no check at connect time); a refused turn now
   fails with "Model endpoint not contacted: ..." naming the setting, not the address.
4. The remote MCP client connected to a private address.
5. The approval webhook posted to a private address.
6. A name that resolved to a public address when saved and to a private one at connect time (DNS rebinding)
   was connected to: the connection now resolves, checks and connects to the checked address itself.

Checked and holds:
- spelled-out IPv4 forms (``2130706433``, ``0177.0.0.1``, ``0x7f.1``) are resolved as the connection resolves them
  (``getaddrinfo``), so they are refused as the loopback they are;
- IPv6 forms embedding a private IPv4 address (``::7f00:1``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``), shared
  (``100.64/10``) and multicast addresses are refused too;
- the production default of ``OUTBOUND_ALLOWED_NETWORKS`` is empty (nothing private allowed);
- a network listed there is allowed, at save and at connect (the loopback fakes of the suite keep working);
- a public address is allowed; a name that does not resolve at save is let through (checked on connect);
- an entry that is not a network fails startup with the key named;
- redirects: the model client and the webhook follow none, the MCP client only within the URL's origin, and
  every connection (a redirect's too) goes through the guarded backend.
"""

import http.server
import socket
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError

from agents_app.models import ModelProvider
from agents_app.models_adapters.openai_chat import OpenAIChatAdapter, provider_client
from approvals.models import WebhookDelivery
from approvals.webhooks import webhook_deliver, webhook_enqueue
from toolhub.conf import DEFAULTS, toolhub_settings
from toolhub.exceptions import ModelError
from toolhub.mcp_client.models import RemoteMcpServer
from toolhub.mcp_client.remote import RemoteServerError, remote_tools
from toolhub.outbound_addresses import address_refused, outbound_url_problem

PRIVATE_URLS = [
    "http://169.254.169.254/latest/meta-data/",
    "http://127.0.0.1:6379/",
    "http://10.1.2.3/v1",
    "http://[::1]:8000/v1",
    "http://[fd00::1]/v1",
    "http://0.0.0.0:8000/v1",
    "http://[::ffff:127.0.0.1]/v1",
    "http://localhost:11434/v1",
]


@pytest.fixture
def production_policy(settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "OUTBOUND_ALLOWED_NETWORKS": []}


class _Listener:
    def __init__(self) -> None:
        self.requests = 0
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                listener.requests += 1
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = b'{"object": "list", "data": []}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"


@pytest.fixture
def listener() -> Iterator[_Listener]:
    state = _Listener()
    thread = threading.Thread(target=state.server.serve_forever, daemon=True)
    thread.start()
    yield state
    state.server.shutdown()
    state.server.server_close()


@pytest.mark.django_db
@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_a_provider_base_url_at_a_private_address_is_refused_when_saved(production_policy: None, url: str) -> None:
    """Found: a model provider's base URL at a private address (metadata, broker, ...) was saved.
    Expect: a field error on base_url naming the setting that would allow it."""
    provider = ModelProvider(name="p", kind="openai", base_url=url)
    with pytest.raises(ValidationError) as raised:
        provider.full_clean()
    assert "OUTBOUND_ALLOWED_NETWORKS" in " ".join(raised.value.message_dict["base_url"])


@pytest.mark.django_db
def test_a_remote_mcp_url_at_a_private_address_is_refused_when_saved(production_policy: None) -> None:
    """Found: a remote MCP server's URL at the broker's address was saved.
    Expect: a field error on url."""
    server = RemoteMcpServer(name="srv", url="http://127.0.0.1:6379/mcp")
    with pytest.raises(ValidationError) as raised:
        server.full_clean()
    assert "OUTBOUND_ALLOWED_NETWORKS" in " ".join(raised.value.message_dict["url"])


@pytest.mark.parametrize("url", ["http://2130706433/", "http://0177.0.0.1/", "http://0x7f.1/"])
def test_spelled_out_ipv4_forms_are_refused(production_policy: None, url: str) -> None:
    """Found: (holds) decimal, octal and hex IPv4 forms of 127.0.0.1 must not slip past the check.
    Expect: they are resolved as a connection resolves them and refused."""
    assert "127.0.0.1" in (outbound_url_problem(url) or "")


@pytest.mark.parametrize("address", ["::7f00:1", "64:ff9b::a9fe:a9fe", "2002:a00:1::1", "100.64.0.1", "224.0.0.1"])
def test_ipv6_forms_embedding_a_private_ipv4_address_are_refused(production_policy: None, address: str) -> None:
    """Found: (holds) an IPv6 address embedding a private IPv4 one (compatible, NAT64, 6to4), shared or multicast
    addresses must not pass as public.
    Expect: each is refused."""
    assert address_refused(address) is not None


@pytest.mark.django_db
def test_a_listed_network_and_a_public_address_are_allowed(settings: Any) -> None:
    """Found: (holds) the allow list is honoured and public addresses pass.
    Expect: loopback allowed when listed; a public address always; an unresolvable name at save."""
    settings.TOOLHUB = {**settings.TOOLHUB, "OUTBOUND_ALLOWED_NETWORKS": ["127.0.0.0/8"]}
    ModelProvider(name="p", kind="openai", base_url="http://127.0.0.1:11434/v1").full_clean()
    assert outbound_url_problem("https://8.8.8.8/v1") is None
    assert outbound_url_problem("https://no-such-host.invalid/v1") is None
    assert DEFAULTS["OUTBOUND_ALLOWED_NETWORKS"] == []


def test_a_bad_network_fails_startup(settings: Any) -> None:
    """Found: (holds) a typo in the allow list must not silently allow or refuse.
    Expect: ImproperlyConfigured naming the key."""
    settings.TOOLHUB = {**settings.TOOLHUB, "OUTBOUND_ALLOWED_NETWORKS": ["10.0.0.0/33"]}
    with pytest.raises(ImproperlyConfigured, match="OUTBOUND_ALLOWED_NETWORKS"):
        toolhub_settings()


def test_the_model_client_does_not_connect_to_a_private_address(production_policy: None, listener: _Listener) -> None:
    """Found: the model provider's client connected to a private address (no connect-time check).
    Expect: the connection is refused before a byte is sent."""
    client = provider_client(base_url=f"{listener.url}/v1", api_key="", timeout=5, max_bytes=1_000_000)
    with pytest.raises(openai.APIConnectionError):
        client.models.list()
    assert listener.requests == 0


def test_a_refused_model_turn_says_why_without_the_address(production_policy: None, listener: _Listener) -> None:
    """Found: the model turn to a private address reached it.
    Expect: the turn fails with a ModelError naming the setting, never the host or address."""
    adapter = OpenAIChatAdapter(provider_name="p", base_url=f"{listener.url}/v1", model="m", api_key="", deadline=10)
    with pytest.raises(ModelError) as raised:
        adapter.complete(messages=[{"role": "user", "content": "hi"}], tools=[])
    assert "not contacted" in str(raised.value) and "OUTBOUND_ALLOWED_NETWORKS" in str(raised.value)
    assert "127.0.0.1" not in str(raised.value)
    assert listener.requests == 0


def test_the_model_client_still_reaches_an_allowed_network(listener: _Listener) -> None:
    """Found: (holds) the guard lets an allowed address through.
    Expect: the test settings' loopback allowance reaches the fake server."""
    client = provider_client(base_url=f"{listener.url}/v1", api_key="", timeout=5, max_bytes=1_000_000)
    client.models.list()
    assert listener.requests == 1


def test_a_name_rebound_to_a_private_address_is_refused_at_connect(
    production_policy: None, listener: _Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: a name checked as public when saved and resolving to loopback at connect time was connected to.
    Expect: the connection resolves and checks the name itself, and refuses."""
    real = socket.getaddrinfo
    answer = {"ip": "93.184.216.34"}

    def rebinding(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "rebind.example":
            return real(answer["ip"], port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    url = f"http://rebind.example:{listener.port}/v1"
    assert outbound_url_problem(url) is None
    answer["ip"] = "127.0.0.1"
    client = provider_client(base_url=url, api_key="", timeout=5, max_bytes=1_000_000)
    with pytest.raises(openai.APIConnectionError):
        client.models.list()
    assert listener.requests == 0


def test_the_remote_mcp_client_does_not_connect_to_a_private_address(
    production_policy: None, listener: _Listener
) -> None:
    """Found: the remote MCP client connected to a private address.
    Expect: RemoteServerError, and nothing reached the address."""
    with pytest.raises(RemoteServerError) as raised:
        remote_tools(f"{listener.url}/mcp", name="srv", headers={}, timeout=5)
    assert listener.requests == 0
    assert "127.0.0.1" not in str(raised.value)  # the message names the server, never its address


@pytest.mark.django_db
def test_the_webhook_does_not_post_to_a_private_address(
    production_policy: None, listener: _Listener, settings: Any
) -> None:
    """Found: the approval webhook posted to a private address.
    Expect: the attempt fails with the refusal recorded, and nothing reached the address."""
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": f"{listener.url}/hook"}
    delivery = webhook_enqueue(event="approval.requested", payload={"x": 1})
    assert delivery is not None
    assert webhook_deliver(delivery_id=delivery.pk, timeout=5) is False
    assert listener.requests == 0
    assert "OUTBOUND_ALLOWED_NETWORKS" in WebhookDelivery.objects.get(pk=delivery.pk).last_error
