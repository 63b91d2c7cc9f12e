"""Review of 2026-12-05 (ae): governance configuration as operators and developers enter it, mistakes included.

Each test fails on the reviewed code (main at c0d013d) and states who enters what, where, and what is expected.
A configuration mistake must be refused where it is entered (the admin's forms, which run the models' ``clean()``),
and one saved before the code changed must be reported (``manage.py check --database default``, the admin's lists)
or fail closed, never let a call run that it was meant to hold or deny.

Findings: an operator's ``ApprovalRule`` naming no registered tool (``tool_name`` typo), an ``argument`` that is a
parameter of none of the tools the rule covers, a tool outside the rule's own tool group, ``in`` with a value that
is not a list, or ``==``/``in`` with a value the parameter can never take (``"GBP"`` for an ``EUR``/``USD`` enum,
``"yes"`` for a boolean) was saved and never matched (``approvals.rules.rule_matches``), so the calls it was meant
to hold ran unapproved (now refused by ``ApprovalRule.clean`` through ``approvals.rule_checks.rule_problems``); a
``Grant`` naming no registered tool was saved, so a deny with a typo denied nothing (default-allow, or beside an
allow of the tool's group) and the tool ran; a ``ToolGroup``'s ``extra_tools`` given as a string (``"debit"``) was
read as its characters and a list naming no tool was accepted, so a deny or an approval rule on the group missed the
tool (both refused by ``toolhub.references``, which every form and the checks share); a rule whose tool no longer
has the parameter it reads (a parameter renamed in code after the rule was saved) let every call of the tool pass
(now held: the rule matches a call it cannot read); a correctly entered rule on an enum or a date parameter
(``op == "/"``, ``start in ["2026-01-01"]``) never matched, the rules reading the validated Python objects
(``Operation.DIVIDE``, ``date(2026, 1, 1)``) instead of the JSON the call sent (now read as JSON:
``approvals.rules.database_rule_verdict``); rules, grants and groups naming a tool or parameter the code no longer
has drew no word (now ``approvals.W001`` and ``toolhub.W006`` under ``manage.py check --database default``, which
``migrate`` runs too, and a "Problems" column on the admin's lists); a model's check naming a field a form does not
edit (the list's editable columns, a read-only field) is shown on the form (``admin_helpers.ModelProblemsShown``).

Checked and found holding (no test here): an agent's tool list and ``tool_choice`` naming no tool are refused by the
API (``unknown_tools_problem`` in ``agents_app.services._apply``) and the admin (``AgentAdminForm.clean_tools``),
with suggestions among the tools the requester may see; an agent's model provider must be one its tenant may use
(API and admin); a tool group's activation rules and capability names are checked in ``ToolGroup.clean``, and a typo
in an activation rule's roles, tenants or agents only leaves the group inactive (fails closed: fewer tools); a rule
or grant form offers a tenant-scoped user only their tenants and the tool groups they see (earlier probes), and a
global rule is refused to them; order comparisons (``>``, ``<=``) on a value of another type raise ``TypeError`` and
hold the call (``_compare``); a rule with an operator but no argument matched every call (held, fails closed: now
refused as incomplete too); a rule's ``min_risk`` above the tool's risk is kept (an operator may raise the tool's
risk later: a rule for that day is deliberate); the catalogue's enable switch on a row the code no longer has
changes nothing that runs; a tool removed from the code cannot be called, so a rule or an allow grant still naming
it lets nothing through (reported all the same).

Not fixed (reported): a grant's ``agent_name`` is free text (adapters name agents that have no ``Agent`` row), so a
deny to a misspelt agent name still denies nothing; a rule bound to a tool group whose members lack the argument in
some but not all of them is accepted (the argument is read where it exists).
"""

from typing import Annotated, Any, Literal

import pytest
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.test import Client

from approvals.models import ApprovalRule
from tests.security_review.conftest import client_for
from toolhub import Param, registry, tool
from toolhub.models import Grant, GrantEffect, Tenant, ToolGroup

pytestmark = pytest.mark.django_db


