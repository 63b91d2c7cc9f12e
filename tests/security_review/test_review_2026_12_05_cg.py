"""Review of 2026-12-05 (cg): today's console and authentication changes (stale edits, desk versions, token expiry,
login lockout), read adversarially.

Findings:

1. ``toolhub.admin_editable`` refused every edit of a value whose stored text is not the form's own spelling of it:
   a multi-line text stored with ``\\n`` (a tool group's ``system_prompt_addition`` set by code, a fixture, the
   shell) comes back from a browser with ``\\r\\n`` in the hidden copy, and a text stored with surrounding spaces
   was compared stripped, so any change to it answered "Changed by someone else since you opened this page"
   forever. Now the hidden copy is compared with the stored value as the page spells it (newlines as a browser
   sends them).
2. A value nobody touched was "kept" by reading the stored value back through the form field: a description stored
   with a trailing space was saved stripped when another field changed (the trail recorded it as the operator's
   change), and a value the form does not offer left the page's shown value standing. An untouched field is now
   not saved at all.
3. The login guard's second authentication backend (``AxesStandaloneBackend``) made ``User.objects.with_perm()``
   raise (it must be told which backend): the desk's page of every pending request answered 500 and no approver
   was mailed (53 of tests/approvals/test_approvers.py and test_notifications.py failed on main).
   ``approvals.selectors`` asks the first backend that grants permissions.
4. The login lockout counts (username, address): an IPv6 client sends from any address of its /64, one per guess,
   and never reached the limit. An IPv6 client now counts as its /64 (an IPv4-mapped one as its IPv4 address).
5. The boundary-crossers' own change pages (``CrossTenantOnly``: remote MCP servers, model providers, tokens) were
   left out of review ca's stale-edit fix: a server a colleague switched off and raised to critical came back on
   at low. ``CrossTenantOnly`` mixes in ``StaleEditsRefused`` too.

Checked and found holding (no test here): the REST API with a session (JSON and ``?format=api``) still answers;
a session POST without a CSRF token is refused (403) while a token POST needs none; a session with an invalid or
expired ``Authorization: Token`` header is refused 401 (the token is read first: fail closed, the message says the
token expired), a session with ``Bearer junk`` (not DRF's keyword) is the session's; MCP reads a key as REST does
(``token_owner``). No password login other than ``/admin/login/`` is routed (no ``/api-auth/``, no
``obtain_auth_token``, no password reset); the name axes counts is the form's cleaned one (NFKC, stripped: the
spellings test in tests/posture), case variants of a name are other accounts on PostgreSQL and cannot log in as
the real one; lockout pages and attempts are for boundary-crossers only. Admin inlines are all read-only; add pages
and the user's password pages are not wrapped (no pk / not a ModelForm of the row); a user's page keeps no hash;
rows of a list outside the viewer's tenants stay disabled; a foreign key a colleague pointed at a row withheld from
the viewer turns read-only on the next POST (``SharedInPart``), so it is not reset; the list's query count is
unchanged on PostgreSQL (tests/posture/test_admin_query_counts.py); the desk's ``fields_version`` tests, desk and
API decisions (tests/approvals) pass once finding 3 is fixed. A stale hidden copy forged to equal the stored value
overwrites without refusal, as Django's own form would (the person holds the change permission anyway).
Noted, not changed: the expired-token message prints the limit as ``7.776e+06 s``; ``/admin/password_change/``
checks the old password without the lockout (it needs a logged-in session; fixed in review cn).
"""

from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, RequestFactory

from approvals.selectors import approvers_of
from tests.helpers import console
from tests.tenancy.conftest import AcmeData
from toolhub.login_guard import client_ip
from toolhub.mcp_client.models import RemoteMcpServer
from toolhub.models import AuditEvent, ToolGroup

pytestmark = pytest.mark.django_db


