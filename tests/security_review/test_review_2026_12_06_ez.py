"""Review 2026-12-06 ez: the review of reviews eu (approvals raised while a call waits or is queued) and eo (rights
re-read after a call or run that ran in the request).

Each finding's test failed on the reviewed code (main at 1257a41) and passes now.

Findings:

1. Review eu sends an approved call back to the desk when governance asks more approvals of it than it was released
   on (``approval_shortfall``), but only where a worker claims it. An external compensation (no worker) whose outside
   system answered with an error is retried as the same approved call (``toolhub.sagas.compensating``); that path
   checked only ``refusal_at_execution`` (so a changed tool version was caught), not the shortfall: a compensation
   approved by one operator went out to the outside system again on that one approval after its tool was raised to
   ``critical``. ``_may_ask_again`` now asks ``approval_no_longer_suffices`` too, as a worker would: such a retry is
   asked anew through the pipeline, a new call held for two distinct approvers
   (``test_an_external_compensation_raised_to_critical_is_not_asked_again_on_one_approval``); README.

Checked and holding (eu):
- No send-back loop: the request is reused (one per call), its new round's count is ``max(before, policy now)``, the
  release records the count it was released on (``_release`` is the only path to ``approved``), and the worker
  compares against the same ``_required_under_rules_now``; a call sent back and approved by two runs (eu's test).
- A sent-back request keeps its askers (``request.askers.add`` adds, never replaces) and counts approvals of its
  current round only: the first round's approver approving again counts once, never twice, and is not lost
  (``test_a_compensation_sent_back_keeps_its_askers_barred_and_runs_once_on_two_approvals``).
- The shortfall lookup reads the call's own request by ``call_id``; rules are matched with the call's tenant and
  requester (``database_rule_verdict``); ``rules_ask_several_approvers`` across tenants is only a pre-filter.
- An external call's first release is judged by the count computed under the decision's lock (no queue gap); a
  worker-run compensation is sent back like any call (its compensation stays ``running`` meanwhile, as for a tool
  changed).

Checked and holding (eo):
- ``ran_here`` excludes replays and waiting calls: an idempotent replay reads no rights twice and is answered by
  ``answering_principal`` as the first answer was; ``?wait=`` follows only a waiting call, once.
- ``_proceeded``: a superuser or boundary-crossing operator (no membership) reads everything (``scope.everything``
  is read before the membership filter); a tenant-less run is its user's own row; an inactive account's scope is
  ``_NOBODY`` and ``visible_rows`` answers nothing.
- MCP progress of a tenant-less call is cut only when the account is deactivated; the recheck reads a copy of the
  user (Django's ``__getstate__`` copies ``_state``), so the request's user is not refreshed under other threads.

Left (not findings, noted): the claim that sends a call back counts as one of its ``attempts``; a superuser's
``superuser_outside_approvers`` mark is on their own decision's event, while a later approver's releasing event
lists them in ``approved_by`` without the mark.
"""

from collections.abc import Iterator
from datetime import timedelta
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_approve
from tests.security_review.conftest import client_for, rolled_back_step
from tests.tenancy.conftest import make_user
from toolhub import Param, Tool, registry, tool
from toolhub.catalogue import tool_catalogue_sync, tool_definition_govern
from toolhub.exceptions import DecisionNotAllowedError
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall, ToolDefinition
from toolhub.sagas.models import Compensation, CompensationStatus
from toolhub.sagas.recovery import compensation_retry_due

pytestmark = pytest.mark.django_db

UNPLUG = Tool.external(
    "review_ez_unplug",
    "Unplug a leased line (done by the carrier's system, which posts the result).",
    {"type": "object", "properties": {"line": {"type": "string"}}, "required": ["line"]},
    idempotent=True,
    risk="high",
)


@tool(
    risk="low",
    compensate_with="review_ez_unplug",
    compensation_mapping=lambda arguments, result: {"line": arguments["line"]},
)
def review_ez_plug(line: Annotated[str, Param("The leased line to plug in.")]) -> dict:
    """Plug in a leased line."""
    return {"line": line}


@pytest.fixture
def line_tools() -> Iterator[None]:
    with registry.temporarily(UNPLUG, review_ez_plug):
        yield


