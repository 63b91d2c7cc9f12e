"""Strict mode, provider exports (library and API), and the system checks."""

from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from pydantic import BaseModel
from rest_framework.test import APIClient

from toolhub import Param, Risk, Secret, Tool, registry, tool
from toolhub.checks import check_tools
from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.export import strict_schema, tool_definition, tool_definitions


class Address(BaseModel):
    street: str
    unit: str | None = None


@tool(strict=True, idempotent=True, risk="low")
def ship(
    to: Annotated[str, Param("Recipient.")],
    address: Address,
    copies: int = 1,
    note: str | None = None,
) -> str:
    """Ship a parcel."""
    return f"{to} x{copies} note={note}"


def test_strict_schema_closes_objects_requires_everything_and_makes_optionals_nullable() -> None:
    schema = ship.tool.strict_json_schema

    assert schema["additionalProperties"] is False
    assert schema["required"] == ["to", "address", "copies", "note"]
    assert schema["properties"]["copies"] == {"type": ["integer", "null"]}
    assert {"type": "null"} in schema["properties"]["note"]["anyOf"]
    assert "default" not in repr(schema)
    nested = schema["$defs"]["Address"]
    assert nested["additionalProperties"] is False and nested["required"] == ["street", "unit"]
    # the non-strict schema is untouched
    assert ship.tool.json_schema["required"] == ["to", "address"]


def test_strict_null_for_an_optional_means_its_default() -> None:
    values = ship.tool.validate_arguments(
        {"to": "Ada", "address": {"street": "Main", "unit": None}, "copies": None, "note": None}
    )

    assert values["copies"] == 1 and values["note"] is None


def test_strict_mode_refuses_open_mappings() -> None:
    @tool(strict=True)
    def tagged(tags: dict[str, str]) -> None:
        """Tagged."""

    with pytest.raises(ToolDefinitionError, match=r"'tagged': strict mode needs objects with fixed properties.*tags"):
        tagged.tool.strict_json_schema  # noqa: B018
    problems = _checks_for(tagged.tool)
    assert [p.id for p in problems] == ["toolhub.E004", "toolhub.W001"]


