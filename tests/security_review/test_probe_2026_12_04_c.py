"""Probe of 2026-12-04 (third pass): credentials, secrets and the four-eyes rule.

Each test is an attack that worked on the code as probed, now refused; its docstring says who the attacker
was, what they reached, where in the code ("Found") and what closed it ("Fix"). The fixes: an operator's
edit goes through the model's intake (interceptors included) and is judged again by policy, never needing
fewer approvers than before (``approvals.editing``); a call sent back because its tool changed is judged
again and keeps its approvers (``toolhub.waiting``, ``approvals.services``); arguments of a tool no longer
registered are withheld whole (``toolhub.selectors.withheld_names``); a code rule's reason and a
validator's message never quote a sensitive value (``toolhub.policy``, ``toolhub.call_arguments``).
"""

import json
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from pydantic import AfterValidator

from approvals.models import ApprovalRequest, ApprovalRule, ApprovalStatus, WebhookDelivery
from approvals.services import approval_approve
from tests.approvals.conftest import third_operator  # noqa: F401 - fixture
from tests.helpers import RequestCall, audit_text, console
from tests.security_review.conftest import client_for
from toolhub import Param, registry, tool
from toolhub.models import CallStatus, ToolCall
from toolhub.tools.definition import Tool

pytestmark = pytest.mark.django_db

Committed = Callable[..., Any]

#: What the probe's payment tool moved, by amount (the side effect an attacker is after).
PAID: list[int] = []


@tool(risk="high")
def probe_c_pay(
    amount: Annotated[int, Param("Amount in cents.")],
    iban: Annotated[str, Param("Where the money goes.")],
) -> dict:
    """Pay ``amount`` to ``iban`` (high risk: held for an operator)."""
    PAID.append(amount)
    return {"paid": amount, "to": iban}


@pytest.fixture
def pay_tool() -> Iterator[None]:
    PAID.clear()
    with registry.temporarily(probe_c_pay):
        yield
    PAID.clear()


# --- four eyes: an edit is never re-judged by the approval policy ------------------------------------------------


def test_an_operator_edit_into_a_two_approver_amount_is_released_by_the_editor_alone(
    pay_tool: None, request_call: RequestCall, alice: User, operator: User, committed: Committed
) -> None:
    """The platform's rule: a payment above 100000 needs two approvers; every other payment one (risk high).

    alice's agent asks to pay 500 (held, one approval needed). A single operator "edits then approves" the
    amount to 9_000_000. Found: the edit opens round 2 with ``required_approvals`` still 1 (the policy is never
    asked about the new version: ``approvals.services._edit`` / ``_decide_in_transaction``, nor by
    ``waiting.tool_call_release`` or the worker), so the editor's own approval releases it and 9_000_000 is
    paid on one person's word, though the same call sent by the model would have needed two distinct approvers.
    Fix: judge the edited version with ``policy.approval_verdict`` (as the pipeline would) and raise the
    request's ``required_approvals`` (never lower it) before counting the editor's approval.
    """
    ApprovalRule.objects.create(
        name="big payments: two approvers",
        priority=1,
        tool_name="probe_c_pay",
        argument="amount",
        operator=">",
        value=100000,
        required_approvals=2,
    )
    call = request_call("probe_c_pay", {"amount": 500, "iban": "DE00 ALICE"}, alice, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)
    assert (request.status, request.required_approvals) == (ApprovalStatus.PENDING, 1)

    decided = committed(
        approval_approve, request_id=request.pk, user=operator, arguments={"amount": 9_000_000}, expected_round=1
    )

    assert PAID == [], f"one operator alone released an edit the policy holds for two approvers: paid {PAID}"
    assert decided.status == ApprovalStatus.PENDING and decided.required_approvals >= 2
    assert ToolCall.objects.get(pk=call.pk).status == CallStatus.PENDING_APPROVAL


