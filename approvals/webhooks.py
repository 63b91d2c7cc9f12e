"""Approval notifications to an optional webhook, signed with the Standard Webhooks scheme, retried by workers.

Every delivery has a message id that stays the same across its retries and is signed together with the
attempt's timestamp (``webhook-id``, ``webhook-timestamp``, ``webhook-signature: v1,<base64 HMAC-SHA256 of
"{id}.{timestamp}.{body}">``), so a receiver that checks the timestamp and remembers ids refuses replays.

No row lock is held while the HTTP POST runs: a worker claims a due delivery with one conditional UPDATE
that moves its next attempt past a lease, posts outside any transaction, and records the outcome in a
second short transaction. A worker that dies in between leaves the delivery due again once the lease ends.

Each connection goes only to an address ``TOOLHUB["OUTBOUND_ALLOWED_NETWORKS"]`` allows
(``toolhub.outbound_addresses``): a webhook at a private address fails its attempts with the refusal as their error
until that setting lists it. Only http and https URLs are opened (no FTP, file or data handler).

A redirect is not followed (``urllib`` would turn the POST into a GET to wherever ``Location`` points, any host):
it fails the attempt, as Standard Webhooks senders do. An attempt's error is shown to each tenant's staff with its
delivery, so the URL's secret parts (``toolhub.url_secrets``), which ``urllib`` and ``http.client`` quote, are
replaced in it: each quoted piece of the URL whole (``url_quotes_redacted``, short keys included), then the long parts.

An attempt takes ``timeout`` seconds at most in all, not per wait for bytes (``urllib``'s): a receiver that drips its
answer is cut off then, so the outcome is recorded inside the attempt's lease and no other worker sends it meanwhile.
"""

import base64
import binascii
import hashlib
import hmac
import http.client
import json
import os
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.models import DeliveryStatus, WebhookDelivery
from toolhub.conf import toolhub_settings
from toolhub.deadlines import DeadlineExceeded, run_within, shut
from toolhub.outbound_addresses import guarded_create_connection
from toolhub.storable import storable_text
from toolhub.tools.secrets import SecretScrubber
from toolhub.url_secrets import url_quotes_redacted, url_secret_parts

__all__ = [
    "webhook_enqueue",
    "webhook_deliver",
    "webhooks_deliver_due",
    "webhooks_dispatch_due",
    "webhook_signature",
    "webhook_secret_key",
]

SECRET_PREFIX = "whsec_"
#: How long a claimed delivery is left to its worker beyond the POST's own timeout, before others may retry it.
LEASE_MARGIN_SECONDS = 30
MAX_BACKOFF_SECONDS = 3600


def webhook_secret_key(secret: str) -> bytes:
    """The HMAC key: ``whsec_<base64>`` is decoded (the Standard Webhooks form), any other secret used as is."""
    if secret.startswith(SECRET_PREFIX):
        try:
            key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
        except binascii.Error:
            raise ValueError("The webhook secret starts with 'whsec_' but the rest is not base64.") from None
        if not key:
            # An empty HMAC key signs nothing: anyone can compute the signature.
            raise ValueError("The webhook secret is 'whsec_' alone and holds no key; give it the receiver's secret.")
        return key
    return secret.encode()


def webhook_signature(*, key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``, the value of the ``webhook-signature`` header."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def webhook_enqueue(*, event: str, payload: dict[str, Any]) -> WebhookDelivery | None:
    """Record a notification for delivery after commit; nothing happens when no webhook is configured."""
    if not toolhub_settings().WEBHOOK_URL:
        return None
    delivery = WebhookDelivery.objects.create(event=event, payload=payload, next_attempt_at=timezone.now())
    delivery_id = delivery.pk

    def send() -> None:
        from approvals.tasks import deliver_webhook_task

        deliver_webhook_task.delay(delivery_id)

    transaction.on_commit(send, robust=True)
    return delivery


@dataclass(frozen=True)
class _Claim:
    delivery: WebhookDelivery
    attempt: int


def webhook_deliver(*, delivery_id: int, timeout: float = 10.0) -> bool:
    """Attempt one due delivery; on failure the next attempt is scheduled with exponential backoff.

    Returns whether the receiver accepted it (``False`` also when the delivery was not due or is claimed).
    """
    return _attempt(delivery_id, timeout=timeout) is True


def webhooks_deliver_due(*, limit: int = 200, timeout: float = 10.0) -> int:
    """Attempt every pending delivery whose time has come, here and now; return how many were attempted."""
    return sum(1 for delivery_id in _due(limit) if _attempt(delivery_id, timeout=timeout) is not None)


def webhooks_dispatch_due(*, limit: int = 200) -> int:
    """Hand every due delivery to a worker task of its own (the periodic task stays short); return how many.

    A delivery sent twice is attempted once: the first worker's claim makes it not due for the second.
    """
    from approvals.tasks import deliver_webhook_task

    due = _due(limit)
    for delivery_id in due:
        deliver_webhook_task.delay(delivery_id)
    return len(due)


def _due(limit: int) -> list[int]:
    _give_up_exhausted()
    due = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=timezone.now())
    return list(due.order_by("next_attempt_at", "pk").values_list("pk", flat=True)[:limit])


