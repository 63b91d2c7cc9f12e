"""Review 2026-12-07 b: yesterday's approval governance (reviews gb, gm, gn): the worker's fast path that reads no
approvals while its governance stamp is the one the release judged under (``ToolCall.approved_under``,
``approvals.shortfall``), the stamp bound to the tool's code group (``approvals.governing.approval_stamp``) and the
compensation retry clearing ``approved_under`` and reading ``compensation_askers`` (``toolhub.sagas``).

Probed at main 8711560.

Findings: none in the mechanism. Fixed besides (the known left item): the model field help text of
``ToolCall.approved_under`` still said "the governance stamp its approvals were judged under"; it now says what it is
since review gm (the stamp bound to the group the tool's code declared at release; none: not known, or cleared by a
compensation's retry, and the worker then reads the approvals in full); migration ``toolhub 0053`` (help text only).

Checked and holding:
- Every input of the full read is a watched governance table or is fixed at release: the givers' active and superuser
  bits, groups, direct and group permissions, tenant memberships, tenants and retired slugs (``auth_user`` INSERT,
  DELETE, UPDATE OF is_superuser/is_active; ``auth_user_groups``, ``auth_user_user_permissions``,
  ``auth_group_permissions``, ``auth_group``, ``toolhub_tenantmembership``, ``toolhub_tenant``,
  ``toolhub_retiredtenantslug``); the tool groups' approvers, permissions, escalation groups, ``extra_tools`` and
  activation rules (``toolhub_toolgroup``); the rules and their quorum (``approvals_approvalrule``); risk overrides
  and enabled flags (``toolhub_tooldefinition``); remote MCP tools (their three tables). The code's risk, rule
  (``needs_approval`` by qualified name) and schema are the tool's version (a change sends the call back before the
  shortfall is asked); the code's group is in the compared stamp (gm). The request row (required count, approver
  group and permission, recorded further restrictions, escalation), its released round's decisions and its askers
  change only when the request opens or reopens (``approval_request_create``), which needs the call back in
  ``pending_approval``; the only way out of it to ``queued`` is ``tool_call_release``, which writes a fresh
  ``approved_under``. ``is_staff`` is no decision input (the REST decision needs the permission, not the console:
  review fp's ``test_an_approver_unstaffed_after_release_still_counts``). There are no tenant settings (a tenant is
  a slug and a name) and no ``TOOLHUB`` setting changes how many approve (``minimum_approvals`` is code).
- Askers added after a release: a run is retried only once failed and its retry queues no call again (the agents app
  moves no call to ``queued``); a rollback asked after a compensation was planned is not among its askers and sets no
  queued call in motion; a compensation's retrier is added before its call goes out, the requeue clears
  ``approved_under`` and the full read reads ``compensation_askers`` (gm, test there), and an external compensation's
  retry reads them in full before it may go out again (``_may_ask_again``, outside any governance scope: test here).
  A whole saga's retry (``compensations_retry``) adds the retrier to each before it launches; one launched later by
  ``advance`` is requeued through the same ``launch``.
- The stamp cannot be carried or forged: ``approved_under`` is written only by ``tool_call_release`` (under the
  decision's scope, stamp read after the request's lock) and cleared by a compensation's requeue; it is
  ``editable=False`` and on no serializer or admin form. It is one global counter (a PostgreSQL sequence, random on
  SQLite), so another tenant's change only moves it (full read, no false send-back: gb); two concurrent governance
  writes never leave the row on a value a release read before either committed (each takes its own ``nextval`` under
  the row lock). A mislabelled process cache (an older stamp put back) holds newer rows, never older ones, and the
  worker's stamp is the one its claim's UPDATE checked. No production ``governance_scope`` encloses a launch, a
  claim or a re-check (settle notices, dispatch and sagas run on commit, after the decision's scope).
- The rules are read again when the stamp moved and some rule asks several approvals or the tool is critical: a rule
  matching a tool group the worker's code moved the tool into (no catalogue sync) sends a call released on one back
  for two (test here; gm's test covers the group's approvers).
- Edits at approval: the release counts ``required_approvals_now`` on the edited arguments (``_edit`` stores them on
  the request first), the worker checks the binding against the call's arguments; agentic inner calls and subagent
  calls are requested anew through the pipeline (each its own request), MCP and the adapters have no decision door
  and wait for the worker's outcome.
- Documented, not changed: a call never held for approval (queued as no approval needed) runs as it was decided when
  a rule asking approval is added while it waits (README, "Approval policy": cancel it or revoke the grant); other
  approval rule sources (``register_approval_rule_source``) are read at request and edit, not by the worker.
"""

