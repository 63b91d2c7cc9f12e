"""Review of 2026-12-05 (d): the newest commits on main (1a7a2e2..6b7a75b), mostly API token expiry, the console's
login lockout (django-axes) and the last five commits (desk ``fields_version``, MCP ``TokenExpired``, lazy prompt
length).

Each test fails on the reviewed code (main at 6b7a75b) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. The console's login records (django-axes' ``AccessLog``: who signed in, when, from where; ``AccessFailureLog``
   when enabled) could be deleted from the admin, one row or every row, by anyone who crosses the tenant boundary,
   with no trail event: the record of a break-in erased without a trace.
2. Unlocking a login pair (deleting its attempt in the admin) copied the name typed at the login into the
   append-only trail, whatever it was: a password typed in the name field stayed in the tamper-evident trail for
   good, where the lockout event itself keeps a name only when it is an account's.
3. Behind ``DJANGO_TRUSTED_PROXY_COUNT`` proxies, an ``X-Forwarded-For`` entry the proxy writes with a port
   (``203.0.113.9:4711``, as Azure's front ends do) or in brackets (``[2001:db8::1]:443``) was read as garbled and
   the login counted under the proxy's own address: every client shared one count per name, so anyone anywhere
   locked any account (the only superuser's included) out of the console for everyone.

Checked and found holding (no test here):

- Token expiry: REST (``ExpiringTokenAuthentication`` first, so a session beside an expired token is refused) and
  MCP (``token_user``, every HTTP request of the stateless app) read a key through ``token_owner``; no other view
  names its own authentication classes, no ``obtain_auth_token``, ``/api-auth/`` or Basic auth is routed, and
  ``request.auth`` is read nowhere; only HTTP scopes reach MCP (a websocket goes to Django). An inactive user's
  token is "invalid" whatever its age (checked before the age: no oracle). ``API_TOKEN_MAX_AGE_SECONDS`` of 0, a
  negative, ``inf`` or a bool is refused at startup (``Seconds | None``, strict); the boundary is exclusive (a token
  exactly at the limit still works). Re-issue (``drf_create_token -r`` or delete and add) makes a new row with a new
  ``created``; the admin cannot edit ``created``.
- Lockout: per (username, address) pair (``AXES_LOCKOUT_PARAMETERS``), reset on success for that pair only
  (``reset_user_attempts`` filters both); the password-change page counts under the session user's own name; case
  variants are other accounts; the form's cleaned name (NFKC, stripped) is the one counted; the 429 page is the
  same for a real and an unknown name; failures keep no password (``AXES_SENSITIVE_PARAMETERS``).
- Last five commits: ``reported_or_estimated`` gives what it gave before for every (count, length) pair (a zero
  beside no text is zero either way) and the lazy length is evaluated only in the adapter's own call; the desk's
  ``definition_changed`` is stricter than before (it compares with the registry at clean time, not the tool the
  form was built with); MCP still answers an unknown and an inactive user's token alike.

- Axes' "Clean up expired attempts" action (no permission but the list's, no trail event) deletes only attempts
  past the cool-off, which lock nothing and which axes deletes itself at the next login of anyone; the audit export's
  ``UnknownTenantError`` (d3c6a94) answers 404 only for a slug the viewer may name, as the text match did.

Noted, not changed: an IPv6 client holding a /48 still has 65,536 /64 buckets; axes checks the pair's count before
the password and records the failure after, so concurrent guesses all pass the check (12 concurrent posts on
PostgreSQL: the count still locked the pair at five, whether more than five were compared was not established).
"""

from typing import Any

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib.auth.models import User
from django.test import Client, RequestFactory

from toolhub.login_guard import client_ip
from toolhub.models import AuditEvent

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lockout_on")]

LOGIN = "/admin/login/?next=/admin/"
ATTACKER = "203.0.113.9"
OPERATOR_HOME = "198.51.100.7"


@pytest.fixture
def root() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "Root-password-7c1e"))
    return client


