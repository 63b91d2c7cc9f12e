"""Which addresses toolhub may connect to for a URL an administrator configured (SSRF guard).

A model provider's base URL, a remote MCP server's URL and the approval webhook are typed by people who
administer one tenant (or the platform); the workers then connect there with their own network position. Left
unchecked, such a URL reaches what only the platform should: the cloud metadata service (169.254.169.254), the
broker (127.0.0.1:6379), the database, anything on the private network. So every address such a connection
would use is refused when it is loopback, link-local, private, unique-local, multicast, unspecified or otherwise
not global, unless ``TOOLHUB["OUTBOUND_ALLOWED_NETWORKS"]`` lists a network holding it.

Checked twice, by the one rule here: when the URL is saved (``outbound_url_problem``: a field error), and when a
connection is opened (``guarded_client``, ``guarded_create_connection``): the name is resolved then, each address
checked, and the socket opened to a checked address itself, so a name that resolves elsewhere by then (DNS
rebinding) or a redirect to a private address is refused too. TLS still verifies the name (SNI and certificate
come from the URL, not from the address connected to). Spelled-out forms of an address (``2130706433``,
``0177.0.0.1``, ``::ffff:127.0.0.1``) are resolved as the connection would resolve them, so they are caught.
"""

import contextlib
import ipaddress
import logging
import socket
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio

from toolhub.conf import toolhub_settings

__all__ = [
    "OutboundAddressRefused",
    "address_refused",
    "guarded_client",
    "guarded_create_connection",
    "outbound_refusal",
    "outbound_url_problem",
]

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundAddressRefused(OSError):
    """A connection to a configured URL would reach an address the policy refuses."""


def address_refused(address: str) -> str | None:
    """Why a connection to ``address`` (an IP literal) is refused, or ``None`` when it may go ahead."""
    ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and (embedded := _embedded_ipv4(ip)) is not None:
        ip = embedded  # ::ffff:127.0.0.1 is 127.0.0.1
    allowed = toolhub_settings().OUTBOUND_ALLOWED_NETWORKS
    if any(ip in ipaddress.ip_network(network, strict=False) for network in allowed):
        return None
    if ip.is_global and not (ip.is_multicast or ip.is_reserved) and not any(ip in network for network in _NOT_GLOBAL):
        return None
    return "not a public address (loopback, private, link-local, multicast or reserved)"