@tool(risk="low", group="ae_payments")
def ae_transfer(
    account: Annotated[str, Param("The account to pay from.")],
    amount: Annotated[int, Param("How much, in cents.")],
    currency: Annotated[Literal["EUR", "USD"], Param("The currency.")] = "EUR",
    urgent: Annotated[bool, Param("Whether it leaves today.")] = False,
) -> str:
    """Pay from an account."""
    return "paid"


@tool(risk="low", group="ae_payments")
def ae_lookup(account: Annotated[str, Param("The account to read.")]) -> str:
    """Read an account."""
    return "read"


@tool(risk="low")
def ae_renamed(amount_cents: Annotated[int, Param("How much, in cents (was: amount).")]) -> str:
    """A tool whose parameter was renamed after a rule reading the old name was saved."""
    return "paid"


@pytest.fixture(autouse=True)
def _ae_tools() -> Any:
    with registry.temporarily(ae_transfer, ae_lookup, ae_renamed):
        yield


def _admin(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _rule(**fields: Any) -> dict[str, Any]:
    """The admin's add form for an approval rule, as an operator fills it in."""
    return {
        "name": "big transfers",
        "enabled": "on",
        "priority": "10",
        "tool_name": "",
        "tool_group": "",
        "tenant": "",
        "min_risk": "",
        "argument": "",
        "operator": "",
        "value": "null",
        "required_approvals": "1",
        "timeout_seconds": "",
        **fields,
    }


def _errors(response: Any) -> str:
    """Every error the admin's form shows, as one text."""
    form = response.context["adminform"].form
    return " ".join(str(message) for messages in form.errors.values() for message in messages)


def _transfer(user: User, **arguments: Any) -> str:
    """Ask for an ``ae_transfer`` call through the API, as a client of toolhub would; its status."""
    response = client_for(user).post(
        "/api/v1/calls/",
        {"tool": "ae_transfer", "arguments": {"account": "ACC-1", "amount": 5000, **arguments}},
        format="json",
    )
    return str(response.json()["status"])  # a denied tool is answered as unknown: 404, "invalid"


# --- approval rules: names and conditions that match nothing --------------------------------------------------


def test_a_rule_naming_no_tool_is_refused_in_the_admin(superuser: User, alice: User) -> None:
    """Found: a platform operator adds "transfers above 1000 cents need approval" and types ``ae_transfr``; the admin
    saves it, and ``POST /api/v1/calls/`` of ``ae_transfer`` with ``amount=5000`` runs unapproved: the rule never
    matches (``rule_matches`` compares names) and nothing says so.
    Expect: the form refuses the name at its field, naming the closest tool; the corrected rule saves and holds.
    """
    client = _admin(superuser)
    condition = {"argument": "amount", "operator": ">", "value": "1000"}
    refused = client.post("/admin/approvals/approvalrule/add/", _rule(tool_name="ae_transfr", **condition))

    assert refused.status_code == 200, "a rule naming no tool was saved"
    assert "ae_transfr" in _errors(refused) and "ae_transfer" in _errors(refused)
    assert not ApprovalRule.objects.exists()

    saved = client.post("/admin/approvals/approvalrule/add/", _rule(tool_name="ae_transfer", **condition))
    assert saved.status_code == 302, _errors(saved)
    assert _transfer(alice) == "pending_approval"


def test_a_rule_reading_an_argument_the_tool_does_not_have_is_refused(superuser: User, alice: User) -> None:
    """Found: the rule ``ae_transfer: ammount > 1000`` (a typo) is saved; ``rule_matches`` finds no ``ammount``
    in the arguments and answers "no match", so every transfer runs unapproved. The same for a rule bound to the tool
    group ``ae_payments`` (no member has ``ammount``) and for a rule on every tool (no registered tool has it).
    Expect: refused at the argument field, naming the parameters the tool has.
    """
    client = _admin(superuser)
    group = ToolGroup.objects.create(name="ae_payments")
    scopes = [{"tool_name": "ae_transfer"}, {"tool_group": str(group.pk)}, {}]
    for scope in scopes:
        response = client.post(
            "/admin/approvals/approvalrule/add/",
            _rule(argument="ammount", operator=">", value="1000", **scope),
        )
        assert response.status_code == 200, f"a rule reading no parameter was saved ({scope})"
        assert "ammount" in _errors(response) and "amount" in _errors(response)
    assert not ApprovalRule.objects.exists()
    assert _transfer(alice) not in ("pending_approval", "denied")  # nothing holds it: no rule was saved

    saved = client.post(
        "/admin/approvals/approvalrule/add/",
        _rule(tool_group=str(group.pk), argument="amount", operator=">", value="1000"),
    )
    assert saved.status_code == 302, _errors(saved)
    assert _transfer(alice) == "pending_approval"


@pytest.mark.parametrize(
    ("operator", "value", "about"),
    [
        ("in", '"EUR"', "list"),  # one value, not a list: `isinstance(expected, list)` fails, never matches
        ("in", '["GBP"]', "GBP"),  # a value the parameter never takes
        ("==", '"GBP"', "GBP"),
        ("==", '"yes"', "yes"),  # on the boolean `urgent`
    ],
)
def test_a_rule_comparing_with_a_value_the_parameter_never_takes_is_refused(
    superuser: User, operator: str, value: str, about: str
) -> None:
    """Found: ``currency in "EUR"`` (one value where a list is needed), ``currency in ["GBP"]`` and
    ``currency == "GBP"`` (the tool takes ``EUR`` or ``USD``) and ``urgent == "yes"`` (a boolean) are saved, and
    each never matches (``_compared``), so the calls they were meant to hold run.
    Expect: refused at the value field, saying what the parameter takes.
    """
    argument = "urgent" if value == '"yes"' else "currency"
    response = _admin(superuser).post(
        "/admin/approvals/approvalrule/add/",
        _rule(tool_name="ae_transfer", argument=argument, operator=operator, value=value),
    )
    assert response.status_code == 200, f"{argument} {operator} {value} was saved"
    assert about in _errors(response)
    assert not ApprovalRule.objects.exists()


def test_a_rule_whose_own_conditions_exclude_each_other_is_refused(superuser: User) -> None:
    """Found: a rule naming the tool ``ae_transfer`` and the group ``ledger`` (which does not hold it) is saved and
    can never match (a call must be of both); so is ``urgent contains "y"`` on a boolean, and an operator and value
    without an argument (which ``rule_matches`` ignores: the rule then holds every call, unlike what was written).
    Expect: each refused, saying which conditions exclude each other or what is missing.
    """
    client = _admin(superuser)
    ledger = ToolGroup.objects.create(name="ledger")
    cases = [
        ({"tool_name": "ae_transfer", "tool_group": str(ledger.pk)}, "not in this tool group"),
        ({"tool_name": "ae_transfer", "argument": "urgent", "operator": "contains", "value": '"y"'}, "contains"),
        ({"tool_name": "ae_transfer", "operator": ">", "value": "1000"}, "argument"),
    ]
    for fields, about in cases:
        response = client.post("/admin/approvals/approvalrule/add/", _rule(**fields))
        assert response.status_code == 200, f"{fields} was saved"
        assert about in _errors(response), _errors(response)
    assert not ApprovalRule.objects.exists()

    # what can match still saves: the check refuses only what never can
    accepted = [
        {"argument": "amount", "operator": ">", "value": "1000"},
        {"argument": "amount", "operator": "", "value": "0"},  # no operator: equals
        {"argument": "currency", "operator": "in", "value": '["EUR", "USD"]'},
        {"argument": "currency", "operator": "!=", "value": '"EUR"'},
        {"argument": "urgent", "operator": "==", "value": "true"},
        {"argument": "account", "operator": "contains", "value": '"ACC-9"'},
        {"argument": "account", "operator": ">=", "value": '"ACC-5"'},
        {},
    ]
    for number, condition in enumerate(accepted):
        response = client.post(
            "/admin/approvals/approvalrule/add/", _rule(name=f"rule {number}", tool_name="ae_transfer", **condition)
        )
        assert response.status_code == 302, (condition, _errors(response))
    assert ApprovalRule.objects.count() == len(accepted)


def test_a_tenant_developers_rule_is_checked_the_same_way(
    globex_developer: User, other_tenant: Tenant, globex_user: User
) -> None:
    """Found: a globex developer's rule bound to globex, ``ae_transfer: amout > 1000``, is saved, and globex's
    transfers run unapproved.
    Expect: refused as the platform's rules are (one check, in the model's ``clean``).
    """
    response = _admin(globex_developer).post(
        "/admin/approvals/approvalrule/add/",
        _rule(tool_name="ae_transfer", tenant=str(other_tenant.pk), argument="amout", operator=">", value="1000"),
    )
    assert response.status_code == 200, "a tenant's rule reading no parameter was saved"
    assert "amout" in _errors(response)
    assert not ApprovalRule.objects.exists()


def test_a_rule_saved_before_its_parameter_was_renamed_holds_the_call(alice: User) -> None:
    """Found: a rule ``ae_renamed: amount > 1000`` saved while the tool took ``amount``; the developer renames the
    parameter ``amount_cents``; every call now runs unapproved (``rule.argument not in arguments``: no match).
    Expect: a rule naming this very tool and reading a parameter it no longer has holds its calls for a person
    (fails closed) until an operator fixes it; the checks report it (below).
    """
    ApprovalRule.objects.create(name="big", tool_name="ae_renamed", argument="amount", operator=">", value=1000)
    response = client_for(alice).post(
        "/api/v1/calls/", {"tool": "ae_renamed", "arguments": {"amount_cents": 10}}, format="json"
    )
    assert response.json()["status"] == "pending_approval", "a call its rule cannot read ran unapproved"


def test_a_rule_on_an_enum_or_a_date_parameter_matches_the_value_the_operator_entered(alice: User) -> None:
    """Found: a correctly entered rule ``calculate: op == "/"`` (an enum) or ``days_between: start in
    ["2026-01-01"]`` (a date) never matched: ``database_rule_verdict`` compared the *validated* arguments, Python
    objects (``Operation.DIVIDE``, ``date(2026, 1, 1)``) that equal no JSON value, so those calls ran unapproved.
    Expect: rules read the arguments as the JSON the call sent and stored (``"/"``, ``"2026-01-01"``), so both
    calls are held; dates compare in order as ISO text (``start >= "2026-06-01"`` lets an earlier one pass).
    """
    ApprovalRule.objects.create(name="divisions", tool_name="calculate", argument="op", operator="==", value="/")
    ApprovalRule.objects.create(
        name="new year", tool_name="days_between", argument="start", operator="in", value=["2026-01-01"]
    )
    ApprovalRule.objects.create(
        name="summer", tool_name="days_between", argument="end", operator=">=", value="2026-06-01"
    )
    api = client_for(alice)

    def status(tool_name: str, arguments: dict[str, Any]) -> str:
        response = api.post("/api/v1/calls/", {"tool": tool_name, "arguments": arguments}, format="json")
        return str(response.json()["status"])

    assert status("calculate", {"a": 1, "op": "/", "b": 2}) == "pending_approval"
    assert status("days_between", {"start": "2026-01-01", "end": "2026-01-05"}) == "pending_approval"
    assert status("days_between", {"start": "2026-02-01", "end": "2026-02-05"}) != "pending_approval"
    assert status("days_between", {"start": "2026-02-01", "end": "2026-07-05"}) == "pending_approval"


def test_a_broken_rule_can_still_be_switched_off_from_the_list(superuser: User) -> None:
    """Found: a rule saved before its tool left the code is edited from the rules' list (its priority) without a
    word about the tool it names.
    Expect: the list's editable columns run the model's check too: refused while the rule is enabled, said on its
    row (not a server error, though the list edits no ``tool_name``), and the rule may still be switched off.
    """
    rule = ApprovalRule.objects.create(name="gone", tool_name="ae_removed", priority=5)
    client = _admin(superuser)
    listing = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": str(rule.pk),
        "form-0-priority": "6",
        "_save": "Save",
    }
    refused = client.post("/admin/approvals/approvalrule/", {**listing, "form-0-enabled": "on"})
    assert refused.status_code == 200 and "ae_removed" in refused.content.decode()
    switched_off = client.post("/admin/approvals/approvalrule/", listing)
    assert switched_off.status_code == 302
    rule.refresh_from_db()
    assert (rule.enabled, rule.priority) == (False, 6)