@pytest.fixture
def acme_operator2(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-operator-ez2", tenant=tenant, staff=True, groups=(roles["operators"],))


def test_an_external_compensation_raised_to_critical_is_not_asked_again_on_one_approval(
    line_tools: None, acme_operator: User, acme_operator2: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: review eu sends an approved call back to the desk when governance asks more approvals of it than it was
    released on, but only where a worker claims it; an external compensation approved by one operator, answered with
    an error by its outside system and retried after its tool was raised to ``critical`` went out again
    (``awaiting_result``, the same call) on that one approval.

    Expect: the retry is not the approved call once more: it is asked anew through the pipeline, held for a decision
    that needs two distinct approvers; the earlier call does not wait for the outside system again.
    """
    committed = django_capture_on_commit_callbacks
    step = rolled_back_step(acme_operator, "line-ez1", "review_ez_plug", {"line": "L-9"}, committed)
    call = ToolCall.objects.get(kind=CallKind.COMPENSATION, tool_name="review_ez_unplug")
    assert call.status == CallStatus.PENDING_APPROVAL
    request = ApprovalRequest.objects.get(call=call)
    assert request.required_approvals == 1
    with committed(execute=True):
        approval_approve(request_id=request.pk, user=acme_operator2, expected_round=1)
    call.refresh_from_db()
    assert call.status == CallStatus.AWAITING_RESULT
    with committed(execute=True):
        answered = client_for(acme_operator2).post(
            f"/api/v1/calls/{call.id}/result/", {"error": "carrier offline"}, format="json"
        )
    assert answered.status_code == 200, answered.content
    compensation = Compensation.objects.get(step_call=step)
    assert compensation.status == CompensationStatus.RETRY_SCHEDULED

    tool_catalogue_sync()
    definition = ToolDefinition.objects.get(name="review_ez_unplug")
    tool_definition_govern(definition=definition, actor="operator:admin", risk_override="critical")
    Compensation.objects.filter(pk=compensation.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    with committed(execute=True):
        compensation_retry_due(compensation_id=compensation.pk)
    call.refresh_from_db()
    assert call.status != CallStatus.AWAITING_RESULT, "the external call went out again on one approval"
    compensation.refresh_from_db()
    assert compensation.call_id != call.id
    again = ApprovalRequest.objects.get(call_id=compensation.call_id)
    assert again.status == ApprovalStatus.PENDING and again.required_approvals == 2


@tool(risk="high", idempotent=True)
def review_ez_unseal(line: str) -> dict:
    """Unseal a leased line (a worker runs it)."""
    return {"unsealed": line}


@tool(
    risk="low",
    compensate_with="review_ez_unseal",
    compensation_mapping=lambda arguments, result: {"line": arguments["line"]},
)
def review_ez_seal(line: Annotated[str, Param("The leased line to seal.")]) -> dict:
    """Seal a leased line."""
    return {"line": line}


@pytest.fixture
def seal_tools() -> Iterator[None]:
    with registry.temporarily(review_ez_unseal, review_ez_seal):
        yield


@pytest.fixture
def acme_operator3(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-operator-ez3", tenant=tenant, staff=True, groups=(roles["operators"],))


def test_a_compensation_sent_back_keeps_its_askers_barred_and_runs_once_on_two_approvals(
    seal_tools: None,
    acme_operator: User,
    acme_operator2: User,
    acme_operator3: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Holding: a worker's compensation approved by one operator and sent back because its tool was raised to
    ``critical`` while it sat in the queue keeps the operator who rolled back barred (four eyes), counts the first
    round's approver once in the new round, and runs once two distinct approvers released it: no second send-back.
    """
    committed = django_capture_on_commit_callbacks
    rolled_back_step(acme_operator, "line-ez2", "review_ez_seal", {"line": "L-7"}, committed)
    call = ToolCall.objects.get(kind=CallKind.COMPENSATION, tool_name="review_ez_unseal")
    request = ApprovalRequest.objects.get(call=call)
    assert call.status == CallStatus.PENDING_APPROVAL and acme_operator in request.askers.all()
    with committed(execute=False) as callbacks:
        approval_approve(request_id=request.pk, user=acme_operator2, expected_round=1)
    tool_catalogue_sync()
    definition = ToolDefinition.objects.get(name="review_ez_unseal")
    tool_definition_govern(definition=definition, actor="operator:admin", risk_override="critical")
    with committed(execute=True):
        for callback in callbacks:
            callback()

    request.refresh_from_db()
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    assert (request.round, request.required_approvals, request.source) == (2, 2, "rules_changed")
    assert acme_operator in request.askers.all()
    with pytest.raises(DecisionNotAllowedError), committed(execute=True):
        approval_approve(request_id=request.pk, user=acme_operator, expected_round=2)
    with committed(execute=True):
        approval_approve(request_id=request.pk, user=acme_operator2, expected_round=2)
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    with committed(execute=True):
        approval_approve(request_id=request.pk, user=acme_operator3, expected_round=2)
    call.refresh_from_db()
    request.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED, (call.status, call.error)
    assert request.status == ApprovalStatus.APPROVED and request.required_approvals == 2
