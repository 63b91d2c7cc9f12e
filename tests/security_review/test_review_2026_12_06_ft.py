"""Review 2026-12-06 (ft): review fm's argument-validation changes (exact ``multipleOf``, pydantic patterns matched by
backtracking ``re`` refused, a tool whose model cannot be built refusing its calls), probed as a hostile model and
developer.

Each finding's test fails on the code as found (main at fe8d6ff) and says what was found and what is expected.

Findings:

1. A backtracking pattern held in a pydantic-core *definition* was not found: ``backtracking_patterns`` walked the
   ``definitions`` list under the engine of where it sits (the top, Rust's), but pydantic-core builds a definition
   with the config of each place referring to it. A ``python-re`` model using a pattern alias twice (a
   ``TypeAliasType``), a model holding such a model, or a recursive one, was accepted and ``^(a+)+$`` ran on
   Python's ``re`` with the model's value (0.3 s for 22 characters, doubling with each one more). The walk now
   follows each ``definition-ref`` to its definition under the engine where the reference is made, each once per
   engine (no loop on recursive models).
2. A tool with sensitive parameters whose input model cannot be built (fm's "refused INVALID" path) failed the call
   request with ``ToolDefinitionError``: recording the refusal redacts what was sent, ``Tool.withheld`` asks which
   names the schema declares, and that schema is the model that cannot be built. No call recorded, no audit event,
   a 500 for the client. A recorded INVALID call of any such tool could not be shown either (``displayed_arguments``,
   the API's and admin's call pages, exports: ``withheld_names`` read ``json_schema``). ``Tool.known_json_schema``
   (``None`` when it cannot be built) now answers those: every name counts as undeclared and is withheld.
3. (Minor) fm's exact ``multipleOf`` multiplied a huge integer by a float divisor's denominator: 23 integers of
   4,299 digits (the byte limit's most) against ``5e-324`` ``allOf``'d 2,000 times (a hostile schema: a remote
   server's, within its bounds) took 4.7 s, four times the same check against ``3.0``: an application cost about
   100 us where the validation budget charges a step (about 50 us), so its "a few seconds at most" did not hold.
   It now divides without a product (each ratio in lowest terms, the numerators and denominators divide): 1.1 s.

Checked and holding (tests below marked holding):

- ``backtracking_patterns`` over nested models (a function parameter's too, through its per-type adapter),
  discriminated unions, generic models, a pydantic dataclass's and a TypedDict's own config, a stdlib dataclass
  under a ``python-re`` model, compiled patterns (a compiled alias too), a ``python-re`` parent with a
  ``rust-regex`` child (not flagged: pydantic-core uses the child's config, measured), recursive models (no loop).
- ``multipleOf``: a divisor ``true``, ``0``, ``-0.0`` or negative is refused when the tool is built (metaschema);
  pydantic refuses ``multiple_of=0``; ``-0.0`` and ``0`` are multiples; ``2.0`` is a multiple of ``1``, ``4`` of
  ``2.0``; ``true`` is not a number.
- With one ``multipleOf`` per item the exact division is bounded by the arguments' byte limit: 23 integers of
  4,299 digits, 4 ms (found code); the exact answers match ``fractions.Fraction`` on 100,000 pairs (ints, floats,
  subnormals, 10**400, negative zero) after the change.
- A remote MCP server cannot make the 9,000-property schema check run again per call: an output schema is checked
  only once its listing hashes to the accepted (pinned) definition, and ``valid_schemas`` keeps it by digest; the
  listing fetched by a sync records, it does not check schemas.

Left (not changed here): one registered tool whose input model cannot be built (fm now counts a ``python-re``
model among them) makes ``GET /api/v1/tools/`` (for a non-operator) and every ``/api/v1/tools/export/<format>/``
answer 400 with its ``ToolDefinitionError`` for every caller, since the listing reads each tool's ``json_schema``
(seen here; a look-ahead tool did so before fm). E001 fails ``manage.py check`` and so ``migrate`` and
``runserver``, which keeps such a tool from a normal deploy; leaving it out of listings instead is a design choice
for the catalogue's owners.
"""

import dataclasses
import re
import time
from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Any, Generic, Literal, TypeVar

import pytest
from pydantic import BaseModel, ConfigDict, Field, with_config
from pydantic.dataclasses import dataclass as pydantic_dataclass
from typing_extensions import TypeAliasType, TypedDict

