"""Review 2026-12-06 (gh): bad input end to end, "every bad input gets a test: a clear error, nothing executed,
nothing lost", through REST, MCP, the agent loop, approve-with-edit and compensations.

Each finding's test fails on the code as found (main at 2c06cf9) and says what was found and what is expected.

Findings:

1. (PostgreSQL) A call held for approval whose arguments held a float PostgreSQL's ``jsonb`` writes back otherwise
   could never run: ``1e16`` (any float of 16 digits or more before the point, which Python writes ``1e+16``) comes
   back from the ``numeric`` jsonb keeps as the integer ``10000000000000000``, and ``-0.0`` as ``0.0``. The approval
   binding (``approval_hash``) was made over the arguments as Python held them, so every approval of such a call
   answered "The arguments under approval no longer match the version that was approved" (the desk read the
   request's arguments back). A model reached it with ``{"amount": 1e16}`` or ``-0.0`` over REST (tested) and by
   every entrance that takes the same intake (MCP, the agent loop); the call stayed pending until it expired,
   whatever the operators did. The intake now stores
   numbers as the database gives them back (``toolhub.storable.stored_numbers``, from ``storable_arguments``): what
   is bound is what is read back, on every database.
2. (Minor) A request body holding an integer of more than 4,300 digits (``POST /api/v1/calls/``, any JSON body)
   answered 400 "JSON parse error - Exceeds the limit (4300 digits) for integer string conversion: value has 5000
   digits; use sys.set_int_max_str_digits() to increase the limit": DRF's decoder wrapped ``int()``'s error before
   ``toolhub.json_intake`` could word it, though the intake says it never passes on that advice (arguments sent as
   text were worded). ``StorableJSONParser`` now lets every error but a syntax error (kept as DRF words it, with its
   position) reach the intake: "The request body is not valid JSON (an integer with more than 4300 digits)".

Checked and holding (REST probed on SQLite, the approval paths on PostgreSQL; no test for those already held by
earlier reviews' tests):

- ``POST /api/v1/calls/`` with ``1e309``/``-1e309`` (400, "not a finite number"), ``NaN``/``Infinity`` (400), a
  400-digit integer (accepted: jsonb stores it), ``1e-400`` (0.0), ``"5"`` for a number, ``1`` for a boolean,
  ``true`` for an integer, duplicate keys (the last wins), a backtracking ``pattern`` against 5,000 ``a`` s and a
  ``!`` (refused at once, linear engine), a lone surrogate or NUL in a value, a key or the tool's name, an extra
  property, a 20,000-character key, bodies and argument texts nested 10,000 deep (400, no recursion), 200,000 items
  (the byte limit), ``1e309``/``NaN`` inside arguments sent as text, a context value ``1e309``, an idempotency key
  holding a NUL: each a 400 with a bounded message, nothing executed, no 500; refused calls recorded ``invalid``.
- A refused call's ``raw_arguments`` of a sensitive tool: text ``json.loads`` accepts but the intake refuses
  (``NaN``, a lone surrogate) is redacted before it is kept; text it cannot read is withheld whole (read in code).
- Compensation arguments: planned values pass ``json_storage_problem``, then the compensation's call takes the same
  intake (nesting, size, schema) as any call; a result too deep to check fails its call (recorded), read in code.
- The langgraph adapter's comparison of the graph's arguments with the call's (``1e16 == 10**16`` in Python; its
  asked binding is made through ``storable_arguments`` on both sides).
- An operator's edit to such a value (approve-with-edit) ran on PostgreSQL already (the release re-binds the edited
  version); held by ``test_an_operators_edit_to_such_a_float_runs``.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.services import approval_approve
from tests.helpers import assert_audit_intact
from toolhub import Tool, registry
from toolhub.arguments import storable_arguments
from toolhub.models import CallStatus, ToolCall

pytestmark = pytest.mark.django_db

#: What each test tool ran with.
ran: list[Any] = []

_AMOUNTS = {
    "type": "object",
    "properties": {"amount": {"type": "number"}, "more": {"type": "array", "items": {"type": "object"}}},
    "required": ["amount"],
    "additionalProperties": False,
}


def _pay(arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
    ran.append(arguments)
    return {"paid": True}


def _pay_tool(risk: str = "high") -> Tool:
    return Tool.create("gh_pay", "Pays an amount.", _AMOUNTS, _pay, risk=risk)


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        (1e16, 10**16),
        (-1.5e300, -15 * 10**299),
        (1.7976931348623157e308, 17976931348623157 * 10**292),
        (-0.0, 0.0),
        (0.1, 0.1),
        (1e-7, 1e-7),
        (123456789012345.6, 123456789012345.6),
        (10**400, 10**400),
    ],
    ids=["1e16", "-1.5e300", "max", "-0.0", "0.1", "1e-7", "16 digits", "10**400"],
)
def test_stored_arguments_hold_numbers_as_the_database_gives_them_back(sent: Any, stored: Any) -> None:
    """Found: ``storable_arguments`` kept ``1e16`` a float and ``-0.0`` negative; PostgreSQL's jsonb gives them back
    as the integer ``10000000000000000`` and ``0.0``, so what the approval bound was not what was read back.

    Expect: the stored arguments hold each number as the database returns it (the same type, value and sign, in
    nested objects and lists too); numbers it returns unchanged stay as they are.
    """
    tool = _pay_tool()
    result = storable_arguments(tool, {"amount": sent, "more": [{"x": [sent]}]})

    for value in (result["amount"], result["more"][0]["x"][0]):
        assert (type(value), value, str(value)) == (type(stored), stored, str(stored))


def _held(client: APIClient, body: str) -> ToolCall:
    answer = client.post("/api/v1/calls/", body, content_type="application/json")
    assert answer.status_code in (200, 201, 202), answer.content
    call = ToolCall.objects.get(pk=answer.json()["id"])
    assert call.status == CallStatus.PENDING_APPROVAL, (call.status, call.error)
    return call


@pytest.mark.parametrize("amount", ["1e16", "-0.0", "-1.5e300", "0.1"])
def test_an_approved_call_with_a_float_jsonb_rewrites_runs(
    amount: str, alice: User, operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """A model sends ``{"amount": 1e16}`` (or ``-0.0``) over REST to a high-risk tool; an operator approves.

    Found (PostgreSQL): the approval raised "The arguments under approval no longer match the version that was
    approved; nothing was recorded" at every attempt: the binding covered ``1e+16``, the request read back
    ``10000000000000000``. The call could never run.
    Expect: the approval releases the call, which runs once with the amount as stored; the audit verifies.
    """
    ran.clear()
    client = APIClient()
    client.force_authenticate(alice)
    with registry.temporarily(_pay_tool()):
        with django_capture_on_commit_callbacks(execute=True):
            call = _held(
                client, f'{{"tool": "gh_pay", "arguments": {{"amount": {amount}, "more": [{{"x": {amount}}}]}}}}'
            )
        request = ApprovalRequest.objects.get(call=call)
        with django_capture_on_commit_callbacks(execute=True):
            approval_approve(request_id=request.pk, user=operator, expected_round=request.round)
        call.refresh_from_db()

    assert call.status == CallStatus.SUCCEEDED, (call.status, call.error)
    assert ran == [call.arguments] and float(ran[0]["amount"]) == float(amount)
    assert_audit_intact()


def test_an_operators_edit_to_such_a_float_runs(
    alice: User, operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Holding: an operator approves a held call with its amount edited to ``1e16``.

    Found: it runs (the edit goes through the same intake, and the release binds the edited version).
    Expect: the call runs once with the edited amount as stored.
    """
    ran.clear()
    client = APIClient()
    client.force_authenticate(alice)
    with registry.temporarily(_pay_tool()):
        with django_capture_on_commit_callbacks(execute=True):
            call = _held(client, '{"tool": "gh_pay", "arguments": {"amount": 5}}')
        request = ApprovalRequest.objects.get(call=call)
        with django_capture_on_commit_callbacks(execute=True):
            approval_approve(request_id=request.pk, user=operator, arguments={"amount": 1e16})
        call.refresh_from_db()

    assert call.status == CallStatus.SUCCEEDED, (call.status, call.error)
    assert ran == [{"amount": 10**16}]
    assert_audit_intact()


def test_a_request_body_with_a_too_long_integer_is_refused_without_the_interpreters_advice(alice: User) -> None:
    """A client posts ``{"tool": ..., "arguments": {"amount": <5,000 digits>}}`` to ``POST /api/v1/calls/``.

    Found: 400 "JSON parse error - Exceeds the limit (4300 digits) for integer string conversion: value has 5000
    digits; use sys.set_int_max_str_digits() to increase the limit": DRF's decoder wrapped ``int()``'s own error
    before ``json_intake`` could word it (as it does for arguments sent as text), so the client was told a detail of
    the server and advice only its operators could follow.
    Expect: 400 naming the problem as the intake does ("an integer with more than 4300 digits"), nothing recorded;
    a syntax error keeps DRF's wording and position, ``NaN`` is refused.
    """
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(alice)
    with registry.temporarily(_pay_tool(risk="low")):
        huge = client.post(
            "/api/v1/calls/",
            f'{{"tool": "gh_pay", "arguments": {{"amount": {"9" * 5000}}}}}',
            content_type="application/json",
        )
        broken = client.post("/api/v1/calls/", '{"tool": "gh_pay", "arguments": ', content_type="application/json")
        nan = client.post(
            "/api/v1/calls/", '{"tool": "gh_pay", "arguments": {"amount": NaN}}', content_type="application/json"
        )

    assert huge.status_code == 400, huge.content
    detail = huge.json()["detail"]
    assert "an integer with more than 4300 digits" in detail and "sys." not in detail, detail
    assert broken.status_code == 400 and broken.json()["detail"].startswith(
        "JSON parse error - Expecting value: line 1"
    )
    assert nan.status_code == 400 and "NaN" in nan.json()["detail"], nan.content
    assert not ToolCall.objects.exists()