class _FormAsPosted(HTMLParser):
    """What a browser posts from the admin form ``form_id``: inputs, selects and textareas, newlines as CRLF."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.data: dict[str, str] = {}
        self._inside = False
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "form":
            self._inside = attributes.get("id") == self.form_id
        if not self._inside:
            return
        name = attributes.get("name")
        if tag == "option" and self._select and "selected" in attributes:
            self.data[self._select] = attributes.get("value") or ""
        if not name:
            return
        if tag == "input":
            kind = attributes.get("type", "text")
            if kind == "checkbox":
                if "checked" in attributes:
                    self.data[name] = attributes.get("value") or "on"
            elif kind not in ("submit", "button"):
                self.data[name] = attributes.get("value") or ""
        elif tag == "select":
            self._select = name
            self.data.setdefault(name, "")
        elif tag == "textarea":
            self._textarea = name
            self.data[name] = ""

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.data[self._textarea] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        if tag == "textarea":
            if self._textarea:  # the HTML parser's rule: a newline right after <textarea> is not content
                self.data[self._textarea] = self.data[self._textarea].removeprefix("\n")
            self._textarea = None
        if tag == "form":
            self._inside = False

    def posted(self) -> dict[str, str]:
        """As a browser encodes them: every newline of every value as CRLF (HTML's form submission algorithm)."""
        return {key: value.replace("\r\n", "\n").replace("\n", "\r\n") for key, value in self.data.items()}


def _change_form_as_posted(client: Client, url: str) -> dict[str, str]:
    page = client.get(url)
    assert page.status_code == 200
    parser = _FormAsPosted(form_id=f"{page.context['opts'].model_name}_form")
    parser.feed(page.content.decode())
    return parser.posted()


def test_a_multi_line_text_stored_by_code_can_be_edited_on_its_change_page(superuser: User) -> None:
    """Found: a tool group whose ``system_prompt_addition`` was stored with ``\\n`` (by code, a fixture, the shell)
    could never be edited in the admin: the browser sends the hidden copy of the shown value back with ``\\r\\n``,
    which differs from the stored text, so any change was refused as "Changed by someone else since you opened this
    page", and reloading the page did not help. The same with a description stored with a trailing space.
    Expect: the edit is saved; nothing was changed by anyone else."""
    group = ToolGroup.objects.create(
        name="cg-ledger", description="Ledger tools. ", system_prompt_addition="Use the ledger.\nNever guess amounts."
    )
    client = console(superuser)
    url = f"/admin/toolhub/toolgroup/{group.pk}/change/"
    posted = _change_form_as_posted(client, url)
    posted["description"] = "Ledger tools (read and write)."
    saved = client.post(url, {**posted, "_save": "Save"})
    assert saved.status_code == 302, "since you opened this page" in saved.content.decode()
    group.refresh_from_db()
    assert group.description == "Ledger tools (read and write)."

    posted = _change_form_as_posted(client, url)
    assert posted["initial-system_prompt_addition"] == "Use the ledger.\r\nNever guess amounts."
    posted["system_prompt_addition"] = "Use the ledger.\r\nNever guess amounts.\r\nAsk the user first."

    saved = client.post(url, {**posted, "_save": "Save"})

    assert saved.status_code == 302, "since you opened this page" in saved.content.decode()
    group.refresh_from_db()
    assert group.system_prompt_addition == "Use the ledger.\r\nNever guess amounts.\r\nAsk the user first."


def test_a_value_nobody_touched_is_saved_exactly_as_stored(superuser: User) -> None:
    """Found: a value the page only showed was "kept as stored" by reading it back through the form field, which
    strips a text's surrounding spaces: changing a tool group's provider also rewrote its description (stored by
    code as ``"Ledger tools. "``), and the trail recorded ``description: "Ledger tools. " -> "Ledger tools."`` as the
    operator's change, an edit nobody made.
    Expect: the untouched description is left exactly as stored; the trail records the provider alone."""
    group = ToolGroup.objects.create(name="cg-ledger", description="Ledger tools. ", provider="demo")
    client = console(superuser)
    url = f"/admin/toolhub/toolgroup/{group.pk}/change/"
    posted = _change_form_as_posted(client, url)
    posted["provider"] = "ledger-co"

    assert client.post(url, {**posted, "_save": "Save"}).status_code == 302

    group.refresh_from_db()
    assert (group.provider, group.description) == ("ledger-co", "Ledger tools. ")
    (change,) = AuditEvent.objects.filter(event_type="governance.changed", tenant="")
    assert change.payload["changes"] == {"provider": {"before": "demo", "after": "ledger-co"}}


@pytest.mark.django_db(transaction=True)
def test_the_desk_names_who_may_still_approve_with_the_login_guard_installed(
    acme: AcmeData, acme_operator: User
) -> None:
    """Found: the login lockout added ``axes.backends.AxesStandaloneBackend`` beside Django's ``ModelBackend``, and
    ``User.objects.with_perm()`` refuses to choose between two backends (``ValueError``): working out who may
    decide a request (``approvals.selectors.approvers_of``) failed, so the desk's page of every pending request
    answered 500 and no approver was mailed (the e-mail task raised).
    Expect: the page opens and names acme's operator among those who may still approve; ``approvers_of`` answers."""
    page = console(acme_operator).get(f"/admin/approvals/approvalrequest/{acme.approval.pk}/change/")

    assert page.status_code == 200
    assert "acme-operator" in page.content.decode()
    assert acme_operator in approvers_of(acme.approval)


def test_an_ipv6_guesser_cannot_take_a_fresh_address_of_their_own_network_for_each_guess(
    settings: Any, operator: User
) -> None:
    """Found: the login lockout counts failures per (username, client address), and an IPv6 client holds a whole
    /64 network (every home line and cloud machine is given one: 2^64 addresses it may send from). Taking the next
    address of its own /64 for each guess, a guesser never reached the limit: the right password, found after any
    number of guesses, logged in.
    Expect: the addresses of one /64 share one count: five failures from five of them lock the name for that network,
    the right password included; an IPv4 client reached over an IPv6 socket (``::ffff:a.b.c.d``) counts as its IPv4
    address, and another network is not locked."""
    settings.AXES_ENABLED = True
    network = "2001:db8:5:9"

    def login(password: str, address: str) -> int:
        body = {"username": "operator", "password": password, "next": "/admin/"}
        return Client().post("/admin/login/?next=/admin/", body, REMOTE_ADDR=address).status_code

    codes = [login(f"guess-{n}", f"{network}::{n + 1:x}") for n in range(5)]
    assert codes == [200, 200, 200, 200, 429]
    assert login("operator-password", f"{network}:ab:cd:ef:12") == 429
    assert login("operator-password", "2001:db8:6::1") == 302  # another network: the operator's own
    request = RequestFactory().get("/", REMOTE_ADDR="::ffff:198.51.100.7")
    assert client_ip(request) == "198.51.100.7"


def test_a_remote_servers_page_switches_nothing_back_that_a_colleague_switched_meanwhile(superuser: User) -> None:
    """Found: the change pages of the boundary-crossers' own configuration (``CrossTenantOnly``: remote MCP
    servers, model providers, tokens) were left out of review ca's fix. A platform operator opens the ``crm``
    server's page to narrow its tools; meanwhile a colleague switches the server off and raises its risk to
    ``critical`` (its tools wait for an operator); the save switched it back on at ``low`` (its tools run
    unattended), recorded as the first operator's change.
    Expect: what the page only showed is left as it is now; what was changed on it is saved."""
    server = RemoteMcpServer.objects.create(name="crm", url="https://crm.example.com/mcp", risk="low")
    client = console(superuser)
    url = f"/admin/toolhub/remotemcpserver/{server.pk}/change/"
    posted = _change_form_as_posted(client, url)
    RemoteMcpServer.objects.filter(pk=server.pk).update(enabled=False, risk="critical")  # a colleague, meanwhile
    posted["select_regex"] = "^read_"

    assert client.post(url, {**posted, "_save": "Save"}).status_code == 302

    server.refresh_from_db()
    assert (server.select_regex, server.enabled, server.risk) == ("^read_", False, "critical")