from tests.helpers import RequestCall, audit_text
from toolhub import registry
from toolhub.checks import check_tools
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import AuditEvent, CallStatus
from toolhub.selectors import displayed_arguments
from toolhub.tools.definition import Tool
from toolhub.tools.linear_keywords import _exact_multiple
from toolhub.tools.linear_patterns import backtracking_patterns

EVIL = r"^(a+)+$"
PYTHON_RE = ConfigDict(regex_engine="python-re")
RUST = ConfigDict(regex_engine="rust-regex")
ran: list[Any] = []

Slow = TypeAliasType("Slow", Annotated[str, Field(pattern=EVIL)])


class _AliasTwice(BaseModel):
    """A ``python-re`` model using a pattern alias twice: pydantic keeps the alias in ``definitions``."""

    model_config = PYTHON_RE
    a: Slow = "a"
    b: Slow = "a"


class _HoldingAliasTwice(BaseModel):
    """A default-engine model holding one: its field's refs still run on ``python-re`` (measured)."""

    inner: _AliasTwice = _AliasTwice()


class _RecursiveWithAlias(BaseModel):
    model_config = PYTHON_RE
    kids: list["_RecursiveWithAlias"] = []
    s: Slow = "a"
    t: Slow = "a"


class _HoldingRecursive(BaseModel):
    tree: _RecursiveWithAlias = _RecursiveWithAlias()


@pytest.mark.parametrize(
    ("model", "arguments"),
    [
        (_AliasTwice, {"a": "a" * 22 + "!"}),
        (_HoldingAliasTwice, {"inner": {"a": "a" * 22 + "!"}}),
        (_HoldingRecursive, {"tree": {"kids": [{"s": "a" * 22 + "!"}]}}),
    ],
)
def test_a_backtracking_pattern_in_a_shared_definition_is_refused(
    request_call: RequestCall, model: type[BaseModel], arguments: dict[str, Any]
) -> None:
    """Found: ``backtracking_patterns`` found nothing in these models (the alias sits in ``definitions``), so the tool
    was accepted and ``^(a+)+$`` ran on Python's ``re`` with what the model sent (0.3 s for 22 characters, doubling
    with each more character).

    Expect: the pattern found, the tool refused as fm refuses the others (``input_model``, E001), its call INVALID
    at once, nothing run.
    """
    assert backtracking_patterns(model.__pydantic_core_schema__) == [EVIL]
    tool = Tool.create("alias_tool", "T.", model, lambda value: ran.append(value))
    with pytest.raises(ToolDefinitionError, match="backtracking re"):
        tool.input_model  # noqa: B018 - building it is the check
    ran.clear()
    with registry.temporarily(tool):
        call = request_call("alias_tool", arguments)
        errors = [error for error in check_tools() if error.obj == "alias_tool"]
    assert call.status == CallStatus.INVALID and ran == []
    assert "cannot validate its arguments" in call.error
    assert [error.id for error in errors] == ["toolhub.E001"]


class _BrokenSensitive(BaseModel):
    model_config = PYTHON_RE
    pin: Annotated[str, Field(pattern=EVIL)] = ""


def _broken_tool(kind: str, sensitive: list[str]) -> Tool:
    if kind == "model":
        return Tool.create("broken", "T.", _BrokenSensitive, lambda value: ran.append(value), sensitive=sensitive)
    fields = {"pin": (Annotated[str, Field(pattern=r"^a+(?=b)")], "")}  # look-ahead: Rust's engine refuses it
    return Tool.create("broken", "T.", fields, lambda value: ran.append(value), sensitive=sensitive)


@pytest.mark.parametrize("kind", ["model", "look_ahead"])
def test_a_sensitive_tool_whose_model_cannot_be_built_records_its_refused_call(
    request_call: RequestCall, kind: str
) -> None:
    """Found: ``tool_call_request`` raised ``ToolDefinitionError`` for a tool with sensitive parameters whose model
    cannot be built (redacting the refused call's arguments asked the schema which names it declares): no call
    recorded, no audit event, the client answered 500.

    Expect: the call recorded INVALID with its ``call.requested`` and ``call.invalid`` events, nothing run, every
    value withheld (the PIN, and a misspelt ``PIN``), in the call, its error and its trail; the call shown.
    """
    tool = _broken_tool(kind, ["pin"])
    ran.clear()
    with registry.temporarily(tool):
        call = request_call("broken", {"pin": "4821-7730-SECRET", "PIN": "9911-SECRET"})
        shown = displayed_arguments(call)
    assert call.status == CallStatus.INVALID and ran == []
    assert "cannot validate its arguments" in call.error
    events = list(AuditEvent.objects.filter(call_id=call.id).order_by("id").values_list("event_type", flat=True))
    assert events == ["call.requested", "call.invalid"]
    kept = " ".join([audit_text(call), call.error, call.raw_arguments, str(call.arguments), str(shown)])
    assert "SECRET" not in kept
    assert "pin" in call.raw_arguments and "PIN" in call.raw_arguments  # the names stay, their values withheld


