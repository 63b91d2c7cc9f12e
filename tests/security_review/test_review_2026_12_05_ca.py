"""Review of 2026-12-05 (ca): the REST API and the admin as automation and scale use them.

Findings:

1. The admin's editable lists (``list_editable``: the catalogue's ``enabled`` / ``risk_override``, the approval
   rules' ``enabled`` / ``priority``) saved every value of a row the person edited, and every row whose posted
   value differed from the database, as the database held it when the POST arrived, not as the page showed it: a
   list opened before a colleague switched a tool off (the catalogue's kill switch) or an approval rule on, then
   saved for any other change on that page, silently switched it back. Now the list's form carries the values it
   showed (``show_hidden_initial``) and ``toolhub.admin_helpers.StaleEditsRefused`` keeps what nobody touched on
   the page as it is now, and refuses (nothing saved) a value changed on the page that a colleague also changed.
2. The change pages had the same flaw: ``ca-wire``'s page opened to raise its risk, saved after a colleague switched
   the tool off, switched it back on; a rule's page opened to rename it switched the rule off again. The same
   mixin (mixed into ``TenantScopedAdmin`` and ``CrossTenantChangesOnly``) now wraps their change forms too.

Checked and found holding (no test here): ``OPTIONS``, ``HEAD`` and ``GET`` (JSON and ``?format=api``) on every
``/api/v1/`` route, ``/api/schema/`` and ``/api/docs/`` as globex's user, auditor, operator and developer, with a
model provider of acme's alone configured: no acme tenant, user, provider or account named (DRF's metadata lists no
related-field choices: the input serializers have no related fields, the outputs' are read-only); the schema's
enums are static (statuses, risks, providers' formats), never tenants', tools' or agents' names; the API's
``?ordering=`` is ignored and list cursors hold a position only (a cursor replayed by another tenant's member pages
through that member's own rows); admin bulk actions with another tenant's ids, ``select_across`` with a filter,
``delete_selected`` and rows decided meanwhile are covered by probes 03_d, 03_f and review af; the approval desk's
bulk confirmation posts ids and each row's arguments hash (never ``select_across``), and every decision goes through
the services (four-eyes, decide permission, approver group, rate); the roles' deletable models (grants, approval
rules) have no cascading rows of another tenant for ``delete_selected``'s confirmation page to list.
"""

from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from approvals.models import ApprovalRule
from tests.helpers import console
from tests.tenancy.conftest import make_user
from toolhub.models import Tenant, ToolDefinition

pytestmark = pytest.mark.django_db


