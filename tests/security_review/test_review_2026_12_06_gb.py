"""Review 2026-12-06 gb: the worker's four-eyes re-check before it runs an approved call ("review the review" of
reviews fj, fp, fx and fz: ``ToolCall.approved_under``, ``approvals.shortfall``, ``ToolCall.claim_hold``,
``ApproverStanding(released=True)``, ``further_restrictions(governing_now=)``).

Each finding's test failed on the reviewed code (main at 2c06cf9) and passes now.

Findings:

1. The fast path (nothing read while the worker's governance stamp is the one the release judged the approvals
   under) applied only while no rule anywhere asked two approvals and the call's tool was not critical: a rule of one
   tenant asking two approvals of another tool (or any critical tool) made the worker of every approved call of every
   tenant read its approvals, request and askers again before running it, though nothing had changed since the
   release counted them: one statement more per approved call (approve -> completed 10, not 9), a cost one tenant's
   rule put on all others (the noise the review asked about), and a critical tool never had the fast path at all.
   Under an unchanged stamp the rules and risks are those the release counted (a rule or a risk override changed
   stamps governance; a tool's code risk changes its version, sent back before), so the worker now reads nothing
   then; a moved stamp reads them as before and a rule raised since still sends the call back. Tests:
   ``test_another_tenants_two_approver_rule_costs_no_read_of_an_unchanged_approval``,
   ``test_a_critical_call_released_on_two_costs_no_read_and_a_rule_raised_since_still_sends_it_back``; README.

Checked and holding:
- No false ``rules_changed`` send-back across tenants: globex's changes after acme's call was released (a member
  added, a globex rule asking two approvals of the same tool, a globex-bound tool group restricting approvers of the
  same tool) move the stamp, the worker reads the approvals, and the call runs in its first round (tests); with
  acme's own rule asking two, a globex change reads and runs as well (test). ``required_under_rules_now`` and the
  release's ``required_approvals_now`` are the same function of the same rows, so a moved stamp alone never asks more.
- An approver's membership removed and re-added after the release: the stamp moved twice, the approval still counts
  and the call runs (test). A superuser outside the tool group's approvers and in no tenant, approving alone: after an
  unrelated change the full read still counts them (test; their bit cleared sends it back: review fp).
- A call re-queued by the reconciler after its worker died (an idempotent tool) is claimed and re-checked again;
  its approver deactivated meanwhile sends it back, the lost attempt still counted (test).
- Batch claims (``WORKER_CLAIM_BATCH`` > 1) check no stamp and keep no hold: each call's re-check reads the stamp
  just before it runs: an approver deactivated while the batch's first call ran sends the second back (test; review
  fp's for a change before the batch); a handed-back call is re-checked at its next claim. A single claim decides
  in the governance its UPDATE checked (``claim_hold``), one whose stamp moved while it waited for its locks
  (``governance_moved``) or its last, unchecked try reads it (read in the code; reviews fx, fz).
- No production ``governance_scope`` encloses a worker's claim or re-check (an eager task runs on commit, after the
  decision's scope closed): a nested scope would hand the claim and the re-check the outer stamp (read in the code).
- A compensation's call held for approval, released by an operator deactivated before the worker claims it, goes
  back to the desk with the compensation still running, and runs once another operator approves: compensated once
  (test). An agentic compensation's inner calls held for approval are released, claimed and re-checked by the same
  path (``_execute_claimed``, their principal ``undoing``); an external compensation's retry reads in full outside
  any scope (``governance_scope_stamp()`` is ``None``) (read in the code; reviews ez, fd).
- A call released by an edit (the editor's approval) goes back to the desk when the editor lapses before the worker
  claims it, with the edited arguments; another operator's approval of that version runs exactly it (test).
- The send-back reason names at most three usernames (``decided_by_name``, 150 characters) and a count of the rest,
  never an argument (review fp's test).
- Shared assumption, noted: a tool moved into a code-declared group (``@tool(group=)``, not part of its version)
  stamps governance only when the catalogue is synced (``migrate``, ``sync_tools``); a worker on new code before that
  judges an unchanged stamp's approvals as released, as it did for non-critical tools before this review.
"""

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from approvals import shortfall
from approvals.models import ApprovalRequest, ApprovalRule
from approvals.services import approval_approve
from tests.approvals.conftest import Hold, hold  # noqa: F401 - the fixture, registered by being imported here
from tests.approvals.released import released_not_run, run_held, sent_back
from tests.security_review.conftest import rolled_back_step
from tests.tenancy.conftest import make_user
from tests.testapp.models import SideEffect
from toolhub import Param, registry, tool
from toolhub.claims import tool_calls_claim
from toolhub.models import AuditEvent, CallKind, CallStatus, Tenant, TenantMembership, ToolCall, ToolGroup
from toolhub.sagas.models import Compensation, CompensationStatus
from toolhub.sweeper import calls_reconcile_expired_leases

