"""Security review 2026-12-05 (cn): the console's own password-change page and the login lockout.

Findings:
- The admin's password-change page (``/admin/password_change/``, the header's "Change password" link) checked the
  old password with no limit: whoever held an unlocked session could guess the account's real password without
  bound. It now counts toward the same (username, address) lockout as logins (``toolhub.login_guard``).
- Once that page's failures reached axes, the typed old and new passwords would have been kept in clear in
  ``AccessAttempt.post_data`` (axes masks only ``password``): they are masked too.

Checked and holding:
- No other page in toolhub/, approvals/ or agents_app/ verifies a password (no ``check_password``,
  ``authenticate`` only through the guard); the user admin's "set password" page (``/admin/auth/user/<id>/password/``)
  asks for no old password and is open only to people who cross the tenant boundary (earlier review), so it is no
  guessing oracle. API tokens and MCP never take a password.
"""

import re
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.test import Client

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lockout_on")]

SESSION_THIEF = "203.0.113.77"
OPERATOR_HOME = "198.51.100.7"
NEW_PASSWORD = "An-entirely-new-passphrase-93"


@pytest.fixture
def stolen_session(operator: User) -> Client:
    client = Client(REMOTE_ADDR=SESSION_THIEF)
    client.force_login(operator)
    return client


def change_link(client: Client) -> str:
    """The "Change password" link in the console's header, as the operator sees it."""
    page = client.get("/admin/").content.decode()
    found = re.search(r'href="([^"]*password_change/)"', page)
    assert found, "no change-password link in the header"
    return found[1]


def change(client: Client, url: str, old: str, new: str = NEW_PASSWORD) -> Any:
    return client.post(url, {"old_password": old, "new_password1": new, "new_password2": new})


def test_guessing_the_old_password_on_the_change_page_locks_the_pair(operator: User, stolen_session: Client) -> None:
    """Found: every wrong old password on the password-change page was a normal form error, without end.
    Expect: the failures count toward the (username, address) lockout of logins; at the limit the page answers the
    lockout (429), the right old password included, and nothing changes; the operator's own address is unaffected."""
    url = change_link(stolen_session)
    codes = [change(stolen_session, url, f"guess-{n}").status_code for n in range(5)]
    assert codes == [200, 200, 200, 200, 429]
    right = change(stolen_session, url, "operator-password")
    assert right.status_code == 429 and "temporarily locked" in right.content.decode()
    assert right["Retry-After"] == "900"
    operator.refresh_from_db()
    assert operator.check_password("operator-password") and not operator.check_password(NEW_PASSWORD)
    # the same lock as a login from that address; the operator at home still signs in
    login = {"username": "operator", "password": "operator-password", "next": "/admin/"}
    assert Client().post("/admin/login/", login, REMOTE_ADDR=SESSION_THIEF).status_code == 429
    assert Client().post("/admin/login/", login, REMOTE_ADDR=OPERATOR_HOME).status_code == 302


def test_login_failures_and_change_page_failures_share_one_count(operator: User, stolen_session: Client) -> None:
    """Found: the change page had a count of its own (none). Expect: three failed logins and two wrong old
    passwords from one address lock the pair."""
    for n in range(3):
        Client().post("/admin/login/", {"username": "operator", "password": f"x{n}"}, REMOTE_ADDR=SESSION_THIEF)
    url = change_link(stolen_session)
    assert [change(stolen_session, url, f"y{n}").status_code for n in range(2)] == [200, 429]


def test_the_right_old_password_below_the_limit_changes_it_and_clears_the_count(
    operator: User, stolen_session: Client
) -> None:
    """Found: (with the guard) a correct old password must still work. Expect: below the limit it changes the
    password and clears the pair's count, as a successful login does."""
    url = change_link(stolen_session)
    assert [change(stolen_session, url, f"guess-{n}").status_code for n in range(4)] == [200] * 4
    done = change(stolen_session, url, "operator-password")
    assert done.status_code == 302 and done["Location"].endswith("/admin/password_change/done/")
    operator.refresh_from_db()
    assert operator.check_password(NEW_PASSWORD)
    assert not AccessAttempt.objects.exists()
    assert [change(stolen_session, url, f"again-{n}").status_code for n in range(4)] == [200] * 4


def test_the_typed_passwords_are_never_stored_with_the_failures(operator: User, stolen_session: Client) -> None:
    """Found: axes keeps a failure's form fields and masks only ``password``. Expect: the change page's old and
    new passwords are masked in what it keeps."""
    url = change_link(stolen_session)
    for n in range(3):
        change(stolen_session, url, f"Old-guess-secret-{n}", f"New-secret-value-{n}")
    stored = list(AccessAttempt.objects.values_list("post_data", flat=True))
    assert stored
    assert all("secret" not in text for text in stored), stored
