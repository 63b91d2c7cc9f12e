"""Review of 2026-12-05 (da): the newest login work (``toolhub.login_guard``, ``toolhub.admin_site``,
``toolhub.admin_logins``, ``toolhub.visible.lookalike_problem``, ``toolhub.admin_usernames``), hunted adversarially.

Each test fails on the reviewed code (main at a677711) and states what was found and what is expected.

Findings:

1. The admin's login told a guesser when they had found the password of an account that may not sign in to the
   console (active, not staff: an API user): the right password passed ``authenticate`` and was refused only
   afterwards (``confirm_login_allowed``), so axes recorded no failure. A wrong password counted, a right one did
   not: at the limit, a wrong guess got the lockout page (429) and the right one the form again (200). Such a refusal
   now counts as a failure of the pair, under the pair's hold (``GuardedAuthenticationForm.clean``), so both read
   the same.
2. The look-alike rule read the scripts of letters only: digits of another script among Latin letters passed
   (``b\u09e6b`` with a Bengali zero, ``user\u096601`` with a Devanagari one, ``alice\u0660`` with an Arabic-Indic one
   that reads as a dot), though they read as ``b0b``, ``user001``. Digits now count by their script too (ASCII
   digits belong to every script, Arabic-Indic ones to Arabic), as UTS #39 reads them.
3. A pair was held by a 32-bit key (PostgreSQL's advisory lock) or by one of 256 in-process locks picked by it
   (SQLite): a guesser could choose names whose pairs share a victim pair's lock and, hashing guesses under them,
   keep the victim's login waiting (unrelated pairs that collided waited on each other too). The key is now 64 bits
   (two-key form, still apart from the one-key locks), and on SQLite each pair has a lock of its own
   (``pair_in_process``).

Checked and holding:

- Doors: the admin login and the password-change page are the only password checks (no DRF ``obtain_auth_token``,
  no ``BasicAuthentication``, no ``rest_framework.urls`` login; the API and MCP take tokens or a session); both go
  through ``authenticate_serialized`` with the same pair, and the page's GET answers the lockout page while locked.
- Addresses: zone ids (``fe80::1%eth0`` / ``%eth1``), upper/lower case IPv6, IPv4-mapped ``::ffff:1.2.3.4`` (also
  bracketed with a port) all fall into one bucket; leading-zero IPv4 (``01.2.3.4``) and ``1.2.3.4:`` are no address
  and fall back to the peer; only the entry the outermost trusted proxy wrote is read, so extra client-written hops
  never pick the bucket.
- Names: the login form NFKC-normalizes and strips the typed name before the pair is formed (``Ａｌｉｃｅ``,
  ``alice ``), and the account lookup is exact (``Alice`` is not ``alice``'s account), so case or width variants
  give no fresh pair for one account; a name longer than axes stores is cut and locks only its sender.
- PostgreSQL: the pair's advisory lock is transaction-level, so it is let go on commit, rollback or an exception;
  each login takes one pair lock and then axes' rows of that pair, so two pairs cannot deadlock.
- The lockout page is the same for a name that is an account and one that is not.
- Look-alikes: zero-width joiners, bidi controls, Hangul fillers and tag characters are refused as invisible;
  full-width Latin is read as Latin (the form stores it NFKC anyway); Cyrillic or Greek letters among Latin ones
  are refused.
"""

import threading

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client, RequestFactory

from toolhub.login_guard import _pair_held
from toolhub.visible import lookalike_problem

LOGIN = "/admin/login/?next=/admin/"
ATTACKER = "203.0.113.9"


def attempt(username: str, password: str) -> int:
    response = Client().post(
        LOGIN, {"username": username, "password": password, "next": "/admin/"}, REMOTE_ADDR=ATTACKER
    )
    return response.status_code


@pytest.mark.django_db
@pytest.mark.usefixtures("lockout_on")
def test_a_right_password_of_an_account_refused_the_console_counts_as_a_failure(settings: object) -> None:
    """Found: an active non-staff account's right password was refused after ``authenticate`` and not counted, so at
    the limit a wrong guess got the lockout page and the right one the form: the page told the guesser they had it.
    Expect: the right one answers exactly as a wrong one (the pair locks at the limit either way)."""
    User.objects.create_user("api-user", password="the-real-one")
    User.objects.create_user("api-other", password="the-real-two")
    limit = settings.AXES_FAILURE_LIMIT  # type: ignore[attr-defined]
    wrong = [attempt("api-other", f"guess-{n}") for n in range(limit)]
    right = [attempt("api-user", f"guess-{n}") for n in range(limit - 1)] + [attempt("api-user", "the-real-one")]
    assert wrong == right == [200] * (limit - 1) + [429]


@pytest.mark.parametrize(
    "name",
    [
        "b\u09e6b",  # a Bengali digit zero among Latin letters: b0b
        "user\u096601",  # a Devanagari digit zero: user001
        "alice\u0660",  # an Arabic-Indic zero, drawn as a dot: alice.
    ],
)
def test_digits_of_another_script_among_latin_letters_are_refused(name: str) -> None:
    """Found: only letters' scripts were read, so another script's digits among Latin letters passed as a name.
    Expect: the name is refused as mixing scripts."""
    assert lookalike_problem(name) is not None


@pytest.mark.parametrize(
    "name",
    ["bob007", "user\uff10\uff11", "\u0639\u0644\u064a\u0661\u0662", "\u0930\u093e\u092e\u0967", "taro_\u7530\u4e2d2"],
)
def test_digits_of_the_names_own_script_or_ascii_stay_accepted(name: str) -> None:
    """Found: (guard for the fix above) ASCII and full-width digits, and a script's own digits in a name of that
    script, must not read as a mix. Expect: accepted."""
    assert lookalike_problem(name) is None


#: Two names whose pairs from ATTACKER shared one lock: the first 32 bits of blake2b("<name>\\0<address>") are both
#: 08d76419 (found among ~90,000 names in a second; a given victim's pair needs ~2^32 names, minutes on a GPU).
SHARING_NAMES = ("guesser-5057", "guesser-90226")


@pytest.mark.django_db
@pytest.mark.usefixtures("lockout_on")
def test_a_pair_held_does_not_hold_a_pair_whose_key_a_guesser_chose_to_share() -> None:
    """Found: a pair was held by a 32-bit key (PostgreSQL) or one of 256 locks picked by it (SQLite), so a guesser
    could pick names whose pairs share a victim pair's lock (1 in 2^32, or 1 in 256) and, hashing guesses under
    them, keep the victim's login waiting; unrelated pairs that collided waited on each other. Expect: while one pair
    is held, a login of another pair goes on, whatever its key."""
    holder, other = (RequestFactory().post("/admin/login/", REMOTE_ADDR=ATTACKER) for _ in range(2))
    entered = threading.Event()

    def second() -> None:
        try:
            with _pair_held(other, SHARING_NAMES[1]):
                entered.set()
        finally:
            connections.close_all()

    with _pair_held(holder, SHARING_NAMES[0]):
        thread = threading.Thread(target=second, daemon=True)
        thread.start()
        waited_for_nothing = entered.wait(5)
    thread.join(10)
    assert waited_for_nothing, "the second pair waited for the first"
