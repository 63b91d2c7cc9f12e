"""Review of 2026-12-06 (al): the outbound address guard (``toolhub.outbound_addresses``) reviewed adversarially.

Findings (each test fails on 819d82f, passes after the fix):

1. Python 3.11.7 (the version toolhub runs on) counts the IETF protocol block ``192.0.0.0/24`` as global except
   ``192.0.0.0/29`` and ``192.0.0.170/31``: ``192.0.0.192``, Oracle Cloud's instance metadata address, was allowed
   at save and at connect. The block is now refused (``_NOT_GLOBAL``): IANA lists it as not globally reachable,
   but for two anycast addresses (``.9`` PCP, ``.10`` TURN), refused too: no model or MCP endpoint lives there.
2. IPv6 addresses Python calls reserved (``::/8`` beyond the forms handled, ``100::/8``, ``200::/7``...) were allowed
   although the README says reserved addresses are refused: among them the IPv4-translated form
   ``::ffff:0:a.b.c.d`` (RFC 2765 SIIT), which a site's translator maps to any IPv4 address, ``127.0.0.1`` and
   ``169.254.169.254`` included. Reserved addresses are now refused (after an embedded IPv4 address is read out).
3. The webhook's ``urllib`` opener kept ``build_opener``'s default FTP handler (and the file and data ones): a
   ``TOOLHUB["WEBHOOK_URL"]`` of ``ftp://127.0.0.1:6379/...`` opened a TCP connection to the broker with no check at
   all (``ftplib`` connects by itself, not through the guarded ``create_connection``). The opener now holds only the
   handlers a POST over HTTP(S) needs; any other scheme fails the attempt as an unknown URL type (a ``file://`` URL
   crashed the delivery with a ``TypeError`` before).
4. The save-time check resolved ``urlsplit``'s host still percent-encoded: ``http://[fe80::1%25lo]/`` (a link-local
   address with its zone id, as a URL writes it) resolved to nothing and was saved without a word, while the client
   connects to the decoded ``fe80::1%lo`` (refused there). ``outbound_url_problem`` now decodes the host as the
   client does.

Checked and holds (production policy, ``OUTBOUND_ALLOWED_NETWORKS = []``):
- every outbound connection that takes a configured URL goes through the guard: the model client
  (``provider_client``: the SDK is handed the guarded httpx2 client, retries and streams use it), the remote MCP
  client (``remote_tools``/``remote_call`` build one guarded client per use), the webhook (``urllib`` with the guarded
  ``create_connection``); no other code opens a connection to a configured URL (grep for httpx/httpx2, urllib,
  requests, socket, smtplib, OpenAI clients, MCP transports: benchmarks/examples only, e-mail goes to the platform's
  ``EMAIL_HOST``); the guarded backend's passthrough ``connect_unix_socket`` is reachable only with ``uds=``, which no
  client sets;
- URL parsing: save and connect disagree on nothing that matters, because the connect-time check is authoritative:
  it resolves the very host the client connects to (userinfo, backslashes, percent-encoding and IDNA are the
  client's own parse); ``fe80::1%25eth0``-style zone ids are stripped before judging; numeric forms are resolved by
  ``getaddrinfo`` as the connection resolves them (reviews h and q);
- a name resolving to a mix of public and private addresses is refused whole (review q);
- IPv4-mapped, compatible, NAT64 and 6to4 forms are judged as the IPv4 address they carry; Teredo (``2001::/32``)
  is inside ``2001::/23``, which 3.11.7 counts private, so it is refused;
- environment proxies: a proxied connection goes to the proxy (documented: the proxy polices it), a ``NO_PROXY``
  destination goes through the guarded direct transport (review q), urllib's tunnel and plain proxy both detected;
- the allow list: a string instead of a list, ``None``, an int, ``/33``, a leading space or a comma-joined entry
  each fail startup with ``ImproperlyConfigured`` naming the key and the entry;
- ``http://a@127.0.0.1``, ``http://example.com\\@127.0.0.1``, ``0x7f.1``, ``127.1``, ``LOCALHOST`` are refused at
  save as at connect; ``127.0.0.1.``, ``localhost.``, ``%31%32%37.0.0.1`` resolve to nothing for save and client alike;
  ``example.com#@127.0.0.1`` and ``127.0.0.1%2f@example.com`` name ``example.com`` for both parsers;
- saves without ``clean``: model providers and remote MCP servers are written only through the admin (ModelForm,
  ``full_clean``; neither has ``list_editable``), the demo loader and the suite; no REST endpoint or management
  command writes them, and the connect-time check covers any row written another way.

Not fixed (outside what an address check can know): a connection through an environment proxy is the proxy's to
police (README); the host's own public addresses, and an ISATAP interface configured on a worker, are not visible in
the address; the built-in shell tool is governed by ``SHELL_COMMANDS`` and approvals, not by this guard.
"""

import socket
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from agents_app.models_adapters.openai_chat import provider_client
from approvals.models import WebhookDelivery
from approvals.webhooks import webhook_deliver, webhook_enqueue
from toolhub.outbound_addresses import address_refused, outbound_refusal, outbound_url_problem


@pytest.fixture
def production_policy(settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "OUTBOUND_ALLOWED_NETWORKS": []}