class _ChangelistForm(HTMLParser):
    """What a browser posts from an admin page's form (the list's ``#changelist-form``) as the page rendered it."""

    def __init__(self, form_id: str = "changelist-form") -> None:
        super().__init__()
        self.form_id = form_id
        self.data: dict[str, str] = {}
        self._inside = False
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "form":
            self._inside = attributes.get("id") == self.form_id
        if not self._inside or not attributes.get("name"):
            if tag == "option" and self._select and "selected" in attributes:
                self.data[self._select] = attributes.get("value") or ""
            return
        name = str(attributes["name"])
        if tag == "input":
            kind = attributes.get("type", "text")
            if kind == "checkbox":
                if "checked" in attributes and name != "_selected_action":
                    self.data[name] = attributes.get("value") or "on"
            elif kind not in ("submit", "button"):
                self.data[name] = attributes.get("value") or ""
        elif tag == "select":
            self._select = name
            self.data.setdefault(name, "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        if tag == "form":
            self._inside = False


def _list_as_shown(client: Client, url: str) -> dict[str, str]:
    """The editable list's form data, as the page showed it."""
    page = client.get(url)
    assert page.status_code == 200
    parser = _ChangelistForm()
    parser.feed(page.content.decode())
    assert "form-TOTAL_FORMS" in parser.data, "the list is not editable"
    return parser.data


def _row(data: dict[str, str], pk: int) -> str:
    """The formset prefix of the row showing ``pk`` (``form-3``)."""
    return next(key[: -len("-id")] for key, value in data.items() if key.endswith("-id") and value == str(pk))


def _set(data: dict[str, str], prefix: str, field: str, value: bool | str) -> None:
    name = f"{prefix}-{field}"
    if value is True:
        data[name] = "on"
    elif value is False:
        data.pop(name, None)
    else:
        data[name] = value


@pytest.fixture
def acme_developer(tenant: Tenant, roles: dict[str, Group]) -> User:
    return make_user("acme-developer-ca", tenant=tenant, staff=True, groups=(roles["developers"],))


def test_saving_an_approval_rules_list_switches_no_rule_back_that_a_colleague_switched_meanwhile(
    acme_developer: User, tenant: Tenant
) -> None:
    """Found: acme's developer opens the approval rules' list; a colleague then switches on the rule that holds
    payments (``hold-payments``); the developer, on the page still open, moves another rule's priority and saves.
    The save posted every row of the page as it was shown, and the admin saved each whose values differ from the
    database: ``hold-payments`` was switched off again, silently (the developer never touched it).
    Expect: a row nobody touched on the page is left as it is now (switched on), and the priority is saved."""
    hold = ApprovalRule.objects.create(name="hold-payments", tenant=tenant, tool_name="debit", enabled=False)
    other = ApprovalRule.objects.create(name="orders", tenant=tenant, tool_name="create_order", priority=100)
    client = console(acme_developer)
    shown = _list_as_shown(client, "/admin/approvals/approvalrule/")

    ApprovalRule.objects.filter(pk=hold.pk).update(enabled=True)  # a colleague, meanwhile
    _set(shown, _row(shown, other.pk), "priority", "5")
    saved = client.post("/admin/approvals/approvalrule/", {**shown, "_save": "Save"})

    assert saved.status_code == 302
    hold.refresh_from_db()
    other.refresh_from_db()
    assert other.priority == 5
    assert hold.enabled is True, "the colleague's switch was undone by a page that only showed it"


def test_saving_the_catalogue_list_re_enables_no_tool_a_colleague_switched_off_meanwhile(superuser: User) -> None:
    """Found: a platform operator opens the catalogue's list; a colleague then switches ``ca-wire`` off (the kill
    switch in an incident); the operator, on the page still open, raises another tool's ``risk_override`` and saves.
    ``ca-wire`` came back on (``tool_definition_govern`` recorded "enabled: false -> true" in the operator's name).
    The same when the operator changes ``ca-wire``'s own ``risk_override`` on a page that showed it on: its
    ``enabled`` came back on with it.
    Expect: what nobody touched on the page is left as it is now; ``ca-wire`` stays off through both saves."""
    wire = ToolDefinition.objects.create(name="ca-wire", enabled=True)
    mail = ToolDefinition.objects.create(name="ca-mail", enabled=True)
    client = console(superuser)
    url = "/admin/toolhub/tooldefinition/?q=ca-"
    shown = _list_as_shown(client, url)

    ToolDefinition.objects.filter(pk=wire.pk).update(enabled=False)  # a colleague, meanwhile
    _set(shown, _row(shown, mail.pk), "risk_override", "high")
    assert client.post(url, {**shown, "_save": "Save"}).status_code == 302
    wire.refresh_from_db()
    mail.refresh_from_db()
    assert mail.risk_override == "high"
    assert wire.enabled is False, "the kill switch was undone by a page that only showed it"

    ToolDefinition.objects.filter(pk=wire.pk).update(enabled=True)
    shown = _list_as_shown(client, url)
    ToolDefinition.objects.filter(pk=wire.pk).update(enabled=False)  # a colleague, meanwhile
    _set(shown, _row(shown, wire.pk), "risk_override", "critical")  # on the page still open: the row itself
    assert client.post(url, {**shown, "_save": "Save"}).status_code == 302
    wire.refresh_from_db()
    assert (wire.enabled, wire.risk_override) == (False, "critical")


def test_a_value_changed_on_the_page_that_a_colleague_also_changed_is_refused(
    acme_developer: User, tenant: Tenant
) -> None:
    """Found: both people changed the same value (the rule's priority: 50 on the page, 10 by the colleague): the
    page's value overwrote the colleague's without a word.
    Expect: the save is refused with the row's error (nothing saved on the page), the colleague's value stays."""
    rule = ApprovalRule.objects.create(name="refunds", tenant=tenant, tool_name="debit", priority=100)
    client = console(acme_developer)
    shown = _list_as_shown(client, "/admin/approvals/approvalrule/")

    ApprovalRule.objects.filter(pk=rule.pk).update(priority=10)  # a colleague, meanwhile
    _set(shown, _row(shown, rule.pk), "priority", "50")
    answer = client.post("/admin/approvals/approvalrule/", {**shown, "_save": "Save"})

    assert answer.status_code == 200
    assert "since you opened this page" in answer.content.decode()
    rule.refresh_from_db()
    assert rule.priority == 10


def _change_form_as_shown(client: Client, url: str) -> dict[str, str]:
    """A change page's form data, as the page showed it (the admin's ``<form>`` of the object)."""
    page = client.get(url)
    assert page.status_code == 200
    parser = _ChangelistForm(form_id=f"{page.context['opts'].model_name}_form")
    parser.feed(page.content.decode())
    return parser.data


def test_saving_a_change_page_switches_nothing_back_that_a_colleague_switched_meanwhile(
    superuser: User, acme_developer: User, tenant: Tenant
) -> None:
    """Found: the change pages have the same flaw as the lists. A platform operator opens ``ca-wire``'s page to
    raise its risk; a colleague switches the tool off meanwhile; the save switched it back on. acme's developer opens
    a rule's page to rename it; a colleague switches the rule on meanwhile; the save switched it off again.
    Expect: what the page only showed is left as it is now; what was changed on it is saved."""
    wire = ToolDefinition.objects.create(name="ca-wire", enabled=True)
    client = console(superuser)
    url = f"/admin/toolhub/tooldefinition/{wire.pk}/change/"
    shown = _change_form_as_shown(client, url)
    ToolDefinition.objects.filter(pk=wire.pk).update(enabled=False)  # a colleague, meanwhile
    shown["risk_override"] = "critical"
    assert client.post(url, {**shown, "_save": "Save"}).status_code == 302
    wire.refresh_from_db()
    assert (wire.enabled, wire.risk_override) == (False, "critical")

    rule = ApprovalRule.objects.create(name="hold-payments", tenant=tenant, tool_name="debit", enabled=False)
    client = console(acme_developer)
    url = f"/admin/approvals/approvalrule/{rule.pk}/change/"
    shown = _change_form_as_shown(client, url)
    ApprovalRule.objects.filter(pk=rule.pk).update(enabled=True)  # a colleague, meanwhile
    shown["name"] = "hold-all-payments"
    assert client.post(url, {**shown, "_save": "Save"}).status_code == 302
    rule.refresh_from_db()
    assert (rule.name, rule.enabled) == ("hold-all-payments", True)


def test_a_change_page_keeps_no_password_hash_among_the_values_it_shows(superuser: User, acme_developer: User) -> None:
    """The values a change page carries to detect a colleague's change never include a read-only or secret field:
    a user's page has no hidden copy of the password hash (``initial-password``), nor the hash anywhere."""
    page = console(superuser).get(f"/admin/auth/user/{acme_developer.pk}/change/")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'name="initial-is_active"' in body  # the mechanism is on for this page
    assert 'name="initial-password"' not in body and acme_developer.password not in body
