"""Probe of 2026-12-04 (fifth pass): what the fixes of the four-eyes and keyed-hash commits missed.

Each test is an attack that worked on the code as probed, now refused. Its docstring says who the attacker
was, what they reached, where in the code ("Found") and what closed it ("Fix"): sensitive values are found in
the arguments' JSON form too (models, Decimals: ``secrets.sensitive_values``), a name a tool no longer has is
withheld (``selectors.withheld_names``), and the migrations carry over only bindings that still held.
"""

import hashlib
import importlib
import json
from decimal import Decimal
from typing import Annotated, Any

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import User
from pydantic import BaseModel

from approvals.models import ApprovalRequest, WebhookDelivery
from tests.helpers import RequestCall, audit_text, console
from tests.security_review.conftest import client_for
from toolhub import Param, registry, tool
from toolhub.audit_hash import canonical_json
from toolhub.models import CallStatus, ToolCall
from toolhub.pipeline import approval_hash_matches
from toolhub.tools.definition import Tool

pytestmark = pytest.mark.django_db


# --- scrubbing: sensitive values are collected from validated Python objects, not from JSON -----------------------


class Payee(BaseModel):
    iban: str
    name: str


#: A sensitive argument's value inside a nested model, and a sensitive Decimal (both >= 4 characters).
IBAN = "CY17-0020-0128-PROBE-E-NESTED"
SALARY = "98765.43"


@tool(sensitive=("payee",), needs_approval=lambda arguments, ctx: f"first payment to {arguments['payee'].iban}")
def probe_e_new_payee(amount: Annotated[int, Param("Amount in cents.")], payee: Annotated[Payee, Param("Who.")]) -> str:
    """Pay a new payee (the code rule holds every call, naming the payee's IBAN in its reason)."""
    return "paid"


@tool(sensitive=("salary",), needs_approval=lambda arguments, ctx: f"salary {arguments['salary']} is above the cap")
def probe_e_set_salary(person: Annotated[str, Param("Who.")], salary: Annotated[Decimal, Param("Yearly.")]) -> str:
    """Set a salary (held when above the cap, the rule quoting the amount)."""
    return "set"


def test_a_code_rules_reason_quoting_a_nested_or_decimal_sensitive_argument_is_kept_in_clear(
    request_call: RequestCall, alice: User, operator: User, settings: Any
) -> None:
    """The fix of probe c scrubs a code rule's reason with ``sensitive_values(arguments, tool.sensitive)``.

    Found: ``toolhub.policy.approval_verdict`` hands it the *validated* arguments (``SignatureInputs.validate``
    returns the pydantic attribute values): a sensitive parameter typed as a model is a ``BaseModel``
    instance, a ``Decimal`` is a ``Decimal``, and ``sensitive_values`` only collects ``str``/``int``/``float``/
    ``Mapping``/``list``: nothing is collected, nothing is scrubbed. The IBAN (and the salary) are stored as the
    request's reason, shown in the approvals API and desk, mailed and sent to webhooks. The same holds for
    ``recorded_call_verdict`` (edits, tool changes). Fix: collect the sensitive values from the JSON form of
    the arguments (``to_json_value(arguments)`` / the stored arguments), or make ``sensitive_values`` walk
    models, Decimals, sets and other pydantic outputs.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": "https://hooks.example.invalid/toolhub"}
    with registry.temporarily(probe_e_new_payee, probe_e_set_salary):
        paid = request_call(
            "probe_e_new_payee", {"amount": 100, "payee": {"iban": IBAN, "name": "Mule"}}, alice, tenant="acme"
        )
        salaried = request_call("probe_e_set_salary", {"person": "bob", "salary": SALARY}, alice, tenant="acme")
        assert paid.status == salaried.status == CallStatus.PENDING_APPROVAL
        shown = {}
        for call in (paid, salaried):
            request = ApprovalRequest.objects.get(call=call)
            shown[f"{call.tool_name}: reason"] = request.reason
            shown[f"{call.tool_name}: approvals API"] = (
                client_for(operator).get(f"/api/v1/approvals/{request.pk}/").content.decode()
            )
            shown[f"{call.tool_name}: audit trail"] = audit_text(call)
        shown["webhook payloads"] = json.dumps(list(WebhookDelivery.objects.values_list("payload", flat=True)))
    leaked = sorted(where for where, text in shown.items() if IBAN in text or SALARY in text)
    assert leaked == [], f"a nested / Decimal sensitive value quoted by a code rule shows in clear in: {leaked}"


@tool(sensitive=("payee",))
def probe_e_pay(amount: Annotated[int, Param("Amount in cents.")], payee: Annotated[Payee, Param("Who.")]) -> str:
    """Pay; the answer repeats the payee's IBAN (as tools do)."""
    return f"paid {amount} to {payee.iban}"