def test_a_refused_call_of_a_tool_whose_model_cannot_be_built_can_be_shown(request_call: RequestCall) -> None:
    """Found: ``displayed_arguments`` (the API's and admin's call pages, exports) raised ``ToolDefinitionError`` for
    a recorded call of a tool whose model cannot be built (``withheld_names`` read its ``json_schema``).

    Expect: shown, every value withheld (which names its schema declares is unknown).
    """
    tool = _broken_tool("look_ahead", [])
    with registry.temporarily(tool):
        call = request_call("broken", {"pin": "aab"})
        assert call.status == CallStatus.INVALID
        assert displayed_arguments(call) == {}  # nothing stored for a refused call
        call.arguments = {"pin": "aab"}  # as an operator's edit or an older row would hold it
        assert displayed_arguments(call) != {"pin": "aab"}
        assert "aab" not in str(displayed_arguments(call))


def test_the_exact_multiple_of_a_huge_integer_costs_what_its_step_charges() -> None:
    """Found: the exact division multiplied the integer (4,299 digits) by the float divisor's denominator (324
    digits for ``5e-324``) and took about 100 us an application, charged one step (about 50 us): 46,000 applications
    within the budget took 4.7 s of a web process, four times the same check against ``3.0`` (1.2 s; measured by this
    review, 5.5 times on the code as found, about once after: timings are the benchmarks', not a test's).

    Expect: no product: each ratio in lowest terms, the quotient is an integer exactly when the divisor's numerator
    divides the value's and the value's denominator the divisor's; the same answers as exact fractions.
    """
    huge = int("9" * 4299)
    values: list[int | float] = [huge, -huge, 0, -0.0, 1, 2, 3, 4.0, 0.07, 0.3, 1e-30, 5e-324, 1e300, 9007199254740993]
    divisors: list[int | float] = [1, 2, 3, 7, 0.01, 0.1, 0.5, 2.0, 3.0, 1e-30, 5e-324, 1e300]
    for value in values:
        for divisor in divisors:
            exact = (_fraction(value) / _fraction(divisor)).denominator == 1
            assert _exact_multiple(value, divisor) is exact, (value, divisor)


def _fraction(number: int | float) -> Fraction:
    return Fraction(number) if type(number) is int else Fraction(Decimal(repr(number)))


# Checked and holding.

T = TypeVar("T")


class _Child(BaseModel):
    model_config = PYTHON_RE
    kind: Literal["a"] = "a"
    x: Annotated[str, Field(pattern=EVIL)] = ""


class _Other(BaseModel):
    kind: Literal["b"] = "b"


class _Union(BaseModel):
    u: Annotated[_Child | _Other, Field(discriminator="kind")]


class _Generic(BaseModel, Generic[T]):
    model_config = PYTHON_RE
    v: T
    x: Annotated[str, Field(pattern=EVIL)] = ""


class _HoldingGeneric(BaseModel):
    g: _Generic[int]


@with_config(PYTHON_RE)
class _Typed(TypedDict):
    x: Annotated[str, Field(pattern=EVIL)]


class _HoldingTyped(BaseModel):
    t: _Typed


@pydantic_dataclass(config=PYTHON_RE)
class _Data:
    x: Annotated[str, Field(pattern=EVIL)] = ""


class _HoldingData(BaseModel):
    d: _Data


@dataclasses.dataclass
class _PlainData:
    x: Annotated[str, Field(pattern=EVIL)] = ""


class _PythonReHoldingPlain(BaseModel):
    model_config = PYTHON_RE
    d: _PlainData


CompiledAlias = TypeAliasType("CompiledAlias", Annotated[str, Field(pattern=re.compile(EVIL))])


class _CompiledTwice(BaseModel):
    a: CompiledAlias = "a"
    b: CompiledAlias = "a"


class _Recursive(BaseModel):
    model_config = PYTHON_RE
    name: Annotated[str, Field(pattern=EVIL)] = ""
    kids: list["_Recursive"] = []


