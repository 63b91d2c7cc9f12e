"""Review 2026-12-06 (ah): review z's askers (``ApprovalRequest.askers``) and review af's call times and problem kinds.

Each finding's test fails on the reviewed code (main at 46bdd05) and passes after the fix.

Findings:

- Reversing ``approvals 0012`` on PostgreSQL failed once a request had two askers (who rolled back and who
  retried: the case 0012 exists for): ``copy_back`` wrote one UPDATE per asker, the second on a row already written
  in the transaction, which left deferred foreign-key checks pending, and the restored ``asked_by`` index could not be
  created ("cannot CREATE INDEX ... because it has pending trigger events"). Now one UPDATE writes each request once,
  its first asker (the rollback's) back into ``asked_by``.

Checked and holds:

- ``approvals.rows.locked_request`` locks with ``FOR UPDATE OF r`` (``rowread.lock_clause``), so the LEFT JOIN on the
  through table is allowed on PostgreSQL; two or more askers give one row each and one instance (review z's tests
  pass on PostgreSQL: 0, 1 and 2 askers refused, another operator approves).
- ``approvals 0012`` forward on PostgreSQL and SQLite copies ``asked_by``; backward and forward again (the test below)
  on both keeps the first asker.
- The e-mail to approvers and the escalation go through ``approvers_of`` (``approvers_still_counting``), which
  excludes the askers; the webhook payload never carried who asked (unchanged); the askers are added before
  ``notify`` in the request's transaction, the e-mail read after commit.
- ``insert_params`` keeps a given ``auto_now_add`` only for rows the code builds: ``ToolCall`` (``_new_call`` never
  takes ``created_at`` from a request; ``_decide`` stamps every attempt anew, so a call decided again under new
  governance and a replay are stamped when decided) and ``ApprovalDecision`` (``decision_row`` never sets it).
- ``TrailProblem``: ``AuditVerification`` records keep strings (``TrailProblem.recorded``), so the console's chain
  status and the audit pages render text, not the dataclass; ``audit_verify_tenant_task`` reads no problems.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from approvals.models import ApprovalRequest
from tests.tenancy.conftest import make_user
from toolhub.models import Tenant, ToolCall


@pytest.mark.django_db(transaction=True)
def test_reversing_askers_keeps_the_first_of_two_askers(alice: User, operator: User, tenant: Tenant) -> None:
    """Found: with a request asked for by two people (who rolled back, who retried), migrating approvals back to 0011
    failed on PostgreSQL: "cannot CREATE INDEX ... because it has pending trigger events".
    Expect: the reverse runs on PostgreSQL and SQLite, ``asked_by`` holds the first asker (a request without askers
    none), and the upgrade again gives that asker back."""
    retrier = make_user("acme-op-ah-retrier", tenant=tenant, staff=True)
    requests = []
    for askers in ((operator, retrier), ()):
        call = ToolCall.objects.create(tool_name="review_ah_void", tenant="acme", user=alice)
        request = ApprovalRequest.objects.create(
            call=call, tool_name="review_ah_void", requested_by=alice, tenant="acme", expires_at="2100-01-01T00:00:00Z"
        )
        request.askers.add(*askers)
        requests.append(request.pk)
    asked, plain = requests
    before = [("approvals", "0011_compensation_asked_by"), ("sagas", "0005_rollback_asked_by")]
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    MigrationExecutor(connection).migrate(before)
    old: Any = MigrationExecutor(connection).loader.project_state(before).apps
    kept = dict(old.get_model("approvals", "ApprovalRequest").objects.values_list("pk", "asked_by_id"))
    assert kept == {asked: operator.pk, plain: None}, kept
    MigrationExecutor(connection).migrate(latest)
    again = {pk: list(ApprovalRequest.objects.get(pk=pk).askers.values_list("pk", flat=True)) for pk in requests}
    assert again == {asked: [operator.pk], plain: []}
