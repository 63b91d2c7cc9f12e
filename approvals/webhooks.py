"""Approval notifications to an optional webhook: JSON, HMAC-SHA256 signed, delivered and retried by workers."""

import hashlib
import hmac
import json
import os
import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.models import DeliveryStatus, WebhookDelivery
from toolhub.conf import toolhub_setting

__all__ = ["webhook_enqueue", "webhook_deliver", "webhooks_deliver_due", "signature_of"]

SIGNATURE_HEADER = "X-Toolhub-Signature"


def signature_of(body: bytes, secret: str) -> str:
    """``sha256=<hex>`` of the body; receivers recompute it with the shared secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_enqueue(*, event: str, payload: dict[str, Any]) -> WebhookDelivery | None:
    """Record a notification for delivery after commit; nothing happens when no webhook is configured."""
    if not toolhub_setting("WEBHOOK_URL"):
        return None
    delivery = WebhookDelivery.objects.create(event=event, payload=payload, next_attempt_at=timezone.now())
    delivery_id = delivery.pk

    def send() -> None:
        from approvals.tasks import deliver_webhook_task

        deliver_webhook_task.delay(delivery_id)

    transaction.on_commit(send, robust=True)
    return delivery


def webhook_deliver(*, delivery_id: int, timeout: float = 10.0) -> bool:
    """POST one delivery; on failure schedule the next attempt with exponential backoff (in the database)."""
    with transaction.atomic():
        delivery = WebhookDelivery.objects.select_for_update(skip_locked=True).filter(pk=delivery_id).first()
        if delivery is None or delivery.status != DeliveryStatus.PENDING:
            return False
        body = json.dumps(
            {"event": delivery.event, "delivery": delivery.pk, **delivery.payload}, sort_keys=True
        ).encode()
        secret = os.environ.get(toolhub_setting("WEBHOOK_SECRET_ENV"), "")
        headers = {"Content-Type": "application/json", "X-Toolhub-Event": delivery.event}
        if secret:
            headers[SIGNATURE_HEADER] = signature_of(body, secret)
        delivery.attempts += 1
        try:
            request = urllib.request.Request(toolhub_setting("WEBHOOK_URL"), data=body, headers=headers, method="POST")
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - operator-configured URL
                ok = 200 <= response.status < 300
                error = "" if ok else f"HTTP {response.status}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            ok, error = False, f"{type(exc).__name__}: {exc}"[:500]
        now = timezone.now()
        if ok:
            delivery.status, delivery.delivered_at, delivery.last_error = DeliveryStatus.DELIVERED, now, ""
        else:
            delivery.last_error = error
            if delivery.attempts >= int(toolhub_setting("WEBHOOK_MAX_ATTEMPTS")):
                delivery.status = DeliveryStatus.FAILED
            else:
                delivery.next_attempt_at = now + timedelta(seconds=min(3600, 2**delivery.attempts * 5))
        delivery.save()
    return ok


def webhooks_deliver_due() -> int:
    """Attempt every pending delivery whose time has come; return how many were attempted."""
    due = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=timezone.now())
    ids = list(due.values_list("pk", flat=True)[:200])
    for delivery_id in ids:
        webhook_deliver(delivery_id=delivery_id)
    return len(ids)
