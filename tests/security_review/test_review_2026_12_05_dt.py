"""Review of 2026-12-05 (dt): toolhub's outbound notifications, the approval webhook and the approval e-mails.

Read as a tenant operator or developer and as a webhook receiver would attack them. Each test fails on the
reviewed code (main at 48baf24); its docstring says "Found: ..." and "Expect: ...".

Findings:

1. A receiver that drips its answer (a byte of a header every few tenths of a second) held the worker for as long
   as it liked: ``urllib``'s timeout bounds each wait for bytes, not the exchange, as the model adapter's deadline
   already says of the SDK's. The attempt outlived its lease (``timeout + LEASE_MARGIN_SECONDS``), so the periodic
   task handed the same delivery to another worker, which the receiver held too: one receiver could tie up a
   worker per attempt (the workers that run tool calls) and have the signed body sent again while the first
   attempt still ran; a drip that ends in ``200`` was even recorded as delivered. Fixed: the POST runs on a helper
   thread and the attempt gives up at ``timeout`` seconds in all, cutting the connection
   (``approvals.webhooks._exchange_within``), so its outcome is recorded well inside its lease.
2. A signing secret of ``whsec_`` alone (a placeholder left as is) decoded to an empty HMAC key: the deploy check
   (``approvals.W002``) was silent and every delivery went out signed with a key anyone knows, so a receiver set up
   the same way accepted forged notifications. Fixed: ``webhook_secret_key`` refuses a key that holds no bytes, as
   it refuses one that is not base64: the check warns and attempts fail, sending nothing.
3. A receiver's status line or reason phrase with a NUL character, quoted in the attempt's error, was stored as it
   came: PostgreSQL refused the outcome's UPDATE, the attempt raised out of the worker unrecorded, and the delivery
   was tried again at each lease's end (no backoff) until it failed as "no outcome was recorded". Fixed: the error
   is made storable (``toolhub.storable.storable_text``) with its URL secrets scrubbed, in ``_post``.

Checked and found holding (no test here):
- Scoping: one webhook URL for the deployment (``TOOLHUB['WEBHOOK_URL']``, settings only; no model, admin page or
  API key holds one), so no tenant can point another's deliveries anywhere; the deliveries' admin is scoped by
  ``payload__tenant`` and read-only. E-mails go to ``approvers_still_counting`` of the request's tenant, one
  message each (no one sees the other recipients).
- Content: payloads carry ids, tool, status, reason (sensitive values scrubbed by ``approval_verdict``), tenant slug,
  round and the keyed arguments hash, never arguments, presets or context; e-mails are plain text (no HTML to
  inject), name no arguments, and their subject holds a registered tool name, a risk and a tenant slug (Django
  refuses a header with CR/LF anyway, and the failure is logged, not raised).
- Signing: the secret comes from the environment only, is never stored, logged or shown (its decoding error names
  no secret); each attempt signs ``{id}.{timestamp}.{body}`` with a fresh timestamp and a ``msg_<uuid4>`` id that
  is unique in the database and stable across retries, so a receiver's tolerance window and id memory stop replays.
- Transport: redirects are not followed (``_NoRedirects``); the response body is never read (only the status),
  so a huge body costs nothing; errors are cut to 500 characters and the URL's secret parts scrubbed.
- Retries: at most ``WEBHOOK_MAX_ATTEMPTS`` with capped exponential backoff; an outcome is recorded only by the
  attempt that still holds the claim (``attempts`` unchanged), so a success is never followed by another POST of
  the same attempt; a delivery whose last attempt's worker died is failed once its lease ends.

Found, not fixed: a URL secret part shorter than ``MIN_SECRET_LENGTH`` (4) is not scrubbed from an attempt's error
(``SecretScrubber`` skips short values; real keys are longer); with no ``WEBHOOK_SECRET_ENV`` set deliveries go out
unsigned (a deploy warning, ``approvals.W002``, only); pending deliveries follow ``WEBHOOK_URL`` as it is at each
attempt (a changed URL gets the older notifications; an emptied one fails them after ``WEBHOOK_MAX_ATTEMPTS``); a
connection still being opened when an attempt's time is up is not cut (its connect is bounded by the per-wait
timeout) and may deliver the body once more, under the same ``webhook-id``.
"""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.utils import timezone

from approvals.checks import check_webhook_signing
from approvals.models import DeliveryStatus, WebhookDelivery
from approvals.webhooks import webhook_deliver
from tests.security_review.test_review_2026_12_05_ai import Endpoint, serve

pytestmark = pytest.mark.django_db

DRIP_SECONDS = 4.0