def test_an_operator_edit_into_a_value_the_argument_policy_refuses_is_executed(
    pay_tool: None, request_call: RequestCall, alice: User, operator: User, committed: Committed, settings: Any
) -> None:
    """The platform's ``ArgumentPolicy`` interceptor allows payments to German IBANs only (``DE*``).

    alice's agent asks to pay 500 to ``DE00 ALICE`` (passes the policy, held for approval: risk high). One
    operator "edits then approves" the IBAN to ``CY99 MULE``. Found: ``approvals.services._edited_version``
    runs only ``parse_arguments`` / ``validate_arguments`` / ``storable_arguments``, never the ``before``
    interceptors the model's arguments went through (``toolhub.call_arguments.prepared_arguments``), and the
    worker does not run them either: the payment to the refused IBAN is made. The README calls the edit "the
    same intake as a model's". Fix: pass the edited version through ``interceptors_before`` (refusal -> 400,
    nothing recorded; rewrites -> the version under approval), or re-run them on the worker for edited calls.
    """
    settings.TOOLHUB = {
        **settings.TOOLHUB,
        "INTERCEPTORS": [
            {
                "class": "toolhub.interceptors.ArgumentPolicy",
                "options": {"rules": [{"tool": "probe_c_pay", "path": "$.iban", "allow": ["DE*"]}]},
            }
        ],
    }
    refused = request_call("probe_c_pay", {"amount": 500, "iban": "CY99 MULE"}, alice, tenant="acme")
    assert refused.status == CallStatus.DENIED  # the policy holds for the model
    call = request_call("probe_c_pay", {"amount": 500, "iban": "DE00 ALICE"}, alice, tenant="acme")
    request = ApprovalRequest.objects.get(call=call)

    try:
        committed(approval_approve, request_id=request.pk, user=operator, arguments={"iban": "CY99 MULE"})
    except Exception:  # noqa: BLE001 - a refusal of the edit is the secure outcome
        pass

    call.refresh_from_db()
    assert PAID == [], f"an operator's edit ran a value the ArgumentPolicy refuses: {call.result}"


# --- sensitive values of a tool the code no longer registers -----------------------------------------------------

#: A ``sensitive=(...)`` argument's value: redacted wherever shown (README, "Secrets and sensitive arguments").
PIN = "pin-probe-c-7731-sensitive"


@tool(sensitive=("pin",), risk="high")
def probe_c_unlock(door: Annotated[str, Param("Which door.")], pin: Annotated[str, Param("The door's PIN.")]) -> str:
    """Unlock a door with its PIN (high risk: held for an operator)."""
    return f"{door} unlocked"


def test_a_sensitive_value_shows_in_clear_once_its_tool_is_no_longer_registered(
    request_call: RequestCall, alice: User, operator: User
) -> None:
    """alice's agent calls ``probe_c_unlock`` (``pin`` sensitive); the call waits for approval. A deploy then
    renames or removes the tool (or a remote server stops offering it).

    Found: every reader of the call and its request now gets the PIN in clear, because redaction asks the
    registry for the tool's sensitive names and treats an unknown tool as having none:
    ``toolhub.selectors.displayed_arguments`` (call API, run API, admin call page, run transcript),
    ``approvals.versions.shown_arguments`` / ``shown_original_arguments`` (approvals API, approval desk) and
    ``toolhub.sagas.admin``. The CSV/JSONL exports already withhold such arguments whole
    (``toolhub.exports.WITHHELD``, tested in tests/audit/test_console.py), so the rest is inconsistent with
    them. Attacker: any operator or auditor of the tenant (or the requester) reading after the deploy.
    Fix: for an unregistered tool, withhold the arguments (as the exports do), or record the sensitive names
    on the call (e.g. in ``call.requested``'s data or a column) and redact by them.
    """
    with registry.temporarily(probe_c_unlock):
        call = request_call("probe_c_unlock", {"door": "vault", "pin": PIN}, alice, tenant="acme")
        request = ApprovalRequest.objects.get(call=call)
        api = client_for(operator)
        assert PIN not in api.get(f"/api/v1/calls/{call.pk}/").content.decode()  # redacted while registered

    shown = {
        "call API (operator)": client_for(operator).get(f"/api/v1/calls/{call.pk}/").content.decode(),
        "call API (alice)": client_for(alice).get(f"/api/v1/calls/{call.pk}/").content.decode(),
        "approvals API": client_for(operator).get(f"/api/v1/approvals/{request.pk}/").content.decode(),
        "admin call page": console(operator).get(f"/admin/toolhub/toolcall/{call.pk}/change/").content.decode(),
        "approval desk page": console(operator)
        .get(f"/admin/approvals/approvalrequest/{request.pk}/change/")
        .content.decode(),
    }
    leaked = sorted(where for where, text in shown.items() if PIN in text)
    assert leaked == [], f"the PIN of a no longer registered tool shows in clear on: {leaked}"