# --- grants and tool groups -----------------------------------------------------------------------------------


def test_a_grant_naming_no_tool_is_refused(superuser: User, globex_developer: User, other_tenant: Tenant) -> None:
    """Found: a platform operator denies ``ae_transfr`` (a typo) to tenant globex; the grant is saved and denies
    nothing: ``authorize_tools`` compares names, so globex's transfers run (default allow here, or an allow of the
    group ``ae_payments``). A globex developer's own grant form saves such a name too.
    Expect: both forms refuse the name at its field, naming the closest tool.
    """
    fields = {"effect": GrantEffect.DENY, "note": "", "tool_name": "ae_transfr", "tool_group": "", "tenant": ""}
    for user in (superuser, globex_developer):
        response = _admin(user).post("/admin/toolhub/grant/add/", {**fields, "tenant": str(other_tenant.pk)})
        assert response.status_code == 200, f"{user.username}'s grant naming no tool was saved"
        assert "ae_transfr" in _errors(response) and "ae_transfer" in _errors(response)
    assert not Grant.objects.exists()


def test_a_tool_groups_extra_tools_must_be_a_list_of_registered_tools(superuser: User) -> None:
    """Found: a group's extra tools entered as ``"ae_transfer"`` (a string, not a list) is saved and read as the
    set of its characters (``frozenset(extra)``), and ``["ae_transfr"]`` is saved too: either way a deny, an approval
    rule or an approver restriction on the group misses the tool the operator added.
    Expect: refused at the field: a JSON list of registered tool names.
    """
    client = _admin(superuser)
    for extra, about in (('"ae_transfer"', "list"), ('["ae_transfr"]', "ae_transfr")):
        response = client.post(
            "/admin/toolhub/toolgroup/add/",
            {
                "name": "ae_extra",
                "extra_tools": extra,
                "capabilities": "[]",
                "activation_rules": "[]",
                "active_by_default": "on",
            },
        )
        assert response.status_code == 200, f"extra_tools {extra} was saved"
        assert about in _errors(response)
    assert not ToolGroup.objects.filter(name="ae_extra").exists()