pytestmark = pytest.mark.django_db


@tool(risk="high")
def review_gb_release(line: str) -> dict:
    """Release a reserved line (held for an operator: high risk)."""
    SideEffect.objects.create(call_id="", tool="review_gb_release", note=line)
    return {"released": line}


@tool(
    risk="low",
    compensate_with="review_gb_release",
    compensation_mapping=lambda arguments, result: {"line": arguments["line"]},
)
def review_gb_reserve(line: Annotated[str, Param("The line to reserve.")]) -> dict:
    """Reserve a line."""
    return {"line": line}


#: What ``review_gb_pay`` does while it runs (set by a test): governance changes between a batch's calls.
WHILE_PAYING: list[Callable[[], Any]] = []


@tool(risk="high")
def review_gb_pay(note: str) -> dict:
    """Pay (held for an operator: high risk); the world changes while it runs."""
    for change in WHILE_PAYING:
        change()
    SideEffect.objects.create(call_id="", tool="review_gb_pay", note=note)
    return {"paid": note}


@pytest.fixture
def line_tools() -> Iterator[None]:
    """The reserve step and its held compensation, registered for the test."""
    with registry.temporarily(review_gb_release, review_gb_reserve):
        yield


Settle = Callable[..., Any]


def _sent_back(call_id: Any) -> bool:
    """Whether a worker sent the call back to the desk."""
    return AuditEvent.objects.filter(
        call_id=call_id, event_type="call.pending_approval", actor__startswith="worker:"
    ).exists()


class _Reads:
    """Counts the worker's reads of the approvals a call was released on (``approvals.rows.released_request``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = shortfall.released_request

        def counted(call_id: object) -> Any:
            self.count += 1
            return real(call_id)

        monkeypatch.setattr(shortfall, "released_request", counted)


def test_another_tenants_changes_send_no_approved_call_back(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    other_tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): after acme's call was released, globex gains a member, a rule asking two approvals of the same
    tool and a globex-bound group restricting its approvers: the stamp moved, the worker reads the approvals, and the
    call runs in its first round with no send-back."""
    first = hold("pay 1")
    callbacks = released_not_run(first, operator, django_capture_on_commit_callbacks)
    stranger = User.objects.create_user("globex-op", "g@example.com", "pw-globex-op")
    TenantMembership.objects.create(user=stranger, tenant=other_tenant)
    ApprovalRule.objects.create(name="globex two", tool_name="risky_effect", tenant=other_tenant, required_approvals=2)
    treasury = Group.objects.create(name="globex-treasury-gb")
    ToolGroup.objects.create(
        name="globex-pay-gb",
        extra_tools=["risky_effect"],
        approver_group=treasury,
        activation_rules=[{"tenants": ["globex"]}],
    )
    reads = _Reads(monkeypatch)
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=first.call_id)
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)
    assert not _sent_back(call.pk)
    assert reads.count == 1  # read in full: the stamp moved


def test_an_approvers_membership_removed_and_added_again_still_counts(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    tenant: Tenant,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): the approver left acme and came back before the worker claimed the call (two stamps later):
    their approval still counts and the call runs in its first round."""
    first = hold("pay 1")
    callbacks = released_not_run(first, operator, django_capture_on_commit_callbacks)
    TenantMembership.objects.filter(user=operator).delete()
    TenantMembership.objects.create(user=operator, tenant=tenant)
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=first.call_id)
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)


def test_a_superuser_outside_the_approvers_and_every_tenant_still_counts_after_a_change(
    hold: Hold,  # noqa: F811 - the fixture
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): a superuser in no tenant and outside the tool group's approver group approved alone; after an
    unrelated change (the stamp moved) the worker's full read still counts them and the call runs."""
    root = User.objects.create_superuser("root-gb", "root@example.com", "pw-root-gb")
    treasury = Group.objects.create(name="treasury-gb")
    ToolGroup.objects.create(name="pay-gb", extra_tools=["risky_effect"], approver_group=treasury)
    first = hold("pay 1")
    callbacks = released_not_run(first, root, django_capture_on_commit_callbacks)
    Group.objects.create(name="unrelated-gb")  # the stamp moves
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=first.call_id)
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)


