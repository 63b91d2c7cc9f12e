"""Login lockout for the console (django-axes): whose address a login comes from, and the audit event of a lockout.

The admin's password login is the only interactive one. django-axes counts its failures per (username, client
address) pair and, past ``AXES_FAILURE_LIMIT`` within ``AXES_COOLOFF_TIME``, refuses that pair, the right password
included, until the cool-off has passed (settings.py explains the choice). API tokens and MCP never authenticate
with a password, so nothing here touches them.

The client address is the connection's peer (``REMOTE_ADDR``) unless ``TRUSTED_PROXY_COUNT`` proxies are declared
in front of the web process: then it is the address the outermost of them appended to ``X-Forwarded-For``
(counted from the right, the end a client cannot write). A header that is short of entries or whose entry is not an
address falls back to the peer, so a forged header never picks the bucket a login is counted in. An IPv6 client
counts as its /64 network: it may send from any of the network's 2^64 addresses, one per guess.

A page that asks a signed-in user for their password again (the console's password change) checks it with
:func:`password_verify`, which counts under the same pair: a held session is no way round the limit.

Axes checks a pair's count before the password is compared and records the failure after, so guesses sent at once
would all read the same count below the limit and all be compared. Every password check therefore goes through
:func:`authenticate_serialized`, which holds the pair (and only the pair) from the check to the recorded failure.
"""

import hashlib
import ipaddress
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_credentials
from axes.signals import user_locked_out
from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.signals import user_login_failed
from django.core.exceptions import ValidationError
from django.db import OperationalError, connection, transaction
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

__all__ = [
    "attempted_username",
    "client_ip",
    "audit_lockout",
    "lockout_response",
    "authenticate_serialized",
    "pair_in_process",
    "PAIR_WAIT_SECONDS",
    "password_locked",
    "password_verify",
]

#: The longest name axes' tables (attempts, logins, failures) hold.
STORED_NAME_LENGTH = 255

logger = logging.getLogger(__name__)


#: The prefix an IPv6 client holds whole (one home line, one cloud machine): its addresses share one count.
IPV6_CLIENT_PREFIX = 64


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _host(text: str) -> str:
    """The address part of a proxy's entry: ``1.2.3.4:5678`` and ``[2001:db8::1]:443`` name their client with a port.

    A proxy that writes the port (Azure's front ends do) would otherwise have every entry read as garbled, and every
    client counted under the proxy's own address: one count per name for all of them, so one guesser locks a name
    for everyone. A bare IPv6 address (its colons) is left whole.
    """
    text = text.strip()
    if text.startswith("["):
        inside, bracket, port = text[1:].partition("]")
        return inside if bracket and (not port or (port[0] == ":" and _is_port(port[1:]))) else text
    address, colon, port = text.partition(":")
    return address if colon and _is_port(port) else text


def _address(text: str) -> str | None:
    """The bucket of an address: itself for IPv4, its /64 network (first address) for IPv6; ``None`` if not one."""
    try:
        address = ipaddress.ip_address(_host(text))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # an IPv4 client on a dual-stack socket
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/{IPV6_CLIENT_PREFIX}", strict=False).network_address)
    return str(address)


def attempted_username(request: HttpRequest, credentials: dict[str, Any] | None = None) -> str | None:
    """The name a login counts under (``AXES_USERNAME_CALLABLE``): the one authenticated with, cut to what axes stores.

    Django's login form does not hold its username to the field's ``max_length``, so a name of 10,000 characters
    reached axes, and PostgreSQL refused to store it (a 500). Cut, it is still longer than any account's name, so
    it locks no one but its sender.
    """
    source = credentials or getattr(request, "data", request.POST)
    name = source.get(settings.AXES_USERNAME_FORM_FIELD)
    return name[:STORED_NAME_LENGTH] if isinstance(name, str) else name


def client_ip(request: HttpRequest) -> str:
    """The login's client address: the peer, or the one the trusted proxies saw (``AXES_CLIENT_IP_CALLABLE``)."""
    peer = _address(str(request.META.get("REMOTE_ADDR", ""))) or "0.0.0.0"
    proxies = int(getattr(settings, "TRUSTED_PROXY_COUNT", 0))
    if proxies <= 0:
        return peer
    forwarded = str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")
    if len(forwarded) < proxies:
        return peer
    return _address(forwarded[-proxies]) or peer