def _attempt(delivery_id: int, *, timeout: float) -> bool | None:
    """Claim, POST, record; whether it was accepted, or ``None`` when it was not ours to attempt."""
    claim = _claim(delivery_id, lease=timeout + LEASE_MARGIN_SECONDS)
    if claim is None:
        return None
    ok, error = _post(claim.delivery, timeout=timeout)
    _record_outcome(claim, ok=ok, error=error)
    return ok


def _claim(delivery_id: int, *, lease: float) -> _Claim | None:
    """Take a due delivery for one attempt: a short transaction; a delivery another worker holds is skipped."""
    now = timezone.now()
    max_attempts = toolhub_settings().WEBHOOK_MAX_ATTEMPTS
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update(skip_locked=True)
            .filter(
                pk=delivery_id,
                status=DeliveryStatus.PENDING,
                next_attempt_at__lte=now,
                attempts__lt=max_attempts,
            )
            .first()
        )
        if delivery is None:
            return None
        # The lease: until it ends, the delivery is not due for anyone else, even if this worker dies.
        delivery.attempts += 1
        delivery.next_attempt_at = now + timedelta(seconds=lease)
        delivery.save(update_fields=["attempts", "next_attempt_at"])
    return _Claim(delivery=delivery, attempt=delivery.attempts)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Follows nothing: the redirect response then fails the attempt as the ``HTTPError`` it is."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _CuttableRequest(urllib.request.Request):
    """A request whose connections can be cut from another thread, when the attempt's time is up.

    The cut is sticky: a connection that finishes opening after it (a slow DNS answer, SYN or TLS handshake, whose
    socket the connection holds only once open) is shut before anything is sent, so no POST leaves after the attempt
    was recorded as failed.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._cut = False

    def cut(self) -> None:
        """Shut the connections' sockets (the thread blocked on them gets end-of-file at once) and any opened later."""
        with self._lock:
            self._cut = True
            for connection in self.connections:
                _shut(connection)

    def watch(self, connection: http.client.HTTPConnection) -> None:
        """List ``connection`` and have it refuse to go on when the request was cut while it was opening."""
        opening = connection.connect

        def connect() -> None:
            self._refuse_if_cut(connection)
            opening()
            self._refuse_if_cut(connection)

        connection.connect = connect  # type: ignore[method-assign]
        with self._lock:
            self.connections.append(connection)

    def _refuse_if_cut(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            if self._cut:
                _shut(connection)
                raise ConnectionAbortedError("the attempt's time was up")


def _shut(connection: http.client.HTTPConnection) -> None:
    shut(connection.sock)


class _Watched:
    """Mixed into ``urllib``'s HTTP(S) handler: each connection it opens is watched by its ``_CuttableRequest``.

    And guarded: it connects only to addresses ``TOOLHUB["OUTBOUND_ALLOWED_NETWORKS"]`` allows (a private one is not).
    """

    def do_open(self, http_class: Any, req: urllib.request.Request, **kwargs: Any) -> Any:
        def connection(host: str, **options: Any) -> http.client.HTTPConnection:
            opened: http.client.HTTPConnection = http_class(host, **options)
            if not (req.has_proxy() or req._tunnel_host):  # type: ignore[attr-defined]
                # Only to an address the outbound policy allows, checked as the name resolves now (a proxy's
                # connection goes to the proxy, which reaches the receiver).
                opened._create_connection = guarded_create_connection  # type: ignore[attr-defined]
            if isinstance(req, _CuttableRequest):
                req.watch(opened)
            return opened

        return super().do_open(connection, req, **kwargs)  # type: ignore[misc]


class _HTTPHandler(_Watched, urllib.request.HTTPHandler):
    pass


class _HTTPSHandler(_Watched, urllib.request.HTTPSHandler):
    pass


def _http_only_opener() -> urllib.request.OpenerDirector:
    """An opener for HTTP(S) alone: ``build_opener`` adds FTP, file and data handlers too.

    ``ftplib`` connects by itself, around the guarded ``create_connection``: an ``ftp://`` webhook URL would open a
    connection to any address, the broker's included, and a ``file://`` one read a local file as the receiver's
    answer. Here any scheme but http and https fails the attempt as an unknown URL type.
    """
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),  # the environment's proxies, as build_opener has them
        urllib.request.UnknownHandler(),
        _HTTPHandler(),
        _HTTPSHandler(),
        urllib.request.HTTPDefaultErrorHandler(),
        _NoRedirects(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


_opener = _http_only_opener()


def _open(request: urllib.request.Request, *, timeout: float) -> Any:
    """``urlopen`` without following redirects."""
    return _opener.open(request, timeout=timeout)


def _post(delivery: WebhookDelivery, *, timeout: float) -> tuple[bool, str]:
    """POST the delivery, outside any transaction; return whether it was accepted and the error if not."""
    url = toolhub_settings().WEBHOOK_URL
    ok, error = _post_to(url, delivery, timeout=timeout)
    # The error quotes the receiver (its status line, its reason): text from outside, stored as any column takes it.
    # The URL's pieces first, whole (a short key in them too), then its long secret parts wherever else they are.
    scrubbed = SecretScrubber([url, *url_secret_parts(url)]).text(url_quotes_redacted(error, url))
    return ok, storable_text(scrubbed)[:500]


def _post_to(url: str, delivery: WebhookDelivery, *, timeout: float) -> tuple[bool, str]:
    body = json.dumps({"event": delivery.event, "delivery": delivery.pk, **delivery.payload}, sort_keys=True).encode()
    timestamp = int(timezone.now().timestamp())
    headers = {
        "Content-Type": "application/json",
        "X-Toolhub-Event": delivery.event,
        "webhook-id": delivery.message_id,
        "webhook-timestamp": str(timestamp),
    }
    try:
        secret = os.environ.get(toolhub_settings().WEBHOOK_SECRET_ENV, "")
        if secret:
            key = webhook_secret_key(secret)
            headers["webhook-signature"] = webhook_signature(
                key=key, message_id=delivery.message_id, timestamp=timestamp, body=body
            )
        request = _CuttableRequest(url, data=body, headers=headers, method="POST")
    except ValueError as exc:
        return False, f"{type(exc).__name__}: {exc}"
    return _exchange_within(request, timeout=timeout)


def _exchange_within(request: _CuttableRequest, *, timeout: float) -> tuple[bool, str]:
    """POST ``request`` on a helper thread and give up at ``timeout`` seconds in all, cutting its connection.

    ``urllib``'s timeout bounds each wait for bytes, not the exchange: a receiver dripping its answer a byte at a
    time would hold the worker past the attempt's lease, and another worker would then send the delivery again.
    """
    try:
        return run_within(
            lambda: _exchange(request, timeout=timeout), seconds=timeout, name="webhook-post", cut=request.cut
        )
    except DeadlineExceeded:
        return False, f"TimeoutError: the receiver did not answer within the attempt's {timeout:g} s"


def _exchange(request: _CuttableRequest, *, timeout: float) -> tuple[bool, str]:
    """POST ``request`` and read the answer's status; return whether it was accepted and the error if not."""
    try:
        with _open(request, timeout=timeout) as response:
            if 200 <= response.status < 300:
                return True, ""
            return False, f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        exc.close()
        if 300 <= exc.code < 400:
            return False, f"HTTPError: HTTP {exc.code}: the receiver redirected; a redirect is not followed"
        return False, f"HTTPError: {exc}"
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        # HTTPException: an answer that is not HTTP (BadStatusLine), a URL http.client cannot use (InvalidURL).
        return False, f"{type(exc).__name__}: {exc}"


def _record_outcome(claim: _Claim, *, ok: bool, error: str) -> None:
    """Record one attempt's outcome, unless a later attempt took the delivery over (its lease had ended)."""
    now = timezone.now()
    mine = WebhookDelivery.objects.filter(pk=claim.delivery.pk, status=DeliveryStatus.PENDING, attempts=claim.attempt)
    if ok:
        mine.update(status=DeliveryStatus.DELIVERED, delivered_at=now, last_error="")
    elif claim.attempt >= toolhub_settings().WEBHOOK_MAX_ATTEMPTS:
        mine.update(status=DeliveryStatus.FAILED, last_error=error)
    else:
        backoff = min(MAX_BACKOFF_SECONDS, 2**claim.attempt * 5)
        mine.update(next_attempt_at=now + timedelta(seconds=backoff), last_error=error)


def _give_up_exhausted() -> None:
    """Deliveries whose last allowed attempt never recorded an outcome (its worker died) fail once its lease ends."""
    WebhookDelivery.objects.filter(
        status=DeliveryStatus.PENDING,
        next_attempt_at__lte=timezone.now(),
        attempts__gte=toolhub_settings().WEBHOOK_MAX_ATTEMPTS,
    ).update(
        status=DeliveryStatus.FAILED, last_error="No outcome was recorded for the last attempt (its worker stopped)."
    )