def test_a_call_released_on_its_tenants_two_approver_rule_runs_after_another_tenants_change(
    request_call: Any,
    alice: User,
    operator: User,
    second_operator: User,
    tenant: Tenant,
    other_tenant: Tenant,
    committed: Settle,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): acme's rule asks two approvals; released on two, a globex change moves the stamp: the worker
    reads the rules and approvals again and runs the call, asking no more of it."""
    ApprovalRule.objects.create(name="acme two", tool_name="risky_effect", tenant=tenant, required_approvals=2)
    call = request_call("risky_effect", {"note": "pay 1"}, alice, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)
    assert request.required_approvals == 2
    committed(approval_approve, request_id=request.pk, user=operator, expected_round=1)
    callbacks = released_not_run(request, second_operator, django_capture_on_commit_callbacks)
    TenantMembership.objects.create(
        user=User.objects.create_user("globex-2", "g2@example.com", "pw-globex-2"), tenant=other_tenant
    )
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)


def test_another_tenants_two_approver_rule_costs_no_read_of_an_unchanged_approval(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    other_tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: a rule of globex asking two approvals of another tool (made before acme's call was held: nothing
    changed since its release) had the worker read the approvals of every approved call of every tenant again before
    running it (one statement each: approve -> completed 10, not 9), though under the stamp the release judged them
    the rules and risks are those it counted.

    Expect: the call runs in its first round with no read of its approvals.
    """
    ApprovalRule.objects.create(name="globex two", tool_name="record_effect", tenant=other_tenant, required_approvals=2)
    request = hold("pay 1")
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    reads = _Reads(monkeypatch)
    run_held(callbacks, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)
    assert reads.count == 0