class _Accepts:
    """A raw TCP listener on loopback counting the connections made to it (whatever protocol they speak)."""

    def __init__(self) -> None:
        self.count = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.count += 1
            conn.close()


@pytest.fixture
def accepts() -> Iterator[_Accepts]:
    state = _Accepts()
    threading.Thread(target=state.serve, daemon=True).start()
    yield state
    state.sock.close()


@pytest.mark.parametrize("address", ["192.0.0.192", "192.0.0.8", "192.0.0.100"])
def test_the_ietf_protocol_block_and_oracle_clouds_metadata_address_are_refused(
    production_policy: None, address: str
) -> None:
    """Found: ``192.0.0.192`` (Oracle Cloud's instance metadata) and the rest of ``192.0.0.0/24`` outside ``/29`` and
    ``.170/31`` were allowed (Python 3.11.7's ``is_global`` is true for them).
    Expect: refused at connect (``address_refused``) and when a URL naming one is saved."""
    assert address_refused(address) is not None
    assert outbound_url_problem(f"http://{address}/opc/v1/instance/") is not None


@pytest.mark.parametrize("address", ["::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe", "::1:0:0:1", "100:0:0:1::1", "200::1"])
def test_reserved_ipv6_addresses_are_refused(production_policy: None, address: str) -> None:
    """Found: reserved IPv6 addresses were allowed, the IPv4-translated ``::ffff:0:127.0.0.1`` and
    ``::ffff:0:169.254.169.254`` among them (a site's SIIT translator reaches the IPv4 address they carry).
    Expect: refused, as the README says reserved addresses are."""
    assert address_refused(address) is not None
    assert outbound_url_problem(f"http://[{address}]/v1") is not None


def test_public_addresses_are_still_allowed(production_policy: None) -> None:
    """Found: nothing (holds after the fix). Expect: public IPv4/IPv6 and NAT64 carrying a public address allowed;
    ``192.0.0.0/24`` allowed once listed."""
    for address in ("8.8.8.8", "2606:4700::1111", "64:ff9b::808:808", "192.0.1.1", "191.255.255.255"):
        assert address_refused(address) is None, address


def test_a_listed_network_allows_the_ietf_block(settings: Any) -> None:
    """Found: nothing (holds). Expect: an operator may still list ``192.0.0.0/24``."""
    settings.TOOLHUB = {**settings.TOOLHUB, "OUTBOUND_ALLOWED_NETWORKS": ["192.0.0.0/24"]}
    assert address_refused("192.0.0.192") is None


@pytest.mark.django_db
def test_an_ftp_webhook_url_connects_nowhere(production_policy: None, accepts: _Accepts, settings: Any) -> None:
    """Found: ``WEBHOOK_URL = "ftp://127.0.0.1:<port>/x"`` was opened by urllib's default FTP handler, which connects
    with ``ftplib`` around the guard: a TCP connection reached the loopback listener (the broker's port in a real
    deployment). Expect: the attempt fails, its error saying why, and nothing connects."""
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": f"ftp://127.0.0.1:{accepts.port}/hook"}
    delivery = webhook_enqueue(event="approval.requested", payload={"x": 1})
    assert delivery is not None
    assert webhook_deliver(delivery_id=delivery.pk, timeout=2) is False
    assert accepts.count == 0
    assert "ftp" in WebhookDelivery.objects.get(pk=delivery.pk).last_error.lower()


@pytest.mark.django_db
def test_a_file_webhook_url_reads_nothing(production_policy: None, settings: Any) -> None:
    """Found: ``WEBHOOK_URL = "file:///etc/hostname"`` was opened by urllib's file handler (the delivery read a local
    file as the receiver's answer). Expect: the attempt fails as an unknown URL type."""
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": "file:///etc/hostname"}
    delivery = webhook_enqueue(event="approval.requested", payload={"x": 1})
    assert delivery is not None
    assert webhook_deliver(delivery_id=delivery.pk, timeout=2) is False
    assert "unknown url type" in WebhookDelivery.objects.get(pk=delivery.pk).last_error.lower()


@pytest.mark.parametrize("url", ["http://[fe80::1%25lo]:8000/v1", "http://[fe80::a9fe:a9fe%25lo]/"])
def test_a_link_local_address_with_a_zone_id_is_refused_when_saved(production_policy: None, url: str) -> None:
    """Found: the save-time check resolved ``urlsplit``'s host still percent-encoded (``fe80::1%25lo``), which
    resolves to nothing, so the link-local URL was saved without a word; the client connects with the zone decoded
    (``fe80::1%lo``, as httpx2 parses it), which the connect-time check refuses. Expect: a field error at save."""
    assert outbound_url_problem(url) is not None


def test_a_link_local_address_with_a_zone_id_is_refused_at_connect(production_policy: None) -> None:
    """Found: nothing (holds). Expect: the model client refuses ``[fe80::1%25lo]`` before connecting."""
    client = provider_client(base_url="http://[fe80::1%25lo]:8000/v1", api_key="", timeout=2, max_bytes=1_000)
    with pytest.raises(openai.APIConnectionError) as raised:
        client.models.list()
    assert outbound_refusal(raised.value) is not None
