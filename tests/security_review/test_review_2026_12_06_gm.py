"""Review 2026-12-06 gm: review gb's widened fast path (``approvals.shortfall``: nothing read while the worker's
governance stamp is the one the release judged the approvals under, critical tools and multi-approver rules included),
and a compensation retried on its old approval.

Each finding's test failed on the reviewed code (main at b4a99d8) and passes now.

Findings:

1. A tool moved into a group restricting approvers by its code (``@tool(group=)``) kept its version (the group is no
   part of it) and moved no governance stamp until the catalogue synced (``migrate`` / ``sync_tools``): a worker on
   the new code claimed a call released by an operator outside that group's approvers under the release's stamp, read
   nothing and ran it, though its tool's approvers were the group's now (the full read would have sent it back: review
   fp). The release now keeps ``approvals.governing.approval_stamp``: the stamp, bound to the group the releasing
   process's code declares for the tool (the stamp itself for a tool declaring none, so ungrouped calls are unchanged),
   and the worker compares its own: a group moved in code (either way, in a web or a worker process of other code
   than the other's) takes the full read. Test:
   ``test_a_tool_moved_into_a_restricted_group_in_code_sends_an_approval_from_outside_it_back``; README.
2. A compensation's call that failed after an operator approved it, retried by that same operator
   (``compensation_retry``: they become one who asked for it, ``retried_by``), was queued again as the same call with
   its approval and ``approved_under`` kept: the worker's fast path read nothing and the full read judged the givers
   against the request's askers of the first round only, so the call ran again on its retrier's own approval; the
   README's four eyes bars who retried a compensation from deciding it. The retry's requeue now clears
   ``approved_under`` (the worker reads the approvals), and the full read holds them to the compensation's askers of
   now (``compensation_askers``, as a reopened request's are): the call goes back to the desk, the retrier among its
   askers, and runs once another operator approves (an external one is asked anew, ``_may_ask_again``). Test:
   ``test_a_compensation_retried_by_its_approver_does_not_run_again_on_their_own_approval``; README.

Checked and holding:
- What changes in code reaches the re-check: the risk and the code rule (``needs_approval``, by qualified name) are
  part of ``Tool.version``; a change sends the call back before the shortfall is asked (``_execute_claimed``), judged
  at the risk of now: a tool raised to critical in code needs two (test). The group declared in code did not (finding
  1). What an operator changes (rules, overrides, tool groups' approvers and ``extra_tools``, memberships, users'
  groups and bits) stamps governance (the watched tables).
- A tool whose code puts it in a restricting group, nothing changed since its release: the worker still reads none
  of its approvals (test): the fast path is kept for grouped tools.
- The fast path's statement counts (tests/approvepath: approve -> completed 9) are unchanged: the stamp compared is
  computed from the scope's stamp and the registry, reading nothing; a compensation's retry adds the full read to that
  retry only (``compensation_askers`` costs no query for a call that undoes nothing).
- A compensation retried by the sweeper (scheduled retries add nobody) or by someone who did not approve it runs on
  its approval after the full read, its approvers not among the askers (read in the code); failing compensations'
  retries without approval still pass (tests/sagas/test_services.py).
- Not changed: the body of a code rule (``needs_approval``) is identified by its qualified name only; it decides
  whether a call is held, not by how many, so an approval judged under the old body is not of fewer approvers.
"""

import dataclasses
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import Group, User

from approvals import shortfall
from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.approvals.conftest import Hold, hold  # noqa: F401 - the fixture, registered by being imported here
from tests.approvals.released import released_not_run, run_held, sent_back
from tests.security_review.conftest import rolled_back_step
from tests.tenancy.conftest import make_user
from tests.testapp.models import SideEffect
from toolhub import Param, governance, registry, tool
from toolhub.exceptions import DecisionNotAllowedError
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall, ToolGroup
from toolhub.sagas.models import Compensation, CompensationStatus
from toolhub.sagas.recovery import compensation_retry

pytestmark = pytest.mark.django_db

#: While true, ``review_gm_release`` fails (its first attempt, for a test).
FAILING: list[bool] = []


@tool(risk="high")
def review_gm_release(line: str) -> dict:
    """Release a reserved line (held for an operator: high risk); fails while ``FAILING`` says so."""
    if FAILING:
        raise RuntimeError("the line system is down")
    SideEffect.objects.create(call_id="", tool="review_gm_release", note=line)
    return {"released": line}


@tool(
    risk="low",
    compensate_with="review_gm_release",
    compensation_mapping=lambda arguments, result: {"line": arguments["line"]},
)
def review_gm_reserve(line: Annotated[str, Param("The line to reserve.")]) -> dict:
    """Reserve a line."""
    return {"line": line}


@pytest.fixture
def line_tools() -> Iterator[None]:
    """The reserve step and its held compensation, registered for the test."""
    with registry.temporarily(review_gm_release, review_gm_reserve):
        yield
    FAILING.clear()


def _deployed(monkeypatch: pytest.MonkeyPatch, name: str, **changes: Any) -> None:
    """The worker's code declares tool ``name`` otherwise (a deploy before the catalogue synced): ``changes``.

    A process on new code starts with nothing cached under the stamp (the test's process cached the old code's).
    """
    monkeypatch.setitem(registry._tools, name, dataclasses.replace(registry.get(name), **changes))
    monkeypatch.setattr(governance, "_current", governance._Cache(None))


def test_a_tool_moved_into_a_restricted_group_in_code_sends_an_approval_from_outside_it_back(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: the tool's code moved it into a group whose approvers are the treasury (``@tool(group=)``, no part of
    its version) after an operator outside the treasury released its call; the catalogue not synced yet, the stamp
    was the release's, so the worker on the new code read nothing and ran the call on that approval, though its
    tool's approvers are the treasury's now.

    Expect: the worker sends it back to the desk naming the operator whose approval no longer counts; nothing runs.
    """
    treasury = Group.objects.create(name="treasury-gm")
    ToolGroup.objects.create(name="pay-gm", approver_group=treasury)
    request = hold("pay 1")
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    before = ToolCall.objects.get(pk=request.call_id).tool_version
    _deployed(monkeypatch, "risky_effect", group="pay-gm")
    assert registry.get("risky_effect").version == before  # the group is no part of the version
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert call.status == CallStatus.PENDING_APPROVAL
    assert "operator" in sent_back(call.pk)["reason"]
    assert ApprovalRequest.objects.filter(call=call).count() == 1


def test_a_grouped_tools_unchanged_code_keeps_the_fast_path(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): a tool its code puts in a group restricting approvers (the operator among them), released and
    claimed with nothing changed: the worker reads none of its approvals (the stamp compared carries the group)."""
    treasury = Group.objects.create(name="treasury-gm")
    operator.groups.add(treasury)
    ToolGroup.objects.create(name="pay-gm", approver_group=treasury)
    _deployed(monkeypatch, "risky_effect", group="pay-gm")
    request = hold("pay 1")
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    reads: list[object] = []
    real = shortfall.released_request
    monkeypatch.setattr(shortfall, "released_request", lambda call_id: reads.append(call_id) or real(call_id))
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)
    assert reads == []


def test_a_risk_raised_in_code_sends_a_call_released_on_one_back_for_two(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): the code raises the tool to critical after its call was released on one approval, before the
    catalogue syncs: the risk is part of the tool's version, so the worker sends the call back needing two."""
    request = hold("pay 1")
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    _deployed(monkeypatch, "risky_effect", risk="critical")
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert call.status == CallStatus.PENDING_APPROVAL
    request.refresh_from_db()
    assert request.required_approvals == 2


def test_a_compensation_retried_by_its_approver_does_not_run_again_on_their_own_approval(
    line_tools: None,
    acme_operator: User,
    roles: dict[str, Group],
    tenant: Tenant,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: an operator approved a compensation's call, which failed; the same operator retried the compensation
    (``compensation_retry``, kept as one who asked for it: ``retried_by``), and the same call was queued again and ran
    on its old approval, theirs: one person both asked for that run and was the approval counted for it, which the
    README's four eyes bars (who retried a compensation never decides it).

    Expect: the retry does not go out on the retrier's approval: it is held for a decision anew, which the retrier may
    not give, and runs once another operator approves it (compensated once).
    """
    committed = django_capture_on_commit_callbacks
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 1}
    second = make_user("acme-operator-gm2", tenant=tenant, staff=True, groups=(roles["operators"],))
    third = make_user("acme-operator-gm3", tenant=tenant, staff=True, groups=(roles["operators"],))
    FAILING.append(True)
    rolled_back_step(acme_operator, "line-gm1", "review_gm_reserve", {"line": "L-1"}, committed)
    first = ToolCall.objects.get(kind=CallKind.COMPENSATION, tool_name="review_gm_release")
    request = ApprovalRequest.objects.get(call=first)
    with committed(execute=True):
        approval_approve(request_id=request.pk, user=second, expected_round=request.round)
    first.refresh_from_db()
    compensation = Compensation.objects.get(step_call__tool_name="review_gm_reserve")
    assert first.status == CallStatus.FAILED
    assert compensation.status == CompensationStatus.FAILED
    FAILING.clear()
    with committed(execute=True):
        compensation_retry(compensation=compensation, actor="operator:acme-operator-gm2", by=second)
    assert not SideEffect.objects.filter(tool="review_gm_release").exists()
    compensation.refresh_from_db()
    held = ApprovalRequest.objects.get(call_id=compensation.call_id, status="pending")
    with pytest.raises(DecisionNotAllowedError):
        approval_approve(request_id=held.pk, user=second, expected_round=held.round)
    with committed(execute=True):
        approval_approve(request_id=held.pk, user=third, expected_round=held.round)
    assert SideEffect.objects.filter(tool="review_gm_release").count() == 1
    compensation.refresh_from_db()
    assert compensation.status == CompensationStatus.SUCCEEDED