def _pair_lock_key(username: str, address: str) -> tuple[int, int]:
    """The pair's PostgreSQL advisory lock: two signed 32-bit halves of a 64-bit digest, the same in every process.

    64 bits, so that a guesser cannot choose a name whose pair shares a victim's lock (and keep the victim's login
    waiting behind their guesses): with 32 that took ~2^32 names, minutes on a GPU. The two-key form keeps these
    apart from the one-key (bigint) locks elsewhere (``toolhub.checkpoints``), which PostgreSQL never confuses.
    """
    digest = hashlib.blake2b(f"{username}\0{address}".encode(errors="surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest[:4], "big", signed=True), int.from_bytes(digest[4:], "big", signed=True)


#: How long an attempt waits for its pair before it fails closed (``login_busy``): far above a burst of guesses
#: hashed one after another up to the limit, so only a holder that never lets go (a request stuck in its
#: transaction) is given up on; without a bound every later attempt at the pair, and its thread, waited forever.
PAIR_WAIT_SECONDS = 30.0


def _pair_busy() -> ValidationError:
    """The refusal of an attempt whose pair stayed held: nothing compared or counted, nothing said about accounts."""
    return ValidationError(
        "Another sign-in with this username from your address is still being checked; try again in a minute.",
        code="login_busy",
    )


#: Elsewhere (SQLite: the embedded mode's one process), each pair being checked has a lock of its own, with the
#: number of attempts holding or waiting for it; the entry goes when the last one is done.
_PAIRS_IN_PROCESS: dict[tuple[str, str], tuple[threading.Lock, int]] = {}
_PAIRS_IN_PROCESS_GUARD = threading.Lock()


@contextmanager
def pair_in_process(username: str, address: str) -> Iterator[None]:
    """Holds the pair in this process where PostgreSQL's lock cannot: the pair's own lock, shared with no other pair.

    Keyed by the pair itself, not a digest of it picking one of a fixed set, so a guesser cannot choose names whose
    pairs share a victim's lock; only pairs being checked at the moment have one, so the table stays that small.
    Waits ``PAIR_WAIT_SECONDS`` at most, then raises the ``login_busy`` ``ValidationError``.
    """
    pair = (username, address)
    with _PAIRS_IN_PROCESS_GUARD:
        lock, users = _PAIRS_IN_PROCESS.get(pair) or (threading.Lock(), 0)
        _PAIRS_IN_PROCESS[pair] = (lock, users + 1)
    try:
        if not lock.acquire(timeout=PAIR_WAIT_SECONDS):
            raise _pair_busy()
        try:
            yield
        finally:
            lock.release()
    finally:
        with _PAIRS_IN_PROCESS_GUARD:
            lock, users = _PAIRS_IN_PROCESS[pair]
            if users > 1:
                _PAIRS_IN_PROCESS[pair] = (lock, users - 1)
            else:
                del _PAIRS_IN_PROCESS[pair]


@contextmanager
def _pair_held(request: HttpRequest, username: str) -> Iterator[None]:
    """A transaction holding the (``username``, client address) pair while it runs; let go after it commits."""
    if not settings.AXES_ENABLED:
        with transaction.atomic():
            yield
        return
    name = attempted_username(request, {settings.AXES_USERNAME_FORM_FIELD: username}) or ""
    address = client_ip(request)
    if connection.vendor == "postgresql":
        with transaction.atomic():
            _pair_locked_in_postgresql(name, address)
            yield
        return
    with pair_in_process(name, address), transaction.atomic():  # the transaction commits, then the lock is let go
        yield


def _pair_locked_in_postgresql(name: str, address: str) -> None:
    """The pair's advisory lock for this transaction, waited for ``PAIR_WAIT_SECONDS`` at most (``login_busy``).

    ``lock_timeout`` bounds the wait for this statement only: what the transaction locks after it (axes' rows, the
    audit chain) waits as it would without it. A shorter ``lock_timeout`` the server, role or pooler set is kept, not
    lengthened; a wait cut short by ``statement_timeout`` is the same refusal, not a 500.
    """
    bound = int(PAIR_WAIT_SECONDS * 1000)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('lock_timeout'), setting::bigint FROM pg_settings WHERE name = 'lock_timeout'"
        )
        previous, previous_ms = cursor.fetchone()
        if previous_ms > 0:
            bound = min(bound, previous_ms)
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{bound}ms"])
        try:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", list(_pair_lock_key(name, address)))
        except OperationalError as error:
            # lock_not_available (psycopg 3: timed out) or query_canceled (statement_timeout): the pair stayed held.
            if getattr(error.__cause__, "sqlstate", None) in ("55P03", "57014"):
                raise _pair_busy() from None
            raise
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous])


