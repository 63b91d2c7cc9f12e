"""Webhook deliveries: Standard Webhooks signatures that resist replay, and no row lock held during the POST."""

import base64
import http.server
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone
from standardwebhooks import Webhook, WebhookVerificationError

from approvals.models import DeliveryStatus, WebhookDelivery
from approvals.tasks import expire_approvals_task
from approvals.webhooks import webhook_deliver, webhook_enqueue, webhooks_deliver_due

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "whsec_" + base64.b64encode(b"a-32-byte-secret-for-the-tests!!").decode()


@dataclass
class Receiver:
    """A local endpoint: records each request, answers with ``statuses`` in turn, can hold a request open."""

    url: str = ""
    received: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    hold: threading.Event | None = None
    arrived: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def receiver(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """A webhook receiver on 127.0.0.1, configured as the webhook, with the Standard Webhooks secret set."""
    state = Receiver()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.received.append({"body": body, "headers": {k.lower(): v for k, v in self.headers.items()}})
            state.arrived.set()
            if state.hold is not None:
                state.hold.wait(timeout=30)
            self.send_response(state.statuses.pop(0) if state.statuses else 204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_port}/hook"
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": state.url}
    monkeypatch.setenv("TOOLHUB_WEBHOOK_SECRET", SECRET)
    yield state
    if state.hold is not None:
        state.hold.set()
    server.shutdown()
    server.server_close()


def _enqueue(event: str = "approval.requested") -> WebhookDelivery:
    """A committed delivery that is due now, as ``webhook_enqueue`` leaves it (the test attempts it itself)."""
    return WebhookDelivery.objects.create(
        event=event, payload={"request": 7, "tool": "risky_effect"}, next_attempt_at=timezone.now()
    )


def test_a_delivery_verifies_with_the_standard_webhooks_library(receiver: Receiver) -> None:
    # given a notification queued in a transaction: once it commits, a worker delivers it
    with transaction.atomic():
        queued = webhook_enqueue(event="approval.requested", payload={"request": 7, "tool": "risky_effect"})
    assert queued is not None
    delivery = WebhookDelivery.objects.get(pk=queued.pk)

    [item] = receiver.received
    payload = Webhook(SECRET).verify(item["body"], item["headers"])
    assert (payload["event"], payload["request"], payload["delivery"]) == ("approval.requested", 7, delivery.pk)
    assert item["headers"]["webhook-id"] == delivery.message_id
    assert abs(int(item["headers"]["webhook-timestamp"]) - time.time()) < 60
    assert WebhookDelivery.objects.get(pk=delivery.pk).status == DeliveryStatus.DELIVERED


def test_a_plain_secret_is_used_as_the_key(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLHUB_WEBHOOK_SECRET", "plain-shared-secret")
    delivery = _enqueue()

    assert webhook_deliver(delivery_id=delivery.pk) is True

    [item] = receiver.received
    assert Webhook(b"plain-shared-secret").verify(item["body"], item["headers"])["delivery"] == delivery.pk
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(item["body"], item["headers"])


def test_a_replayed_delivery_fails_verification(receiver: Receiver) -> None:
    # given a genuine delivery the receiver accepted
    delivery = _enqueue()
    webhook_deliver(delivery_id=delivery.pk)
    [item] = receiver.received
    verifier = Webhook(SECRET)
    old = str(int(time.time()) - 3600)

    # when an attacker replays it later, re-stamped or under another id, or alters the body
    replays = [
        {**item["headers"], "webhook-timestamp": old},
        {**item["headers"], "webhook-id": "msg_another"},
    ]

    # then none of them verifies
    for headers in replays:
        with pytest.raises(WebhookVerificationError):
            verifier.verify(item["body"], headers)
    with pytest.raises(WebhookVerificationError):
        verifier.verify(item["body"].replace(b'"request": 7', b'"request": 8'), item["headers"])
    # and the genuine message verifies only while its timestamp is fresh
    with pytest.raises(WebhookVerificationError, match="too old"):
        verifier.verify(item["body"], {**item["headers"], "webhook-timestamp": old})


def test_the_message_id_stays_the_same_across_retries(receiver: Receiver) -> None:
    # given a receiver that fails the first attempt
    receiver.statuses = [503]
    delivery = _enqueue()

    # when the delivery is attempted, then retried once it is due again
    assert webhook_deliver(delivery_id=delivery.pk) is False
    failed = WebhookDelivery.objects.get(pk=delivery.pk)
    assert (failed.status, failed.attempts, failed.last_error) == (
        DeliveryStatus.PENDING,
        1,
        "HTTPError: HTTP Error 503: Service Unavailable",
    )
    assert failed.next_attempt_at > timezone.now()
    assert webhooks_deliver_due() == 0
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    time.sleep(1.1)  # so that the second attempt carries a later timestamp
    assert webhooks_deliver_due() == 1

    # then both attempts carried the same id, each its own timestamp, and each verifies
    first, second = receiver.received
    assert first["headers"]["webhook-id"] == second["headers"]["webhook-id"] == delivery.message_id
    assert int(second["headers"]["webhook-timestamp"]) > int(first["headers"]["webhook-timestamp"])
    for item in (first, second):
        Webhook(SECRET).verify(item["body"], item["headers"])
    assert WebhookDelivery.objects.get(pk=delivery.pk).status == DeliveryStatus.DELIVERED


@pytest.mark.postgres  # row locks: SQLite has none
def test_no_row_lock_is_held_while_the_receiver_answers(receiver: Receiver) -> None:
    # given a receiver that holds the request open
    receiver.hold = threading.Event()
    delivery = _enqueue()
    outcome: dict[str, bool] = {}

    def deliver() -> None:
        try:
            outcome["ok"] = webhook_deliver(delivery_id=delivery.pk)
        finally:
            connection.close()

    worker = threading.Thread(target=deliver)
    worker.start()
    assert receiver.arrived.wait(timeout=10), "the delivery never reached the receiver"

    try:
        # when another transaction locks the delivery row while the POST is in flight
        with transaction.atomic(), connections["default"].cursor() as cursor:
            cursor.execute("SELECT id FROM approvals_webhookdelivery WHERE id = %s FOR UPDATE NOWAIT", [delivery.pk])
            locked = cursor.fetchall()
        # and a second worker asks for the same delivery
        second_attempt = webhook_deliver(delivery_id=delivery.pk)
    finally:
        receiver.hold.set()
        worker.join(timeout=30)

    # then the lock was free, the second worker did not post it again (the first one's lease), it was delivered once
    assert locked == [(delivery.pk,)]
    assert second_attempt is False
    assert len(receiver.received) == 1
    assert outcome == {"ok": True}
    delivered = WebhookDelivery.objects.get(pk=delivery.pk)
    assert (delivered.status, delivered.attempts) == (DeliveryStatus.DELIVERED, 1)


def test_a_worker_that_dies_during_the_post_leaves_the_delivery_retryable(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a worker that dies after claiming the delivery, before it records anything
    delivery = _enqueue()

    def die(*args: Any, **kwargs: Any) -> None:
        raise SystemExit("worker killed")

    monkeypatch.setattr("approvals.webhooks._open", die)
    with pytest.raises(SystemExit):
        webhook_deliver(delivery_id=delivery.pk)
    monkeypatch.undo()
    monkeypatch.setenv("TOOLHUB_WEBHOOK_SECRET", SECRET)

    # then it stays pending, out of reach only until its lease ends
    claimed = WebhookDelivery.objects.get(pk=delivery.pk)
    assert (claimed.status, claimed.attempts) == (DeliveryStatus.PENDING, 1)
    assert claimed.next_attempt_at > timezone.now()
    assert webhooks_deliver_due() == 0

    # when the lease has ended, the periodic task delivers it, under the same id
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert webhooks_deliver_due() == 1
    [item] = receiver.received
    assert item["headers"]["webhook-id"] == delivery.message_id
    delivered = WebhookDelivery.objects.get(pk=delivery.pk)
    assert (delivered.status, delivered.attempts) == (DeliveryStatus.DELIVERED, 2)


def test_deliveries_give_up_after_the_last_attempt(receiver: Receiver, settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_MAX_ATTEMPTS": 2}
    receiver.statuses = [500, 500]
    delivery = _enqueue()

    assert webhook_deliver(delivery_id=delivery.pk) is False
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    assert webhook_deliver(delivery_id=delivery.pk) is False

    failed = WebhookDelivery.objects.get(pk=delivery.pk)
    assert (failed.status, failed.attempts) == (DeliveryStatus.FAILED, 2)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    assert webhooks_deliver_due() == 0
    assert len(receiver.received) == 2


def test_the_periodic_task_hands_due_deliveries_to_workers(receiver: Receiver) -> None:
    # given one due delivery and one whose next attempt is later
    due = _enqueue()
    later = _enqueue()
    WebhookDelivery.objects.filter(pk=later.pk).update(next_attempt_at=timezone.now() + timedelta(minutes=5))

    # when the periodic task runs (Celery is eager here: each handed-over task runs at once)
    expire_approvals_task.delay()

    # then only the due one was delivered, once
    assert [item["headers"]["webhook-id"] for item in receiver.received] == [due.message_id]
    assert WebhookDelivery.objects.get(pk=due.pk).status == DeliveryStatus.DELIVERED
    assert WebhookDelivery.objects.get(pk=later.pk).attempts == 0


def test_deploy_check_warns_when_the_webhook_cannot_sign(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``approvals.W002``: a webhook URL whose deliveries go out unsigned (no secret, or a malformed one)."""
    from approvals.checks import check_webhook_signing

    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": "", "WEBHOOK_SECRET_ENV": "REVIEW_WEBHOOK_SECRET"}
    monkeypatch.delenv("REVIEW_WEBHOOK_SECRET", raising=False)
    assert check_webhook_signing() == []  # no webhook, nothing to sign

    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": "https://hooks.example.com/toolhub"}
    unset = check_webhook_signing()
    monkeypatch.setenv("REVIEW_WEBHOOK_SECRET", "whsec_not base64!")
    malformed = check_webhook_signing()
    monkeypatch.setenv("REVIEW_WEBHOOK_SECRET", "whsec_" + base64.b64encode(b"k" * 32).decode())
    usable = check_webhook_signing()

    assert [m.id for m in unset] == ["approvals.W002"]
    assert "REVIEW_WEBHOOK_SECRET is not set: every delivery goes out unsigned" in unset[0].msg
    assert [m.id for m in malformed] == ["approvals.W002"]
    assert "the rest is not base64" in malformed[0].msg and "not base64!" not in malformed[0].msg
    assert usable == []