# --- what the code no longer has: reported ----------------------------------------------------------------------


def test_rules_grants_and_groups_naming_what_the_code_no_longer_has_are_reported(
    superuser: User, tenant: Tenant
) -> None:
    """Found: after a tool is removed from the code (or a parameter renamed), the rules, grants and group members
    still naming it are kept without a word: ``manage.py check`` says nothing and the admin's lists look healthy.
    Expect: ``manage.py check --database default`` warns about each (``approvals.W001``, ``toolhub.W006``), and
    the rules' and grants' lists mark the row.
    """
    ApprovalRule.objects.create(name="gone", tool_name="ae_removed", required_approvals=2)
    ApprovalRule.objects.create(name="stale", tool_name="ae_renamed", argument="amount", operator=">", value=1)
    grant = Grant.objects.create(tool_name="ae_removed", tenant=tenant, effect=GrantEffect.DENY)
    ToolGroup.objects.create(name="ae_old", extra_tools=["ae_removed"])

    messages = run_checks(databases=["default"])
    warned = {(message.id, str(message.obj)) for message in messages}
    assert ("approvals.W001", "ApprovalRule 'gone'") in warned
    assert ("approvals.W001", "ApprovalRule 'stale'") in warned
    assert ("toolhub.W006", f"Grant {str(grant)!r}") in warned
    assert ("toolhub.W006", "ToolGroup 'ae_old'") in warned
    assert not any(message.id in ("approvals.W001", "toolhub.W006") for message in run_checks())  # no database

    client = _admin(superuser)
    rules = client.get("/admin/approvals/approvalrule/").content.decode()
    assert "ae_removed" in rules and "No registered tool" in rules
    grants = client.get("/admin/toolhub/grant/").content.decode()
    assert "No registered tool" in grants
