"""JSON Schema of tool inputs: from type hints, Param markers and docstrings."""

import datetime as dt
import enum
from decimal import Decimal
from typing import Annotated, Literal, Optional

from pydantic import BaseModel, Field

from toolhub import Param, ToolContext, tool


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    zip_code: int


class Customer(BaseModel):
    name: str
    address: Address


def _schema(fn):  # type: ignore[no-untyped-def]
    return tool(fn).tool.json_schema


def test_primitive_types_map_to_json_schema_types() -> None:
    # given
    def primitives(text: str, count: int, ratio: float, flag: bool) -> None:
        """Primitives."""

    # when
    schema = _schema(primitives)

    # then
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["properties"] == {
        "text": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
    }
    assert schema["required"] == ["text", "count", "ratio", "flag"]


def test_decimal_date_datetime_are_described() -> None:
    def moments(amount: Decimal, day: dt.date, moment: dt.datetime) -> None:
        """Moments."""

    properties = _schema(moments)["properties"]

    assert {"type": "string"} in properties["amount"]["anyOf"]
    assert {"type": "number"} in properties["amount"]["anyOf"]
    assert properties["day"] == {"type": "string", "format": "date"}
    assert properties["moment"] == {"type": "string", "format": "date-time"}


def test_enum_and_literal_list_their_values() -> None:
    def choices(colour: Colour, size: Literal["s", "m", "l"]) -> None:
        """Choices."""

    schema = _schema(choices)

    ref = schema["properties"]["colour"]["$ref"]
    assert ref == "#/$defs/Colour"
    assert schema["$defs"]["Colour"]["enum"] == ["red", "blue"]
    assert schema["properties"]["size"]["enum"] == ["s", "m", "l"]


def test_optional_list_and_dict_and_defaults() -> None:
    def containers(
        tags: list[str],
        scores: dict[str, int],
        note: Optional[str] = None,  # noqa: UP045 - Optional is what is under test
        limit: int | None = 10,
    ) -> None:
        """Containers."""

    schema = _schema(containers)
    properties = schema["properties"]

    assert properties["tags"] == {"type": "array", "items": {"type": "string"}}
    assert properties["scores"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert properties["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert properties["note"]["default"] is None
    assert properties["limit"]["default"] == 10
    assert schema["required"] == ["tags", "scores"]


def test_nested_pydantic_models_are_defined_without_titles() -> None:
    def register(customer: Customer) -> None:
        """Register a customer."""

    schema = _schema(register)

    assert schema["properties"]["customer"] == {"$ref": "#/$defs/Customer"}
    assert schema["$defs"]["Customer"]["properties"]["address"] == {"$ref": "#/$defs/Address"}
    assert schema["$defs"]["Address"]["properties"] == {"street": {"type": "string"}, "zip_code": {"type": "integer"}}
    assert "title" not in repr(schema)


def test_property_named_title_is_kept() -> None:
    def publish(title: str) -> None:
        """Publish a book."""

    schema = _schema(publish)

    assert schema["properties"] == {"title": {"type": "string"}}
    assert schema["required"] == ["title"]


def test_descriptions_from_param_marker_and_field() -> None:
    def described(
        customer_id: Annotated[str, Param("The customer's id.")],
        amount: Annotated[Decimal, Field(description="How much, in EUR.", gt=0)],
    ) -> None:
        """Described."""

    properties = _schema(described)["properties"]

    assert properties["customer_id"] == {"type": "string", "description": "The customer's id."}
    assert properties["amount"]["description"] == "How much, in EUR."


def test_descriptions_and_summary_from_google_docstring() -> None:
    def days_until(start: dt.date, end: dt.date) -> int:
        """Count the days between two dates.

        Dates are ISO 8601.

        Args:
            start: The first date.
            end: The second date.
        """
        return (end - start).days

    built = tool(days_until).tool

    assert built.description == "Count the days between two dates.\n\nDates are ISO 8601."
    assert built.json_schema["properties"]["start"]["description"] == "The first date."
    assert built.json_schema["properties"]["end"]["description"] == "The second date."


def test_param_marker_wins_over_docstring() -> None:
    def both(x: Annotated[int, Param("From the marker.")]) -> None:
        """Both.

        Args:
            x: From the docstring.
        """

    assert _schema(both)["properties"]["x"]["description"] == "From the marker."


def test_context_parameter_is_injected_not_shown() -> None:
    # given a tool that takes the context among its parameters
    def who_am_i(greeting: str, ctx: ToolContext) -> str:
        """Greet the current user."""
        return f"{greeting}, {ctx.user}"

    # when
    built = tool(who_am_i).tool

    # then the model sees only the greeting, and the handler still gets the context
    assert list(built.json_schema["properties"]) == ["greeting"]
    assert built.json_schema["required"] == ["greeting"]
    assert built.context_parameter == "ctx"
    assert built.invoke({"greeting": "Hello"}, ToolContext(user="alice")) == "Hello, alice"


def test_context_parameter_under_annotated_is_recognised() -> None:
    def annotated_ctx(x: int, context: Annotated[ToolContext, "injected"]) -> int:
        """Annotated context."""
        return x

    built = tool(annotated_ctx).tool

    assert built.context_parameter == "context"
    assert list(built.json_schema["properties"]) == ["x"]


def test_methods_skip_self() -> None:
    class Shop:
        def price(self, sku: str) -> int:
            """Price of a product."""
            return 3

    built = tool(Shop.price).tool

    assert list(built.json_schema["properties"]) == ["sku"]
