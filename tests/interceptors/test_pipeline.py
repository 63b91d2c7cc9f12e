"""Interceptors in the governed pipeline: refuse, rewrite, redact, order and fail closed (eager, PostgreSQL)."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured

from tests.helpers import RequestCall, assert_audit_intact, audit_text, event_types
from tests.interceptors.conftest import SEEN, Configure, recorder
from tests.testapp.models import SideEffect
from toolhub.audit import REDACTED
from toolhub.interceptors import INTERCEPTOR_FAILED_MESSAGE, configured_interceptors
from toolhub.models import AuditEvent, CallStatus, ToolCall

pytestmark = pytest.mark.django_db

EMAIL = {"to": "Bob@Example.com", "body": "hello", "token": "secret-token-1"}


def _event(call: ToolCall, event_type: str) -> AuditEvent:
    return AuditEvent.objects.get(call_id=call.id, event_type=event_type)


def test_a_refusing_interceptor_records_the_call_runs_nothing_and_tells_the_model(
    interceptors: Configure, request_call: RequestCall, alice: User
) -> None:
    interceptors(recorder("gate", refuse=True), recorder("later"))

    call = request_call("send_email", EMAIL, user=alice)

    assert call.status == CallStatus.DENIED
    assert not SideEffect.objects.exists()
    assert call.model_text() == "gate refuses: recipients outside the company need a manager."
    assert event_types(call) == ["call.requested", "call.denied"]
    denied = _event(call, "call.denied")
    assert denied.actor == "interceptor:gate" and denied.payload["interceptor"] == "gate"
    # the chain stops at the refusal; the sensitive token is not kept in what was recorded
    assert SEEN == [("gate", "before")]
    assert "secret-token-1" not in call.raw_arguments + audit_text(call)
    assert_audit_intact()


def test_a_rewrite_is_validated_audited_as_a_diff_and_runs(
    interceptors: Configure, request_call: RequestCall, alice: User
) -> None:
    interceptors("tests.interceptors.conftest.Tokenizer")

    call = request_call("send_email", EMAIL, user=alice)

    assert call.status == CallStatus.SUCCEEDED, call.error
    # the rewritten arguments ran
    assert SideEffect.objects.get().note == "bob@example.com"
    assert call.arguments["to"] == "bob@example.com"
    assert event_types(call) == [
        "call.requested",
        "call.arguments_rewritten",
        "call.queued",
        "call.running",
        "call.succeeded",
    ]
    rewritten = _event(call, "call.arguments_rewritten")
    assert rewritten.actor == "interceptor:tokenizer"
    assert rewritten.payload["diff"] == {
        "to": {"before": "Bob@Example.com", "after": "bob@example.com"},
        "token": {"before": REDACTED, "after": REDACTED},
    }
    assert "secret-token-1" not in audit_text(call) and "rotated-secret-2" not in audit_text(call)


def test_a_rewrite_the_schema_refuses_fails_closed(
    interceptors: Configure, request_call: RequestCall, alice: User
) -> None:
    interceptors("tests.interceptors.conftest.BreaksSchema")

    call = request_call("send_email", EMAIL, user=alice)

    assert call.status == CallStatus.DENIED
    assert call.model_text() == INTERCEPTOR_FAILED_MESSAGE
    assert "breaks_schema" in _event(call, "call.denied").actor
    assert "to" in call.error_detail
    assert not SideEffect.objects.exists()


def test_before_runs_in_order_after_in_reverse_and_rewrites_chain(
    interceptors: Configure, request_call: RequestCall, alice: User
) -> None:
    interceptors(recorder("outer", append=True, suffix_result=True), recorder("inner", append=True, suffix_result=True))

    call = request_call("send_email", EMAIL, user=alice)

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert SEEN == [("outer", "before"), ("inner", "before"), ("inner", "after"), ("outer", "after")]
    # each rewrite saw the one before it; the result passed inner first, then outer
    assert call.arguments["body"] == "hello|outer|inner"
    assert call.result == "sent to Bob@Example.com|inner|outer"
    diffs = AuditEvent.objects.filter(call_id=call.id, event_type="call.arguments_rewritten").order_by("seq")
    assert [event.actor for event in diffs] == ["interceptor:outer", "interceptor:inner"]
    succeeded = _event(call, "call.succeeded")
    assert succeeded.payload["result_changed_by"] == ["interceptor:inner", "interceptor:outer"]


def test_a_refusal_comes_before_approval_policy(
    interceptors: Configure, request_call: RequestCall, alice: User
) -> None:
    interceptors(
        {
            "class": "toolhub.interceptors.ArgumentPolicy",
            "options": {"rules": [{"tool": "send_email", "path": "$.to", "deny": ["*@competitor.com"]}]},
        }
    )

    refused = request_call("send_email", {**EMAIL, "to": "ceo@Competitor.com"}, user=alice)
    allowed = request_call("send_email", EMAIL, user=alice)

    assert refused.status == CallStatus.DENIED
    assert "$.to" in refused.model_text() and "ceo@Competitor.com" in refused.model_text()
    assert _event(refused, "call.denied").actor == "interceptor:argument_policy"
    assert allowed.status == CallStatus.SUCCEEDED
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["Bob@Example.com"]


def test_pii_is_redacted_from_the_result_the_model_reads(
    interceptors: Configure, request_call: RequestCall, alice: User
) -> None:
    interceptors("toolhub.interceptors.PIIRedaction")

    call = request_call("lookup_customer", {"name": "Ada"}, user=alice)

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert call.result == {
        "name": "Ada",
        "email": "[email redacted]",
        "phone": "[phone redacted]",
        "card": "[card redacted]",
        "order": "1234 5678 9012 3456",  # fails the Luhn check: not a card
        "since": "2021-03-04",
        "notes": ["call [phone redacted] after 5", "no PII here"],
    }
    text = call.model_text()
    assert "ada.lovelace" not in text and "4111" not in text and "7946" not in text
    assert _event(call, "call.succeeded").payload["result_changed_by"] == ["interceptor:pii_redaction"]
    assert "ada.lovelace" not in json.dumps(list(AuditEvent.objects.filter(call_id=call.id).values("data")))


def test_pii_redaction_is_configurable(interceptors: Configure, request_call: RequestCall, alice: User) -> None:
    interceptors(
        {
            "class": "toolhub.interceptors.PIIRedaction",
            "options": {"kinds": ["email"], "replacement": "<{kind}>", "tools": ["lookup_customer"]},
        }
    )

    call = request_call("lookup_customer", {"name": "Ada"}, user=alice)
    untouched = request_call("send_email", {**EMAIL, "to": "x@example.com"}, user=alice)

    assert call.result["email"] == "<email>"
    assert call.result["card"] == "4111 1111 1111 1111" and call.result["phone"] == "+44 20 7946 0958"
    assert untouched.result == "sent to x@example.com"
    assert "result_changed_by" not in _event(untouched, "call.succeeded").payload


@pytest.mark.parametrize("phase", ["before", "after"])
def test_a_raising_interceptor_fails_closed(
    interceptors: Configure, request_call: RequestCall, alice: User, phase: str
) -> None:
    interceptors({"class": "tests.interceptors.conftest.Exploding", "options": {"phase": phase}})

    call = request_call("lookup_customer", {"name": "Ada"}, user=alice)

    # the model reads a sanitized message; the detail is for auditors only
    assert call.model_text() == INTERCEPTOR_FAILED_MESSAGE
    assert "hunter2-internal" not in call.model_text() and "hunter2-internal" in call.error_detail
    assert "hunter2-internal" not in audit_text(call)
    if phase == "before":
        assert call.status == CallStatus.DENIED
        assert not SideEffect.objects.exists()
        assert _event(call, "call.denied").payload == {
            "reason": INTERCEPTOR_FAILED_MESSAGE,
            "interceptor": "exploding",
            "failed": True,
        }
    else:
        # the tool ran, but its unchecked result is withheld
        assert call.status == CallStatus.FAILED and call.result is None
        assert _event(call, "call.failed").payload["interceptor"] == "exploding"
        assert SideEffect.objects.count() == 1


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("tests.interceptors.conftest.nowhere", "cannot import"),
        ("json.dumps", "not an Interceptor"),
        ({"class": "toolhub.interceptors.PIIRedaction", "options": {"kinds": ["ssn"]}}, "unknown kinds"),
        (
            {"class": "toolhub.interceptors.ArgumentPolicy", "options": {"rules": [{"path": "$.[", "deny": ["x"]}]}},
            "bad JSON path",
        ),
        ({"class": "toolhub.interceptors.ArgumentPolicy", "options": {"rules": [{"path": "$.to"}]}}, "allow"),
    ],
)
def test_bad_configuration_is_refused_with_a_clear_error(interceptors: Configure, entry: Any, problem: str) -> None:
    interceptors(entry)

    with pytest.raises(ImproperlyConfigured, match=problem):
        configured_interceptors()


def test_a_result_replaced_by_something_unstorable_fails_closed(
    interceptors: Configure, request_call: RequestCall, alice: User
) -> None:
    interceptors("tests.interceptors.conftest.Unstorable")

    call = request_call("lookup_customer", {"name": "Ada"}, user=alice)

    assert call.status == CallStatus.FAILED and call.result is None
    assert call.model_text() == INTERCEPTOR_FAILED_MESSAGE
    assert "cannot be stored as JSON" in call.error_detail
    assert _event(call, "call.failed").payload["interceptor"] == "unstorable"