def test_strict_schema_of_a_hand_written_schema() -> None:
    schema = strict_schema(
        "hand",
        {
            "type": "object",
            "properties": {"q": {"type": "string"}, "n": {"$ref": "#/$defs/N", "description": "N."}},
            "required": ["q"],
            "$defs": {"N": {"type": "integer"}},
        },
    )

    assert schema["required"] == ["q", "n"]
    assert schema["properties"]["n"] == {"anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}], "description": "N."}


def test_provider_shapes() -> None:
    openai = tool_definition(ship.tool, "openai")
    anthropic = tool_definition(ship.tool, "anthropic")
    mcp = tool_definitions([ship.tool], "mcp")

    assert openai["type"] == "function"
    assert openai["function"]["strict"] is True
    # the strict schema in the openai profile: the same rules, with the nested model inlined
    parameters = openai["function"]["parameters"]
    assert parameters["required"] == ship.tool.strict_json_schema["required"]
    assert parameters["properties"]["address"] == {
        **ship.tool.strict_json_schema["$defs"]["Address"],
        "properties": {"street": {"type": "string"}, "unit": {"type": ["string", "null"]}},
    }
    assert "$defs" not in parameters
    assert anthropic["name"] == "ship" and anthropic["description"] == "Ship a parcel."
    assert anthropic["input_schema"]["required"] == ["to", "address"] and "$defs" not in anthropic["input_schema"]
    assert mcp["tools"][0]["inputSchema"] == ship.tool.json_schema
    assert mcp["tools"][0]["annotations"] == {"idempotentHint": True, "destructiveHint": False}
    with pytest.raises(ValueError, match="Unknown export format"):
        tool_definition(ship.tool, "llama")


class Sum(BaseModel):
    total: int


class Pair(BaseModel):
    a: int
    b: int


def test_mcp_export_advertises_a_typed_output() -> None:
    add = Tool.from_function(
        lambda p: Sum(total=p.a + p.b), name="add_pair", description="Add a pair.", input_model=Pair, output_model=Sum
    )

    definition = tool_definition(add, "mcp")

    assert definition["outputSchema"]["properties"] == {"total": {"title": "Total", "type": "integer"}}


def test_api_exports_the_tools_the_user_may_call(alice_client: APIClient, settings: Any) -> None:
    with registry.temporarily(ship):
        openai = alice_client.get("/api/v1/tools/export/openai/")
        anthropic = alice_client.get("/api/v1/tools/export/anthropic/")
        mcp = alice_client.get("/api/v1/tools/export/mcp/")
        catalogue = alice_client.get("/api/v1/tools/")
        unknown = alice_client.get("/api/v1/tools/export/llama/")
        settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
        denied = alice_client.get("/api/v1/tools/export/openai/")

    assert openai.status_code == 200, openai.content
    shipped = next(d for d in openai.json() if d["function"]["name"] == "ship")
    assert shipped["function"]["strict"] is True
    assert any(d["name"] == "ship" and "input_schema" in d for d in anthropic.json())
    assert any(d["name"] == "ship" for d in mcp.json()["tools"])
    assert isinstance(catalogue.json()["results"], list)  # the JSON catalogue is paginated, the exports are not
    assert unknown.status_code == 404 and "Unknown provider 'llama'" in unknown.json()["detail"]
    assert denied.json() == []  # without a grant a user may call nothing


def test_api_export_refuses_a_tenant_the_user_is_not_in(alice_client: APIClient) -> None:
    response = alice_client.get("/api/v1/tools/export/mcp/?tenant=globex")

    assert response.status_code == 400


def _checks_for(*tools: Tool) -> list[Any]:
    with registry.temporarily(*tools):
        names = {t.name for t in tools}
        return [p for p in check_tools() if p.obj in names]


def test_checks_report_with_ids_and_hints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLHUB_MISSING_SECRET", raising=False)

    @tool(risk=Risk.MEDIUM, compensate_with="nothing_here")
    def orphan() -> None:
        """Compensated by nothing."""

    @tool(risk="low", presets={"key": Secret("TOOLHUB_MISSING_SECRET")})
    def keyed(key: str) -> None:
        """Needs a secret."""

    @tool(name="Get-Thing", risk="low")
    def get_thing_a() -> None:
        """One."""

    @tool(name="get_thing", risk="low")
    def get_thing_b() -> None:
        """Two."""

    @tool
    def undeclared() -> None:
        """No risk."""

    problems = _checks_for(orphan.tool, keyed.tool, get_thing_a.tool, get_thing_b.tool, undeclared.tool)

    by_id = {p.id: p for p in problems}
    assert set(by_id) == {"toolhub.E002", "toolhub.E003", "toolhub.W001", "toolhub.W002"}
    assert by_id["toolhub.E002"].obj == "orphan" and by_id["toolhub.E002"].hint
    assert "Get-Thing, get_thing" in by_id["toolhub.E003"].msg
    assert by_id["toolhub.W001"].obj == "undeclared"
    assert "TOOLHUB_MISSING_SECRET" in by_id["toolhub.W002"].msg


def test_check_reports_a_schema_that_cannot_be_built() -> None:
    class Loose:
        pass

    # a type pydantic cannot handle slipping past definition (built by hand) is caught by the check
    from toolhub.tools.inputs import SignatureInputs
    from toolhub.tools.specs import ParameterSpec

    broken = Tool(
        name="broken",
        description="Broken.",
        handler=lambda **kw: None,
        inputs=SignatureInputs(parameters=(ParameterSpec("x", Loose, ..., None),)),
    )

    problems = _checks_for(broken)

    assert [p.id for p in problems] == ["toolhub.E001"]
    assert "'broken'" in problems[0].msg


def test_exact_duplicates_are_refused_at_registration() -> None:
    @tool(name="twin")
    def one() -> None:
        """One."""

    @tool(name="twin")
    def two() -> None:
        """Two."""

    with pytest.raises(ToolDefinitionError, match="Duplicate tool name 'twin'"):
        with registry.temporarily(one, two):
            pass


def test_manage_py_check_runs_the_tool_checks(alice: User) -> None:
    from django.core.management import call_command

    call_command("check")  # the project's own tools pass (warnings allowed)
