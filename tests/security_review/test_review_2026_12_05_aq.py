"""Review of 2026-12-05 (aq): regressions and holes in the newest commits (a0c4d88..a48e13e).

Findings:

1. (placeholder)
"""

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.sagas.sample_tools import LOG, RELEASE_FAILS, TOOLS
from toolhub import sweeper
from toolhub.authorization import CallPrincipal
from toolhub.claims import tool_call_claim
from toolhub.models import CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.sagas import compensating
from toolhub.sagas.models import Compensation, CompensationStatus
from toolhub.sagas.recovery import sagas_sweep
from toolhub.sweeper import calls_reconcile_expired_leases
from toolhub.tools.context import ToolContext
from toolhub.tools.registry import registry

# --- 1. the reconciler's bound on lost attempts counted a compensation's ordinary failures -------------------


@pytest.fixture
def saga_tools(settings: Any) -> Iterator[None]:
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 5, "SAGA_RETRY_BASE_SECONDS": 10.0}
    LOG.clear()
    RELEASE_FAILS["on"] = False
    with registry.temporarily(*TOOLS):
        yield
    RELEASE_FAILS["on"] = False


def _saga_call(user: User, name: str, arguments: dict[str, Any]) -> ToolCall:
    principal = CallPrincipal(user_id=user.pk, username=user.username, tenant="acme")
    return tool_call_request(
        request=CallRequest(
            tool_name=name, arguments=arguments, principal=principal, context=ToolContext(tenant="acme"), saga_id="s"
        )
    )


def _lose_its_worker(call: ToolCall, worker: str) -> None:
    """The call is claimed by ``worker``, which dies running it: its lease ends with no outcome."""
    claimed = tool_call_claim(call_id=call.pk, worker=worker)
    assert claimed is not None and claimed.status == CallStatus.RUNNING
    ToolCall.objects.filter(pk=call.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def _retry_due(compensation: Compensation) -> None:
    Compensation.objects.filter(pk=compensation.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert sagas_sweep()["retried"] == 1


@pytest.mark.django_db(transaction=True)
def test_a_compensation_that_failed_twice_is_run_again_when_its_worker_is_lost_once(
    saga_tools: None, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: the reconciler queues a lost call of an idempotent tool again only while ``call.attempts`` is below
    ``CALL_MAX_ATTEMPTS`` (3), and ``attempts`` counts every claim: a compensation's call is the same row on each of
    its ``SAGA_MAX_ATTEMPTS`` attempts, so one whose downstream refused it twice (ordinary failures, retried with
    backoff) and whose worker was then restarted once (a deploy) was not run again: it needed attention, the
    compensation became ``unknown`` and the saga waited for an operator, although its tool is idempotent and no
    worker had died on it before. Every operator retry of a compensation (a fresh round) hit the same wall.
    Expect: the bound counts lost attempts in a row (the reconciler's own requeues since anyone else queued the
    call), as ``RUN_MAX_LOST_STEPS`` does for a run's steps: this call is queued again and then succeeds.
    """
    monkeypatch.setattr(sweeper, "dispatch_call", lambda call: None)
    _saga_call(alice, "reserve", {"item": "x"})
    RELEASE_FAILS["on"] = True
    _saga_call(alice, "explode", {"reason": "boom"})
    (compensation,) = Compensation.objects.filter(saga__key="s")
    _retry_due(compensation)  # attempt 2: refused again
    compensation.refresh_from_db()
    assert compensation.status == CompensationStatus.RETRY_SCHEDULED and compensation.attempts == 2

    RELEASE_FAILS["on"] = False
    with monkeypatch.context() as held:  # attempt 3 is queued for a worker, which dies running it
        held.setattr(compensating, "dispatch_call", lambda call: None)
        _retry_due(compensation)
    call = ToolCall.objects.get(pk=compensation.call_id)
    assert call.status == CallStatus.QUEUED
    _lose_its_worker(call, "w3")

    counts = calls_reconcile_expired_leases()

    row = ToolCall.objects.get(pk=call.pk)
    assert (row.status, counts) == (CallStatus.QUEUED, {"requeued": 1, "needs_attention": 0}), (row.status, row.error)
    compensation.refresh_from_db()
    assert compensation.status == CompensationStatus.RUNNING