@tool(sensitive=("salary",))
def probe_e_salary_echo(salary: Annotated[Decimal, Param("Yearly.")]) -> str:
    """Set a salary; the answer repeats it."""
    return f"salary set to {salary}"


def test_a_tool_repeating_a_nested_or_decimal_sensitive_argument_stores_it_in_clear(
    request_call: RequestCall, alice: User, operator: User
) -> None:
    """README: where the tool repeats a sensitive argument (its result, an error, a log line) its value is
    replaced by ``[secret]`` (values of at least 4 characters).

    Found (predates these commits, same root cause as above): ``toolhub.execution.tool_call_run_claimed`` builds
    ``SecretScrubber.for_call(tool, arguments)`` from the validated arguments, whose nested model / Decimal
    values ``sensitive_values`` does not collect: the IBAN and the salary are stored in the call's result and
    shown to the model, the call API and the admin. Fix: as above (collect from the stored JSON arguments).
    """
    with registry.temporarily(probe_e_pay, probe_e_salary_echo):
        paid = request_call("probe_e_pay", {"amount": 1, "payee": {"iban": IBAN, "name": "Mule"}}, alice, tenant="acme")
        salaried = request_call("probe_e_salary_echo", {"salary": SALARY}, alice, tenant="acme")
        paid.refresh_from_db()
        salaried.refresh_from_db()
        assert paid.status == salaried.status == CallStatus.SUCCEEDED
        shown = {
            "result (nested)": json.dumps(paid.result),
            "result (Decimal)": json.dumps(salaried.result),
            "call API (nested)": client_for(operator).get(f"/api/v1/calls/{paid.pk}/").content.decode(),
            "call API (Decimal)": client_for(operator).get(f"/api/v1/calls/{salaried.pk}/").content.decode(),
        }
    leaked = sorted(where for where, text in shown.items() if IBAN in text or SALARY in text)
    assert leaked == [], f"a nested / Decimal sensitive value repeated by the tool is kept in clear in: {leaked}"


# --- withheld_names: a registered tool whose sensitive parameter was renamed -----------------------------------

PIN = "pin-probe-e-4417-sensitive"


def _unlock_v1(door: Annotated[str, Param("Which door.")], pin: Annotated[str, Param("The door's PIN.")]) -> str:
    """Unlock a door."""
    return "unlocked"


def _unlock_v2(door: Annotated[str, Param("Which door.")], door_pin: Annotated[str, Param("The door's PIN.")]) -> str:
    """Unlock a door (the PIN parameter renamed)."""
    return "unlocked"


