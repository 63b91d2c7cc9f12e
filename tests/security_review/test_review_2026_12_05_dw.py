"""Review of 2026-12-05 (dw): a regression review of review dk (the sagas' sweep in SQL, the expiry and redispatch
sweeps' attempt guards), review du (``run.retried``) and review dp (the login pair's bounded wait). Each test fails
on the reviewed code (main at d6aa836) and states what was found and what is expected.

Findings:

1. The login pair's wait on PostgreSQL overrode a shorter ``lock_timeout`` the server, role or pooler had set with
   ``PAIR_WAIT_SECONDS`` (30 s): a deployment that bounds every lock wait at a second had its logins wait thirty.
   And a ``statement_timeout`` shorter than the wait cancelled the advisory lock with ``query_canceled`` (57014),
   which was re-raised: a 500 on the admin login instead of the ``login_busy`` form error. The wait is now the
   shorter of the two bounds, and a cancelled wait is the same ``login_busy`` refusal.

Checked and holding:

- ``_sagas_with_unheard_failures`` against the loop it replaced: failures are matched by saga key AND tenant (a
  failed call of another tenant's saga of the same key is not taken); ``newest_step_at`` is
  ``Coalesce(step_call.finished_at, created_at)`` of the highest-sequence recorded step as the loop's
  ``finished_at or created_at`` (``step_call`` is a non-null one-to-one, so the join loses no step); on SQLite the
  comparison is of Django's stored text, which orders as the datetimes do. The exclusion of failures any rollback
  names (the loop: this saga's rollbacks) differs only for a rollback naming another saga's direct failed call,
  which no path writes (``saga_call_settled`` and the sweep name the call's own saga; a run's rollback names a
  run's call, never a direct one). EXPLAIN ANALYZE on PostgreSQL with 4,000 direct sagas and 40,000 failed calls:
  a hash semi join of one pass over the sagas and one over the failed direct calls (rollbacks a hashed subplan),
  the newest-step subquery an index scan (``saga_compensation_sequence``) per saga: ~0.1 s, no nested loop per saga
  over the calls. Noted, not changed: that pass reads every failed direct call ever (``saga_id`` has no index), and
  the ``NOT IN`` over all rollbacks becomes a plain subplan once it outgrows ``work_mem``.
- ``tool_call_submit_result``'s expiry reads the call under ``select_for_update``, so its attempt guard holds.
- ``tool_call_expire_awaiting`` guarded by ``attempt=call.attempts`` leaves no call stuck: a call whose attempt
  moved on is re-read by the next sweep with its new attempt count and expired then if still overdue;
  ``calls_redispatch_stale`` does not bump ``queued_at`` of a call whose attempt moved on, so it stays the oldest
  and the next sweep reads it again.
- ``run_retry(run, user)``: its one caller (``RunRetryView``) passes the request's user; ``run.retried`` is
  appended with the run's tenant in the transaction that moves the run.
- ``login_busy`` is a ``ValidationError``: the admin login shows it as a form error (200), the password change as
  the old password's error; its text names no account and reads the same for a name that is none.
"""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, connections
from django.test import RequestFactory

from toolhub import login_guard

ADDRESS = "203.0.113.77"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("lockout_on"), pytest.mark.postgres]


@contextmanager
def _pair_held_elsewhere(username: str) -> Iterator[None]:
    """Another connection holds ``username``'s pair from ``ADDRESS`` until the block ends."""
    release, holding = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with login_guard._pair_held(RequestFactory().post("/admin/login/", REMOTE_ADDR=ADDRESS), username):
                holding.set()
                release.wait(30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    try:
        assert holding.wait(10), "the holder never held the pair"
        yield
    finally:
        release.set()
        holder.join(30)
    assert not holder.is_alive()


def _attempt(username: str) -> float:
    """Seconds until an attempt at the held pair is refused ``login_busy``."""
    started = time.monotonic()
    with pytest.raises(ValidationError) as refused:
        with login_guard._pair_held(RequestFactory().post("/admin/login/", REMOTE_ADDR=ADDRESS), username):
            pass
    assert refused.value.code == "login_busy"
    return time.monotonic() - started


def test_a_shorter_lock_timeout_set_for_the_session_bounds_the_pair_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: the pair's wait set ``lock_timeout`` to ``PAIR_WAIT_SECONDS`` whatever the server, role or pooler had
    set: a deployment bounding lock waits at 300 ms had its logins wait the full 30 s.
    Expect: the shorter bound holds; the session's own ``lock_timeout`` is as it was afterwards."""
    monkeypatch.setattr(login_guard, "PAIR_WAIT_SECONDS", 20.0)
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '300ms'")
    try:
        with _pair_held_elsewhere("dw-someone"):
            waited = _attempt("dw-someone")
        with connection.cursor() as cursor:
            cursor.execute("SHOW lock_timeout")
            assert cursor.fetchone()[0] == "300ms"
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
    assert waited < 5, f"the login waited {waited:.1f} s past the session's 300 ms lock_timeout"


def test_a_pair_wait_cut_by_statement_timeout_is_login_busy_not_a_server_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: a ``statement_timeout`` shorter than the pair's wait cancelled it (``query_canceled``, 57014), which
    was re-raised as an ``OperationalError``: a 500 on the admin login or password change.
    Expect: the same ``login_busy`` refusal as a wait that timed out, nothing compared or counted."""
    monkeypatch.setattr(login_guard, "PAIR_WAIT_SECONDS", 20.0)
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = '300ms'")
    try:
        with _pair_held_elsewhere("dw-other"):
            waited = _attempt("dw-other")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET statement_timeout")
    assert waited < 5