#: Blocks not globally reachable that Python 3.11's ``is_global`` still counts as global: the IETF protocol block
#: ``192.0.0.0/24`` (3.11.7 refuses only its ``/29`` and ``.170/31``; ``192.0.0.192`` is Oracle Cloud's metadata
#: service), local-use NAT64 (RFC 8215; through a site's translator ``64:ff9b:1::a9fe:a9fe`` is 169.254.169.254, at a
#: prefix length the site chose, so no IPv4 address can be read out of it), the deprecated site-local block, IPv6
#: documentation (RFC 9637) and SRv6 segment ids (RFC 9602). Reserved IPv6 space (``::/8``, ``100::/8``...; among it
#: the IPv4-translated ``::ffff:0:a.b.c.d``, which a site's SIIT translator maps to any IPv4 address) is refused as
#: ``is_reserved``. A network listed in ``OUTBOUND_ALLOWED_NETWORKS`` is still allowed.
_NOT_GLOBAL = tuple(
    ipaddress.ip_network(block) for block in ("192.0.0.0/24", "64:ff9b:1::/48", "fec0::/10", "3fff::/20", "5f00::/16")
)

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPATIBLE = ipaddress.ip_network("::/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, NAT64, 6to4, the old compatible form), judged as itself."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (ip in _COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _resolved(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to now, as the connection would resolve it (numeric forms included)."""
    return list(dict.fromkeys(str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)))


def _first_refused(addresses: Iterable[str]) -> tuple[str, str] | None:
    """The first address refused and why; a name is refused whole when any of its addresses is (none may mix)."""
    for address in addresses:
        if reason := address_refused(address):
            return address, reason
    return None


def _checked(host: str, addresses: list[str]) -> list[str]:
    """``addresses`` when all are allowed, else ``OutboundAddressRefused``.

    Its message names neither the host nor the address: it may reach the call's user, the model and the audit trail,
    which never see a configured URL. The log has both.
    """
    if refused := _first_refused(addresses):
        logger.warning("Refused an outbound connection to %r at %s: %s", host, *refused)
        raise OutboundAddressRefused(
            "Refused to connect: the endpoint's address is not public (loopback, private, link-local, multicast or "
            "reserved) and TOOLHUB['OUTBOUND_ALLOWED_NETWORKS'] does not list its network."
        )
    return addresses


def outbound_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as a destination, checked when it is saved; ``None`` when nothing is.

    A name that does not resolve now is let through (it is checked again on every connection). The host is
    percent-decoded as the client decodes it: an IPv6 zone id is written ``%25`` in a URL (``[fe80::1%25eth0]``),
    and only its decoded form (``fe80::1%eth0``) resolves, to the link-local address it is.
    """
    if not url:
        return None
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        host = unquote(host) if host else host
    except ValueError:
        return None  # the field's own URL validation says what is wrong
    if not host:
        return None
    try:
        addresses = _resolved(host, port)
    except (OSError, UnicodeError):
        return None
    if refused := _first_refused(addresses):
        address, reason = refused
        where = address if address == host else f"{host}, at {address},"
        return f"{where} is {reason}; list its network in TOOLHUB['OUTBOUND_ALLOWED_NETWORKS'] to allow it."
    return None


def outbound_refusal(error: BaseException) -> OutboundAddressRefused | None:
    """The policy's refusal behind ``error`` (a client library's connection error wrapping it), if it is one."""
    seen: BaseException | None = error
    for _ in range(10):
        if seen is None or isinstance(seen, OutboundAddressRefused):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def guarded_create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
    """``socket.create_connection`` that connects only to allowed addresses, each checked as resolved."""
    host, port = address
    error: OSError | None = None
    for ip in _checked(host, _resolved(host, port)):
        try:
            return socket.create_connection((ip, port), *args, **kwargs)
        except OSError as exc:
            error = exc
    raise error or OSError(f"{host!r} resolved to no address")


@contextlib.contextmanager
def _as_connect_error() -> Iterator[None]:
    """Resolving and checking fail as httpcore's own backend fails: with its ``ConnectError``.

    That is what clients handle and retry (the SDK wraps it as its connection error); a bare ``OSError`` (a name
    that resolves to nothing now) would escape them. The cause is kept: the refusal, or the resolver's error.
    """
    import httpcore2

    try:
        yield
    except (OSError, UnicodeError) as exc:  # OutboundAddressRefused; gaierror: the name resolves to nothing now
        raise httpcore2.ConnectError(str(exc)) from exc


class _GuardedBackend:
    """An httpcore network backend that opens TCP connections only to allowed addresses."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, **kwargs: Any) -> Any:
        with _as_connect_error():
            addresses = _checked(host, _resolved(host, port))
        error: Exception | None = None
        for ip in addresses:
            try:
                return self._inner.connect_tcp(ip, port, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the next address is tried, the last error raised
                error = exc
        raise error or OSError(f"{host!r} resolved to no address")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _AsyncGuardedBackend(_GuardedBackend):
    """``_GuardedBackend`` for an async pool; the name is resolved off the event loop.

    The resolving thread is abandoned when the connection's wait is cancelled (a use's ``fail_after``): a resolver
    that hangs (a dead name server, tried again and again) would otherwise hold the caller past its deadline.
    """

    async def connect_tcp(self, host: str, port: int, **kwargs: Any) -> Any:  # type: ignore[override]
        with _as_connect_error():
            resolved = await anyio.to_thread.run_sync(_resolved, host, port, abandon_on_cancel=True)
            addresses = _checked(host, resolved)
        error: Exception | None = None
        for ip in addresses:
            try:
                return await self._inner.connect_tcp(ip, port, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the next address is tried, the last error raised
                error = exc
        raise error or OSError(f"{host!r} resolved to no address")


def guarded_client(client: Any) -> Any:
    """``client`` (an ``httpx2`` Client or AsyncClient) with every direct connection it opens guarded.

    Each connection, the first and every redirect's, goes through the guarded backend. A transport that goes
    through a proxy (``HTTPS_PROXY``) is left as it is: it connects to the proxy, which reaches the destination.
    It reaches into httpx2's and httpcore2's private attributes, so any transport it does not recognise (a pool of
    another class, none, a backend kept elsewhere) is a ``TypeError``: never a client handed back unguarded.
    """
    import httpcore2

    guards = {httpcore2.ConnectionPool: _GuardedBackend, httpcore2.AsyncConnectionPool: _AsyncGuardedBackend}
    proxies = (httpcore2.HTTPProxy, httpcore2.SOCKSProxy, httpcore2.AsyncHTTPProxy, httpcore2.AsyncSOCKSProxy)
    transports = [client._transport, *(mounted for mounted in client._mounts.values() if mounted is not None)]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        guard = guards.get(type(pool))
        if guard is not None and "_network_backend" in vars(pool):
            pool._network_backend = guard(pool._network_backend)
        elif type(pool) not in proxies:
            raise TypeError(f"Cannot guard the connections of {type(transport).__name__} ({type(pool).__name__}).")
    return client
