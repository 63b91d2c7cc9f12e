"""Review of 2026-12-05 (az): sagas and compensations under changing governance.

Each test fails on the reviewed code (main at 317e64f) and states who reaches what, where ("Found: ...") and what
is expected ("Expect: ...").

Findings:

1. An external compensation (``Tool.external``, answered by an outside system) that its system answered with an
   error was "retried" by queueing its call for a worker, which cannot run an external tool: every attempt failed
   "is external ... cannot run here", the outside system was never asked again, and an operator's retry did the
   same, so only resolving by hand ended it. Now its retry waits for the outside system again (``awaiting_result``,
   the same call, checked as a release checks it), each ask counted as an attempt.
2. A compensation mapping returning the compensation's own Python types (``Decimal(result["amount"])``) made the
   write of ``Compensation.arguments`` raise ``TypeError``: the step was never recorded and every rollback of the
   saga answered 500, nothing undone. Now planned arguments are stored as JSON (``mapping._as_json``); a value no
   column takes is a mapping error naming the parameter and type, never the value.

Checked and found holding (no test here): a compensation runs as the step's user and tenant with their grants
re-read at request and on the worker (``undoing`` exempts only standing); a deleted step user leaves a principal
without a user (tenant grants only), judged the same on the worker (``_made_for`` reads the recorded id, gone);
operators' retry/resolve act on tenant-scoped rows under the saga's row lock (two retries, retry against resolve,
a due retry against an operator's resolve serialise; the loser gets ``InvalidTransitionError``), resolving keeps
four eyes (``compensation_settle_refusal``); a result's keys fill only the compensation's declared parameters, and a
tenant named in them is refused (``tenant_argument_denial``), failing the compensation for an operator.

Not fixed: a retried compensation runs the same call again without asking the approval policy anew (a rule added
since its first attempt does not hold it); a compensation names no agent, so an agent-side deny does not stop it
(README documents it).
"""

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from tests.security_review.conftest import client_for, rolled_back_step
from tests.tenancy.conftest import make_user
from toolhub import Param, Tool, registry, tool
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus
from toolhub.sagas.recovery import compensation_retry, compensation_retry_due

pytestmark = pytest.mark.django_db

UNPLUG = Tool.external(
    "review_az_unplug",
    "Unplug a leased line (done by the carrier's system, which posts the result).",
    {"type": "object", "properties": {"line": {"type": "string"}}, "required": ["line"]},
    idempotent=True,
)


@tool(
    risk="low",
    compensate_with="review_az_unplug",
    compensation_mapping=lambda arguments, result: {"line": arguments["line"]},
)
def review_az_plug(line: Annotated[str, Param("The leased line to plug in.")]) -> dict:
    """Plug in a leased line."""
    return {"line": line}


@pytest.fixture
def line_tools() -> Iterator[None]:
    with registry.temporarily(UNPLUG, review_az_plug):
        yield


