"""Review of 2026-12-06 (q): the outbound address policy (``toolhub.outbound_addresses``) reviewed again.

Findings (fail on 3af5acc, pass after the fix in ``toolhub.outbound_addresses``):

1. A name that does not resolve when a connection is opened (a typo, a DNS outage) escaped the guarded backend as
   a bare ``socket.gaierror``, not the ``ConnectError`` httpcore's own backend raises: the OpenAI SDK neither
   retried nor wrapped it, so a model turn failed as "Model adapter error (gaierror)" with a traceback logged as
   an adapter bug, instead of "Model endpoint unreachable". Resolving (and refusing) now fail as ``ConnectError``.
2. ``guarded_client`` guarded a transport's pool only when its class was exactly httpcore2's ``ConnectionPool``
   and passed any other over in silence: an httpx2 building its direct transport on a subclass or a new pool class
   would have been handed back unguarded. It now guards the two pool classes it knows, leaves the four proxy
   classes to the proxy, and refuses anything else (``TypeError``), a pool without ``_network_backend`` too.

Checked and holds (production-like policy, ``OUTBOUND_ALLOWED_NETWORKS = []``, a listener on 127.0.0.1 counting
connections):
- other spellings of loopback at connect time: ``127.1``, ``0x7f000001``, ``0``, ``[::ffff:7f00:1]``,
  ``[0:0:0:0:0:ffff:7f00:1]``, ``0.0.0.0``, ``[::]``, ``LOCALHOST``, ``127。0。0。1`` (IDNA full-width dots);
  ``127.0.0.1.``, ``localhost.`` and ``[::1%25lo]`` do not resolve here: never connected to, but they raised the
  bare ``gaierror`` of finding 1 (now the SDK's connection error);
- a name with several addresses, one private, is refused whole at connect (no happy-eyeballs fallback to it);
- the SDK's derived clients (``with_options``, ``copy``) share the one guarded httpx client;
- with ``HTTP_PROXY`` set (trust_env), a ``NO_PROXY`` destination goes through the guarded direct transport; a
  proxied one goes to the proxy, as the README says (the proxy is the platform's to police);
- TLS verifies the URL's name, not the address connected to: httpcore2 passes ``server_hostname`` from the
  request's origin to ``start_tls`` (``_sync/connection.py``), shown here with a self-signed server whose
  certificate names only a host name: reached by that name, refused as ``127.0.0.1``;
- the guard is installed on the direct pools of the httpx2 clients as built today (the private attributes
  ``_transport``, ``_mounts``, ``_pool``, ``_network_backend`` it relies on exist), sync and async;
- no other outbound path takes a configured URL: the built-in tools (``toolhub/builtins``) fetch nothing, the
  framework adapters use the caller's own model clients, the admin lists and checks no models, the embedding
  search ships its model files (nothing downloaded), MCP discovery goes through ``remote_tools`` (guarded).
"""

import datetime
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpcore2
import httpx2
import openai
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agents_app.models_adapters.openai_chat import OpenAIChatAdapter, provider_client
from toolhub.exceptions import ModelError
from toolhub.outbound_addresses import guarded_client

GUARDS = {"_GuardedBackend", "_AsyncGuardedBackend"}


@pytest.fixture
def production_policy(settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "OUTBOUND_ALLOWED_NETWORKS": []}


class _Counting:
    """A TCP listener that counts the connections it accepts (any, HTTP or not) and answers an empty model list."""

    def __init__(self, host: str = "127.0.0.1", *, tls: ssl.SSLContext | None = None) -> None:
        self.accepted = 0
        self._tls = tls
        self._socket = socket.create_server((host, 0))
        self.port = self._socket.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                if self._tls is not None:
                    connection = self._tls.wrap_socket(connection, server_side=True)
                connection.recv(65536)
                body = b'{"object": "list", "data": []}'
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
            except OSError:
                pass  # a client that refused our certificate hangs up
            finally:
                connection.close()

    def close(self) -> None:
        self._socket.close()


@pytest.fixture
def counting() -> Iterator[_Counting]:
    listener = _Counting()
    yield listener
    listener.close()


def _models(base_url: str) -> Any:
    return provider_client(base_url=base_url, api_key="", timeout=5, max_bytes=1_000_000).models.list()


def test_an_unresolvable_model_host_fails_the_turn_as_unreachable(production_policy: None) -> None:
    """Found: a model host that did not resolve at connect time raised a bare socket.gaierror out of the SDK (not
    retried, not wrapped), so the turn failed as "Model adapter error (gaierror)", logged as an adapter bug.
    Expect: the SDK's connection error, so the turn fails with "Model endpoint unreachable"."""
    adapter = OpenAIChatAdapter(
        provider_name="p", base_url="http://no-such-host.invalid/v1", model="m", api_key="", deadline=10
    )
    with pytest.raises(ModelError, match="Model endpoint unreachable"):
        adapter.complete(messages=[{"role": "user", "content": "hi"}], tools=[])


def test_an_unresolvable_host_is_a_connect_error_for_both_guarded_clients(production_policy: None) -> None:
    """Found: resolving in the guarded backends raised what httpcore's own backend maps to ConnectError, raw.
    Expect: httpx2.ConnectError from the sync and the async guarded client alike."""
    with guarded_client(httpx2.Client(trust_env=False)) as client, pytest.raises(httpx2.ConnectError):
        client.get("http://no-such-host.invalid/")

    async def fetch() -> None:
        async with guarded_client(httpx2.AsyncClient(trust_env=False)) as client:
            await client.get("http://no-such-host.invalid/")

    with pytest.raises(httpx2.ConnectError):
        anyio.run(fetch)


