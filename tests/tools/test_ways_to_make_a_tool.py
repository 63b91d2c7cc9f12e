"""@tool on methods, tools_from_instance, Tool.create, Tool.from_function, copies, option mistakes."""

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ValidationError

from toolhub import Param, ReturnBehavior, Tool, ToolContext, ToolResult, registry, tool, tools_from_instance
from toolhub.exceptions import ToolDefinitionError


class Inventory:
    def __init__(self, warehouse: str) -> None:
        self.warehouse = warehouse

    @tool(idempotent=True)
    def stock(self, sku: Annotated[str, Param("The product.")]) -> str:
        """Units of a product in stock."""
        return f"{self.warehouse}:{sku}"

    @tool(risk="medium")
    def reserve(self, sku: str, quantity: int, ctx: ToolContext) -> str:
        """Reserve units of a product."""
        return f"{self.warehouse}:{sku}x{quantity}@{ctx.tenant}"

    @staticmethod
    @tool
    def units() -> str:
        """The unit of stock."""
        return "pieces"

    def helper(self) -> None:
        """Not a tool."""


def test_tools_from_instance_binds_each_tool_method_to_the_object() -> None:
    # when
    north = tools_from_instance(Inventory("north"))
    south = tools_from_instance(Inventory("south"), naming="south_")

    # then
    assert [t.name for t in north] == ["stock", "reserve", "units"]
    assert [t.name for t in south] == ["south_stock", "south_reserve", "south_units"]
    assert north[0].invoke({"sku": "A1"}) == "north:A1"
    assert south[1].invoke({"sku": "B", "quantity": 2}, ToolContext(tenant="acme")) == "south:Bx2@acme"
    assert list(north[0].json_schema["properties"]) == ["sku"]
    assert north[0].idempotent and str(north[1].risk) == "medium"


def test_naming_function_and_filter() -> None:
    tools = tools_from_instance(Inventory("x"), naming=lambda name: name.upper(), filter=lambda name: name != "units")

    assert [t.name for t in tools] == ["STOCK", "RESERVE"]


def test_instance_tools_register_and_an_unbound_method_is_refused() -> None:
    tools = tools_from_instance(Inventory("east"), naming="east_")

    with registry.temporarily(*tools):
        assert registry.get("east_stock").invoke({"sku": "Q"}) == "east:Q"

    with pytest.raises(ToolDefinitionError, match=r"Tool 'stock' is a method .* tools_from_instance"):
        with registry.temporarily(Inventory.stock):
            pass


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tools_from_instance(Inventory), "takes an object, not the class Inventory"),
        (lambda: tools_from_instance(object()), "object has no @tool methods"),
        (lambda: tools_from_instance(Inventory("x"), filter=lambda n: False), "that pass the filter"),
        (lambda: tools_from_instance(Inventory("x"), naming=lambda n: "same"), "would both be named 'same'"),
        (lambda: tools_from_instance(Inventory("x"), naming=42), "naming= takes a prefix"),
    ],
)
def test_tools_from_instance_mistakes(call: Any, message: str) -> None:
    with pytest.raises(ToolDefinitionError, match=message):
        call()
    assert tools_from_instance(object(), required=False) == []


