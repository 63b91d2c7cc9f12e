"""The two shipped interceptors on their own: the argument policy's paths and patterns, PII detection."""

import time

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


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("a@b.co", "<e>"),  # the whole string
        ("a@b.co and more", "<e> and more"),  # at the start
        ("write to x.y+z@mail.example.org", "write to <e>"),  # at the end
        ("<bob@x.org>, mailto:ann@y.io;", "<<e>>, mailto:<e>;"),  # after characters no local part holds
        ("a@b.cd.e@f.gh", "<e><e>"),  # the second starts where the first ended, inside a run of local characters
        ("x@a.bc9@e.fg", "<e><e>"),  # likewise, after a top-level domain followed by a digit
        ("a@b.co@c.de", "<e>@c.de"),  # an @ cannot start a local part
        ("a" * 10_000 + "@b.co!", "<e>!"),  # a long local part is taken whole
        ("a@" + "b." * 10_000 + "co", "<e>"),  # a long domain too
        ("a@b, a@b.c, @b.co, a@.co, a@b.c9", "a@b, a@b.c, @b.co, a@.co, a@b.c9"),  # not emails
    ],
)
def test_email_detection_at_the_edges(text: str, redacted: str) -> None:
    assert PIIRedaction(kinds=("email",), replacement="<e>").redact_text(text) == redacted


def test_the_email_replacement_is_taken_literally_like_the_others() -> None:
    redactor = PIIRedaction(kinds=("email", "phone"), replacement="\\{kind}\\1")

    assert redactor.redact_text("a@b.co, 020 7946 0958") == "\\email\\1, \\phone\\1"


#: Results of about 200 KB that no tool returns: long runs of what emails, cards and phone numbers are made of.
ADVERSARIAL_RESULTS = {
    "an-at-then-one-letter-labels": "a@" + "a." * 100_000,
    "local-part-characters": "a" * 200_000,
    "dots": "." * 200_000,
    "ats": "@" * 200_000,
    "local-parts-and-ats": "a@" * 100_000,
    "domains-with-no-top-level": ("@" + "a." * 50) * 2_000,
    "domains-of-hyphens": "a@" + "a-" * 100_000,
    "emails-running-into-each-other": "x@a.bc9" * 30_000,
    "digits": "1" * 200_000,
    "spaced-digits": "1 " * 100_000,
    "phone-fragments": "+1 (12) " * 25_000,
}


@pytest.mark.parametrize("text", ADVERSARIAL_RESULTS.values(), ids=ADVERSARIAL_RESULTS.keys())
def test_redaction_of_a_long_adversarial_result_takes_linear_time(text: str) -> None:
    started = time.monotonic()
    PIIRedaction().redact_text(text)
    elapsed = time.monotonic() - started

    assert elapsed < 1.0, f"redacting {len(text) // 1000} KB took {elapsed:.1f} s"  # linear: well under 0.2 s


def _after(redactor: PIIRedaction, result: object) -> object:
    return redactor.after(_call("mail_stats", {}), result)


def test_a_results_keys_are_redacted_like_its_values() -> None:
    result = {"ann@example.com": {"5500-0000-0000-0004": 2}, "total": 3, 7: "020 7946 0958"}

    assert _after(PIIRedaction(), result) == {
        "[email redacted]": {"[card redacted]": 2},
        "total": 3,
        7: "[phone redacted]",
    }


def test_keys_redacted_alike_are_all_kept_numbered() -> None:
    result = {"ann@example.com": 1, "bob@example.com": 2, "[email redacted] (2)": 3, "cy@example.com": 4}

    assert _after(PIIRedaction(), result) == {
        "[email redacted]": 1,
        "[email redacted] (2)": 2,
        "[email redacted] (2) (2)": 3,
        "[email redacted] (3)": 4,
    }


def test_many_keys_redacted_alike_are_kept_in_linear_time() -> None:
    result = {f"user{i}@example.com": i for i in range(20_000)}

    started = time.monotonic()
    redacted = _after(PIIRedaction(), result)
    elapsed = time.monotonic() - started

    assert isinstance(redacted, dict) and sorted(redacted.values()) == list(range(20_000))
    assert not any("@example.com" in key for key in redacted)
    assert elapsed < 2.0, f"numbering 20,000 keys took {elapsed:.1f} s"