@pytest.fixture
def acme_operator2(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-operator-az2", tenant=tenant, staff=True, groups=(roles["operators"],))


def test_an_external_compensation_answered_with_an_error_is_asked_again_from_outside(
    line_tools: None, acme_operator: User, acme_operator2: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: the carrier's system answers the compensation ``review_az_unplug`` with ``{"error": ...}`` (its
    back end was down); the saga schedules a retry, and the retry queues the same call for a worker, which cannot
    run an external tool: the call fails "is external ... cannot run here", attempt after attempt, and the
    carrier's system never sees it again; an operator's retry does the same.

    Expect: a retry of an external compensation waits for its result from outside again (``awaiting_result``,
    the same call and idempotency key), and the outside system's answer then compensates the step.
    """
    committed = django_capture_on_commit_callbacks
    step = rolled_back_step(acme_operator, "line-az1", "review_az_plug", {"line": "L-9"}, committed)
    call = ToolCall.objects.get(kind=CallKind.COMPENSATION, tool_name="review_az_unplug")
    assert call.status == CallStatus.AWAITING_RESULT
    carrier = client_for(acme_operator2)
    with committed(execute=True):
        answered = carrier.post(f"/api/v1/calls/{call.id}/result/", {"error": "carrier offline"}, format="json")
    assert answered.status_code == 200, answered.content
    compensation = Compensation.objects.get(step_call=step)
    assert compensation.status == CompensationStatus.RETRY_SCHEDULED

    Compensation.objects.filter(pk=compensation.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    with committed(execute=True):
        assert compensation_retry_due(compensation_id=compensation.pk)
    call.refresh_from_db()
    assert call.status == CallStatus.AWAITING_RESULT, f"the retry went to a worker: {call.status} {call.error!r}"

    with committed(execute=True):
        answered = carrier.post(f"/api/v1/calls/{call.id}/result/", {"result": {"unplugged": True}}, format="json")
    assert answered.status_code == 200, answered.content
    step.refresh_from_db()
    compensation.refresh_from_db()
    call.refresh_from_db()
    assert compensation.status == CompensationStatus.SUCCEEDED, (compensation.status, call.status, call.error)
    assert step.status == CallStatus.COMPENSATED


def test_an_operators_retry_of_a_failed_external_compensation_asks_the_outside_system_again(
    line_tools: None, acme_operator: User, acme_operator2: User, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    """Found: the carrier's system answered the compensation with an error on its last attempt (``failed``); an
    operator's retry queued the call for a worker, which failed it at once ("cannot run here").

    Expect: the retried call waits for the carrier's answer again (``awaiting_result``).
    """
    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "SAGA_MAX_ATTEMPTS": 1}
    committed = django_capture_on_commit_callbacks
    step = rolled_back_step(acme_operator, "line-az2", "review_az_plug", {"line": "L-10"}, committed)
    call = ToolCall.objects.get(kind=CallKind.COMPENSATION, tool_name="review_az_unplug")
    compensation = Compensation.objects.get(step_call=step)
    Compensation.objects.filter(pk=compensation.pk).update(max_attempts=0)
    with committed(execute=True):
        client_for(acme_operator2).post(f"/api/v1/calls/{call.id}/result/", {"error": "no such line"}, format="json")
    compensation.refresh_from_db()
    assert compensation.status == CompensationStatus.FAILED

    with committed(execute=True):
        compensation_retry(compensation=compensation, actor="user:acme-operator-az2")
    call.refresh_from_db()
    compensation.refresh_from_db()
    assert call.status == CallStatus.AWAITING_RESULT, f"the retry went to a worker: {call.status} {call.error!r}"
    assert compensation.status == CompensationStatus.RUNNING


@tool(risk="low", idempotent=True)
def review_az_release_hold(hold_id: str, amount: Decimal) -> dict:
    """Release a hold placed on a card."""
    return {"released": hold_id, "amount": str(amount)}


@tool(
    risk="low",
    compensate_with="review_az_release_hold",
    # What a developer writes for a parameter typed Decimal: the value as the compensation takes it.
    compensation_mapping=lambda arguments, result: {"hold_id": result["hold_id"], "amount": Decimal(result["amount"])},
)
def review_az_place_hold(amount: Annotated[Decimal, Param("How much to hold.")]) -> dict:
    """Place a hold on a card."""
    return {"hold_id": "H-1", "amount": str(amount)}


@pytest.fixture
def hold_tools() -> Iterator[None]:
    with registry.temporarily(review_az_release_hold, review_az_place_hold):
        yield


def test_a_mapping_that_returns_python_values_does_not_crash_the_saga(
    hold_tools: None, acme_operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: a compensation mapping returned the ``Decimal`` its compensation takes (``amount: Decimal``); the
    planned arguments were written as they were into ``Compensation.arguments`` (a JSON column), whose write raised
    ``TypeError: Object of type Decimal is not JSON serializable``: the step was never recorded, and every rollback
    of the saga (``POST /api/v1/sagas/{id}/rollback/``, a failed step) raised the same in ``record_missing_steps``:
    a 500, nothing undone, ever.

    Expect: the planned arguments are stored as JSON (the compensation's validation reads them back as
    ``Decimal``): the rollback is accepted and the compensation runs and succeeds.
    """
    committed = django_capture_on_commit_callbacks
    client = client_for(acme_operator)
    client.raise_request_exception = False
    with committed(execute=True):
        assert client.post("/api/v1/sagas/", {"saga_id": "hold-az1"}, format="json").status_code == 201
        step = client.post(
            "/api/v1/calls/",
            {"tool": "review_az_place_hold", "arguments": {"amount": "12.50"}, "saga_id": "hold-az1"},
            format="json",
        )
    assert ToolCall.objects.get(pk=step.json()["id"]).status == CallStatus.SUCCEEDED, step.content
    with committed(execute=True):
        rolled = client.post("/api/v1/sagas/hold-az1/rollback/", format="json")
    assert rolled.status_code == 202, rolled.status_code
    compensation = Compensation.objects.get(step_call_id=step.json()["id"])
    assert compensation.status == CompensationStatus.SUCCEEDED, (compensation.status, compensation.last_error)
    assert compensation.call is not None and compensation.call.result == {"released": "H-1", "amount": "12.50"}
