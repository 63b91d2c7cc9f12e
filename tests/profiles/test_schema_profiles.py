"""Tool schemas per provider profile: every demo and test tool obeys each profile's rules, and arguments round-trip."""

import datetime as dt
import importlib
import pkgutil
import re
from decimal import Decimal
from typing import Any

import jsonschema
import pydantic
import pytest

import demo.tools
import tests
from tests.profiles.sample_tools import Address, Color, book_stay, book_stay_strictly
from toolhub import Tool, registry, tool
from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.export import EXPORT_FORMATS, SCHEMA_PROFILES, profile_parameters, tool_definition
from toolhub.tools.profiles import profile_problems, profile_schema, strict_safe
from toolhub.tools.schema_decimals import decimal_pattern

#: Packages whose tools are broken on purpose (registration must refuse them).
_BROKEN_ON_PURPOSE = ("tests.sagas.badapp", "tests.toolsec.leakapp", "tests.toolsec.late_context", "tests.browser")


def _module_tools() -> dict[str, Tool]:
    """Every tool defined at module level in the demo and in the tests, plus the registered ones."""
    found: dict[str, Tool] = {}
    modules = [demo.tools]
    for info in pkgutil.walk_packages(tests.__path__, "tests."):
        if info.name.startswith(_BROKEN_ON_PURPOSE) or info.ispkg:
            continue
        modules.append(importlib.import_module(info.name))
    for module in modules:
        for name, value in vars(module).items():
            candidate = value if isinstance(value, Tool) else getattr(value, "tool", None)
            if isinstance(candidate, Tool):
                found[f"{module.__name__}.{name}"] = candidate
    for registered in registry.all():
        found.setdefault(f"registry.{registered.name}", registered)
    return found


ALL_TOOLS = _module_tools()


def test_the_collection_covers_the_demo_and_the_tests() -> None:
    modules = {key.rsplit(".", 1)[0] for key in ALL_TOOLS}
    assert "demo.tools" in modules and "tests.testapp.tools" in modules
    assert len(ALL_TOOLS) > 50


@pytest.mark.parametrize("profile", SCHEMA_PROFILES)
def test_every_demo_and_test_tool_obeys_each_profile(profile: str) -> None:
    broken = {}
    for key, candidate in ALL_TOOLS.items():
        try:
            schema, strict = profile_parameters(candidate, profile)
        except ToolDefinitionError as exc:
            # only a strict=True tool with an open mapping may refuse, and only where strict is sent
            assert candidate.strict and "strict mode needs objects with fixed properties" in str(exc), key
            assert profile in ("openai", "openai-strict"), key
            continue
        jsonschema.Draft202012Validator.check_schema(_as_json_schema(schema))
        problems = profile_problems(schema, profile, strict=strict)
        if problems:
            broken[key] = problems
        if strict:
            assert candidate.strict or profile == "openai-strict", key
    assert broken == {}


def test_exports_keep_their_shapes_and_add_the_profiles() -> None:
    ship = ALL_TOOLS["tests.tools.test_strict_export_checks.ship"]

    assert EXPORT_FORMATS == ("openai", "openai-strict", "anthropic", "gemini", "compact", "mcp")
    assert tool_definition(ship, "openai")["function"]["strict"] is True
    assert tool_definition(ship, "openai-strict")["function"]["strict"] is True
    assert "strict" not in tool_definition(ship, "compact")["function"]
    assert set(tool_definition(ship, "anthropic")) == {"name", "description", "input_schema"}
    assert set(tool_definition(ship, "gemini")) == {"name", "description", "parameters"}
    assert tool_definition(ship, "mcp")["inputSchema"] == ship.json_schema  # MCP keeps full JSON Schema
    with pytest.raises(ValueError, match="Unknown schema profile 'llama'; use one of openai, openai-strict"):
        profile_parameters(ship, "llama")


# --- round trips for representative types --------------------------------------------------------


