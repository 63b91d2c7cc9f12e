"""Parameter types pydantic handles, descriptions from three docstring styles, and refused declarations."""

import collections.abc
import dataclasses
import datetime as dt
import enum
import typing
import uuid
from decimal import Decimal
from typing import Annotated, Any, Literal, NotRequired

import pytest
from pydantic import BaseModel, Field, Secret, SecretBytes, SecretStr, ValidationError
from typing_extensions import TypedDict

from toolhub import Param, Tool, registry, tool
from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.results import to_json_value


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class Address(TypedDict):
    street: str
    zip_code: NotRequired[str]


class Line(BaseModel):
    sku: str
    quantity: Annotated[int, Field(gt=0)]


def test_every_pydantic_type_validates_and_has_a_schema() -> None:
    # given a tool with every kind of parameter the issue lists
    def everything(
        ident: uuid.UUID,
        tags: set[str],
        pair: tuple[int, str],
        many: tuple[float, ...],
        point: Point,
        address: Address,
        lines: list[Line],
        amount: Annotated[Decimal, Field(gt=0, decimal_places=2)],
        count: Annotated[int, Field(ge=1, le=10)],
        when: dt.datetime,
        size: Literal["s", "m"] = "s",
        note: str | None = None,
    ) -> None:
        """Take everything."""

    built = tool(everything).tool

    # when the model sends JSON
    values = built.validate_arguments(
        {
            "ident": "12345678-1234-5678-1234-567812345678",
            "tags": ["a", "b", "a"],
            "pair": [1, "x"],
            "many": [1, 2.5],
            "point": {"x": 3},
            "address": {"street": "Main"},
            "lines": [{"sku": "A", "quantity": 2}],
            "amount": "12.50",
            "count": 3,
            "when": "2025-01-02T03:04:05Z",
        }
    )

    # then the handler gets Python values
    assert values["ident"] == uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert values["tags"] == {"a", "b"}
    assert values["pair"] == (1, "x") and values["many"] == (1.0, 2.5)
    assert values["point"] == Point(3, 0)
    assert values["address"] == {"street": "Main"}
    assert values["lines"] == [Line(sku="A", quantity=2)]
    assert values["amount"] == Decimal("12.50")
    properties = built.json_schema["properties"]
    assert properties["ident"] == {"type": "string", "format": "uuid"}
    assert properties["tags"] == {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    assert properties["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert properties["count"] == {"type": "integer", "minimum": 1, "maximum": 10}
    assert set(built.json_schema["$defs"]) == {"Point", "Address", "Line"}
    assert built.json_schema["$defs"]["Address"]["required"] == ["street"]


@pytest.mark.parametrize(
    ("arguments", "location"),
    [
        ({"count": 0}, "count"),
        ({"count": 11}, "count"),
        ({"count": "three"}, "count"),
    ],
)
def test_constraints_are_enforced(arguments: dict[str, Any], location: str) -> None:
    def constrained(count: Annotated[int, Field(ge=1, le=10)]) -> None:
        """Constrained."""

    with pytest.raises(ValidationError) as excinfo:
        tool(constrained).tool.validate_arguments(arguments)

    assert excinfo.value.errors()[0]["loc"] == (location,)


def _google(start: int, end: int) -> None:
    """Count from one number to another.

    Args:
        start: Where to start.
        end (int): Where to stop.
    """


def _numpy(start: int, end: int) -> None:
    """Count from one number to another.

    Parameters
    ----------
    start : int
        Where to start.
    end : int
        Where to stop.
    """


def _sphinx(start: int, end: int) -> None:
    """Count from one number to another.

    :param start: Where to start.
    :param int end: Where to stop.
    :returns: nothing.
    """


@pytest.mark.parametrize("fn", [_google, _numpy, _sphinx], ids=["google", "numpy", "sphinx"])
def test_descriptions_come_from_google_numpy_and_sphinx_docstrings(fn: Any) -> None:
    built = tool(name="count")(fn).tool

    assert built.description == "Count from one number to another."
    assert built.json_schema["properties"]["start"]["description"] == "Where to start."
    assert built.json_schema["properties"]["end"]["description"] == "Where to stop."


def test_docstring_describing_a_missing_parameter_is_refused() -> None:
    def typo(start: int) -> None:
        """Typo.

        Args:
            strat: Where to start.
        """

    with pytest.raises(ToolDefinitionError, match=r"Tool 'typo'.*\['strat'\].*not parameters"):
        tool(typo)


def test_a_setting_can_require_every_parameter_to_be_described(settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "REQUIRE_PARAMETER_DESCRIPTIONS": True}

    def described(a: Annotated[int, Param("First.")], b: Annotated[int, Field(description="Second.")]) -> None:
        """Described."""

    def half(a: Annotated[int, Param("First.")], b: int) -> None:
        """Half described."""

    class Input(BaseModel):
        a: int

    assert tool(described).tool.json_schema["properties"]["b"]["description"] == "Second."
    with pytest.raises(ToolDefinitionError, match=r"Tool 'half', parameter 'b': has no description"):
        tool(half)
    with pytest.raises(ToolDefinitionError, match=r"Tool 'typed', parameter 'a': has no description"):
        Tool.from_function(lambda value: "x", name="typed", description="Typed.", input_model=Input, output_model=str)
    with pytest.raises(ToolDefinitionError, match=r"Tool 'schema', parameter 'q': has no description"):
        Tool.create("schema", "Schema.", {"type": "object", "properties": {"q": {"type": "string"}}}, lambda a: a)


class Opaque:
    """A class pydantic does not know."""


class WithCallback(BaseModel):
    name: str
    callback: collections.abc.Callable[[], None]


class PlainTypedDict(typing.TypedDict):
    x: int


def _opaque(value: Opaque) -> None:
    """Opaque."""


def _nested_callable(value: WithCallback) -> None:
    """Nested callable."""


def _typing_typeddict(value: PlainTypedDict) -> None:
    """typing.TypedDict."""


def _class(value: type[int]) -> None:
    """A class."""


def _optional_any(value: Any | None = None) -> None:
    """Optional Any."""


def _object(value: object) -> None:
    """Object."""


def _positional_only(value: int, /) -> None:
    """Positional only."""


@pytest.mark.parametrize(
    ("fn", "problem"),
    [
        (_opaque, "pydantic cannot validate Opaque"),
        (_nested_callable, "Callable is not a JSON value"),
        (_typing_typeddict, "typing_extensions.TypedDict"),
        (_class, "a class is not a JSON value"),
        (_optional_any, "bare Any"),
        (_object, "bare Any"),
        (_positional_only, "positional-only"),
    ],
)
def test_unsupported_declarations_fail_naming_tool_and_parameter(fn: Any, problem: str) -> None:
    with pytest.raises(ToolDefinitionError) as excinfo:
        tool(name="broken")(fn)

    message = str(excinfo.value)
    assert "Tool 'broken', parameter 'value'" in message
    assert problem in message


def test_any_is_accepted_with_opt_in_and_inside_containers() -> None:
    def free(value: Any, extra: dict[str, Any]) -> None:
        """Free-form."""

    built = tool(allow_any=True)(free).tool
    assert built.validate_arguments({"value": [1, "x"], "extra": {"k": None}}) == {
        "value": [1, "x"],
        "extra": {"k": None},
    }

    def contained(extra: dict[str, Any]) -> None:
        """Contained Any."""

    assert tool(contained).tool.json_schema["properties"]["extra"] == {"type": "object", "additionalProperties": True}


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


def _tricky(
    customer_id: Annotated[str, Param("The customer.")],
    limit: Annotated[int, Field(ge=1, le=100, description="At most.")] = 10,
    colour: Colour = Colour.RED,
    amount: Decimal = Decimal("1.50"),
    day: dt.date = dt.date(2025, 1, 1),
    point: Point | None = None,
    lines: list[Line] | None = None,
    address: Address | None = None,
    pair: tuple[int, str] = (1, "a"),
    tags: frozenset[str] = frozenset(),
    kind: Literal["a", "b"] = "a",
    maybe: Annotated[int | None, Param("Maybe.")] = None,
    nested: dict[str, list[Line]] | None = None,
) -> None:
    """Tricky."""


def test_the_fast_schema_equals_the_input_models_schema() -> None:
    # the fast path (per-type schemas, no model) must say exactly what the input model says
    from toolhub.tools.inputs import FieldsInputs, SignatureInputs
    from toolhub.tools.schema import fast_json_schema, json_schema_of

    tools = [tool(name="tricky")(_tricky).tool, *registry.all()]
    for built in tools:
        if not isinstance(built.inputs, SignatureInputs | FieldsInputs):
            continue
        fast = fast_json_schema(built.parameters)
        assert fast is not None, built.name
        assert fast == json_schema_of(built.name, built.input_model), built.name


def test_two_types_with_one_name_fall_back_to_the_model() -> None:
    from toolhub.tools.schema import fast_json_schema

    first = type("Same", (BaseModel,), {"__annotations__": {"a": int}})
    second = type("Same", (BaseModel,), {"__annotations__": {"b": str}})

    def clash(x: first, y: second) -> None:  # type: ignore[valid-type]
        """Clash."""

    built = tool(clash).tool
    assert fast_json_schema(built.parameters) is None
    assert len(built.json_schema["$defs"]) == 2  # the model disambiguates


class Credentials(BaseModel):
    user: str
    password: SecretStr


def _secret_str(value: SecretStr) -> None:
    """A SecretStr."""


def _secret_bytes(value: SecretBytes | None = None) -> None:
    """Optional SecretBytes."""


def _generic_secret(value: list[Secret[int]]) -> None:
    """A list of generic secrets."""


def _nested_secret(value: Credentials) -> None:
    """A model holding a SecretStr."""


@pytest.mark.parametrize(
    ("fn", "secret"),
    [
        (_secret_str, "SecretStr"),
        (_secret_bytes, "SecretBytes"),
        (_generic_secret, "Secret"),
        (_nested_secret, "SecretStr"),
    ],
)
def test_a_pydantic_secret_parameter_is_refused_pointing_to_sensitive(fn: Any, secret: str) -> None:
    # pydantic writes a secret as "**********" in JSON: stored so, a worker would run the tool with the mask
    with pytest.raises(ToolDefinitionError) as excinfo:
        tool(name="secretive")(fn)

    message = str(excinfo.value)
    assert f"Tool 'secretive', parameter 'value': a pydantic {secret} is stored as its mask" in message
    assert "sensitive=('value',)" in message


def test_a_secret_in_an_input_model_or_a_mapping_of_types_is_refused_too() -> None:
    with pytest.raises(ToolDefinitionError, match=r"Tool 'login', parameter 'password': a pydantic SecretStr"):
        Tool.create("login", "Log in.", Credentials, lambda arguments: "in")
    with pytest.raises(ToolDefinitionError, match=r"Tool 'unlock', parameter 'pin': a pydantic SecretStr"):
        Tool.create("unlock", "Unlock.", {"door": str, "pin": SecretStr}, lambda arguments: "open")
    with pytest.raises(ToolDefinitionError, match=r"Tool 'remote', parameter 'creds': a pydantic SecretStr"):
        Tool.external("remote", "Remote.", {"creds": Credentials})


def test_a_secret_the_tool_returns_is_stored_as_its_mask() -> None:
    # an output type may hold a secret: what is stored and shown is the mask, as pydantic writes it
    def issue() -> SecretStr:
        """Issue a token."""
        return SecretStr("tok-123456")

    built = tool(name="issue_token", output_model=SecretStr)(issue).tool

    assert to_json_value(built.invoke({})) == "**********"