class _RustChild(BaseModel):
    model_config = RUST
    x: Annotated[str, Field(pattern=EVIL)] = ""


class _PythonReParent(BaseModel):
    model_config = PYTHON_RE
    c: _RustChild
    again: _RustChild


class _RustAliasTwice(BaseModel):
    a: Slow = "a"
    b: Slow = "a"


@pytest.mark.parametrize(
    "model",
    [_Union, _HoldingGeneric, _HoldingTyped, _HoldingData, _PythonReHoldingPlain, _CompiledTwice, _Recursive],
)
def test_backtracking_patterns_are_found_wherever_pydantic_puts_them(model: type[BaseModel]) -> None:
    """Holding: a pattern run on ``re`` is found in a discriminated union, a generic model, a TypedDict's or a
    pydantic dataclass's own config, a stdlib dataclass under a ``python-re`` model, a compiled alias used twice, a
    recursive model (no loop)."""
    assert backtracking_patterns(model.__pydantic_core_schema__) == [EVIL]


@pytest.mark.parametrize("model", [_PythonReParent, _RustAliasTwice])
def test_patterns_run_on_rust_are_not_flagged(model: type[BaseModel]) -> None:
    """Holding: a ``rust-regex`` child of a ``python-re`` parent (pydantic-core uses the child's own config: its
    pattern is linear, measured), and an alias used twice on the default engine, are not flagged; they validate
    10,000 characters at once."""
    assert backtracking_patterns(model.__pydantic_core_schema__) == []
    value = "a" * 9_999 + "!"
    data = {"c": {"x": value}, "again": {"x": value}} if model is _PythonReParent else {"a": value}
    started = time.monotonic()
    with pytest.raises(ValueError, match="String should match pattern"):
        model.model_validate(data)
    assert time.monotonic() - started < 1


def _number_tool(multiple: Any) -> Tool:
    schema = {"properties": {"n": {"type": "number", "multipleOf": multiple}}}
    return Tool.create("number", "T.", schema, lambda value: value)


@pytest.mark.parametrize("divisor", [True, 0, 0.0, -0.0, -2])
def test_multiple_of_divisors_that_are_not_positive_numbers_are_refused_when_built(divisor: Any) -> None:
    """Holding: ``multipleOf`` ``true``, ``0``, ``-0.0``, ``-2``: the tool is refused when built (the metaschema), so
    the exact division never meets a zero divisor."""
    with pytest.raises(ToolDefinitionError, match="not valid JSON Schema"):
        _number_tool(divisor)


@pytest.mark.parametrize(
    ("divisor", "value", "multiple"),
    [(1, 2.0, True), (2.0, 4, True), (0.5, -0.0, True), (3, 0, True), (2.0, 3, False), (1, 2.5, False)],
)
def test_multiple_of_mixes_ints_and_floats_exactly(divisor: Any, value: Any, multiple: bool) -> None:
    """Holding: integers written as floats, ints against float divisors, negative zero: divided exactly."""
    assert _number_tool(divisor).is_valid_arguments({"n": value}) is multiple


def test_multiple_of_ignores_booleans() -> None:
    """Holding: ``true`` is no number to ``multipleOf`` (``type`` decides); against ``type: number`` it is refused."""
    schema = {"properties": {"n": {"multipleOf": 2}, "m": {"type": "number", "multipleOf": 2}}}
    tool = Tool.create("bools", "T.", schema, lambda value: value)
    assert tool.is_valid_arguments({"n": True})
    assert not tool.is_valid_arguments({"m": True})


def _takes_a_model_with_an_alias(order: _HoldingAliasTwice) -> str:
    """A @tool function whose parameter is such a model: checked through the per-type adapter and the built model."""
    return "ok"


def test_a_function_parameter_holding_a_backtracking_definition_is_refused() -> None:
    """Holding (with finding 1's fix): a function tool's parameter typed as such a model is named by
    ``manage.py check`` (from the per-type ``TypeAdapter``'s core schema, no model built) and its model refused."""
    tool = Tool.from_function(_takes_a_model_with_an_alias, name="alias_param", description="T.")
    with registry.temporarily(tool):
        errors = [error for error in check_tools() if error.obj == "alias_param"]
    assert [error.id for error in errors] == ["toolhub.E001"]
    with pytest.raises(ToolDefinitionError, match="backtracking re"):
        tool.input_model  # noqa: B018 - building it is the check