def test_create_with_a_json_schema_validates_without_echoing_values() -> None:
    # given
    def handler(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.text(f"{arguments['a'] + arguments.get('b', 0)} for {ctx.tenant}")

    add = Tool.create(
        "add",
        "Add two numbers.",
        {
            "type": "object",
            "properties": {"a": {"type": "integer", "description": "First."}, "b": {"type": "integer"}},
            "required": ["a"],
            "additionalProperties": False,
        },
        handler,
    )

    # then the schema is the one given, and the handler gets the arguments and the context
    assert add.json_schema["properties"]["a"] == {"type": "integer", "description": "First."}
    assert add.invoke(add.validate_arguments({"a": 2, "b": 3}), ToolContext(tenant="acme")).value == "5 for acme"
    with pytest.raises(ValidationError) as excinfo:
        add.validate_arguments({"b": "secret-value", "c": 1})
    problems = {(e["loc"], e["msg"]) for e in excinfo.value.errors()}
    assert problems == {
        (("a",), "Field required"),
        (("b",), "Input should be of type integer"),
        (("c",), "Extra inputs are not permitted"),
    }
    assert "secret-value" not in str(excinfo.value)


def test_create_with_python_types_or_a_model_or_nothing() -> None:
    class Query(BaseModel):
        text: str

    typed = Tool.create("typed", "Typed.", {"a": Annotated[int, Param("First.")], "b": (int, 10)}, lambda a: a)
    modelled = Tool.create("modelled", "Modelled.", Query, lambda query: query.text.upper())
    bare = Tool.create("bare", "No parameters.", None, lambda arguments: "hello")

    assert typed.invoke(typed.validate_arguments({"a": "1"})) == {"a": 1, "b": 10}
    assert typed.json_schema["properties"]["a"]["description"] == "First."
    assert typed.json_schema["required"] == ["a"]
    assert modelled.invoke(modelled.validate_arguments({"text": "hi"})) == "HI"
    assert bare.json_schema == {"type": "object", "properties": {}, "additionalProperties": False}
    assert bare.invoke({}) == "hello"


def test_references_within_the_schema_are_accepted() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/Point"}, "b": {"$ref": "#here"}, "c": {"$ref": "#/properties/a"}},
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}}, "H": {"$anchor": "here"}},
    }
    made = Tool.create("made", "Made.", schema, lambda a: a)
    assert made.validate_arguments({"a": {"x": 1}, "c": {"x": 2}}) == {"a": {"x": 1}, "c": {"x": 2}}


@pytest.mark.parametrize(
    ("parameters", "handler", "message"),
    [
        ({"type": "string"}, lambda a: a, "must describe an object"),
        ({"type": "object", "properties": {"a": {"type": "nope"}}}, lambda a: a, "not valid JSON Schema"),
        ({"type": "object", "properties": {}, "required": ["x"]}, lambda a: a, r"requires \['x'\]"),
        ({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}, lambda a: a, "'#/nowhere', which resolve"),
        ({"type": "object", "properties": {"a": {"$ref": "https://x.example/s.json"}}}, lambda a: a, "not fetched"),
        ({"type": "object", "properties": {"a": {"$ref": "#missing-anchor"}}}, lambda a: a, "resolve to nothing"),
        ({"a": "integer"}, lambda a: a, "give a Python type"),
        ({"not valid": int}, lambda a: a, "not a valid identifier"),
        ([1, 2], lambda a: a, "parameters must be"),
        (None, lambda: 1, "must take \\(arguments\\) or \\(arguments, ctx\\)"),
        (None, "not callable", "is not callable"),
        (None, None, "needs a handler"),
    ],
)
def test_create_mistakes_name_the_tool(parameters: Any, handler: Any, message: str) -> None:
    with pytest.raises(ToolDefinitionError, match=message) as excinfo:
        Tool.create("made", "Made.", parameters, handler)
    assert "'made'" in str(excinfo.value)


class AddRequest(BaseModel):
    a: int
    b: int


class AddResult(BaseModel):
    sum: int


def test_from_function_validates_input_and_serializes_output() -> None:
    add = Tool.from_function(
        lambda r: AddResult(sum=r.a + r.b),
        name="add",
        description="Add.",
        input_model=AddRequest,
        output_model=AddResult,
    )
    greet = Tool.from_function(
        lambda r: f"{r.a} and {r.b}", name="greet", description="Greet.", input_model=AddRequest, output_model=str
    )
    as_dict = Tool.from_function(
        lambda r, ctx: {"sum": r.a * 2},
        name="as_dict",
        description="Dict.",
        input_model=AddRequest,
        output_model=AddResult,
    )

    assert add.invoke(add.validate_arguments({"a": 5, "b": "3"})) == AddResult(sum=8)
    assert greet.invoke(greet.validate_arguments({"a": 1, "b": 2})) == "1 and 2"  # strings pass through
    assert as_dict.invoke(as_dict.validate_arguments({"a": 4, "b": 0}), ToolContext()) == AddResult(sum=8)
    assert add.json_schema["required"] == ["a", "b"]
    with pytest.raises(ValidationError):
        add.validate_arguments({"a": 1, "b": 2, "c": 3})  # the input model refuses unknown fields