@pytest.mark.parametrize("client_class", [httpx2.Client, httpx2.AsyncClient])
def test_guarded_client_fails_loudly_on_a_pool_it_does_not_know(client_class: Any) -> None:
    """Found: guarded_client guarded only a pool of exactly httpcore2's ConnectionPool class and passed any other
    over in silence: an httpx2 whose direct transport used a subclass (or a new pool class) would have been handed
    back connecting anywhere, unguarded.
    Expect: TypeError for a pool it does not know, and for a pool keeping no ``_network_backend``."""
    client = client_class(trust_env=False)
    pool = client._transport._pool
    client._transport._pool = type("NewPool", (type(pool),), {})()
    with pytest.raises(TypeError, match="Cannot guard"):
        guarded_client(client)
    client._transport._pool = pool
    del pool._network_backend
    with pytest.raises(TypeError, match="Cannot guard"):
        guarded_client(client)


def test_the_guard_sits_on_every_direct_pool_of_todays_httpx2(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: (holds) the private attributes guarded_client relies on exist in httpx2/httpcore2 as installed.
    Expect: each direct pool's backend is the guard, sync and async, proxies configured from the environment too;
    a proxy's pool is left to the proxy."""
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    for client in (guarded_client(httpx2.Client()), guarded_client(httpx2.AsyncClient())):
        assert type(client._transport._pool._network_backend).__name__ in GUARDS
        proxied = [transport._pool for transport in client._mounts.values() if transport is not None]
        assert proxied and all(type(pool) is not httpcore2.ConnectionPool for pool in proxied)
        assert all(type(pool._network_backend).__name__ not in GUARDS for pool in proxied)


@pytest.mark.parametrize(
    "host",
    [
        "127.1",
        "0x7f000001",
        "0",
        "0.0.0.0",
        "[::]",
        "[::ffff:7f00:1]",
        "[0:0:0:0:0:ffff:7f00:1]",
        "LOCALHOST",
        "127\u30020\u30020\u30021",
        "127.0.0.1.",
        "localhost.",
        "[::1%25lo]",
    ],
)
def test_other_spellings_of_loopback_are_refused_at_connect(
    production_policy: None, counting: _Counting, host: str
) -> None:
    """Found: (holds) a spelling of a loopback address the save-time check might miss is caught at connect.
    Expect: the SDK's connection error, and no connection reached the listener."""
    with pytest.raises(openai.APIConnectionError):
        _models(f"http://{host}:{counting.port}/v1")
    assert counting.accepted == 0


def test_a_name_with_one_private_address_among_public_ones_is_refused_whole(
    production_policy: None, counting: _Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: (holds) a name answering a public and a private address must not reach the private one when the
    public one does not answer (happy-eyeballs style fallback).
    Expect: refused before any connection."""
    real = socket.getaddrinfo

    def mixed(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "mixed.example":
            return real("192.0.2.1", port, *args, **kwargs)[:1] + real("127.0.0.1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", mixed)
    with pytest.raises(openai.APIConnectionError):
        _models(f"http://mixed.example:{counting.port}/v1")
    assert counting.accepted == 0


def test_the_sdks_derived_clients_stay_guarded(production_policy: None, counting: _Counting) -> None:
    """Found: (holds) with_options/copy must not build a second, unguarded httpx client.
    Expect: each refuses the loopback listener."""
    client = provider_client(base_url=f"http://127.0.0.1:{counting.port}/v1", api_key="", timeout=5, max_bytes=10**6)
    for derived in (client.with_options(timeout=3), client.copy(), client.with_options(max_retries=0)):
        assert derived._client is client._client
        with pytest.raises(openai.APIConnectionError):
            derived.models.list()
    assert counting.accepted == 0


def test_a_no_proxy_destination_is_guarded_when_a_proxy_is_set(
    production_policy: None, counting: _Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: (holds) HTTP_PROXY makes httpx mount proxy transports; NO_PROXY hosts use the direct transport.
    Expect: that direct transport is the guarded one: neither the destination nor the proxy is reached."""
    proxy = _Counting()
    try:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        with pytest.raises(openai.APIConnectionError):
            _models(f"http://127.0.0.1:{counting.port}/v1")
        assert (counting.accepted, proxy.accepted) == (0, 0)
    finally:
        proxy.close()


def _self_signed(tmp_path: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a certificate naming only ``name``, and a client context trusting just it."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "cert.pem").write_bytes(pem)
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    return server, ssl.create_default_context(cadata=pem.decode())


def test_tls_verifies_the_urls_name_not_the_address_connected_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: (holds) the guarded backend connects to the checked IP; SNI and the certificate must still be the
    URL's host's, or a certificate for any name would do.
    Expect: the name in the certificate is reached; the same server by its address fails verification."""
    server_context, client_context = _self_signed(tmp_path, "model.toolhub.test")
    listener = _Counting(tls=server_context)
    real = socket.getaddrinfo

    def named(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        return real("127.0.0.1" if host == "model.toolhub.test" else host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", named)
    try:
        with guarded_client(httpx2.Client(verify=client_context, trust_env=False)) as client:
            assert client.get(f"https://model.toolhub.test:{listener.port}/v1/models").status_code == 200
            with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED|IP address mismatch"):
                client.get(f"https://127.0.0.1:{listener.port}/v1/models")
    finally:
        listener.close()
    assert listener.accepted == 2  # the test settings allow loopback: both connected, only the name verified