def attempt(username: str, password: str, ip: str = ATTACKER, **meta: str) -> Any:
    return Client().post(LOGIN, {"username": username, "password": password, "next": "/admin/"}, REMOTE_ADDR=ip, **meta)


@pytest.mark.parametrize("model", [AccessLog, AccessFailureLog])
def test_login_records_cannot_be_deleted_from_the_console(
    settings: Any, operator: User, root: Client, model: Any
) -> None:
    """Found: a boundary-crosser deleted every login record (who signed in, from where) from the admin's list with
    "Delete selected", and nothing in the trail told of it. Expect: the login records are read-only in the console
    (no delete action, the delete page refused); every row is still there."""
    settings.AXES_ENABLE_ACCESS_FAILURE_LOG = True
    attempt("operator", "guess")
    assert attempt("operator", "operator-password", OPERATOR_HOME).status_code == 302
    ids = list(model.objects.values_list("pk", flat=True))
    assert ids
    url = f"/admin/axes/{model._meta.model_name}/"

    assert root.get(url).status_code == 200  # still readable
    assert "delete_selected" not in root.get(url).content.decode()
    root.post(url, {"action": "delete_selected", "_selected_action": ids, "post": "yes"})
    assert root.post(f"{url}{ids[0]}/delete/", {"post": "yes"}).status_code == 403
    assert list(model.objects.values_list("pk", flat=True)) == ids


def test_unlocking_a_pair_keeps_no_typed_name_that_is_no_account(operator: User, root: Client) -> None:
    """Found: deleting a locked attempt (the documented unlock) wrote its ``username`` into a governance.deleted event,
    whatever was typed: a password typed as the name stayed in the append-only trail. Expect: the unlock is still one
    event, naming a real account's name as the lockout event does, never a name that is no account."""
    typed = "Passw0rd!typed-as-name"
    for name in (typed, "operator"):
        for n in range(5):
            attempt(name, f"guess-{n}")
    ids = list(AccessAttempt.objects.order_by("username").values_list("pk", flat=True))
    assert len(ids) == 2

    root.post("/admin/axes/accessattempt/", {"action": "delete_selected", "_selected_action": ids, "post": "yes"})

    assert not AccessAttempt.objects.exists()
    unlocks = [e.data for e in AuditEvent.objects.filter(event_type="governance.deleted")]
    assert len(unlocks) == 2
    assert not any(typed in data for data in unlocks)
    assert any('"username":"operator"' in data for data in unlocks)
    assert attempt("operator", "operator-password").status_code == 302  # unlocked


@pytest.mark.parametrize(
    ("forwarded", "expected"),
    [
        ("6.6.6.6, 203.0.113.9:4711", ATTACKER),
        ("[2001:db8::1]:443", "2001:db8::"),
        ("[2001:db8::1]", "2001:db8::"),
        ("203.0.113.9:notaport", "10.0.0.2"),  # still garbled: the peer
        ("[2001:db8::1", "10.0.0.2"),
    ],
)
def test_a_proxy_entry_with_a_port_is_its_client(settings: Any, forwarded: str, expected: str) -> None:
    """Found: behind a trusted proxy that writes its client as ``address:port``, every login fell back to the proxy's
    own address. Expect: the address the entry names (without its port) is the client."""
    settings.TRUSTED_PROXY_COUNT = 1
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected


def test_behind_a_port_writing_proxy_a_guesser_locks_only_their_own_pair(settings: Any, operator: User) -> None:
    """Found: the guesser's five failures locked "operator" for every client of the proxy. Expect: the operator,
    another client of the same proxy, still signs in."""
    settings.TRUSTED_PROXY_COUNT = 1
    proxy = "10.0.0.2"
    codes = [
        attempt("operator", f"g{n}", proxy, HTTP_X_FORWARDED_FOR=f"{ATTACKER}:4{n}11").status_code for n in range(5)
    ]
    assert codes[-1] == 429
    home = attempt("operator", "operator-password", proxy, HTTP_X_FORWARDED_FOR=f"{OPERATOR_HOME}:5123")
    assert home.status_code == 302