@sensitive_variables("password")
def authenticate_serialized(
    request: HttpRequest,
    username: str,
    password: str,
    allowed: Callable[[Any], None] | None = None,
) -> AbstractBaseUser | None:
    """:func:`~django.contrib.auth.authenticate`, one attempt at a time per (``username``, client address) pair.

    Axes' check of the pair's count, the comparison and axes' record of a failure then run as one step, so no more
    than ``AXES_FAILURE_LIMIT`` passwords are ever compared, however many requests arrive at once. On PostgreSQL a
    transaction-level advisory lock keyed by the pair: other pairs (another address, another name) never wait on
    it, and it is taken for the typed name before anything is read, whether or not it is an account's, so waiting
    says nothing about accounts. The failure commits before the lock is let go, so the pair's next attempt reads it.

    Elsewhere (SQLite, the embedded mode's single process) an in-process lock of the pair's own
    (:func:`pair_in_process`): SQLite's write lock orders the failure records but not the reads of the count before
    them, and taking it for every login would make one guesser's hashing delay every other login; several processes
    on one SQLite file are not held against each other (run PostgreSQL for that).

    An attempt whose pair stays held past ``PAIR_WAIT_SECONDS`` is refused with a ``ValidationError`` (code
    ``login_busy``) before anything is compared or counted: the form shows it, and no thread waits without end.

    ``allowed`` (a login form's ``confirm_login_allowed``) refuses an account that may not sign in here with a
    ``ValidationError``: that refusal counts as a failure of the pair, as a wrong password does. Uncounted, the right
    password of an account refused afterwards (not staff) would read differently from a wrong one at the limit (the
    form again, not the lockout page), and tell the guesser they had found it.
    """
    refused: ValidationError | None = None
    with _pair_held(request, username):
        user = authenticate(request=request, username=username, password=password)
        if user is not None and allowed is not None:
            try:
                allowed(user)
            except ValidationError as error:
                refused = error  # raised after the hold commits the failure, not rolling it back
                user_login_failed.send(sender=__name__, credentials={"username": username}, request=request)
    if refused is not None:
        raise refused
    return user


def password_verify(request: HttpRequest, user: AbstractBaseUser, password: str) -> bool:
    """Whether ``password`` is ``user``'s, checked as a login of theirs from this request's address.

    Through :func:`django.contrib.auth.authenticate`, so axes counts a wrong one toward the (username, address)
    lockout of logins, refuses the right one too once the pair is locked (the lockout middleware then answers the
    request with :func:`lockout_response`), and a right one below the limit clears the pair's count as a successful
    login does. ``user.check_password`` alone would let whoever holds a session guess without bound.
    """
    username = user.get_username()
    verified = authenticate_serialized(request, username, password)
    if verified is None or verified.pk != user.pk:
        return False
    if settings.AXES_ENABLED and settings.AXES_RESET_ON_SUCCESS:
        AxesProxyHandler.get_implementation().reset_user_attempts(request, get_credentials(username))
    return True


def password_locked(request: HttpRequest, user: AbstractBaseUser) -> bool:
    """Whether ``user``'s (username, address) pair is locked out now: a page asking for their password answers so.

    Only reads the count (``AxesProxyHandler.is_locked``): showing the form is no attempt, so nothing is counted.
    """
    if not settings.AXES_ENABLED:
        return False
    return bool(AxesProxyHandler.is_locked(request, get_credentials(user.get_username())))


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    """The page a refused login gets (``AXES_LOCKOUT_CALLABLE``): 429, when to retry, and nothing about the account.

    The same for a name that is an account and one that is not, and it never repeats the name typed. Each refused
    attempt restarts the cool-off, so the retry time counts from now.
    """
    cool_off = settings.AXES_COOLOFF_TIME
    seconds = int(cool_off.total_seconds())
    context = {
        "title": "Sign-in temporarily locked",
        "retry_minutes": max(1, -(-seconds // 60)),
        "retry_at": timezone.now() + cool_off,
        "failure_limit": settings.AXES_FAILURE_LIMIT,
    }
    response = render(request, "admin/toolhub/login_locked_out.html", context, status=429)
    response["Retry-After"] = str(seconds)
    return response


@receiver(user_locked_out, dispatch_uid="toolhub.login_guard.audit_lockout")
def audit_lockout(sender: Any, request: HttpRequest | None = None, username: str | None = None, **kwargs: Any) -> None:
    """A lockout is a platform audit event: which account (only if it exists), from where, for how long.

    Never the password; and a name that is no account is not kept (it may be a password typed in the wrong field).
    Only the failure that locks the pair is recorded, not each refused attempt after it: otherwise anyone could grow
    the append-only trail at will.
    """
    from toolhub.audit import audit_append
    from toolhub.governance_trail import account_named

    if request is not None and getattr(request, "axes_failures_since_start", None) != settings.AXES_FAILURE_LIMIT:
        return

    name = username or ""
    known = account_named(name)
    cool_off = getattr(settings, "AXES_COOLOFF_TIME", None)
    with transaction.atomic():
        audit_append(
            event_type="login.locked_out",
            actor="system:login-guard",
            data={
                "username": name if known else None,
                "known_user": known,
                "ip_address": kwargs.get("ip_address") or "",
                "failure_limit": settings.AXES_FAILURE_LIMIT,
                "cool_off_seconds": int(cool_off.total_seconds()) if cool_off else None,
            },
        )
