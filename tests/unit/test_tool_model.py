"""The Tool value: definition-time checks, validation, copies, version and result serialization."""

import dataclasses
import datetime as dt
import enum
import typing
from collections.abc import Callable, Generator, Iterator
from decimal import Decimal
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ValidationError

from toolhub import Param, Risk, Tool, ToolContext, ToolResult, tool
from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.results import result_text_for_model, to_json_value


class Size(enum.Enum):
    SMALL = "s"
    LARGE = "l"


class Line(BaseModel):
    sku: str
    quantity: int


def place_order(
    customer: Annotated[str, Param("Who orders.")],
    amount: Decimal,
    due: dt.date,
    size: Size,
    lines: list[Line],
    express: bool = False,
) -> None:
    """Place an order."""


ORDER = tool(place_order).tool


# --- validation ------------------------------------------------------------------------------------


def test_validation_coerces_json_values_to_python_types() -> None:
    # when the model sends JSON-ish values
    validated = ORDER.validate_arguments(
        {
            "customer": "ACME",
            "amount": "12.50",
            "due": "2025-03-01",
            "size": "l",
            "lines": [{"sku": "A-1", "quantity": "2"}],
        }
    )

    # then the handler receives real Python values, defaults filled in
    assert validated == {
        "customer": "ACME",
        "amount": Decimal("12.50"),
        "due": dt.date(2025, 3, 1),
        "size": Size.LARGE,
        "lines": [Line(sku="A-1", quantity=2)],
        "express": False,
    }


def test_extra_arguments_are_refused() -> None:
    with pytest.raises(ValidationError) as excinfo:
        ORDER.validate_arguments(
            {"customer": "x", "amount": 1, "due": "2025-01-01", "size": "s", "lines": [], "discount": 10}
        )

    assert [(e["type"], e["loc"]) for e in excinfo.value.errors()] == [("extra_forbidden", ("discount",))]


def test_validation_errors_name_every_bad_field() -> None:
    with pytest.raises(ValidationError) as excinfo:
        ORDER.validate_arguments({"customer": 5, "amount": "lots", "due": "tomorrow", "size": "xl", "lines": [{}]})

    locations = {e["loc"] for e in excinfo.value.errors()}
    assert locations == {
        ("customer",),
        ("amount",),
        ("due",),
        ("size",),
        ("lines", 0, "sku"),
        ("lines", 0, "quantity"),
    }


def test_is_valid_arguments_answers_yes_or_no() -> None:
    good = {"customer": "x", "amount": 1, "due": "2025-01-01", "size": "s", "lines": []}

    assert ORDER.is_valid_arguments(good) is True
    assert ORDER.is_valid_arguments({**good, "amount": "x"}) is False


def test_async_tools_are_awaited() -> None:
    @tool
    async def double(x: int) -> int:
        """Double a number, asynchronously."""
        return x * 2

    assert double.tool.invoke({"x": 21}, ToolContext()) == 42


# --- definition-time refusals --------------------------------------------------------------------


def _callback(cb: Callable[[int], int]) -> None:
    """Callback."""


def _bare_callable(cb: typing.Callable) -> None:  # type: ignore[type-arg]
    """Bare callable."""


def _generator(items: Generator[int, None, None]) -> None:
    """Generator."""


def _iterator(items: Iterator[int]) -> None:
    """Iterator."""


def _any(value: Any) -> None:
    """Any."""


def _nested_callable(callbacks: list[Callable[[], None]] | None) -> None:
    """Nested callable."""


def _unannotated(value) -> None:  # type: ignore[no-untyped-def]
    """Unannotated."""


def _star_args(*values: int) -> None:
    """Star args."""


def _star_kwargs(**values: int) -> None:
    """Star kwargs."""


@pytest.mark.parametrize(
    ("fn", "parameter", "problem"),
    [
        (_callback, "cb", "Callable"),
        (_bare_callable, "cb", "Callable"),
        (_generator, "items", "Generator"),
        (_iterator, "items", "Iterator"),
        (_any, "value", "Any"),
        (_nested_callable, "callbacks", "Callable"),
        (_unannotated, "value", "no type hint"),
        (_star_args, "values", "*args"),
        (_star_kwargs, "values", "**kwargs"),
    ],
)
def test_unsupported_parameters_fail_at_definition_naming_tool_and_parameter(
    fn: Callable[..., Any], parameter: str, problem: str
) -> None:
    with pytest.raises(ToolDefinitionError) as excinfo:
        tool(name="broken_tool")(fn)

    message = str(excinfo.value)
    assert "'broken_tool'" in message
    assert f"parameter {parameter!r}" in message
    assert problem in message


@pytest.mark.parametrize(
    "name", ["has space", "1starts_with_digit", "_underscore_first", "x" * 65, "dots.not.allowed", "trailing\n"]
)
def test_invalid_names_are_refused(name: str) -> None:
    def handler(x: int) -> None:
        """Handler."""

    with pytest.raises(ToolDefinitionError, match="is not valid"):
        tool(name=name)(handler)


@pytest.mark.parametrize("name", ["a", "get_order", "get-order", "A1", "x" * 64])
def test_valid_names_are_accepted(name: str) -> None:
    def handler(x: int) -> None:
        """Handler."""

    assert tool(name=name)(handler).tool.name == name


