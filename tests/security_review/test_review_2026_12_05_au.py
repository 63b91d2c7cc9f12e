"""Review of 2026-12-05 (au): regressions in the newest commits (7e2198f..8fb6e3e).

Found (fixed):

1. An external tool's call approved after its tool changed (redeployed with another description, schema or
   risk while the call waited on the desk) is now denied at its release (``toolhub.waiting._refusal_going_out``,
   new in eaf2b89) with "The arguments differ from what was approved": the approval binding was checked against
   the tool's new version, so the model, the audit trail and the operator were told the arguments changed when
   nothing but the tool had. Fixed in ``toolhub.execution_checks.refusal_at_execution``: a changed tool is
   refused as such (the versions named), before the binding is checked; a worker's call never reaches it
   (``_execute_claimed`` asks for a fresh approval first), so only the external release's reason changes.

2. The receivers of 285f28a judged standing at each statement, not on what a change leaves: the admin's user
   form saves ``groups.set([new])``, which Django runs as remove-then-add, so a platform user moved from one group
   giving ``toolhub.cross_tenant`` to another giving it too had their runs in other tenants cancelled between the
   two statements (likewise a user form unticking superuser while adding such a group, or an inline moving one
   membership while adding another to the same tenant). Fixed in ``agents_app.receivers``: every standing
   check (deactivation, a membership deleted or moved, groups or permissions taken) goes through
   ``_cancel_runs_without_standing``, which judges on commit (``transaction.on_commit``); a deleted user's runs
   still end before the deletion empties their link. Tests that asserted the cancellation now commit the change.

Checked and found holding: the receivers of 285f28a act only on ``post_remove``/``pre_clear``+``post_clear``
(adding a group or permission cancels nothing) and a membership saved unchanged, a superuser, or a user who still
stands through another membership or ``toolhub.cross_tenant`` keeps their runs (``runs_cancel_without_standing``
judges standing per run; the cost is one query per save plus one per going run of the former member);
``token_count`` accepts 12, 12.0, "12", absent and null (0), refusing only what is no count (as before, "12.0"
text is refused, as it was an error before eff819f too); ``_instant_problem`` accepts an aware value ("+02:00",
"Z") on ``datetime`` and ``Optional[datetime]`` parameters and never applies to a ``date`` parameter (format
``date``) or to ``==``/``!=``; the external release's denial is a guarded ``pending_approval`` -> ``denied``
transition with the approval's rows in the same write, audited as ``call.denied``, and applies to external tools
only (a worker's call is checked where it runs).
"""

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User

from agents_app.models import AgentRun, RunStatus
from approvals.models import ApprovalRequest
from tests.agents.conftest import start_run  # noqa: F401 - a fixture, registered by being imported here
from tests.security_review.conftest import client_for
from tests.security_review.test_review_2026_12_05_at import _waiting_run
from toolhub import Tool, registry
from toolhub.models import CallStatus, Tenant, TenantMembership, ToolCall

pytestmark = pytest.mark.django_db

_SCHEMA = {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}
WIRE_V1 = Tool.external("review_au_wire", "Send a wire (the back office posts the result).", _SCHEMA, risk="high")
WIRE_V2 = Tool.external("review_au_wire", "Send a wire, same day (the back office posts it).", _SCHEMA, risk="high")


def test_an_external_call_whose_tool_changed_is_not_told_its_arguments_differ(
    alice: User, tenant: Tenant, acme_operator: User
) -> None:
    """Found: an external call approved after its tool changed was denied as "The arguments differ from what was
    approved", though its arguments were exactly those approved: the binding was checked with the new version.

    Expect: still not sent out, but denied for what happened (the tool changed after the call was asked), so the
    model, the audit trail and the operator are told the truth.
    """
    with registry.temporarily(WIRE_V1):
        held = client_for(alice).post(
            "/api/v1/calls/", {"tool": "review_au_wire", "arguments": {"amount": 9}}, format="json"
        )
    assert held.status_code == 202, held.content
    approval = ApprovalRequest.objects.get(call_id=held.json()["id"]).pk

    with registry.temporarily(WIRE_V2):
        approved = client_for(acme_operator).post(f"/api/v1/approvals/{approval}/approve/", {"round": 1}, format="json")

    assert approved.status_code == 200, approved.content
    call = ToolCall.objects.get(pk=held.json()["id"])
    assert call.status == CallStatus.DENIED
    assert "arguments differ" not in call.error
    assert "changed" in call.error and WIRE_V2.version in call.error


# --- groups replaced in one edit (the admin's user form: ``groups.set``) -------------------------------------


def test_moving_someone_to_another_group_that_also_lets_them_act_everywhere_keeps_their_runs(
    start_run: Any,  # noqa: F811
    tenant: Tenant,
    other_tenant: Tenant,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: a platform user moved from one group giving ``toolhub.cross_tenant`` to another giving it too (the
    admin's user form saves ``groups.set([new])``: Django removes the old group, then adds the new one) had their
    acme run cancelled: the removal's receiver judged their standing between the two statements, with no group.

    Expect: judged on what the edit leaves (after commit), they still act in acme: the run goes on.
    """
    cross = Permission.objects.get(codename="cross_tenant")
    old, new = Group.objects.create(name="review-au-old"), Group.objects.create(name="review-au-new")
    old.permissions.add(cross)
    new.permissions.add(cross)
    user = User.objects.create_user("review-au-platform", password="x")
    TenantMembership.objects.create(user=user, tenant=other_tenant)
    user.groups.add(old)
    run = _waiting_run(start_run, User.objects.get(pk=user.pk), "acme")

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        user.groups.set([new])

    assert callbacks, "the change is judged when it commits"
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    with django_capture_on_commit_callbacks(execute=True):
        user.groups.set([])
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED
