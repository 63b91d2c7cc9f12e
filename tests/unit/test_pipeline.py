"""The governed call pipeline, through its services: every bad input is recorded and nothing runs."""

import json
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from pydantic import AfterValidator

from approvals.models import ApprovalRequest, ApprovalStatus
from demo.models import Order
from tests.helpers import RequestCall, assert_audit_intact, event_types, for_a_worker, principal_for
from tests.testapp.models import SideEffect
from toolhub import Param, Tool, registry, tool
from toolhub.arguments import ArgumentsRefused, validate_arguments
from toolhub.audit import REDACTED
from toolhub.execution import tool_call_execute
from toolhub.models import AuditEvent, CallStatus, ToolCall, ToolDefinition
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tasks import execute_tool_call_task
from toolhub.tools.context import ToolContext

pytestmark = pytest.mark.django_db

SECRET = "correct-horse-battery-staple"


@tool(sensitive=("password",))
def sign_in(
    username: Annotated[str, Param("Who signs in.")],
    password: Annotated[str, Param("Their password.")],
) -> dict[str, Any]:
    """Sign a user in to a downstream system."""
    SideEffect.objects.create(call_id="", tool="sign_in", note=username)
    return {"signed_in": username}


def _request(tool_name: str, arguments: Any, user: User) -> ToolCall:
    """Request a call in the current transaction; the caller decides when its commit callbacks run."""
    return tool_call_request(
        request=CallRequest(
            tool_name=tool_name, arguments=arguments, principal=principal_for(user), context=ToolContext()
        )
    )


def _audit_text() -> str:
    return "\n".join(AuditEvent.objects.values_list("data", flat=True))


# --- bad input -------------------------------------------------------------------------------------

BAD_INPUTS = [
    pytest.param("record_effect", '{"note": ', "Arguments are not valid JSON", id="malformed-json"),
    pytest.param("record_effect", '["note"]', "Arguments must be a JSON object", id="array-not-object"),
    pytest.param("record_effect", '"note"', "Arguments must be a JSON object", id="string-not-object"),
    pytest.param("record_effect", "null", "Arguments must be a JSON object", id="null-not-object"),
    pytest.param("record_efect", "{}", "Unknown tool 'record_efect'. Did you mean: record_effect", id="typo"),
    pytest.param("record_effect", '{"note": 5}', "- note: Input should be a valid string", id="wrong-type"),
    pytest.param("calculate", '{"a": 1, "op": "%", "b": 2}', "- op: Input should be", id="wrong-enum"),
    pytest.param("record_effect", "{}", "- note: Field required", id="missing"),
    pytest.param("record_effect", None, "- note: Field required", id="no-arguments"),
    pytest.param(
        "record_effect", '{"note": "x", "force": true}', "- force: Extra inputs are not permitted", id="extra"
    ),
    pytest.param("calculate", '{"a": NaN, "op": "+", "b": 1}', "a is not a finite number", id="nan"),
    pytest.param("calculate", '{"a": 1e999, "op": "+", "b": 1}', "a is not a finite number", id="overflow"),
    pytest.param("calculate", '{"a": "-inf", "op": "+", "b": 1}', "a is not a finite number", id="inf-string"),
    pytest.param("record_effect", '{"note": "a\\u0000b"}', "note contains a NUL character", id="nul-character"),
    pytest.param("record_effect", '{"note": "\\ud800"}', "note contains an invalid character", id="lone-surrogate"),
    pytest.param(
        "record_effect", '{"note": ' + "[" * 150 + "]" * 150 + "}", "nested deeper than 100 levels", id="too-deep"
    ),
    pytest.param(
        "record_effect", "[" * 20_000 + "]" * 20_000, "Arguments are nested deeper than 100", id="thousands-deep"
    ),
]