FULL = {
    "amount": "123456.78",
    "color": "blue",
    "on": "2026-11-30",
    "mode": "slow",
    "note": None,
    "tags": ["a", "b"],
    "address": {"street": "Main", "unit": "4", "color": "red"},
    "stops": [{"street": "Side"}],
    "at": "2026-11-30T12:00:00Z",
    "copies": 3,
    "fee": "-0.5",
}
MINIMAL = {k: FULL[k] for k in ("amount", "color", "on", "mode", "note", "tags", "address")}


@pytest.mark.parametrize("profile", SCHEMA_PROFILES)
@pytest.mark.parametrize("arguments", [FULL, MINIMAL], ids=["full", "minimal"])
def test_arguments_valid_under_the_tool_are_valid_under_each_profile_and_back(
    profile: str, arguments: dict[str, Any]
) -> None:
    schema, strict = profile_parameters(book_stay.tool, profile)
    assert not strict  # an optional int cannot take null: strict mode would change its meaning

    jsonschema.validate(arguments, book_stay.tool.json_schema)
    jsonschema.validate(arguments, _as_json_schema(schema))
    values = book_stay.tool.validate_arguments(arguments)
    assert values["amount"] == Decimal(str(arguments["amount"])) and values["color"] is Color.BLUE
    assert values["on"] == dt.date(2026, 11, 30) and values["address"].street == "Main"
    assert _no_refs_or_unions(schema, profile)


@pytest.mark.parametrize("profile", SCHEMA_PROFILES)
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("amount", "1234567.8"),  # 7 digits before the point, the limit is 6
        ("amount", "1.234"),  # 3 decimal places, the limit is 2
        ("amount", "-1"),  # below ge=0
        ("color", "green"),
        ("mode", "medium"),
        ("tags", "a"),
        ("address", {"unit": "4"}),
    ],
)
def test_a_profile_refuses_what_the_tool_refuses(profile: str, field: str, value: Any) -> None:
    schema, _ = profile_parameters(book_stay.tool, profile)
    arguments = {**MINIMAL, field: value}

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(arguments, _as_json_schema(schema))
    with pytest.raises(pydantic.ValidationError):
        book_stay.tool.validate_arguments(arguments)


@pytest.mark.parametrize("profile", ["openai", "openai-strict"])
def test_strict_tools_take_nulls_for_unset_optionals(profile: str) -> None:
    schema, strict = profile_parameters(book_stay_strictly.tool, profile)
    arguments = {
        "amount": "10.00",
        "color": "red",
        "address": {"street": "Main", "unit": None, "color": "red"},
        "at": None,
        "copies": None,
    }

    assert strict and profile_problems(schema, profile, strict=True) == []
    assert schema["required"] == ["amount", "color", "address", "at", "copies"]
    assert schema["properties"]["address"]["additionalProperties"] is False
    jsonschema.validate(arguments, schema)
    values = book_stay_strictly.tool.validate_arguments(arguments)
    assert values["copies"] == 1 and values["at"] is None and values["address"].color is Color.RED


