"""Review of 2026-12-05 (bi): the login lockout under concurrent guesses (django-axes, ``toolhub.login_guard``).

The console's password login and the password-change page's old-password check go through
:func:`django.contrib.auth.authenticate`, where axes checks the (username, address) pair's failure count before the
password is compared (``AxesStandaloneBackend``) and records the failure after it (``user_login_failed``). Each test
fails on the reviewed code (main at 2c9389f) and states what was found and what is expected.

Findings:

1. The check, the comparison and the record were three steps with nothing holding them together: guesses sent at
   once for one name from one address all read the same count, below the limit, and all had their password compared
   before any failure was recorded. With ``TOOLHUB_LOGIN_FAILURE_LIMIT`` 5, twelve simultaneous POSTs of the admin
   login form had twelve passwords compared (a guesser with many connections got as many guesses per round as
   connections, not five per cool-off). The sequence now runs under a PostgreSQL transaction-level advisory lock
   keyed by the pair (``toolhub.login_guard.authenticate_serialized``), which the admin's login form and
   ``password_verify`` (the password-change page) both call: at most the limit is compared.
2. (after review bi) On SQLite, the embedded mode, nothing held the pair: its write lock orders the failure records
   but not the reads of the count before them, so the burst still had twelve compared. One of a fixed set of
   in-process locks, picked by the pair's key (``pair_stripe``; since review da a lock of the pair's own,
   ``pair_in_process``), now holds it there; the burst tests run on both databases.

Checked and holding:

- Different pairs are not serialized against each other: a login of another address, or of another name, completes
  while one pair's comparison is held (test below). The lock is taken for the typed name whether or not it is an
  account, before anything is read, so waiting on it says nothing about the account.
- No other path compares a password: the REST API and MCP take tokens and sessions only (no ``BasicAuthentication``,
  no ``obtain_auth_token``, no ``rest_framework.urls`` login); ``load_demo``'s ``check_password`` is a CLI check of
  the demo's own accounts.
"""

import threading
import time
from typing import Any

import pytest
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client

from toolhub.models import AuditEvent

LOGIN = "/admin/login/?next=/admin/"
ATTACKER = "203.0.113.9"
GUESSES = 12

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("lockout_on")]


class Compared:
    """Counts the passwords that reached the password backend; each comparison takes ``seconds`` (a real hasher's)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, seconds: float = 0.3) -> None:
        self.count = 0
        self.hold: dict[tuple[str | None, str], threading.Event] = {}
        self._lock = threading.Lock()
        original = ModelBackend.authenticate

        def authenticate(backend: ModelBackend, request: Any, username: str | None = None, **kwargs: Any) -> Any:
            with self._lock:
                self.count += 1
            held = self.hold.get((username, str(request.META.get("REMOTE_ADDR"))))
            if held is not None:
                assert held.wait(10), "the held comparison was never released"
            time.sleep(seconds)
            return original(backend, request, username=username, **kwargs)

        monkeypatch.setattr(ModelBackend, "authenticate", authenticate)


def post_login(username: str, password: str, ip: str) -> int:
    try:
        response = Client().post(LOGIN, {"username": username, "password": password, "next": "/admin/"}, REMOTE_ADDR=ip)
        return response.status_code
    finally:
        connections.close_all()


def at_once(actions: list[Any]) -> list[Any]:
    """Runs ``actions`` on threads of their own (each with its own connection), released together."""
    start = threading.Barrier(len(actions), timeout=30)
    results: list[Any] = [None] * len(actions)

    def run(index: int) -> None:
        try:
            start.wait()
            results[index] = actions[index]()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            results[index] = exc

    # Daemons, joined with a deadline: a thread that never ends fails the test, and never keeps pytest from exiting.
    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(len(actions))]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "a thread was still running at the deadline"
    return results


@pytest.mark.parametrize("name", ["operator", "no-such-person"])
def test_simultaneous_guesses_compare_no_more_passwords_than_the_limit(
    monkeypatch: pytest.MonkeyPatch, settings: Any, operator: User, name: str
) -> None:
    """Found: twelve simultaneous wrong passwords for one name from one address all passed axes' check before any
    failure was recorded: twelve compared with a limit of five. Expect: at most five compared, the fifth failure and
    the rest get the lockout page (429), for an account's name and for a name that is none alike."""
    compared = Compared(monkeypatch)
    codes = at_once([lambda n=n: post_login(name, f"guess-{n}", ATTACKER) for n in range(GUESSES)])
    assert all(isinstance(code, int) for code in codes), codes
    assert compared.count <= settings.AXES_FAILURE_LIMIT, f"{compared.count} passwords compared"
    limit = settings.AXES_FAILURE_LIMIT
    assert sorted(codes) == [200] * (limit - 1) + [429] * (GUESSES - limit + 1)  # the limit-th failure locks
    assert post_login(name, "operator-password", ATTACKER) == 429  # the pair is locked, the right password too
    assert AuditEvent.objects.filter(event_type="login.locked_out").count() == 1  # one lockout, one event


