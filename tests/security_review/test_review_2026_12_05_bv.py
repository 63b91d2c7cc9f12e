"""Review of 2026-12-05 (bv): what depends on time (expiries, deadlines, sweeps, backoffs, time zones).

Each test fails on the reviewed code (main at 1a7a2e2); its docstring says what was found and what is expected.

Findings:
1. A call of an external tool asked without approval never expired: the pipeline wrote it ``awaiting_result``
   without ``queued_at``, from which the sweep counts. Fixed: the pipeline stamps it; the deadline is read from
   ``queued_at``, else ``created_at`` (rows already written) (``toolhub.waiting.awaiting_results_past_deadline``).
2. A result posted after ``EXTERNAL_RESULT_TIMEOUT_SECONDS`` was accepted until a sweep happened to expire the call.
   Fixed: ``tool_call_submit_result`` reads the same deadline; a late result expires the call (audited, the model
   told) and answers 409.
3. A ``*_SECONDS`` setting of ``inf`` or ``1e12`` validated, then every held call raised ``OverflowError`` when its
   deadline was computed. Fixed: durations are at most 100 years (``toolhub.conf.MAX_SECONDS``).
4. A compensation's backoff overflowed (``OverflowError``) from its 1026th attempt instead of staying at
   ``SAGA_RETRY_MAX_SECONDS``. Fixed: the exponent is bounded first (``toolhub.sagas.conf.retry_delay_seconds``).
5. An approval rule's ``timeout_seconds`` or a tool group's ``escalate_after_seconds`` of 0 was accepted and read as
   unset (the 24 h / 1 h defaults). Fixed: both are at least 1 (a validator; stored zeros become unset, as read).

Checked and found holding (no test here): an approval decided after its ``expires_at`` (approve, edit or reject,
API or desk) expires there under the request's lock, the expiry committed and audited (``approval.expired`` on the
call's own tenant chain) before ``AlreadyDecidedError`` is raised; the expiry sweep re-reads status and deadline
under the lock, expires before it escalates, and escalation is skipped for a decided request; every sweep
(approvals, lost calls, leases, awaiting results, sagas) moves rows by guarded transitions of the row's own call,
so two beats at once act once and each event goes to that call's tenant chain (the late-result expiry and the sweep
were run on PostgreSQL too); a reopened request (tool changed) gets a fresh deadline; webhook attempts are signed
with their own timestamp, their backoff is capped (``MAX_BACKOFF_SECONDS``) and their exponent bounded by
``WEBHOOK_MAX_ATTEMPTS``; a model provider's deadlines are admin-set and bounded (``MAX_MODEL_DEADLINE_SECONDS``),
nothing a run user or model sends extends them; ``?wait=`` is cut to ``CALL_WAIT_MAX_SECONDS`` and refuses
``inf``/negative; ``USE_TZ`` with UTC throughout, and approval rules refuse a date-time without its offset.

Not fixed: API tokens (DRF ``authtoken``) never expire (a deployment choice, not a deadline toolhub states);
``?status=pending`` lists requests past their deadline until the next sweep (deciding one expires it).
"""

from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.models import ApprovalRule
from tests.helpers import RequestCall, event_types
from tests.tools.test_external_and_loop import LOOKUP
from toolhub import registry
from toolhub.conf import toolhub_settings
from toolhub.models import CallStatus, ToolGroup
from toolhub.sagas.conf import retry_delay_seconds
from toolhub.sweeper import calls_expire_awaiting_results


def _later(seconds: float) -> Any:
    """``timezone.now`` frozen ``seconds`` from now (every module reads it through ``django.utils.timezone``)."""
    return mock.patch("django.utils.timezone.now", return_value=timezone.now() + timedelta(seconds=seconds))


def test_a_direct_external_call_expires_when_its_result_never_comes(alice: User, request_call: RequestCall) -> None:
    """Found: a call of an external tool asked without approval was written ``awaiting_result`` with no
    ``queued_at``, and the sweep's expiry counts from ``queued_at``: the call (and a run waiting on it) waited
    forever; ``EXTERNAL_RESULT_TIMEOUT_SECONDS`` held only for calls released by an approval (the suite's own
    expiry test set ``queued_at`` by hand). Expect: it expires once its wait is over, as the README says.
    """
    with registry.temporarily(LOOKUP):
        call = request_call("crm_lookup", {"email": "a@example.com"}, alice)
        assert call.status == CallStatus.AWAITING_RESULT
        with _later(60):
            assert calls_expire_awaiting_results() == 0
        with _later(3 * 24 * 3600):
            assert calls_expire_awaiting_results() == 1
    call.refresh_from_db()
    assert call.status == CallStatus.EXPIRED