@pytest.mark.parametrize(("tool_name", "arguments", "expected"), BAD_INPUTS)
def test_bad_input_is_recorded_refused_and_never_executed(
    request_call: RequestCall, tool_name: str, arguments: str | None, expected: str
) -> None:
    # when the model sends a bad call
    call = request_call(tool_name, arguments)

    # then it is recorded as invalid with an actionable message, and nothing ran
    assert call.status == CallStatus.INVALID
    assert expected in call.error
    assert "nothing was executed" in call.error or "Unknown tool" in call.error or "JSON" in call.error
    assert call.finished_at is not None
    assert SideEffect.objects.count() == 0
    assert event_types(call) == ["call.requested", "call.invalid"]
    reason = json.loads(AuditEvent.objects.get(call_id=call.id, event_type="call.invalid").data)["reason"]
    assert reason == call.error
    assert call.model_text() == call.error
    assert_audit_intact()


def test_unknown_tool_far_from_any_name_lists_the_available_tools(request_call: RequestCall) -> None:
    call = request_call("zzzzzzzz", "{}")

    assert call.status == CallStatus.INVALID
    assert "Unknown tool 'zzzzzzzz'. Available tools:" in call.error
    assert "always_fails" in call.error  # the first 20 names, sorted


def test_unknown_tool_suggests_several_close_names(request_call: RequestCall) -> None:
    call = request_call("slow_efect", "{}")

    assert call.error.startswith("Unknown tool 'slow_efect'. Did you mean: ")
    suggestions = call.error.split("Did you mean: ")[1].rstrip("?").split(", ")
    assert suggestions[0] == "slow_effect"
    assert 1 < len(suggestions) <= 3


def test_a_tool_name_with_a_nul_character_is_recorded(request_call: RequestCall) -> None:
    call = request_call("record\x00effect", '{"note": "x"}')

    assert call.status == CallStatus.INVALID
    assert call.error.startswith("Unknown tool 'record\\x00effect'")
    assert "\x00" not in call.tool_name
    assert SideEffect.objects.count() == 0


def test_raw_arguments_of_a_refused_call_are_kept_for_auditors(request_call: RequestCall) -> None:
    call = request_call("record_effect", '{"note": 5, "junk": "\x00"}')

    assert call.status == CallStatus.INVALID
    assert call.raw_arguments == '{"note": 5, "junk": "\\u0000"}'
    assert call.arguments == {}


def test_oversized_string_is_refused(request_call: RequestCall, settings: Any) -> None:
    # given a small limit on strings
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_STRING_LENGTH": 10}

    # when
    at_limit = request_call("record_effect", {"note": "x" * 10})
    too_long = request_call("record_effect", {"note": "x" * 11})
    nested = request_call("calculate", {"a": 1, "op": "+", "b": 2, "extra": {"deep": ["y" * 11]}})

    # then
    assert at_limit.status == CallStatus.SUCCEEDED
    assert too_long.status == CallStatus.INVALID
    assert "note is longer than 10 characters" in too_long.error
    assert nested.status == CallStatus.INVALID
    assert "extra.deep[0] is longer than 10 characters" in nested.error
    assert SideEffect.objects.count() == 1
    assert event_types(too_long) == ["call.requested", "call.invalid"]
    assert_audit_intact()


@pytest.mark.parametrize("as_text", [True, False], ids=["json-text", "mapping"])
def test_oversized_payload_is_refused(request_call: RequestCall, settings: Any, as_text: bool) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_ARGUMENTS_BYTES": 100}
    arguments = {"note": "x" * 150}

    call = request_call("record_effect", json.dumps(arguments) if as_text else arguments)

    assert call.status == CallStatus.INVALID
    assert "Arguments are larger than 100 bytes; nothing was executed." == call.error
    assert len(call.raw_arguments) <= 2000
    assert SideEffect.objects.count() == 0
    assert event_types(call) == ["call.requested", "call.invalid"]
    assert_audit_intact()


def test_huge_raw_arguments_are_stored_bounded(request_call: RequestCall) -> None:
    call = request_call("record_effect", "[" * 200_000)

    assert call.status == CallStatus.INVALID
    assert len(call.raw_arguments) == 2000


def test_deeply_nested_json_is_refused_not_crashing(request_call: RequestCall) -> None:
    call = request_call("record_effect", "[" * 50_000 + "]" * 50_000)

    assert call.status == CallStatus.INVALID
    assert SideEffect.objects.count() == 0


# --- the happy paths -------------------------------------------------------------------------------


def test_low_risk_call_is_queued_then_executed_once(
    request_call: RequestCall, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    # when
    call = request_call("record_effect", '{"note": "hello"}', user=alice, tenant="acme")

    # then it ran once, on a worker, with the call id as idempotency key, and the result is JSON
    assert call.status == CallStatus.SUCCEEDED
    effect = SideEffect.objects.get()
    assert call.result == {"effect_id": effect.pk}
    assert effect.call_id == str(call.id) and effect.note == "hello"
    assert call.attempts == 1
    assert call.worker == "eager"
    assert call.queued_at <= call.started_at <= call.finished_at
    assert (call.user_id, call.tenant, call.arguments) == (alice.pk, "acme", {"note": "hello"})
    assert call.tool_version == registry.get("record_effect").version
    assert call.model_text() == json.dumps({"effect_id": effect.pk})
    assert event_types(call) == ["call.requested", "call.queued", "call.running", "call.succeeded"]
    requested = AuditEvent.objects.get(call_id=call.id, event_type="call.requested")
    assert requested.actor == "user:alice"
    assert requested.payload["arguments"] == {"note": "hello"}
    assert requested.tenant == "acme"
    assert_audit_intact()


def test_dispatch_waits_for_the_commit(alice: User, django_capture_on_commit_callbacks: Any) -> None:
    # given a call requested inside a transaction that has not committed yet
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        call = _request("record_effect", {"note": "later"}, alice)
        # then the row is written claimed by this process (it executes the call itself), and nothing ran yet
        assert (call.status, call.worker, call.attempts) == (CallStatus.RUNNING, "eager", 1)
        assert call.lease_expires_at is not None
        assert SideEffect.objects.count() == 0

    # when the commit's callbacks run
    assert len(callbacks) == 1
    callbacks[0]()

    # then the worker executed it
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED
    assert SideEffect.objects.count() == 1


def test_mapping_arguments_with_python_values_are_accepted(request_call: RequestCall) -> None:
    call = request_call("calculate", {"a": 2, "op": "*", "b": 21.5})

    assert call.status == CallStatus.SUCCEEDED
    assert call.arguments == {"a": 2.0, "op": "*", "b": 21.5}
    assert call.result == 43.0


def test_high_risk_call_waits_for_approval(request_call: RequestCall, alice: User) -> None:
    call = request_call("risky_effect", {"note": "careful"}, user=alice, tenant="acme")

    assert call.status == CallStatus.PENDING_APPROVAL
    assert call.approval_hash
    approval = ApprovalRequest.objects.get(call=call)
    assert approval.status == ApprovalStatus.PENDING
    assert approval.reason == "risk is high"
    assert approval.requested_by == alice
    assert approval.required_approvals == 1
    assert SideEffect.objects.count() == 0
    assert event_types(call) == ["call.requested", "call.pending_approval"]
    assert_audit_intact()


def test_callable_approval_rule_decides_per_call(request_call: RequestCall) -> None:
    small = request_call("create_order", {"product": "Pen", "amount": "12.50"}, tenant="acme")
    large = request_call("create_order", {"product": "Laptop", "amount": "5000"}, tenant="acme")

    assert small.status == CallStatus.SUCCEEDED
    assert small.result["amount"] == "12.50"
    assert large.status == CallStatus.PENDING_APPROVAL
    assert ApprovalRequest.objects.get(call=large).reason == "orders above 1000 need an operator's approval"
    assert list(Order.objects.values_list("product", "call_id")) == [("Pen", str(small.id))]


def test_risk_override_by_an_operator_holds_a_low_risk_tool(request_call: RequestCall) -> None:
    ToolDefinition.objects.filter(name="record_effect").update(risk_override="high")

    call = request_call("record_effect", {"note": "x"})

    assert call.status == CallStatus.PENDING_APPROVAL
    assert SideEffect.objects.count() == 0


# --- refusals by policy ----------------------------------------------------------------------------


def test_disabled_tool_is_denied(request_call: RequestCall) -> None:
    ToolDefinition.objects.filter(name="record_effect").update(enabled=False)

    call = request_call("record_effect", {"note": "x"})

    assert call.status == CallStatus.DENIED
    assert call.error == "Tool 'record_effect' is disabled by an operator; do not call it."
    assert SideEffect.objects.count() == 0
    assert event_types(call) == ["call.requested", "call.denied"]
    assert_audit_intact()


def test_tool_disabled_after_queueing_is_denied_at_execution(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    with for_a_worker(), django_capture_on_commit_callbacks(execute=False) as callbacks:
        call = _request("record_effect", {"note": "x"}, alice)
    ToolDefinition.objects.filter(name="record_effect").update(enabled=False)

    callbacks[0]()

    call.refresh_from_db()
    assert call.status == CallStatus.DENIED
    assert "disabled" in call.error
    assert SideEffect.objects.count() == 0
    assert event_types(call) == ["call.requested", "call.queued", "call.running", "call.denied"]


def test_agent_without_the_tool_is_denied(request_call: RequestCall, alice: User) -> None:
    call = request_call(
        "record_effect", {"note": "x"}, user=alice, agent_name="helper", agent_tools=frozenset({"calculate"})
    )

    assert call.status == CallStatus.DENIED
    assert call.error == "Tool 'record_effect' is not available to agent 'helper'; do not call it."
    assert call.agent_name == "helper"
    assert SideEffect.objects.count() == 0
    assert event_types(call) == ["call.requested", "call.denied"]
    assert AuditEvent.objects.get(call_id=call.id, event_type="call.requested").actor == "user:alice via agent:helper"
    assert_audit_intact()


# --- failures ----------------------------------------------------------------------------------------


def test_tool_error_reaches_the_model_as_is(request_call: RequestCall) -> None:
    call = request_call("always_fails", {"reason": "the printer is on fire"})

    assert call.status == CallStatus.FAILED
    assert call.error == "failed as asked: the printer is on fire"
    assert call.model_text() == "failed as asked: the printer is on fire"
    assert "ToolError" in call.error_detail
    assert event_types(call) == ["call.requested", "call.queued", "call.running", "call.failed"]


def test_unexpected_exception_is_sanitized_for_the_model(request_call: RequestCall) -> None:
    call = request_call("crashes", {})

    assert call.status == CallStatus.FAILED
    assert "hunter2" not in call.error
    assert "RuntimeError" in call.error
    assert "internal error" in call.error
    assert "Traceback" in call.error_detail
    assert "hunter2" in call.error_detail
    assert "hunter2" not in _audit_text()
    assert_audit_intact()


def test_custom_error_handler(request_call: RequestCall, settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "ERROR_HANDLER": "tests.unit.test_pipeline.terse_error"}

    call = request_call("crashes", {})

    assert call.error == "terse: RuntimeError"


def terse_error(exc: BaseException) -> str:
    return f"terse: {type(exc).__name__}"


def test_non_finite_result_fails_the_call_instead_of_crashing(request_call: RequestCall) -> None:
    # 1e308 * 10 overflows to infinity, which no JSON column stores
    call = request_call("calculate", {"a": 1e308, "op": "*", "b": 10})

    assert call.status == CallStatus.FAILED
    assert call.error == "The tool returned a value that cannot be serialized to JSON."
    assert call.result is None
    assert call.lease_expires_at is None
    assert_audit_intact()


def test_explicit_tool_results(request_call: RequestCall) -> None:
    from toolhub import ToolResult

    @tool
    def explicit(kind: str) -> Any:
        """Return an explicit result."""
        if kind == "text":
            return ToolResult.text("plain words")
        if kind == "error":
            return ToolResult.error("you asked for an error")
        return ToolResult.artifact({"rows": [1, 2]}, name="rows.json")

    with registry.temporarily(explicit):
        text = request_call("explicit", {"kind": "text"})
        error = request_call("explicit", {"kind": "error"})
        artifact = request_call("explicit", {"kind": "artifact"})

    assert (text.status, text.result, text.model_text()) == (CallStatus.SUCCEEDED, "plain words", "plain words")
    assert (error.status, error.error) == (CallStatus.FAILED, "you asked for an error")
    assert artifact.status == CallStatus.SUCCEEDED
    assert "Stored artifact 'rows.json'" in artifact.result


# --- at most once ------------------------------------------------------------------------------------


def test_a_second_execution_attempt_does_not_run_the_call_again(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    # given a queued call whose broker message has not been delivered
    with for_a_worker(), django_capture_on_commit_callbacks(execute=False):
        call = _request("record_effect", {"note": "once"}, alice)

    # when two deliveries of it reach workers
    first = tool_call_execute(call_id=call.id, worker="w1")
    second = tool_call_execute(call_id=call.id, worker="w2")
    execute_tool_call_task.delay(str(call.id))

    # then it ran exactly once
    assert first is not None and second is None
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED
    assert (call.attempts, call.worker) == (1, "w1")
    assert SideEffect.objects.filter(call_id=str(call.id)).count() == 1
    assert event_types(call).count("call.running") == 1
    assert_audit_intact()


def test_executing_a_call_that_waits_for_approval_does_nothing(request_call: RequestCall) -> None:
    call = request_call("risky_effect", {"note": "x"})

    assert tool_call_execute(call_id=call.id, worker="rogue") is None

    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL
    assert SideEffect.objects.count() == 0


# --- sensitive arguments ----------------------------------------------------------------------------


@pytest.fixture
def sensitive_tool() -> Any:
    with registry.temporarily(sign_in):
        ToolDefinition.objects.get_or_create(name="sign_in")
        yield sign_in.tool


def test_sensitive_values_never_reach_the_audit_trail(request_call: RequestCall, sensitive_tool: Any) -> None:
    # when a call of a tool with a sensitive parameter succeeds
    call = request_call("sign_in", {"username": "alice", "password": SECRET})

    # then the call ran with the real value, and no audit event holds it
    assert call.status == CallStatus.SUCCEEDED
    assert call.result == {"signed_in": "alice"}
    requested = AuditEvent.objects.get(call_id=call.id, event_type="call.requested")
    assert requested.payload["arguments"] == {"username": "alice", "password": REDACTED}
    assert SECRET not in _audit_text()


def test_sensitive_values_of_refused_calls_are_withheld(request_call: RequestCall, sensitive_tool: Any) -> None:
    extra = request_call("sign_in", {"username": "alice", "password": SECRET, "otp": 1})
    broken = request_call("sign_in", '{"username": "alice", "password": "' + SECRET)
    not_object = request_call("sign_in", json.dumps([SECRET]))

    assert [c.status for c in (extra, broken, not_object)] == [CallStatus.INVALID] * 3
    # a name the tool does not declare is withheld too: it may hold a sensitive value (see the misspelt name below)
    assert json.loads(extra.raw_arguments) == {"username": "alice", "password": REDACTED, "otp": REDACTED}
    assert SECRET not in broken.raw_arguments + broken.error
    assert SECRET not in not_object.raw_arguments
    assert SECRET not in _audit_text()
    assert SideEffect.objects.count() == 0


def test_a_sensitive_value_under_a_misspelt_name_is_withheld_from_the_raw_arguments(
    request_call: RequestCall, sensitive_tool: Any
) -> None:
    # when the model gets the sensitive parameter's case wrong
    call = request_call("sign_in", {"username": "alice", "Password": SECRET})

    # then the call is refused naming the parameter, nothing ran, and the value is kept nowhere
    assert call.status == CallStatus.INVALID and SideEffect.objects.count() == 0
    assert "Password: Extra inputs are not permitted" in call.error
    assert json.loads(call.raw_arguments) == {"username": "alice", "Password": REDACTED}
    assert SECRET not in call.error + call.model_text() + _audit_text()


def test_an_extra_argument_of_a_tool_with_sensitive_parameters_is_withheld_from_the_trail(
    request_call: RequestCall,
) -> None:
    # given a tool whose hand-written schema admits other names, and a model that sends the PIN under one
    opened: list[dict[str, Any]] = []
    schema = {"type": "object", "properties": {"safe": {"type": "string"}, "pin": {"type": "string"}}}
    safe = Tool.create(
        "open_safe", "Open a safe.", schema, lambda arguments: opened.append(arguments) or "open", sensitive=("pin",)
    )
    with registry.temporarily(safe):
        call = request_call("open_safe", {"safe": "vault-2", "pin": "1234-5678", "PIN": "9021-0333"})

    # then it runs as the schema allows, and the audit trail shows the extra name's value no more than the PIN's
    assert call.status == CallStatus.SUCCEEDED and len(opened) == 1
    requested = AuditEvent.objects.get(call_id=call.id, event_type="call.requested")
    assert requested.payload["arguments"] == {"safe": "vault-2", "pin": REDACTED, "PIN": REDACTED}
    assert "9021-0333" not in _audit_text() and "1234-5678" not in _audit_text()


def test_a_refusal_quoting_a_value_sent_under_an_undeclared_name_does_not_show_it(request_call: RequestCall) -> None:
    # given a tool with a sensitive parameter whose input model's own check quotes what it was sent
    from pydantic import BaseModel, ConfigDict, model_validator

    class Unlock(BaseModel):
        """Unlock a safe."""

        model_config = ConfigDict(extra="forbid")
        safe: str
        pin: str

        @model_validator(mode="before")
        @classmethod
        def _no_strangers(cls, data: Any) -> Any:
            if isinstance(data, dict) and set(data) - {"safe", "pin"}:
                raise ValueError(f"unexpected input {data}")
            return data

    opened: list[Any] = []
    unlock = Tool.create(
        "unlock_safe", "Unlock a safe.", Unlock, lambda a: opened.append(a) or "ok", sensitive=("pin",)
    )

    # when the model sends the PIN under a name the tool does not declare
    with registry.temporarily(unlock):
        call = request_call("unlock_safe", {"safe": "vault-2", "PIN": "9021-0333"})

    # then the call is refused, nothing ran, and the value shows neither in the error nor in the trail
    assert call.status == CallStatus.INVALID and opened == []
    assert "unexpected input" in call.error
    assert "9021-0333" not in call.error + call.model_text() + call.raw_arguments + _audit_text()


def test_sensitive_values_of_held_calls_stay_out_of_the_trail(
    request_call: RequestCall, sensitive_tool: Any, settings: Any
) -> None:
    ToolDefinition.objects.filter(name="sign_in").update(risk_override="high")

    call = request_call("sign_in", {"username": "alice", "password": SECRET})

    assert call.status == CallStatus.PENDING_APPROVAL
    assert SECRET not in _audit_text()


CARD = "4000123412341234"


def _luhn(card: str) -> str:
    """A validator that quotes what it refuses, in a sentence long enough to be cut when bounded."""
    if card.startswith("4000"):
        raise ValueError(
            f"the customer's card number {card} fails the Luhn check; ask them to read the number on the front of "
            "their card again, digit by digit, and call this tool again with the number they read"
        )
    return card


@tool(sensitive=("card",))
def pay_by_card(card: Annotated[str, AfterValidator(_luhn), Param("The card to charge.")]) -> str:
    """Charge a card."""
    SideEffect.objects.create(call_id="", tool="pay_by_card", note="charged")
    return "charged"


def test_a_validator_quoting_a_sensitive_value_in_a_long_message_keeps_no_part_of_it() -> None:
    # when a validator's long message quotes the card it refuses
    with pytest.raises(ArgumentsRefused) as refused:
        validate_arguments(pay_by_card.tool, {"card": CARD})

    # then the card is replaced before the line is cut: none of its digits survive, the reason does
    message = str(refused.value)
    assert "card number [secret]" in message
    assert CARD[:8] not in message and CARD[-8:] not in message


def test_a_refused_call_quoting_a_sensitive_value_keeps_no_part_of_it(request_call: RequestCall) -> None:
    with registry.temporarily(pay_by_card):
        call = request_call("pay_by_card", {"card": CARD})

    assert call.status == CallStatus.INVALID and SideEffect.objects.count() == 0
    assert "[secret]" in call.error and "nothing was executed" in call.error
    assert CARD[:8] not in call.error + _audit_text() + call.model_text()


def test_the_trail_of_many_calls_verifies(request_call: RequestCall, alice: User) -> None:
    for index in range(12):
        request_call("record_effect", {"note": f"n{index}"}, user=alice)
    request_call("crashes", {})
    request_call("nope", {})

    checked = assert_audit_intact()

    assert checked == AuditEvent.objects.count() == 12 * 4 + 4 + 2
    assert ToolCall.objects.count() == 14
