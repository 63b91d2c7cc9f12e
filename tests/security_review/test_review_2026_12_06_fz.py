"""Review 2026-12-06 (fz): on_commit_once, the stamp a worker's re-check decides under, re-reads after work ran here.

Findings:

1. A worker's re-check decided under ``governance_scope(stamp=call.claim_stamp)`` (review fx): when another thread of
   the process read a newer stamp between the claim and the re-check (a governance change committed meanwhile), that
   put the claim's older stamp back as the process's current cache, empty, reloaded from the newer state under the
   older label (review br's defect, back by another door): every checked write of the process (claims, guarded
   transitions) then checked a stamp already gone, failed and decided again. The claim now keeps the cache it checked
   (``GovernanceHold``, ``ToolCall.claim_hold``) and the re-check decides in it, leaving the process's cache alone.

Checked and holding:
- ``on_commit_once`` against Django 5.2's ``run_on_commit`` (``(savepoint ids, callable, robust)``): a second request
  for the same key inside a savepoint later rolled back leaves the pending one to run once; one pending only in a
  rolled-back savepoint is gone, so the next request registers again; different keys each run; a failing action is
  logged (robust) under its key's name and the next action still runs.
- the re-check still decides under the claim's governance when another thread puts back an older cache (review fx's
  test, unchanged, on the hold).
- a claim that checked nothing (the last attempt) leaves no held governance, even on a call object that carried one
  from an earlier claim: its re-check reads the stamp; a batch's re-check and its hand-back read none of it; a worker's
  claim builds a fresh call object per delivery (``_queued_call``, a hinted one), so none is reused across retries.
- decisions sent to a worker (tasks not eager) answer 200 with the decided request and read no rights again; eager,
  a decider who stays gets 200 with the body and one who left gets 403 with the decision standing (review fu's tests;
  no ``ATOMIC_REQUESTS``, and neither the REST views nor MCP's ``cancel_call`` run inside an atomic block, so the
  403 is a Response after the decision's or cancellation's own commit, not a rollback).
"""

import logging
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction

from tests.approvals.conftest import Hold, hold  # noqa: F401 - the fixture, registered by being imported here
from tests.approvals.released import released_not_run, run_held
from toolhub import claims, execution, governance
from toolhub.commit_once import on_commit_once
from toolhub.models import CallStatus, ToolCall

pytestmark = pytest.mark.django_db


def test_on_commit_once_follows_savepoint_rollbacks(django_capture_on_commit_callbacks: Any) -> None:
    """Holding. Found: a repeat inside a rolled-back savepoint is skipped, the pending one still runs once; a pending
    one dropped by its savepoint's rollback is registered again by the next request; the entry shape is Django's.

    Expect: each key runs exactly once per committed request for it.
    """
    ran: list[str] = []
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with transaction.atomic():
            on_commit_once("a", lambda: ran.append("a1"))
            try:
                with transaction.atomic():
                    on_commit_once("a", lambda: ran.append("a2"))
                    on_commit_once("b", lambda: ran.append("b1"))
                    raise RuntimeError("roll the savepoint back")
            except RuntimeError:
                pass
            on_commit_once("b", lambda: ran.append("b2"))
            on_commit_once("a", lambda: ran.append("a3"))
            sids, pending, robust = connection.run_on_commit[-1]
            assert isinstance(sids, set) and robust is True and callable(pending)
    assert ran == ["a1", "b2"], ran
    assert len(callbacks) == 2


def test_on_commit_once_failure_is_logged_and_the_next_runs(
    django_capture_on_commit_callbacks: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Holding. Found: a failing action is logged with its key's name (robust), later actions still run.

    Expect: one error record naming the key, the other key's action ran.
    """
    ran: list[str] = []

    def fail() -> None:
        raise ValueError("boom")

    with caplog.at_level(logging.ERROR, logger="django.db.backends.base"):
        with django_capture_on_commit_callbacks(execute=True):
            with transaction.atomic():
                on_commit_once(("k", 1), fail)
                on_commit_once(("k", 2), lambda: ran.append("k2"))
    assert ran == ["k2"]
    assert any("on_commit_once(('k', 1))" in record.getMessage() for record in caplog.records), caplog.records


def test_the_recheck_leaves_a_newer_process_cache_alone(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Found: after the claim, a governance change committed and another thread read its stamp; the re-check, under
    ``governance_scope(stamp=claim_stamp)``, put the claim's older stamp back as the process's current cache.

    Expect: the call runs (nothing relevant changed) and the process's cache still holds the newest stamp read.
    """
    request = hold()
    callbacks = released_not_run(request, operator, django_capture_on_commit_callbacks)
    claim = claims.tool_calls_claim
    newest: list[Any] = []

    def claim_then_a_newer_stamp_read(**kwargs: Any) -> list[ToolCall]:
        claimed = claim(**kwargs)
        with connection.cursor() as cursor:  # a governance change commits (the stamp moves)
            cursor.execute("UPDATE toolhub_governanceversion SET stamp = stamp + 7 WHERE id = 1")
        newest.append(governance._snapshot())  # another thread reads it: the process's current cache
        return claimed

    monkeypatch.setattr(execution, "tool_calls_claim", claim_then_a_newer_stamp_read)
    run_held(callbacks, django_capture_on_commit_callbacks)

    call = ToolCall.objects.get(pk=request.call_id)
    assert call.status == CallStatus.SUCCEEDED, call.status
    assert newest and governance._current is newest[0], (governance._current.stamp, newest[0].stamp)


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_decision_sent_to_a_worker_is_answered_without_a_re_read(
    decision: str,
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Holding. Found: with workers (tasks not eager) the released call and its run's turns run elsewhere: the
    decision view answers 200 with the decided request, and reads no rights again (nothing waited).

    Expect: 200 with the request's body and status, ``tenant_scope_now`` not asked by the re-read.
    """
    from rest_framework.test import APIClient

    from tests.mcp.conftest import token
    from toolhub import rights_recheck
    from toolhub.celery import app as celery_app

    celery_app.conf.task_always_eager = False  # a worker's call (conftest's _celery_mode restores it)

    def no_re_read(user: Any) -> Any:
        raise AssertionError("rights read again with nothing run in the request")

    monkeypatch.setattr(rights_recheck, "tenant_scope_now", no_re_read)
    request = hold()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token(operator)}")
    answer = client.post(f"/api/v1/approvals/{request.pk}/{decision}/", {"round": request.round}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["id"] == request.pk
    assert answer.json()["status"] == ("approved" if decision == "approve" else "rejected")


def test_a_claim_that_checked_nothing_leaves_no_governance_for_its_re_check(
    hold: Hold,  # noqa: F811 - the fixture
    operator: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Holding. Found: the last claim attempt (unchecked, so a stream of changes starves no call) leaves the call no
    held governance, even on a call object that carried one from an earlier claim: its re-check reads the stamp.

    Expect: ``claim_hold`` None after the unchecked claim, the checked one holding the stamp it checked.
    """
    request = hold()
    released_not_run(request, operator, django_capture_on_commit_callbacks)
    call = ToolCall.objects.get(pk=request.call_id)
    call.claim_hold = governance.governance_hold(assume_current=False)  # left by an earlier claim of this object
    assert claims._claim(call, "w1", attempt=claims._CLAIM_ATTEMPTS - 1)
    assert call.claim_hold is None
    ToolCall.objects.filter(pk=call.pk).update(status=CallStatus.QUEUED)
    call.status = CallStatus.QUEUED
    assert claims._claim(call, "w2", attempt=1)
    assert call.claim_hold is not None and call.claim_hold.stamp == governance._read_stamp()