def test_a_critical_call_released_on_two_costs_no_read_and_a_rule_raised_since_still_sends_it_back(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Settle,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: a call of a critical tool, released on the two approvals it needs, had its approvals read again before
    it ran whatever changed (the fast path never applied to a critical tool).

    Expect: unchanged governance reads nothing and runs it; a rule raised to three approvals after the release of a
    second call still sends that one back (the stamp moved), saying how many it needs now.
    """
    first = hold("pay 1", approvers=2)
    committed(approval_approve, request_id=first.pk, user=operator, expected_round=1)
    callbacks = released_not_run(first, second_operator, django_capture_on_commit_callbacks)
    reads = _Reads(monkeypatch)
    run_held(callbacks, django_capture_on_commit_callbacks)
    assert ToolCall.objects.get(pk=first.call_id).status == CallStatus.SUCCEEDED
    assert reads.count == 0

    second = hold("pay 2", approvers=2)
    committed(approval_approve, request_id=second.pk, user=operator, expected_round=1)
    callbacks = released_not_run(second, second_operator, django_capture_on_commit_callbacks)
    ApprovalRule.objects.create(name="three", tool_name="risky_effect", required_approvals=3)
    run_held(callbacks, django_capture_on_commit_callbacks)
    assert ToolCall.objects.get(pk=second.call_id).status == CallStatus.PENDING_APPROVAL
    assert "now needs 3 approvals" in sent_back(second.call_id)["reason"]
    assert reads.count == 1


def test_a_call_requeued_after_its_worker_died_is_checked_again_at_its_next_claim(
    request_call: Any,
    alice: User,
    operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): an approved idempotent call whose worker died after its claim (the re-check passed, nothing
    read) and whose approver was deactivated before the reconciler queued it again is re-checked at its next claim
    (``approved_under`` no longer the stamp): it goes back to the desk, the lost attempt still counted."""
    ApprovalRule.objects.create(name="hold idempotent", tool_name="slow_idempotent", required_approvals=1)
    call = request_call("slow_idempotent", {"seconds": 0}, alice, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)
    released_not_run(request, operator, django_capture_on_commit_callbacks)  # its delivery is lost
    (claimed,) = tool_calls_claim(call_id=call.pk, worker="w-gb", limit=1)
    assert claimed.approved_under is not None
    ToolCall.objects.filter(pk=call.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    User.objects.filter(pk=operator.pk).update(is_active=False)
    with django_capture_on_commit_callbacks(execute=True):
        assert calls_reconcile_expired_leases()["requeued"] == 1
    call.refresh_from_db()
    assert (call.status, call.attempts) == (CallStatus.PENDING_APPROVAL, 1), call.status
    assert "the approval of operator no longer counts" in sent_back(call.pk)["reason"]


def test_an_edit_that_released_the_call_lapses_with_its_editor_and_the_edit_runs_after_a_new_round(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    second_operator: User,
    committed: Settle,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): an operator's edit released the call (it counts as their approval); deactivated before the
    worker claims it, the call goes back to the desk with the edited arguments, and another operator's approval of
    that version runs exactly it."""
    request = hold("pay 5000")
    with django_capture_on_commit_callbacks(execute=False) as held:
        approval_approve(request_id=request.pk, user=operator, arguments={"note": "pay 50"}, expected_round=1)
    call = ToolCall.objects.get(pk=request.call_id)
    assert (call.status, call.arguments) == (CallStatus.QUEUED, {"note": "pay 50"})
    User.objects.filter(pk=operator.pk).update(is_active=False)
    run_held(list(held), django_capture_on_commit_callbacks)
    call.refresh_from_db()
    assert (call.status, call.arguments) == (CallStatus.PENDING_APPROVAL, {"note": "pay 50"})
    assert "the approval of operator no longer counts" in sent_back(call.pk)["reason"]
    request.refresh_from_db()
    committed(approval_approve, request_id=request.pk, user=second_operator, expected_round=request.round)
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED
    assert SideEffect.objects.get(tool="risky_effect").note == "pay 50"


def test_a_compensation_whose_approver_lapsed_goes_back_to_the_desk_and_stays_running(
    line_tools: None,
    acme_operator: User,
    roles: dict[str, Group],
    tenant: Tenant,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): a compensation's call held for approval and released by an operator deactivated before the
    worker claims it goes back to the desk (the compensation still running, not failed), and runs once another
    operator approves it: the step is compensated once."""
    committed = django_capture_on_commit_callbacks
    second = make_user("acme-operator-gb2", tenant=tenant, staff=True, groups=(roles["operators"],))
    third = make_user("acme-operator-gb3", tenant=tenant, staff=True, groups=(roles["operators"],))
    rolled_back_step(acme_operator, "line-gb1", "review_gb_reserve", {"line": "L-1"}, committed)
    call = ToolCall.objects.get(kind=CallKind.COMPENSATION, tool_name="review_gb_release")
    request = ApprovalRequest.objects.get(call=call)
    callbacks = released_not_run(request, second, committed)
    User.objects.filter(pk=second.pk).update(is_active=False)
    run_held(callbacks, committed)
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    assert Compensation.objects.get(call=call).status == CompensationStatus.RUNNING
    request.refresh_from_db()
    with committed(execute=True):
        approval_approve(request_id=request.pk, user=third, expected_round=request.round)
    call.refresh_from_db()
    assert (call.status, call.attempts) == (CallStatus.SUCCEEDED, 1)
    assert Compensation.objects.get(call=call).status == CompensationStatus.SUCCEEDED
    assert SideEffect.objects.filter(tool="review_gb_release").count() == 1


def test_a_batch_reads_a_change_made_while_its_first_call_ran_before_its_second_runs(
    request_call: Any,
    alice: User,
    operator: User,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Expect (holds): a worker claims two approved calls in one batch (``WORKER_CLAIM_BATCH`` 2); the first runs on
    the release's stamp and, while it runs, its approver is deactivated: the second call's re-check, made just before
    it would run, reads the stamp again and sends it back (the batch's claim checked no stamp for it)."""
    settings.TOOLHUB = {**settings.TOOLHUB, "WORKER_CLAIM_BATCH": 2}
    with registry.temporarily(review_gb_pay):
        first = request_call("review_gb_pay", {"note": "pay 1"}, alice, tenant="acme")
        second = request_call("review_gb_pay", {"note": "pay 2"}, alice, tenant="acme")
        callbacks = [
            *released_not_run(ApprovalRequest.objects.get(call=first), operator, django_capture_on_commit_callbacks),
            *released_not_run(ApprovalRequest.objects.get(call=second), operator, django_capture_on_commit_callbacks),
        ]
        WHILE_PAYING[:] = [lambda: User.objects.filter(pk=operator.pk).update(is_active=False)]
        try:
            run_held(callbacks[:1], django_capture_on_commit_callbacks)  # claims both, the first call first
        finally:
            WHILE_PAYING.clear()
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == (CallStatus.SUCCEEDED, CallStatus.PENDING_APPROVAL)
    assert "the approval of operator no longer counts" in sent_back(second.pk)["reason"]
    assert list(SideEffect.objects.filter(tool="review_gb_pay").values_list("note", flat=True)) == ["pay 1"]