def test_simultaneous_old_password_guesses_on_the_password_change_page_stop_at_the_limit(
    monkeypatch: pytest.MonkeyPatch, settings: Any, operator: User
) -> None:
    """Found: the password-change page's old-password check (``password_verify``) raced the same way. Expect: at most
    the limit compared, however many requests the held session sends at once."""
    clients = []
    for _ in range(GUESSES):
        client = Client()
        client.force_login(operator)
        clients.append(client)
    compared = Compared(monkeypatch)

    def guess(client: Client, n: int) -> int:
        try:
            data = {"old_password": f"guess-{n}", "new_password1": "N3w-passw0rd!x", "new_password2": "N3w-passw0rd!x"}
            return client.post("/admin/password_change/", data, REMOTE_ADDR=ATTACKER).status_code
        finally:
            connections.close_all()

    codes = at_once([lambda c=c, n=n: guess(c, n) for n, c in enumerate(clients)])
    assert all(isinstance(code, int) for code in codes), codes
    assert compared.count <= settings.AXES_FAILURE_LIMIT, f"{compared.count} passwords compared"
    operator.refresh_from_db()
    assert operator.check_password("operator-password")


@pytest.mark.postgres  # SQLite's in-memory test database locks whole tables between threads: not what is tested
def test_one_pair_held_does_not_hold_another_address_or_another_name(
    monkeypatch: pytest.MonkeyPatch, operator: User
) -> None:
    """Checked: while one pair's comparison is held, a login of the same name from another address, and of another
    name from the held address, complete (the right password logs in)."""
    compared = Compared(monkeypatch, seconds=0)
    release = compared.hold[("operator", "192.0.2.1")] = threading.Event()
    held = threading.Thread(target=post_login, args=("operator", "wrong", "192.0.2.1"), daemon=True)
    held.start()
    try:
        deadline = time.monotonic() + 10
        while compared.count == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert compared.count == 1
        assert post_login("operator", "operator-password", "192.0.2.2") == 302
        assert post_login("no-such-person", "x", "192.0.2.1") == 200
    finally:
        release.set()
        held.join(10)


def test_the_in_process_pair_lock_holds_one_pair_and_lets_others_by() -> None:
    """Expect (SQLite's path, ``pair_in_process``): a second attempt at a held pair waits; another pair (another
    address, another name) does not."""
    from toolhub.login_guard import pair_in_process

    def enters(username: str, address: str) -> bool:
        entered = threading.Event()

        def attempt() -> None:
            with pair_in_process(username, address):
                entered.set()

        thread = threading.Thread(target=attempt, daemon=True)
        thread.start()
        return entered.wait(1)

    with pair_in_process("operator", ATTACKER):
        assert enters("operator", "192.0.2.1") and enters("other", ATTACKER)
        assert not enters("operator", ATTACKER)