def test_sensitive_names_must_be_parameters() -> None:
    def login(username: str, password: str, ctx: ToolContext) -> None:
        """Log in."""

    with pytest.raises(ToolDefinitionError, match=r"sensitive names \['passwd'\] are not parameters"):
        tool(sensitive=("passwd",))(login)
    with pytest.raises(ToolDefinitionError, match=r"sensitive names \['ctx'\]"):
        tool(sensitive=("ctx",))(login)
    assert tool(sensitive=("password",))(login).tool.sensitive == frozenset({"password"})


def test_a_description_is_required() -> None:
    def undocumented(x: int) -> None:
        pass

    with pytest.raises(ToolDefinitionError, match="'undocumented' has no description"):
        tool(undocumented)
    assert tool(description="Explicit.")(undocumented).tool.description == "Explicit."


def test_unknown_risk_and_approval_rule_are_refused() -> None:
    def handler(x: int) -> None:
        """Handler."""

    with pytest.raises(ToolDefinitionError, match="risk 'extreme' is not one of low, medium, high, critical"):
        tool(risk="extreme")(handler)
    with pytest.raises(ToolDefinitionError, match="needs_approval must be"):
        tool(needs_approval="sometimes")(handler)  # type: ignore[typeddict-item]


def test_decorated_function_stays_callable() -> None:
    @tool(risk=Risk.HIGH, tags=("a", "b"), group="ops", idempotent=True, timeout=5)
    def add(x: int, y: int) -> int:
        """Add."""
        return x + y

    assert add(1, 2) == 3
    assert add.tool.risk is Risk.HIGH
    assert add.tool.tags == frozenset({"a", "b"})
    assert (add.tool.group, add.tool.idempotent, add.tool.timeout) == ("ops", True, 5)
    assert add.tool.module == __name__


# --- immutable copies and version ----------------------------------------------------------------


def test_tool_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ORDER.description = "changed"  # type: ignore[misc]


def test_with_description_and_with_note_return_copies() -> None:
    # given
    original_description = ORDER.description
    original_version = ORDER.version

    # when
    renamed = ORDER.with_description("Order things.")
    noted = ORDER.with_note("Only on weekdays.")

    # then the copies changed, the original did not
    assert renamed is not ORDER and noted is not ORDER
    assert renamed.description == "Order things."
    assert noted.description == "Place an order.\n\nOnly on weekdays."
    assert ORDER.description == original_description == "Place an order."
    assert ORDER.version == original_version
    assert renamed.version != original_version and noted.version != original_version
    assert renamed.json_schema == ORDER.json_schema
    assert renamed.handler is ORDER.handler


def test_version_is_stable_and_changes_with_the_schema() -> None:
    def v1(x: int) -> None:
        """Same tool."""

    def v2(x: int, y: int = 0) -> None:
        """Same tool."""

    def v3(x: str) -> None:
        """Same tool."""

    first = tool(name="versioned")(v1).tool
    again = Tool.from_function(v1, name="versioned")

    assert first.version == again.version
    assert len(first.version) == 16
    assert tool(name="versioned")(v2).tool.version != first.version
    assert tool(name="versioned")(v3).tool.version != first.version


def test_version_changes_with_risk() -> None:
    def handler(x: int) -> None:
        """Handler."""

    low = Tool.from_function(handler, risk=Risk.LOW)
    high = Tool.from_function(handler, risk=Risk.HIGH)

    assert low.version != high.version


# --- results ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Receipt:
    number: int
    total: Decimal


class OrderOut(BaseModel):
    order_id: int
    amount: Decimal
    created_at: dt.datetime
    size: Size


def test_results_are_serialized_to_json() -> None:
    moment = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)

    assert to_json_value(OrderOut(order_id=1, amount=Decimal("9.90"), created_at=moment, size=Size.SMALL)) == {
        "order_id": 1,
        "amount": "9.90",
        "created_at": "2025-01-02T03:04:05Z",
        "size": "s",
    }
    assert to_json_value(Receipt(number=7, total=Decimal("1.5"))) == {"number": 7, "total": "1.5"}
    assert to_json_value(Decimal("0.10")) == "0.10"
    assert to_json_value(dt.date(2025, 12, 31)) == "2025-12-31"
    assert to_json_value(moment) == "2025-01-02T03:04:05Z"
    assert to_json_value(Size.LARGE) == "l"
    assert to_json_value(None) is None
    assert to_json_value({"n": [1, (2, 3)]}) == {"n": [1, [2, 3]]}


def test_result_text_for_model() -> None:
    assert result_text_for_model("plain text") == "plain text"
    assert result_text_for_model({"b": 1, "a": "é"}) == '{"a": "é", "b": 1}'
    assert result_text_for_model(None) == "Done."  # TOOLHUB["NONE_RESULT_TEXT"]


def test_explicit_results() -> None:
    assert ToolResult.text("hi") == ToolResult(kind="text", value="hi")
    assert ToolResult.error("nope").kind == "error"
    artifact = ToolResult.artifact({"rows": 3}, name="report.json")
    assert (artifact.kind, artifact.name, artifact.media_type) == ("artifact", "report.json", "application/json")