def test_from_function_output_that_does_not_match_fails_the_call() -> None:
    wrong = Tool.from_function(
        lambda r: {"total": 1}, name="wrong", description="Wrong.", input_model=AddRequest, output_model=AddResult
    )

    with pytest.raises(ValidationError):
        wrong.invoke({"a": 1, "b": 1})


def test_from_function_mistakes() -> None:
    with pytest.raises(ToolDefinitionError, match="'bad': the input type must be a pydantic model"):
        Tool.from_function(lambda r: r, name="bad", description="Bad.", input_model=dict, output_model=str)  # type: ignore[typeddict-item]
    with pytest.raises(ToolDefinitionError, match="'bad': its output type cannot be serialized"):
        Tool.from_function(lambda r: r, name="bad", description="Bad.", input_model=AddRequest, output_model=lambda: 1)


def test_copies_share_the_built_schema() -> None:
    original = tools_from_instance(Inventory("w"))[0]
    schema = original.json_schema

    noted = original.with_note("Counts only sellable units.").with_description("Stock level.")

    assert noted.json_schema is schema
    assert noted.description == "Stock level."
    assert original.description == "Units of a product in stock."
    assert noted.version != original.version


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retries": 3}, "unknown option\\(s\\) retries"),
        ({"return_behavior": "later"}, "return_behavior 'later' is not one of"),
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"timeout": "5"}, "timeout must be a positive number"),
        ({"advice": "Use it."}, "needs one_shot_per_loop=True"),
        ({"tags": "one"}, "tags= takes a list of strings"),
        ({"presets": {"missing": 1}}, "presets \\['missing'\\] are not parameters"),
        ({"compensate_with": "made"}, "cannot compensate itself"),
        ({"needs_approval": 3}, "needs_approval must be True, False or a callable"),
    ],
)
def test_option_mistakes_are_refused_naming_the_tool(options: dict[str, Any], message: str) -> None:
    def made(x: int) -> None:
        """Made."""

    with pytest.raises(ToolDefinitionError, match=message) as excinfo:
        tool(**options)(made)
    assert "'made'" in str(excinfo.value)


def test_return_behavior_accepts_enum_or_string() -> None:
    def a() -> None:
        """A."""

    assert tool(return_behavior="immediate")(a).tool.return_behavior is ReturnBehavior.IMMEDIATE
    assert tool(return_behavior=ReturnBehavior.IMMEDIATE_IF_LAST)(a).tool.return_behavior == "immediate_if_last"


def test_async_tools_run_and_their_timeout_is_enforced() -> None:
    import asyncio

    from toolhub import ToolTimeoutError

    @tool
    async def nap(seconds: float) -> str:
        """Sleep asynchronously."""
        await asyncio.sleep(seconds)
        return "rested"

    assert nap.tool.invoke({"seconds": 0.01}, timeout=1) == "rested"
    with pytest.raises(ToolTimeoutError, match="'nap' did not finish within its time limit of 0.05 s"):
        nap.tool.invoke({"seconds": 2}, timeout=0.05)


def test_sync_timeout_interrupts_the_tool() -> None:
    import time

    from toolhub import ToolTimeoutError

    @tool
    def spin(seconds: float) -> str:
        """Sleep."""
        time.sleep(seconds)
        return "done"

    started = time.monotonic()
    with pytest.raises(ToolTimeoutError):
        spin.tool.invoke({"seconds": 5}, timeout=0.1)
    assert time.monotonic() - started < 1
    assert spin.tool.invoke({"seconds": 0}, timeout=1) == "done"


def test_autodiscovery_registers_instance_tools_and_tool_values_but_not_bare_methods() -> None:
    from toolhub.tools.registry import ToolRegistry, autodiscover

    own = ToolRegistry()
    autodiscover(["tests.tools.discoverable"], target=own)

    assert own.names() == ["echo_back", "north_temperature"]
    assert own.get("north_temperature").invoke({"city": "Oslo"}) == "north: 21C in Oslo"
