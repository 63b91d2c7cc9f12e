"""Review 2026-12-06 (ak): compensation approvals pending at the upgrade had no askers (noted by review ag).

Finding (fails before migration ``approvals 0013``, passes with it):

1. ``ApprovalRequest.askers`` is filled when a request is made; a compensation's request made before the upgrade had
   none, so the operator who rolled the saga back could still approve that compensation alone, though the new rule
   bars them. ``approvals 0013`` gives each pending compensation's request its rollback's ``asked_by``.

Checked and holds: a request already decided keeps the askers it was decided with (none); a pending request that
is no compensation gets none.
"""

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from approvals.models import ApprovalRequest

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("approvals", "0012_approvalrequest_askers"), ("sagas", "0006_compensation_retried_by")]


def test_a_compensation_pending_at_the_upgrade_bars_who_rolled_back() -> None:
    """Found: a pending compensation's request from before ``askers`` had none; its rollback's operator could approve
    it alone. Expect: after the upgrade that operator is its asker; a decided one and a plain call's are untouched."""
    alice = User.objects.create_user("review-ak-alice")
    operator = User.objects.create_user("review-ak-operator")
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    try:
        old = MigrationExecutor(connection).loader.project_state(BEFORE).apps
        calls = old.get_model("toolhub", "ToolCall").objects
        requests = old.get_model("approvals", "ApprovalRequest").objects
        saga = old.get_model("sagas", "Saga").objects.create(key="review-ak", tenant="acme", created_by_id=alice.pk)
        rollback = old.get_model("sagas", "Rollback").objects.create(
            saga=saga, trigger="on_demand", requested_by=f"user:{operator.username}", asked_by_id=operator.pk
        )

        def compensation_request(step_tool: str, status: str, sequence: int) -> int:
            step = calls.create(tool_name=step_tool, tenant="acme", user_id=alice.pk)
            old.get_model("sagas", "Compensation").objects.create(
                saga=saga, sequence=sequence, rollback=rollback, step_call=step, step_tool=step_tool, tool_name="void"
            )
            undo = calls.create(
                tool_name="void",
                tenant="acme",
                user_id=alice.pk,
                kind="compensation",
                context={"compensates": str(step.pk)},
            )
            return requests.create(
                call=undo,
                tool_name="void",
                requested_by_id=alice.pk,
                tenant="acme",
                status=status,
                expires_at="2100-01-01T00:00:00Z",
            ).pk

        pending = compensation_request("issue", "pending", 2)
        decided = compensation_request("issue_again", "approved", 1)
        plain = requests.create(
            call=calls.create(tool_name="order", tenant="acme", user_id=alice.pk),
            tool_name="order",
            requested_by_id=alice.pk,
            tenant="acme",
            expires_at="2100-01-01T00:00:00Z",
        ).pk
    finally:
        MigrationExecutor(connection).migrate(latest)  # the later tests' schema, whatever happened here
    askers = {
        pk: list(ApprovalRequest.objects.get(pk=pk).askers.values_list("pk", flat=True))
        for pk in (pending, decided, plain)
    }
    assert askers == {pending: [operator.pk], decided: [], plain: []}