import dataclasses
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from approvals.models import ApprovalRequest, ApprovalRule, ApprovalStatus
from approvals.services import approval_approve
from tests.approvals.conftest import Hold, hold  # noqa: F401 - the fixture, registered by being imported here
from tests.approvals.released import released_not_run, run_held, sent_back
from tests.security_review.conftest import client_for, rolled_back_step
from tests.security_review.test_review_2026_12_06_ez import line_tools  # noqa: F401 - the fixture
from tests.tenancy.conftest import make_user
from toolhub import governance, registry
from toolhub.exceptions import DecisionNotAllowedError
from toolhub.models import CallKind, CallStatus, Tenant, ToolCall, ToolGroup
from toolhub.sagas.models import Compensation, CompensationStatus
from toolhub.sagas.recovery import compensation_retry

pytestmark = pytest.mark.django_db


def _deployed(monkeypatch: pytest.MonkeyPatch, name: str, **changes: Any) -> None:
    """The worker's code declares tool ``name`` otherwise (deployed, the catalogue not synced yet): ``changes``."""
    monkeypatch.setitem(registry._tools, name, dataclasses.replace(registry.get(name), **changes))
    monkeypatch.setattr(governance, "_current", governance._Cache(None))


def test_a_rule_on_the_group_the_code_moved_the_tool_into_sends_a_call_released_on_one_back_for_two(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): an operators' rule asks two approvals of tool group ``pay-b``; a call of a tool in no group is
    released on one, then the worker's code puts the tool in ``pay-b`` (no part of its version, the catalogue not
    synced): the stamp compared carries the group, so the worker reads the rules, finds two asked and sends the call
    back for two; nothing runs on the one approval."""
    ApprovalRule.objects.create(
        name="two for pay-b", tool_group=ToolGroup.objects.create(name="pay-b"), required_approvals=2
    )
    request = hold("pay 1")  # the rule does not match yet: released on one
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    _deployed(monkeypatch, "risky_effect", group="pay-b")
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert call.status == CallStatus.PENDING_APPROVAL
    assert "needs 2 approvals" in sent_back(call.pk)["reason"]
    request.refresh_from_db()
    assert (request.status, request.required_approvals) == (ApprovalStatus.PENDING, 2)


def test_an_external_compensation_retried_by_its_approver_is_asked_anew_not_sent_out_on_their_approval(
    line_tools: None,  # noqa: F811 - the fixture
    acme_operator: User,
    roles: dict[str, Group],
    tenant: Tenant,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): an external compensation (no worker re-checks it) approved by an operator, answered with an
    error and retried by that same operator is not sent out again on their approval (its ``approved_under`` is still
    set when ``_may_ask_again`` asks, outside any governance scope, so it reads the askers of now): it is asked anew
    as a new call held for a decision, which the retrier may not give and another operator may."""
    committed = django_capture_on_commit_callbacks
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 1}
    second = make_user("acme-operator-b2", tenant=tenant, staff=True, groups=(roles["operators"],))
    third = make_user("acme-operator-b3", tenant=tenant, staff=True, groups=(roles["operators"],))
    step = rolled_back_step(acme_operator, "line-b1", "review_ez_plug", {"line": "L-7"}, committed)
    first = ToolCall.objects.get(kind=CallKind.COMPENSATION, tool_name="review_ez_unplug")
    request = ApprovalRequest.objects.get(call=first)
    with committed(execute=True):
        approval_approve(request_id=request.pk, user=second, expected_round=request.round)
    first.refresh_from_db()
    assert first.status == CallStatus.AWAITING_RESULT and first.approved_under is not None
    with committed(execute=True):
        answered = client_for(second).post(f"/api/v1/calls/{first.id}/result/", {"error": "offline"}, format="json")
    assert answered.status_code == 200, answered.content
    compensation = Compensation.objects.get(step_call=step)
    assert compensation.status == CompensationStatus.FAILED
    with committed(execute=True):
        compensation_retry(compensation=compensation, actor="operator:acme-operator-b2", by=second)
    first.refresh_from_db()
    assert first.status == CallStatus.FAILED, "the external call went out again on its retrier's approval"
    compensation.refresh_from_db()
    assert compensation.call_id != first.id
    held = ApprovalRequest.objects.get(call_id=compensation.call_id, status=ApprovalStatus.PENDING)
    with pytest.raises(DecisionNotAllowedError):
        approval_approve(request_id=held.pk, user=second, expected_round=held.round)
    with committed(execute=True):
        approval_approve(request_id=held.pk, user=third, expected_round=held.round)
    assert ToolCall.objects.get(pk=compensation.call_id).status == CallStatus.AWAITING_RESULT
