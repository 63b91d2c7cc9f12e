"""Review 2026-12-06 (ah): review z's askers (``ApprovalRequest.askers``) and review af's call times and problem kinds.

Each finding's test fails on the reviewed code (main at 46bdd05) and passes after the fix.

Findings:

- Reversing ``approvals 0012`` on PostgreSQL failed once a request had two askers (who rolled back and who
  retried: the case 0012 exists for): ``copy_back`` wrote one UPDATE per asker, the second on a row already written
  in the transaction, which left deferred foreign-key checks pending, and the restored ``asked_by`` index could not be
  created ("cannot CREATE INDEX ... because it has pending trigger events"). Now one UPDATE writes each request once,
  its first asker (the rollback's) back into ``asked_by``.
- A decision whose locking statement waited while a compensation's request was reopened with a new asker (askers are
  added under the request's lock) read the askers in that statement (a LEFT JOIN beside ``FOR UPDATE OF r``): on
  PostgreSQL it got the row as reopened (the new round) but the askers its snapshot saw, the new one missing, so
  ``approval_may_decide`` let them decide. Now the askers are read after the lock, in the statement that already reads
  the decisions and the governance stamp for that reason (``approvals.rows.request_decisions``): no round trip added.

Checked and holds:

- The LEFT JOIN itself was valid: ``lock_clause`` gives ``FOR UPDATE OF r`` (never the nullable side), and two or
  more askers gave one instance; review z's tests pass on PostgreSQL and SQLite after the change (0, 1 and 2 askers
  refused, another operator approves); the decision path's statement budget (tests/approvepath) and the admin and
  API query counts (tests/posture, 59 on PostgreSQL) hold.
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

import threading
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor

from approvals.deciders import asker_ids
from approvals.models import ApprovalRequest
from approvals.rows import locked_request, request_decisions
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
        for asker in askers:  # one by one: ``add(*users)`` inserts in set order, and the first asker is the point
            request.askers.add(asker)
        requests.append(request.pk)
    asked, plain = requests
    # Decided: a pending request with two askers refuses the reverse (review ao).
    ApprovalRequest.objects.filter(pk=asked).update(status="approved")
    before = [("approvals", "0011_compensation_asked_by"), ("sagas", "0005_rollback_asked_by")]
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    MigrationExecutor(connection).migrate(before)
    try:
        old: Any = MigrationExecutor(connection).loader.project_state(before).apps
        kept = dict(old.get_model("approvals", "ApprovalRequest").objects.values_list("pk", "asked_by_id"))
    finally:
        MigrationExecutor(connection).migrate(latest)  # the later tests' schema, whatever was read
    assert kept == {asked: operator.pk, plain: None}, kept
    again = {pk: list(ApprovalRequest.objects.get(pk=pk).askers.values_list("pk", flat=True)) for pk in requests}
    assert again == {asked: [operator.pk], plain: []}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_decision_waiting_on_a_reopening_sees_who_asked_since(alice: User, operator: User, tenant: Tenant) -> None:
    """Found: the decision path read the askers in its locking statement (a LEFT JOIN beside ``FOR UPDATE OF r``): one
    that waited while a compensation's request was reopened with a new asker (a retrier, added under the request's
    lock) got the row as reopened (the new round) but the askers its snapshot saw, so the retrier was not barred.
    Expect: the askers are read after the lock (with the decisions and the governance stamp): the retrier is among
    them, and ``approval_may_decide`` refuses them."""
    retrier = make_user("acme-op-ah-race", tenant=tenant, staff=True)
    call = ToolCall.objects.create(tool_name="review_ah_void", tenant="acme", user=alice)
    request = ApprovalRequest.objects.create(
        call=call, tool_name="review_ah_void", requested_by=alice, tenant="acme", expires_at="2100-01-01T00:00:00Z"
    )
    request.askers.add(operator)
    holding, release, seen = threading.Event(), threading.Event(), {}

    def reopen() -> None:  # as ``approval_request_create`` reopens a request: locked, a new round, askers added
        try:
            with transaction.atomic():
                locked = ApprovalRequest.objects.select_for_update().get(pk=request.pk)
                locked.round += 1
                locked.save(update_fields=["round"])
                locked.askers.add(retrier)
                holding.set()
                release.wait(10)
        finally:
            connection.close()

    def decide() -> None:  # the decision path's reads, as ``approvals.services._decide_in_transaction`` makes them
        try:
            with transaction.atomic():
                read = locked_request(request.pk)
                request_decisions(read)
                seen.update(round=read.round, askers=asker_ids(read))
        finally:
            connection.close()

    reopening = threading.Thread(target=reopen)
    reopening.start()
    assert holding.wait(10)
    deciding = threading.Thread(target=decide)
    deciding.start()
    time.sleep(0.5)  # the decision's locking statement is under way, waiting for the reopening's lock
    release.set()
    reopening.join(10)
    deciding.join(10)
    assert seen == {"round": 2, "askers": frozenset({operator.pk, retrier.pk})}, seen
