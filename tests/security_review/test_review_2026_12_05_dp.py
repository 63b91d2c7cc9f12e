"""Review of 2026-12-05 (dp): the login pair's hold (``toolhub.login_guard``, review da) and the wire bound
(``toolhub.wire``, review di) looked at for what could hang CI or a request. Each test fails on the reviewed code
(main at 309469c) and states what was found and what is expected.

Findings:

1. A login waited for its (username, address) pair without end: ``pair_in_process`` (SQLite) took a
   ``threading.Lock`` with no timeout, and ``pg_advisory_xact_lock`` (PostgreSQL) waited with the server's
   ``lock_timeout`` (none by default). A holder that never let go (a request stuck in its transaction, a test thread
   that never finished) kept every later attempt at that pair, and the test or request thread waiting on it, blocked
   forever: no CPU, no error (the one unexplained 14-minute hang of da + bi on SQLite under load fits). The wait is
   now bounded (``PAIR_WAIT_SECONDS``, well above a burst of guesses' hashing at the limit); past it the attempt
   fails closed: no password is compared or counted, the form says the sign-in is still being checked and to try
   again (code ``login_busy``), on both databases.
2. (tests) bi's ``at_once`` released its threads with a ``Barrier`` without timeout, and its threads were not
   daemons: a thread stuck past its ``join(30)`` kept pytest from exiting after the tests had run. The barrier now
   times out, the threads are daemons, and a thread still running after its join fails the test.

Checked and holding:

- ``pair_in_process``: the count of holders and waiters is raised and lowered under one guard, in a ``finally``
  that also runs when the wait times out or the body raises; the entry goes with its last user, and a pair's lock is
  only replaced once nobody holds or waits for it. No code path holds two pairs, or takes one inside a transaction
  that wrote (the forms call it outside any atomic block; ``ATOMIC_REQUESTS`` is off), so the pair lock and SQLite's
  write lock are always taken in that order. Reproduction: da + bi five times under ``timeout 300`` beside a CPU hog
  on SQLite, all passed (29 to 61 s): the hang did not recur; with finding 1 it can no longer be unbounded.
- ``allowed``: an inactive account's right password is refused by ``ModelBackend`` inside ``authenticate`` (it
  returns ``None``), so ``confirm_login_allowed`` never runs and axes counts it once through Django's own
  ``user_login_failed``; the page is the wrong password's (same message). An active non-staff account's right
  password is counted once (da's test locks at exactly the limit). The password-change page passes no ``allowed``.
- ``toolhub.wire``: a gzip SSE body is handed on piece by piece as read (no buffering of the whole body), sync and
  async; gzip, deflate and stacked encodings decode; ``br`` and ``zstd`` are not installed (httpx2 does not ask
  for them either); an unknown encoding is passed through raw, as httpx2 would; more than five encodings and a
  corrupt body raise ``httpx2.DecodingError`` (an ``HTTPError``: the model adapter and the MCP client report them,
  no 500, no hang), as httpx2 itself would; an empty body, HEAD and 204 with ``Content-Encoding: gzip`` give an
  empty body. A gzip bomb is refused by the bytes it decodes to. The MCP SDK's GET stream gets a fresh count per
  response; cut at the bound, the SDK logs it and reconnects a bounded number of times inside the call's deadline.
"""

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client, RequestFactory

from toolhub import login_guard

LOGIN = "/admin/login/?next=/admin/"
ATTACKER = "203.0.113.9"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("lockout_on")]


def test_a_login_waiting_on_a_pair_held_without_end_fails_closed_instead_of_waiting_forever(
    monkeypatch: pytest.MonkeyPatch, operator: User
) -> None:
    """Found: a login of a pair another attempt held waited for it without end (SQLite's in-process lock had no
    timeout, PostgreSQL's advisory lock the server's ``lock_timeout``, none by default): a holder that never let go
    hung every later attempt, and CI with it. Expect: past ``PAIR_WAIT_SECONDS`` the login answers the form (200,
    not 500) saying the sign-in is still being checked, its password neither compared nor counted."""
    monkeypatch.setattr(login_guard, "PAIR_WAIT_SECONDS", 0.5)
    release, holding = threading.Event(), threading.Event()
    answered: dict[str, Any] = {}

    def hold() -> None:
        try:
            with login_guard._pair_held(RequestFactory().post("/admin/login/", REMOTE_ADDR=ATTACKER), "operator"):
                holding.set()
                release.wait(30)
        finally:
            connections.close_all()

    def attempt() -> None:
        try:
            answered["response"] = Client().post(
                LOGIN, {"username": "operator", "password": "operator-password"}, REMOTE_ADDR=ATTACKER
            )
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    try:
        assert holding.wait(10), "the holder never held the pair"
        waiter = threading.Thread(target=attempt, daemon=True)
        waiter.start()
        waiter.join(10)
        waited_without_end = waiter.is_alive()
    finally:
        release.set()
        holder.join(10)
    waiter.join(10)
    assert not waited_without_end, "the login waited for the held pair without end"
    response = answered["response"]
    assert response.status_code == 200
    assert "still being checked" in response.content.decode()
    assert not response.wsgi_request.user.is_authenticated
    assert not login_guard._PAIRS_IN_PROCESS  # the timed-out waiter left no entry behind
