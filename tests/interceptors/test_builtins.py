"""The two shipped interceptors on their own: the argument policy's paths and patterns, PII detection."""

import pytest

from toolhub.interceptors import ArgumentPolicy, InterceptedCall, PIIRedaction, Refuse, luhn_valid


def _call(tool_name: str, arguments: dict) -> InterceptedCall:
    return InterceptedCall(
        tool_name=tool_name, arguments=arguments, tenant="acme", user_id=None, agent_name="", context={}
    )


POLICY = ArgumentPolicy(
    rules=[
        {"tool": "send_email", "path": "$.to", "deny": ["*@competitor.com"]},
        {
            "tool": "send_*",
            "path": "$.cc[*]",
            "allow": [r"re:[^@]+@example\.com"],
            "message": "Only company addresses.",
        },
        {"tool": "*", "path": "$.order.amount", "deny": ["re:\\d{5,}(\\.\\d+)?"]},
    ]
)


@pytest.mark.parametrize(
    ("tool_name", "arguments", "refused"),
    [
        ("send_email", {"to": "Boss@COMPETITOR.com"}, "not allowed"),
        ("send_email", {"to": "a@example.com", "cc": ["b@example.com", "c@elsewhere.org"]}, "Only company addresses."),
        ("send_fax", {"cc": ["x@elsewhere.org"]}, "Only company addresses."),
        ("pay", {"order": {"amount": 125000.5}}, "$.order.amount"),
        ("send_email", {"to": "a@example.com", "cc": ["b@example.com"]}, None),
        ("pay", {"order": {"amount": 99.5}}, None),
        ("other", {"to": "x@competitor.com"}, None),
    ],
)
def test_argument_policy(tool_name: str, arguments: dict, refused: str | None) -> None:
    answer = POLICY.before(_call(tool_name, arguments))

    if refused is None:
        assert answer is None
    else:
        assert isinstance(answer, Refuse) and refused in answer.message


def test_pii_detection() -> None:
    redactor = PIIRedaction()

    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    text = (
        "Mail bob.smith+x@mail.example.co.uk, card 5500-0000-0000-0004, call 020 7946 0958, paid 1250.00 on 2024-01-31."
    )
    assert redactor.redact_text(text) == (
        "Mail [email redacted], card [card redacted], call [phone redacted], paid 1250.00 on 2024-01-31."
    )
