"""A hand-written JSON Schema's ``format`` is asserted: a value of the wrong form is ``invalid`` and nothing runs."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from pydantic import ValidationError

from tests.helpers import RequestCall
from toolhub import Tool, registry
from toolhub.models import CallStatus
from toolhub.tools.jsonschema_args import validate_against_schema

pytestmark = pytest.mark.django_db

RAN: list[dict[str, Any]] = []

FORMATS = [
    ("uuid", "1 OR 1=1", "0b5d8f0e-3c1a-4f7e-9a55-2f1c8f7e6d41"),
    ("date", "yesterday", "2026-12-04"),
    ("date-time", "2026-12-04 noon", "2026-12-04T12:00:00Z"),
    ("time", "noon", "12:00:00+01:00"),
    ("email", "nobody", "ops@example.com"),
    ("ipv4", "10.0.0.999", "10.0.0.9"),
    ("ipv6", "::g", "::1"),
]


@pytest.fixture(autouse=True)
def _ran() -> Any:
    RAN.clear()
    yield
    RAN.clear()


def _tool(format: str, draft: str | None = None) -> Tool:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"value": {"type": "string", "format": format}},
        "required": ["value"],
    }
    if draft:
        schema["$schema"] = draft
    return Tool.create("formatted", "Take a formatted value.", schema, lambda arguments: RAN.append(arguments))


@pytest.mark.parametrize(("format", "bad", "good"), FORMATS)
def test_a_value_not_in_the_schemas_format_is_invalid_and_nothing_runs(
    request_call: RequestCall, alice: User, format: str, bad: str, good: str
) -> None:
    with registry.temporarily(_tool(format)):
        refused = request_call("formatted", {"value": bad}, alice)
        accepted = request_call("formatted", {"value": good}, alice)

    assert refused.status == CallStatus.INVALID
    assert f"valid '{format}'" in refused.error and bad not in refused.error
    assert accepted.status == CallStatus.SUCCEEDED, accepted.error
    assert RAN == [{"value": good}]


def test_an_older_drafts_formats_are_asserted_too() -> None:
    tool = _tool("ipv4", draft="http://json-schema.org/draft-07/schema#")
    with pytest.raises(ValidationError):
        tool.validate_arguments({"value": "not an address"})
    assert tool.validate_arguments({"value": "192.0.2.1"}) == {"value": "192.0.2.1"}


def test_an_external_tools_format_is_asserted() -> None:
    schema = {"type": "object", "properties": {"day": {"type": "string", "format": "date"}}}
    remote = Tool.external("remote_day", "Answered elsewhere.", schema)
    with pytest.raises(ValidationError, match="valid 'date'"):
        remote.validate_arguments({"day": "2026-13-45"})


@pytest.mark.parametrize("pattern", ["(" * 5000 + ")" * 5000, "a{99999999999}", "(unclosed"])
def test_a_regex_format_is_published_not_asserted(pattern: str) -> None:
    # ECMA-262's dialect, which Python's re does not check (review e): nothing compiles the model's pattern here,
    # so one that would crash re (nested past the recursion limit, a huge repetition) crashes nothing either.
    schema = {"type": "object", "properties": {"pattern": {"type": "string", "format": "regex"}}}
    assert validate_against_schema("grep", schema, {"pattern": pattern}) == {"pattern": pattern}


def test_an_unchecked_format_is_published_and_let_through() -> None:
    schema = {"type": "object", "properties": {"link": {"type": "string", "format": "uri"}}}
    assert validate_against_schema("linker", schema, {"link": "not a uri"}) == {"link": "not a uri"}


def test_a_long_pattern_or_enum_is_quoted_cut_in_the_message() -> None:
    schema = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^(" + "|".join(f"C{i:04d}" for i in range(500)) + ")$"},
            "kind": {"enum": [f"kind-{i}" for i in range(500)]},
        },
    }
    with pytest.raises(ValidationError) as raised:
        validate_against_schema("coded", schema, {"code": "X", "kind": "other"})
    errors = raised.value.errors()
    assert [e["loc"] for e in errors] == [("code",), ("kind",)]
    assert all(len(e["msg"]) < 200 for e in errors)