@pytest.fixture
def dripping_receiver(settings: Any) -> Iterator[list[float]]:
    """A receiver on 127.0.0.1 that answers ``200 OK`` a byte every tenth of a second for ``DRIP_SECONDS``.

    Yields the times (monotonic) at which the drip ended: on its end, or when the sender cut the connection.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    ended: list[float] = []
    stop = threading.Event()

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            request = b""
            while b"\r\n\r\n" not in request:
                request += connection.recv(65536)
            answer = b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * int(DRIP_SECONDS * 10) + b"\r\nContent-Length: 0\r\n\r\n"
            try:
                for index in range(len(answer)):
                    if stop.is_set():
                        break
                    connection.sendall(answer[index : index + 1])
                    if index >= len("HTTP/1.1 200 OK\r\nX-Pad: "):
                        time.sleep(0.1)
            except OSError:
                pass
            ended.append(time.monotonic())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": f"http://127.0.0.1:{listener.getsockname()[1]}/hook"}
    yield ended
    stop.set()
    thread.join(timeout=DRIP_SECONDS + 2)
    listener.close()


def test_a_receiver_that_drips_its_answer_does_not_hold_the_attempt_past_its_timeout(
    dripping_receiver: list[float],
) -> None:
    """Found: ``urllib``'s timeout bounds each wait for bytes, so a receiver answering a byte every 0.1 s held a
    0.5 s attempt for the whole drip (past its lease, for another worker to send it again) and was then recorded as
    delivered. Expect: the attempt gives up at its timeout, fails with an error naming it, and is retried later."""
    # given a delivery to a receiver that drips its answer
    delivery = WebhookDelivery.objects.create(
        event="approval.requested", payload={"request": 7, "tenant": "acme"}, next_attempt_at=timezone.now()
    )
    # when a worker attempts it with a 0.5 s timeout
    started = time.monotonic()
    accepted = webhook_deliver(delivery_id=delivery.pk, timeout=0.5)
    took = time.monotonic() - started
    # then it gave up near its timeout, not at the end of the drip, and will try again after its backoff
    assert accepted is False
    assert took < 2.0, f"the attempt took {took:.1f} s"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, 1)
    assert "0.5 s" in delivery.last_error
    assert delivery.next_attempt_at > timezone.now()
    # and the connection was cut: the receiver's drip ended then, not at its own end
    for _ in range(20):
        if dripping_receiver:
            break
        time.sleep(0.1)
    assert dripping_receiver and dripping_receiver[0] - started < DRIP_SECONDS - 1


def test_a_signing_secret_that_holds_no_key_is_refused_not_signed_with(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: ``whsec_`` with nothing after it (a template's placeholder left as is) decoded to an empty HMAC key:
    the deploy check was silent and every delivery went out with a signature anyone can compute (a receiver set
    up the same way accepts forged notifications). Expect: the check warns (approvals.W002) and the attempt fails
    with an error naming the problem, sending nothing, as for a secret that is not base64."""
    monkeypatch.setenv("TOOLHUB_WEBHOOK_SECRET", "whsec_")
    with serve(Endpoint(status=204)) as receiver:
        settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": receiver.url + "/hook"}
        warnings = check_webhook_signing()
        delivery = WebhookDelivery.objects.create(
            event="approval.requested", payload={"request": 7, "tenant": "acme"}, next_attempt_at=timezone.now()
        )
        accepted = webhook_deliver(delivery_id=delivery.pk, timeout=5)
    delivery.refresh_from_db()
    assert [warning.id for warning in warnings] == ["approvals.W002"]
    assert accepted is False and receiver.requests == []
    assert "holds no key" in delivery.last_error


@contextmanager
def _answering(answer: bytes) -> Iterator[str]:
    """A receiver on 127.0.0.1 that reads one request and sends ``answer`` as it is; yields its URL."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve_once() -> None:
        connection, _ = listener.accept()
        with connection:
            request = b""
            while b"\r\n\r\n" not in request:
                request += connection.recv(65536)
            connection.sendall(answer)

    thread = threading.Thread(target=serve_once, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    finally:
        thread.join(timeout=5)
        listener.close()


@pytest.mark.parametrize(
    "answer",
    [b"HTTP/1.1 500 Bad\x00Gateway\r\nContent-Length: 0\r\n\r\n", b"HTTP/1.1 20\x00 OK\r\n\r\n"],
    ids=["reason", "status-line"],
)
def test_a_receiver_error_with_a_nul_character_is_recorded(settings: Any, answer: bytes) -> None:
    """Found: the receiver's reason phrase or status line, quoted in the attempt's error, was stored as it came: a NUL
    in it made PostgreSQL refuse the outcome's UPDATE, so the attempt raised out of the worker unrecorded and the
    delivery was tried again at each lease's end, without backoff, until it failed as "no outcome was recorded".
    Expect: the error is stored with the NUL written out (``storable_text``) and retried after its backoff."""
    with _answering(answer) as url:
        settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": url}
        delivery = WebhookDelivery.objects.create(
            event="approval.requested", payload={"request": 7, "tenant": "acme"}, next_attempt_at=timezone.now()
        )
        accepted = webhook_deliver(delivery_id=delivery.pk, timeout=5)
    delivery.refresh_from_db()
    assert accepted is False
    assert delivery.last_error and "\x00" not in delivery.last_error
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, 1)