def test_openai_strict_sends_strict_where_it_cannot_change_a_call() -> None:
    @tool
    def safe(query: str, limit: int | None = None, where: Address | None = None) -> str:
        """Nothing optional here refuses null... except inside Address."""
        return query

    @tool
    def nullable_only(query: str, limit: int | None = None) -> str:
        """Every optional takes null."""
        return query

    assert profile_parameters(nullable_only.tool, "openai")[1] is False  # not declared strict
    schema, strict = profile_parameters(nullable_only.tool, "openai-strict")
    assert strict and schema["required"] == ["query", "limit"]
    assert nullable_only.tool.validate_arguments({"query": "q", "limit": None}) == {"query": "q", "limit": None}
    # Address.color has a non-null default: a null from the model would be refused, so no strict
    assert profile_parameters(safe.tool, "openai-strict")[1] is False
    assert (
        strict_safe({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": True}}}) is False
    )


def test_decimal_patterns_keep_the_digit_limits() -> None:
    assert decimal_pattern(max_digits=8, decimal_places=2) == r"^-?\d{1,6}(\.\d{1,2})?$"
    assert decimal_pattern(max_digits=5, decimal_places=0, signed=False) == r"^\d{1,5}$"
    assert decimal_pattern(max_digits=None, decimal_places=None) == r"^-?\d+(\.\d+)?$"
    amount = profile_parameters(book_stay.tool, "compact")[0]["properties"]["amount"]
    assert amount["type"] == "string" and amount["pattern"] == r"^\d{1,6}(\.\d{1,2})?$"
    assert "Amount in EUR." in amount["description"]
    # narrower than the tool, never wider: plain notation only
    assert re.fullmatch(amount["pattern"], "1000.5") and not re.fullmatch(amount["pattern"], "1e3")


def test_hand_written_schemas_are_inlined_and_compacted() -> None:
    schema = {
        "type": "object",
        "properties": {
            "kind": {"$ref": "#/$defs/Kind", "description": "Which."},
            "n": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "tree": {"$ref": "#/$defs/Node"},
        },
        "required": ["kind"],
        "$defs": {
            "Kind": {"enum": ["a", "b"], "type": "string"},
            "Node": {
                "type": "object",
                "properties": {"child": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
            },
        },
    }

    compact = profile_schema(schema, "compact")
    gemini = profile_schema(schema, "gemini")

    assert compact["properties"]["kind"] == {"enum": ["a", "b"], "type": "string", "description": "Which."}
    assert compact["properties"]["n"] == {"type": ["integer", "string"]}
    assert compact["properties"]["tree"]["properties"]["child"] == {"type": ["object", "null"]}  # recursion cut
    assert gemini["properties"]["n"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert gemini["properties"]["tree"]["properties"]["child"] == {"type": "object", "nullable": True}
    for profile in SCHEMA_PROFILES:
        assert profile_problems(profile_schema(schema, profile), profile) == []
    assert "$ref" in repr(schema)  # the input is left alone


def test_the_checks_name_what_a_raw_pydantic_schema_breaks() -> None:
    raw = book_stay.tool.json_schema

    compact = profile_problems(raw, "compact")
    strict = profile_problems(raw, "openai-strict", strict=True)

    assert "$ uses $defs" in compact and "$.color uses $ref" in compact
    assert "$.amount uses anyOf" in compact
    assert "$.amount is a decimal as anyOf (number or string) without its limits" in compact
    assert any("does not require" in p for p in strict)
    assert any("uses default, which OpenAI's strict mode does not accept" in p for p in strict)


def _no_refs_or_unions(schema: dict[str, Any], profile: str) -> bool:
    text = repr(schema)
    return "$ref" not in text and "$defs" not in text and (profile != "compact" or "anyOf" not in text)


def _as_json_schema(node: Any) -> Any:
    """Gemini's OpenAPI ``nullable: true`` as JSON Schema, so that one validator checks every profile."""
    if isinstance(node, list):
        return [_as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {k: _as_json_schema(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable"):
        if isinstance(converted.get("type"), str):
            converted["type"] = [converted["type"], "null"]
            if "enum" in converted:
                converted["enum"] = [*converted["enum"], None]
        elif "anyOf" in converted:
            converted["anyOf"] = [*converted["anyOf"], {"type": "null"}]
    if "properties" in node:
        converted["properties"] = {k: _as_json_schema(v) for k, v in node["properties"].items()}
    return converted


@pytest.mark.django_db
@pytest.mark.parametrize("profile", SCHEMA_PROFILES)
def test_the_api_exports_each_profile(profile: str, settings: Any) -> None:
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "allow"}
    client = APIClient()
    client.force_authenticate(User.objects.create_user("ada"))
    with registry.temporarily(book_stay):
        response = client.get(f"/api/v1/tools/export/{profile}/")

    assert response.status_code == 200, response.content
    definitions = response.json()
    [exported] = [d for d in definitions if (d.get("function") or d)["name"] == "book_stay"]
    schema = exported.get("input_schema") or (exported.get("function") or exported)["parameters"]
    assert schema == profile_parameters(book_stay.tool, profile)[0]
    assert profile_problems(schema, profile) == []