def test_a_sensitive_value_shows_in_clear_once_its_parameter_is_renamed(
    request_call: RequestCall, alice: User, operator: User
) -> None:
    """alice's agent calls ``probe_e_unlock`` (``pin`` sensitive, risk high: held). A deploy renames the parameter
    to ``door_pin`` (still sensitive); the tool keeps its name.

    Found: ``toolhub.selectors.withheld_names`` withholds every name only when the tool is no longer
    registered; a registered tool answers with its *current* ``sensitive`` names, which no longer include
    ``pin``: the PIN of every earlier call shows in clear on the call API, the approvals API and the approval
    desk (whose edit form also pre-fills it: ``approvals.admin._editable``); the exports do the same
    (``toolhub.exports``, ``tool.sensitive``). Which of an old call's names were sensitive is as unknown as for
    a removed tool. Fix: also withhold every argument name that is not a current parameter of the tool (or
    record the sensitive names with the call when it is requested and redact by those).
    """
    v1 = Tool.from_function(_unlock_v1, name="probe_e_unlock", sensitive=("pin",), risk="high")
    v2 = Tool.from_function(_unlock_v2, name="probe_e_unlock", sensitive=("door_pin",), risk="high")
    with registry.temporarily(v1):
        call = request_call("probe_e_unlock", {"door": "vault", "pin": PIN}, alice, tenant="acme")
        request = ApprovalRequest.objects.get(call=call)
        assert PIN not in client_for(operator).get(f"/api/v1/calls/{call.pk}/").content.decode()
    with registry.temporarily(v2):
        shown = {
            "call API": client_for(operator).get(f"/api/v1/calls/{call.pk}/").content.decode(),
            "approvals API": client_for(operator).get(f"/api/v1/approvals/{request.pk}/").content.decode(),
            "approval desk": console(operator)
            .get(f"/admin/approvals/approvalrequest/{request.pk}/change/")
            .content.decode(),
            "admin call page": console(operator).get(f"/admin/toolhub/toolcall/{call.pk}/change/").content.decode(),
        }
    leaked = sorted(where for where, text in shown.items() if PIN in text)
    assert leaked == [], f"the PIN shows in clear after its parameter was renamed, on: {leaked}"


# --- the keyed-hash migrations rebind bindings that no longer held -----------------------------------------------


def _plain(tool_name: str, version: str, arguments: Any) -> str:
    """The binding as written before toolhub 0022 (a plain SHA-256)."""
    return hashlib.sha256(
        canonical_json({"tool": tool_name, "version": version, "arguments": arguments}).encode()
    ).hexdigest()


@tool(risk="high")
def probe_e_wire(amount: Annotated[int, Param("Amount in cents.")]) -> str:
    """Wire money (held for an operator)."""
    return "wired"


def test_the_keyed_hash_migrations_launder_a_binding_that_no_longer_matched(
    request_call: RequestCall, alice: User
) -> None:
    """Before the upgrade, a call approved for 500 waits for a worker; its arguments were changed afterwards
    (not by an operator's edit), so the worker would refuse it: "anything else changing the arguments voids
    the approval" (``toolhub.execution._refusal_at_execution``). Likewise a pending request's version was
    changed after it was bound, so ``approvals.services._release`` would refuse it.

    Found: ``toolhub/migrations/0022_keyed_approval_hashes.rebind_waiting_calls`` and
    ``approvals/migrations/0006_keyed_arguments_hash.rebind_pending_requests`` compute the keyed hash over the
    arguments *as they are now*, without checking the stored plain digest still binds them: the upgrade turns
    a voided approval into a valid one, and the worker runs 9,000,000. Fix: rebind only where the stored
    binding equals the plain SHA-256 of the current (tool, version, arguments); leave the others as they are
    (they stay refused).
    """
    rebind_calls = importlib.import_module("toolhub.migrations.0022_keyed_approval_hashes").rebind_waiting_calls
    rebind_requests = importlib.import_module("approvals.migrations.0006_keyed_arguments_hash").rebind_pending_requests
    with registry.temporarily(probe_e_wire):
        approved = request_call("probe_e_wire", {"amount": 500}, alice, tenant="acme")
        pending = request_call("probe_e_wire", {"amount": 500}, alice, tenant="acme")
    version = approved.tool_version
    # As the database held them before the upgrade: bound to 500 by the plain digest, then changed.
    ToolCall.objects.filter(pk=approved.pk).update(
        status=CallStatus.QUEUED,
        approval_hash=_plain("probe_e_wire", version, {"amount": 500}),
        arguments={"amount": 9_000_000},
    )
    ApprovalRequest.objects.filter(call=pending).update(
        arguments_hash=_plain("probe_e_wire", version, {"amount": 500}), arguments={"amount": 9_000_000}
    )

    rebind_calls(django_apps, None)
    rebind_requests(django_apps, None)

    approved.refresh_from_db()
    request = ApprovalRequest.objects.get(call=pending)
    laundered = {
        "waiting call": approval_hash_matches(approved.approval_hash, "probe_e_wire", version, approved.arguments),
        "pending request": approval_hash_matches(request.arguments_hash, "probe_e_wire", version, request.arguments),
    }
    assert not any(laundered.values()), f"the upgrade bound changed arguments as if approved: {laundered}"
