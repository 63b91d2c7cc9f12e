"""Review of 2026-12-05 (ea): three leftovers of earlier reviews.

Findings (each fixed in the shared mechanism, each with a test below):

1. Webhook attempt errors (``approvals.webhooks._post``, shown to tenant staff with the delivery) were scrubbed of
   the URL's secret parts one by one with ``SecretScrubber``, which skips values shorter than 4 characters: a short
   password (``http://u:pw@host/``, quoted by ``http.client`` as ``nonnumeric port: 'pw@host'``) or a short query
   key (``?k=ab1``, quoted with the path by ``URL can't contain control characters``) stayed in the stored error.
   Now ``toolhub.url_secrets.url_quotes_redacted`` replaces the URL and each piece of it an HTTP client quotes
   (the URL, its path and query, its host part and the end of it after the user name) whole by its redacted form,
   before the long parts are scrubbed anywhere: nothing short is scrubbed everywhere, which would garble the error.
2. ``paused_run_claim`` (paused OpenAI Agents SDK runs) checked the tenant scope only for a run in a tenant: a
   deactivated user could still claim (and resume) their run in no tenant. It now asks
   ``toolhub.authorization.standing_refusal``, as the agent loop does before every model turn.
3. ``approvals.unanswered.expire_request`` wrote ``approval.expired`` and notified (signal, webhook) whether or not
   the call moved: a call no longer waiting for approval got an expiry event and notification it never had. Now
   both follow the call's conditional move (``tool_call_refuse``'s result), as ``toolhub/calls.py`` does.

Checked and holds:
- a URL quoted nowhere in an error (``Connection refused``) leaves the error as written; an error quoting the URL
  keeps its host and path words readable (only the secret parts are ``[redacted]``);
- ``paused_runs_ready`` lists only the user's own runs in their tenants; ``paused_run_claim`` still refuses another
  user's run and a run in a tenant the user left (``tenant_scope``);
- ``approvals_expire_due`` and a late decision reach ``expire_request`` under the request's lock
  (``locked_request``), so the request itself moves once.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from approvals import signals
from approvals.models import ApprovalRequest, ApprovalStatus, WebhookDelivery
from approvals.rows import locked_request
from approvals.unanswered import expire_request
from approvals.webhooks import _post
from tests.helpers import RequestCall
from toolhub.adapters.openai_agents.models import PausedAgentRun, PausedRunStatus
from toolhub.adapters.openai_agents.store import AdapterError, paused_run_claim
from toolhub.models import AuditEvent, CallStatus, ToolCall

pytestmark = pytest.mark.django_db


def _delivery() -> WebhookDelivery:
    return WebhookDelivery(event="approval.requested", payload={}, next_attempt_at=timezone.now())


@pytest.mark.parametrize(
    ("url", "secret", "kept"),
    [
        ("http://u:pw@127.0.0.1/hook", "pw@", "127.0.0.1"),
        ("http://127.0.0.1:1/ho ok?k=ab1", "ab1", "/ho ok?k="),
    ],
)
def test_a_short_secret_of_the_webhook_url_is_not_in_the_attempts_error(
    settings: Any, url: str, secret: str, kept: str
) -> None:
    """Found: a short password or query key of WEBHOOK_URL (under 4 characters) stayed in the attempt's error, as
    ``http.client`` quoted it. Expect: the quoted piece redacted whole, the rest of the error readable."""
    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "WEBHOOK_URL": url}

    ok, error = _post(_delivery(), timeout=2)

    assert not ok
    assert secret not in error
    assert "[redacted]" in error
    assert kept in error


def test_an_error_not_quoting_the_url_is_left_as_written(settings: Any) -> None:
    """Holds: an error that quotes nothing of the URL is stored as it was (no short value scrubbed everywhere).

    Expect: ``Connection refused`` in full, no marker."""
    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "WEBHOOK_URL": "http://127.0.0.1:1/hook?k=on"}

    ok, error = _post(_delivery(), timeout=2)

    assert not ok
    assert error == "URLError: <urlopen error [Errno 111] Connection refused>"


def test_a_deactivated_user_does_not_claim_their_paused_run_in_no_tenant(alice: User) -> None:
    """Found: ``paused_run_claim`` checked the tenant scope only for a run in a tenant; alice, deactivated, claimed
    her paused SDK run in no tenant and could resume it. Expect: refused as the loop refuses, the run still paused."""
    # given alice's decided paused run in no tenant, and alice deactivated
    paused = PausedAgentRun.objects.create(run_key="sdk-ea", tenant="", user=alice, agent_name="sdk", state={})
    User.objects.filter(pk=alice.pk).update(is_active=False)
    alice.refresh_from_db()

    # when she claims it, then it is refused and stays paused
    with pytest.raises(AdapterError):
        paused_run_claim(paused_run_id=paused.pk, user=alice)
    paused.refresh_from_db()
    assert paused.status == PausedRunStatus.PAUSED


def test_an_active_user_still_claims_their_paused_run_in_no_tenant(alice: User) -> None:
    """Holds: the standing check refuses only who lost it. Expect: alice, active, claims her run once."""
    paused = PausedAgentRun.objects.create(run_key="sdk-eb", tenant="", user=alice, agent_name="sdk", state={})

    run, decisions = paused_run_claim(paused_run_id=paused.pk, user=alice)

    assert run.pk == paused.pk and decisions == {}
    assert PausedAgentRun.objects.get(pk=paused.pk).status == PausedRunStatus.RESUMED


def test_expiry_records_and_notifies_only_when_the_call_moved(
    request_call: RequestCall, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: ``expire_request`` wrote ``approval.expired`` and sent ``approval_expired`` (and the webhook) even when
    the call had already left ``pending_approval``. Expect: no event and no notification for a call that did not move.
    """
    # given a held call whose request is pending while the call already settled otherwise
    call = request_call("risky_effect", {"note": "x"}, user=alice, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)
    ToolCall.objects.filter(pk=call.pk).update(status=CallStatus.CANCELLED)
    received: list[Any] = []

    def listener(**kwargs: Any) -> None:
        received.append(kwargs)

    signals.approval_expired.connect(listener)
    try:
        # when it expires
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
            expire_request(locked_request(request.pk))
    finally:
        signals.approval_expired.disconnect(listener)

    # then the call keeps its state, and nothing says it expired
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.CANCELLED
    assert not AuditEvent.objects.filter(call_id=call.pk, event_type="approval.expired").exists()
    assert not AuditEvent.objects.filter(call_id=call.pk, event_type="call.expired").exists()
    assert received == []
    assert ApprovalRequest.objects.get(pk=request.pk).status == ApprovalStatus.EXPIRED