def test_a_result_that_comes_after_the_wait_is_over_is_refused(
    alice: User, alice_client: APIClient, request_call: RequestCall, committed: Any
) -> None:
    """Found: ``POST /calls/{id}/result/`` accepted a result after ``EXTERNAL_RESULT_TIMEOUT_SECONDS`` until the
    next sweep happened to expire the call (every 30 s, or never while beat is down); the run went on with an
    answer that came after its deadline. An approval past its deadline expires when decided; a result did not.
    Expect: a result that comes after the deadline expires the call there and then (audited, the model told)
    and answers 409 with why; nothing of the late result is kept.
    """
    with registry.temporarily(LOOKUP):
        call = request_call("crm_lookup", {"email": "a@example.com"}, alice)
        past_deadline = toolhub_settings().EXTERNAL_RESULT_TIMEOUT_SECONDS + 1
        with _later(past_deadline):
            response = committed(
                alice_client.post, f"/api/v1/calls/{call.id}/result/", {"result": {"tier": "gold"}}, format="json"
            )
    assert response.status_code == 409, response.content
    assert "expired" in response.json()["detail"]
    call.refresh_from_db()
    assert call.status == CallStatus.EXPIRED and call.result is None
    assert event_types(call)[-1] == "call.expired"


def test_a_duration_no_date_can_be_counted_to_fails_startup_with_its_key() -> None:
    """Found: every ``*_SECONDS`` setting took any float above 0: ``inf`` or ``1e12`` (beyond the year 9999)
    validated, then every held call raised ``OverflowError`` when its request's deadline was computed (and the
    sweeps' cutoffs likewise), far from the setting that caused it. Expect: such a value fails when the settings
    are built, ``ImproperlyConfigured`` naming the key, as any other bad value does.
    """
    for key, value in [("APPROVAL_TIMEOUT_SECONDS", float("inf")), ("EXTERNAL_RESULT_TIMEOUT_SECONDS", 1e12)]:
        with override_settings(TOOLHUB={key: value}), pytest.raises(ImproperlyConfigured, match=key):
            toolhub_settings()


def test_a_compensation_retried_many_times_still_has_a_next_attempt() -> None:
    """Found: a compensation's backoff was ``SAGA_RETRY_BASE_SECONDS * 2 ** (attempt - 1)`` in floats, capped
    only after it was computed: from attempt 1026 (an operator's retries each add ``SAGA_MAX_ATTEMPTS``, and the
    setting has no upper bound) it raised ``OverflowError`` when the failed attempt's outcome was applied, every
    sweep, instead of scheduling the next one. Expect: the delay stays at ``SAGA_RETRY_MAX_SECONDS``.
    """
    assert retry_delay_seconds(2000) == toolhub_settings().SAGA_RETRY_MAX_SECONDS


@pytest.mark.django_db
def test_a_zero_second_approval_timeout_or_escalation_is_refused_where_it_is_entered() -> None:
    """Found: an approval rule's ``timeout_seconds`` and a tool group's ``escalate_after_seconds`` took 0 (a
    ``PositiveIntegerField``), which the request's terms read as unset (``or``): a rule meant to give operators
    no time at all kept its calls open for the default 24 hours, and an escalation "at once" came after an hour,
    without a word where the operator typed it. Expect: 0 is refused by the form's validation of the field.
    """
    rule = ApprovalRule(name="instant", timeout_seconds=0)
    with pytest.raises(ValidationError) as refused:
        rule.clean_fields()
    assert "timeout_seconds" in refused.value.message_dict
    group = ToolGroup(name="instant", escalate_after_seconds=0)
    with pytest.raises(ValidationError) as refused:
        group.clean_fields()
    assert "escalate_after_seconds" in refused.value.message_dict