#: A sensitive IBAN a tool's own approval rule quotes in its reason.
IBAN = "CY17-0020-0128-PROBE-C-SENSITIVE"


@tool(sensitive=("iban",), needs_approval=lambda arguments, ctx: f"first payment to {arguments['iban']}")
def probe_c_new_payee(
    amount: Annotated[int, Param("Amount in cents.")], iban: Annotated[str, Param("The payee's IBAN.")]
) -> str:
    """Pay a new payee (the code rule holds every call, naming the payee in its reason)."""
    return "paid"


def test_a_code_rules_reason_quoting_a_sensitive_argument_is_kept_and_mailed_in_clear(
    request_call: RequestCall, alice: User, operator: User, settings: Any, mailoutbox: list[Any]
) -> None:
    """A tool's ``needs_approval`` rule explains itself with the value that made it match (here: the payee's
    IBAN, a ``sensitive`` argument), as a reason naturally does.

    Found: ``verdict.reason`` is stored unscrubbed (``approvals.services.approval_request_create`` ->
    ``ApprovalRequest.reason``; ``toolhub.pipeline`` -> the ``call.pending_approval`` audit event) and goes out
    in the approval e-mails ("Why:"), the webhook payloads (``_notify``'s ``reason``), the approvals API and
    the desk: the IBAN reaches every approver's mailbox and the webhook receiver, though sensitive values are
    shown nowhere (README) and an interceptor's refusal quoting one is already scrubbed
    (``call_arguments._without_sensitive_values``). Fix: pass a code rule's reason through the same
    ``SecretScrubber(sensitive_values(arguments, tool.sensitive))`` before it is stored or sent.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "WEBHOOK_URL": "https://hooks.example.invalid/toolhub"}
    with registry.temporarily(probe_c_new_payee):
        call = request_call("probe_c_new_payee", {"amount": 100, "iban": IBAN}, alice, tenant="acme")
        request = ApprovalRequest.objects.get(call=call)
        shown = {
            "approvals API": client_for(operator).get(f"/api/v1/approvals/{request.pk}/").content.decode(),
            "audit trail": audit_text(call),
            "e-mails": " ".join(f"{message.subject} {message.body}" for message in mailoutbox),
            "webhook payloads": json.dumps(list(WebhookDelivery.objects.values_list("payload", flat=True))),
        }
    assert mailoutbox, "the operator was mailed"
    leaked = sorted(where for where, text in shown.items() if IBAN in text)
    assert leaked == [], f"a sensitive argument quoted by the code rule's reason shows in clear in: {leaked}"


#: A sensitive card number a validator quotes when it refuses it.
CARD = "4000-1234-PROBE-C-9999"


def _luhn(value: str) -> str:
    raise ValueError(f"{value} fails the Luhn check")


@tool(sensitive=("card",))
def probe_c_charge(
    amount: Annotated[int, Param("Amount in cents.")],
    card: Annotated[str, AfterValidator(_luhn), Param("The card number.")],
) -> str:
    """Charge a card."""
    return "charged"


def test_a_validation_error_quoting_a_sensitive_argument_is_stored_and_shown_in_clear(
    request_call: RequestCall, alice: User, operator: User
) -> None:
    """A sensitive parameter's own validator says why it refuses the value, quoting it (pydantic's
    ``Value error, <message>``).

    Found: ``toolhub.feedback.invalid_arguments_message`` keeps each error's ``msg`` as is (only pydantic's
    ``input`` is left out), and ``toolhub.arguments.validate_arguments`` / the pipeline store it unscrubbed as
    the call's error and its ``call.invalid`` audit event: the card number shows on the call API and admin page
    to the tenant's operators and auditors, in the exports and in the audit trail, where an interceptor's
    refusal quoting the same value is scrubbed (``call_arguments._without_sensitive_values``). Fix: scrub an
    argument refusal with ``SecretScrubber(sensitive_values(parsed, tool.sensitive))`` as the interceptors'.
    """
    with registry.temporarily(probe_c_charge):
        call = request_call("probe_c_charge", {"amount": 100, "card": CARD}, alice, tenant="acme")
        assert call.status == CallStatus.INVALID
        shown = {
            "call error": call.error,
            "audit trail": audit_text(call),
            "call API (operator)": client_for(operator).get(f"/api/v1/calls/{call.pk}/").content.decode(),
            "admin call page": console(operator).get(f"/admin/toolhub/toolcall/{call.pk}/change/").content.decode(),
        }
    leaked = sorted(where for where, text in shown.items() if CARD in text)
    assert leaked == [], f"a sensitive value quoted by its validator shows in clear in: {leaked}"


# --- four eyes: a call sent back because its tool changed needs one approver only ------------------------------


def test_a_critical_call_sent_back_after_a_tool_change_is_released_by_one_operator(
    request_call: RequestCall,
    alice: User,
    operator: User,
    second_operator: User,
    third_operator: User,  # noqa: F811 - fixture
    django_capture_on_commit_callbacks: Any,
) -> None:
    """``probe_c_wire`` is critical: two distinct approvers (README, "Four eyes"). Two operators approve alice's
    call; before a worker runs it, a deploy changes the tool, so the worker sends it back for a new decision.

    Found: ``toolhub.waiting.tool_call_require_reapproval`` reopens the request with
    ``ApprovalVerdict(reason, "tool_changed", str(tool.risk))``, whose ``required_approvals`` defaults to 1
    (and whose risk ignores the operators' ``risk_override`` and the rules): ``approval_request_create`` sets
    the new round to one approval, and a single (third) operator releases the critical call, with the
    changed tool, alone. Fix: judge the call again with ``policy.approval_verdict`` (its arguments, the new
    tool, the definition) and keep at least the request's earlier ``required_approvals``.
    """

    def probe_c_wire(amount: int) -> str:
        """Wire money."""
        PAID.append(amount)
        return "wired"

    PAID.clear()
    original = Tool.from_function(probe_c_wire, risk="critical")
    with registry.temporarily(original):
        call = request_call("probe_c_wire", {"amount": 70_000}, alice, tenant="acme")
        request = ApprovalRequest.objects.get(call=call)
        assert request.required_approvals == 2
        approval_approve(request_id=request.pk, user=operator, expected_round=1)
        with django_capture_on_commit_callbacks(execute=False) as dispatches:
            approval_approve(request_id=request.pk, user=second_operator, expected_round=1)
    with registry.temporarily(original.with_description("Wire money, now to any bank worldwide.")):
        with django_capture_on_commit_callbacks(execute=True):
            for dispatch in dispatches:
                dispatch()
        request.refresh_from_db()
        assert (request.status, request.round) == (ApprovalStatus.PENDING, 2)
        with django_capture_on_commit_callbacks(execute=True):
            approval_approve(request_id=request.pk, user=third_operator, expected_round=2)
        request.refresh_from_db()
    try:
        assert PAID == [], f"one operator alone released a critical call after its tool changed: {PAID}"
        assert request.status == ApprovalStatus.PENDING and request.required_approvals == 2
    finally:
        PAID.clear()
