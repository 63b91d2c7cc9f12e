"""Review 2026-12-06 (fm): argument validation cost and JSON Schema handling, probed as a hostile model and developer.

Each finding's test fails on the code as found (main at 3fc511b) and states what was found ("Found: ...") and what
is expected ("Expect: ...").

Findings (1-3: ``multipleOf`` of a JSON-schema tool: ``Tool.create`` with a schema, a remote MCP tool, an output
schema):

1. A quotient that underflows to 0 passed: jsonschema divides in floating point when the divisor is a float, so
   ``5e-324`` was a multiple of ``4.0`` and ``1e-30`` of ``1e300``: a value no multiple reached the tool.
2. An integer past 2**53 was rounded before dividing: ``9007199254740993`` (odd) passed ``multipleOf: 2.0`` and
   reached the tool; and ``10**400`` (``json`` reads it exactly) failed ``multipleOf: 0.5`` though it is one.
3. The floating-point quotient refused multiples the model cannot write otherwise: with ``multipleOf: 0.01`` (cents)
   ``0.07``, ``0.29``, ``0.57``... (1,363 of the 10,000 amounts 0.00-99.99) were refused as "Input should satisfy
   multipleOf 0.01", an error the model cannot act on. ``multipleOf`` now divides exactly, each number as its JSON
   text reads (a float as its shortest decimal form); no slower than jsonschema's (5,000 items, 40-75 ms either way).
4. A pydantic-typed tool's pattern ran on Python's backtracking ``re`` when its pydantic model asked for
   it (``regex_engine="python-re"``) or the pattern was a compiled ``re.Pattern``: ``^(a+)+$`` against 27 characters a
   model sent held the web process 9.5 s (hours for 40), though the README says patterns run in linear time. Such a
   tool is now refused: ``manage.py check`` names it and the pattern (E001), its calls are refused INVALID at once.
5. A tool whose input model cannot be built (a look-ahead pattern Rust's engine refuses) let ``ToolDefinitionError``
   out of ``tool_call_request`` (the request failed, no call recorded): now the call is recorded INVALID, the model
   told the tool cannot validate its arguments, the cause logged.
6. (Minor, no path found to it: JSON intake refuses it first.) ``NaN`` checked by a schema's ``multipleOf`` from
   Python raised jsonschema's ``ValueError`` out of ``Tool.validate_arguments``; now a failed check.

Checked and holding (tests below marked holding):

- ``NaN``/``Infinity`` in the JSON text, ``"NaN"``/``"inf"`` strings to a ``float`` or ``Decimal`` parameter: refused
  with a clear message, nothing executed. Numbers as strings against ``type: number``: refused (no coercion).
- An integer of more than 4,300 digits: "an integer with more than 4300 digits" (no interpreter advice, no 500); one
  of 10**6 digits is refused by the byte limit first; the same as a string to an ``int`` parameter: pydantic's
  "exceeded maximum size".
- Duplicate keys: the last one wins, once, and what is validated is what is stored and run.
- Lone surrogates and NUL characters in values and keys: refused as unstorable; nesting past 100: refused before
  any recursion; a key past ``MAX_STRING_LENGTH``: refused without quoting it.
- A sensitive mapping's key (a card number) in a schema error's location is replaced by ``[secret]``; a
  ``pattern``/``propertyNames`` failure names the rule, never the value.
- ReDoS: ``(a+)+$`` against 10,000 ``a`` s and a ``!`` is matched in linear time (Rust engine), in a JSON-schema
  tool and on pydantic's default engine; a backreference is refused when the tool is built; a ``$ref`` cycle too.
- A recursive (tree) schema checks a value nested 99 deep, the most the nesting limit lets through, without
  ``RecursionError``.

Left (not a finding here): a pydantic-typed parameter's ``Field(multiple_of=4.0)`` passes ``5e-324`` as well
(pydantic-core's relative tolerance, upstream); a plain ``Decimal`` parameter accepts ``"1e999999999"`` (pydantic),
on which a tool's ``int(amount)`` would build a billion-digit integer; give it ``max_digits`` or bounds. A hand-written
schema of 9,000 properties still takes seconds to build the first time in a process (jsonschema's metaschema check,
a ``$dynamicRef`` resolved per subschema; kept by ``valid_schemas`` after that): not changed here.
"""

import re
import time
from decimal import Decimal
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tests.helpers import RequestCall, audit_text
from toolhub import registry
from toolhub.arguments import ArgumentsRefused, parse_arguments, storable_arguments, validate_arguments
from toolhub.checks import check_tools
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import CallStatus
from toolhub.tools.definition import Tool

ran: list[dict[str, Any]] = []


def _record(arguments: dict[str, Any]) -> dict[str, Any]:
    ran.append(arguments)
    return arguments


def _create(schema: dict[str, Any], name: str = "t", **options: Any) -> Tool:
    return Tool.create(name, "T.", schema, _record, **options)


def _intake(tool: Tool, raw: str) -> dict[str, Any]:
    """What the pipeline does with a model's arguments before anything runs (``prepared_version``)."""
    return storable_arguments(tool, validate_arguments(tool, parse_arguments(raw, tool)))


def _number(multiple: float | int) -> Tool:
    return _create({"properties": {"n": {"type": "number", "multipleOf": multiple}}})


@pytest.mark.parametrize(("value", "multiple"), [("5e-324", 4.0), ("1e-30", 1e300), ("1e-320", 100.0)])
def test_multiple_of_a_quotient_underflowing_to_zero_is_refused(value: str, multiple: float) -> None:
    """Found: ``5e-324`` passed ``multipleOf: 4.0``, ``1e-30`` passed ``multipleOf: 1e300`` (quotient 0.0); ``1e-320``
    of ``100.0`` (a subnormal quotient, not 0) was refused and still is.

    Expect: refused as not a multiple (a nonzero multiple is at least the divisor), naming the rule.
    """
    with pytest.raises(ArgumentsRefused, match="n: Input should satisfy multipleOf"):
        _intake(_number(multiple), f'{{"n": {value}}}')


def test_multiple_of_an_integer_past_float_precision_is_divided_exactly() -> None:
    """Found: ``9007199254740993`` (odd) passed ``multipleOf: 2.0`` (rounded to 2**53 first); ``10**400`` failed
    ``multipleOf: 0.5``.

    Expect: the odd one refused, ``10**400`` and ``2**53 + 2`` accepted as the exact integers they are.
    """
    tool = _number(2.0)
    with pytest.raises(ArgumentsRefused, match="n: Input should satisfy multipleOf 2.0"):
        _intake(tool, '{"n": 9007199254740993}')
    assert _intake(tool, '{"n": 9007199254740994}') == {"n": 9007199254740994}
    assert _intake(_number(0.5), '{"n": 1' + "0" * 400 + "}") == {"n": 10**400}


def test_multiple_of_cents_accepts_every_amount_in_cents() -> None:
    """Found: with ``multipleOf: 0.01``, 0.07, 0.29, 0.57... (1,363 of 0.00-99.99) were refused as not multiples.

    Expect: every amount written in cents accepted; one with a third decimal refused. Bounded: the exact check of
    20 integers of 4,299 digits against ``1.2345678901234567e-308`` stays within a second.
    """
    tool = _number(0.01)
    amounts = [round(cents / 100, 2) for cents in range(10_000)]
    refused = []
    for amount in amounts:
        try:
            _intake(tool, f'{{"n": {amount!r}}}')
        except ArgumentsRefused:
            refused.append(amount)
    assert refused == []
    for value in ("0.071", "1e-3", "0.3000000000000001"):
        with pytest.raises(ArgumentsRefused, match="multipleOf 0.01"):
            _intake(tool, f'{{"n": {value}}}')
    assert _intake(_number(0.1), '{"n": 0.3}') == {"n": 0.3}

    many = _create(
        {"properties": {"xs": {"type": "array", "items": {"type": "number", "multipleOf": 1.2345678901234567e-308}}}}
    )
    started = time.monotonic()
    with pytest.raises(ArgumentsRefused, match="multipleOf"):
        _intake(many, '{"xs": [' + ",".join(["9" * 4299] * 20) + "]}")
    assert time.monotonic() - started < 1


def test_an_underflowing_multiple_is_refused_through_the_governed_call(request_call: RequestCall) -> None:
    """Found: a governed call with ``{"quantity": 5e-324}`` (``multipleOf: 4.0``) ran the tool with it.

    Expect: the call is INVALID, the tool never runs, the error names the rule.
    """
    tool = _create({"properties": {"quantity": {"type": "number", "multipleOf": 4.0}}}, name="order_boxes")
    ran.clear()
    with registry.temporarily(tool):
        call = request_call("order_boxes", '{"quantity": 5e-324}')
    assert call.status == CallStatus.INVALID
    assert "quantity: Input should satisfy multipleOf 4.0" in call.error
    assert ran == []


# Checked and holding.


@pytest.mark.parametrize("text", ['{"n": NaN}', '{"n": Infinity}', '{"n": -Infinity}'])
def test_non_finite_numbers_are_refused_clearly(text: str) -> None:
    """Holding: ``NaN``/``Infinity`` (which ``json`` accepts) are refused before validation, naming where."""
    with pytest.raises(ArgumentsRefused, match="n is not a finite number"):
        _intake(_number(4.0), text)


def test_non_finite_numbers_as_strings_are_refused_for_typed_parameters() -> None:
    """Holding: ``"NaN"``/``"inf"`` to a ``float`` (pydantic coerces) or a ``Decimal``: refused, nothing kept."""
    tool = Tool.create("typed", "T.", {"x": (float, 0.0), "d": (Decimal, Decimal(0))}, _record)
    for raw, message in (
        ('{"x": "NaN"}', "x is not a finite number"),
        ('{"x": "inf"}', "x is not a finite number"),
        ('{"d": "NaN"}', "d: Input should be a finite number"),
        ('{"d": "-Infinity"}', "d: Input should be a finite number"),
    ):
        with pytest.raises(ArgumentsRefused, match=message):
            _intake(tool, raw)


def test_numbers_as_strings_are_not_coerced_by_a_schema() -> None:
    """Holding: ``"4"`` against ``type: number`` is refused (a JSON-schema tool does not coerce)."""
    with pytest.raises(ArgumentsRefused, match="n: Input should be of type number"):
        _intake(_number(4.0), '{"n": "4"}')


def test_huge_integers_get_a_clear_bounded_error() -> None:
    """Holding: 4,301 digits: "an integer with more than 4300 digits", no advice to call ``sys``; 10**6 digits: the
    byte limit; 4,301 digits as a string to an ``int``: pydantic's "exceeded maximum size"."""
    tool = Tool.create("ints", "T.", {"i": (int, 0)}, _record)
    with pytest.raises(ArgumentsRefused, match="an integer with more than 4300 digits") as refused:
        _intake(tool, '{"i": ' + "1" * 4301 + "}")
    assert "set_int_max_str_digits" not in str(refused.value)
    with pytest.raises(ArgumentsRefused, match="larger than 100000 bytes"):
        _intake(tool, '{"i": ' + "1" * 10**6 + "}")
    with pytest.raises(ArgumentsRefused, match="exceeded maximum size"):
        _intake(tool, '{"i": "' + "1" * 4301 + '"}')


def test_duplicate_keys_validate_what_is_stored() -> None:
    """Holding: ``{"n": 4, "n": 5}``: the last wins once; what is validated is what is stored (and run)."""
    tool = _number(4.0)
    with pytest.raises(ArgumentsRefused, match="multipleOf 4.0"):
        _intake(tool, '{"n": 4, "n": 5}')
    assert _intake(tool, '{"n": 5, "n": 8}') == {"n": 8}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"n": "\\ud800"}', "n contains an invalid character"),
        ('{"n\\u0000": 1}', "a key contains a NUL character"),
        ('{"n": ' + "[" * 101 + "]" * 101 + "}", "nested deeper than 100 levels"),
        ('{"' + "k" * 10_001 + '": 1}', "a key is longer than 10000 characters"),
    ],
)
def test_unstorable_or_deep_values_are_refused_clearly(text: str, message: str) -> None:
    """Holding: lone surrogates, NUL characters, deep nesting, huge keys: refused with a bounded message."""
    with pytest.raises(ArgumentsRefused, match=message) as refused:
        _intake(_create({"properties": {}}), text)
    assert len(str(refused.value)) < 300


def test_sensitive_keys_and_values_are_not_echoed_in_schema_errors(request_call: RequestCall) -> None:
    """Holding: a card number as a sensitive mapping's key, in an error's location, reads ``[secret]``; a pattern
    failure of a sensitive PIN names the rule only; neither reaches the call's error or its audit trail."""
    schema = {
        "properties": {
            "cards": {"type": "object", "additionalProperties": {"type": "integer"}},
            "pin": {"type": "string", "pattern": "^[0-9]{4}$"},
        },
        "additionalProperties": False,
    }
    tool = _create(schema, name="pay_cards", sensitive=["cards", "pin"])
    with registry.temporarily(tool):
        call = request_call("pay_cards", '{"cards": {"4111111111111111": "x"}, "pin": "98765"}')
    assert call.status == CallStatus.INVALID
    assert "cards.[secret]: Input should be of type integer" in call.error
    assert "pin: Input should satisfy pattern" in call.error
    for secret in ("4111111111111111", "98765"):
        assert secret not in call.error and secret not in audit_text(call)


def test_patterns_run_in_linear_time_and_unbounded_ones_are_refused() -> None:
    """Holding: ``(a+)+$`` on 50,000 ``a`` s and ``!``: linear (Rust engine); a backreference and a ``$ref`` cycle
    are refused when the tool is built."""
    tool = _create({"properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}})
    started = time.monotonic()
    with pytest.raises(ArgumentsRefused, match="s: Input should satisfy pattern"):
        _intake(tool, '{"s": "' + "a" * 9_999 + '!"}')
    assert time.monotonic() - started < 1
    with pytest.raises(ToolDefinitionError, match="not supported"):
        _create({"properties": {"s": {"type": "string", "pattern": "^(a)\\1$"}}})
    with pytest.raises(ToolDefinitionError, match="refers to itself"):
        _create({"properties": {"s": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"$ref": "#/$defs/a"}}})


def test_a_pydantic_decimal_keeps_its_digit_limits() -> None:
    """Holding: ``Field(max_digits=10, decimal_places=2)`` refuses ``"1e999999999"`` and ``"0.001"`` at once."""
    tool = Tool.create(
        "dec", "T.", {"d": (Annotated[Decimal, Field(max_digits=10, decimal_places=2)], Decimal(0))}, _record
    )
    for value in ("1e999999999", "0.001"):
        started = time.monotonic()
        with pytest.raises(ArgumentsRefused, match="d: "):
            _intake(tool, f'{{"d": "{value}"}}')
        assert time.monotonic() - started < 1


def test_validation_errors_stay_pydantic_errors_for_a_direct_check() -> None:
    """Holding: ``Tool.validate_arguments`` raises ``ValidationError`` (not ``OverflowError``) for a huge integer."""
    with pytest.raises(ValidationError, match="multipleOf"):
        _number(0.3).validate_arguments({"n": 10**4000 + 1})


class _PythonRe(BaseModel):
    """A developer's input model asking pydantic for Python's ``re`` (look-around support, say)."""

    model_config = ConfigDict(regex_engine="python-re")
    code: Annotated[str, Field(pattern=r"^(a+)+$")] = ""


def _compiled_pattern_tool(code: Annotated[str, Field(pattern=re.compile(r"^(a+)+$"))]) -> str:
    """A @tool function whose pattern is a compiled ``re.Pattern`` (pydantic-core then matches with ``re``)."""
    ran.append({"code": code})
    return code


@pytest.mark.parametrize("make", ["model", "compiled"])
def test_a_pydantic_pattern_matched_by_backtracking_re_is_refused(request_call: RequestCall, make: str) -> None:
    """Found: a pydantic-typed tool whose pattern ran on Python's ``re`` (``regex_engine="python-re"`` or a compiled
    ``re.Pattern``) took 9.5 s for 27 characters a model sent (``^(a+)+$``; hours for 40), in the web process.

    Expect: the call refused at once (INVALID, nothing ran, the model told the tool cannot validate, no pattern
    quoted), the cause logged; ``manage.py check`` names the tool and the pattern (E001).
    """
    if make == "model":
        tool = Tool.create("check_code", "T.", _PythonRe, lambda arguments: ran.append({}))
    else:
        tool = Tool.from_function(_compiled_pattern_tool, name="check_code", description="T.")
    ran.clear()
    started = time.monotonic()
    with registry.temporarily(tool):
        call = request_call("check_code", {"code": "a" * 28 + "!"})
        errors = [error for error in check_tools() if error.obj == "check_code"]
    assert time.monotonic() - started < 5
    assert call.status == CallStatus.INVALID and ran == []
    assert "cannot validate its arguments" in call.error and "(a+)" not in call.error
    assert [error.id for error in errors] == ["toolhub.E001"]
    assert "'^(a+)+$' would be matched by Python's backtracking re" in errors[0].msg


def test_a_tool_whose_model_cannot_be_built_refuses_its_calls(request_call: RequestCall) -> None:
    """Found: a tool whose input model cannot be built (a look-ahead pattern Rust's engine refuses) let
    ``ToolDefinitionError`` out of ``tool_call_request``: the request failed, no call recorded.

    Expect: the call recorded INVALID, nothing ran, a bounded message without the developer's details.
    """
    tool = Tool.create("look_ahead", "T.", {"s": (Annotated[str, Field(pattern=r"^a+(?=b)")], "")}, _record)
    ran.clear()
    with registry.temporarily(tool):
        call = request_call("look_ahead", {"s": "aab"})
    assert call.status == CallStatus.INVALID and ran == []
    assert call.error == (
        "Tool 'look_ahead' cannot validate its arguments (an error in its definition, logged for its developers); "
        "nothing was executed."
    )


def test_patterns_on_the_default_engine_are_not_flagged() -> None:
    """Holding: a str pattern on pydantic's default engine (Rust), a model's and a function's, builds and validates."""

    class Plain(BaseModel):
        code: Annotated[str, Field(pattern=r"^(a+)+$")] = ""

    tool = Tool.create("plain", "T.", Plain, lambda arguments: arguments)
    started = time.monotonic()
    with pytest.raises(ArgumentsRefused, match="code: String should match pattern"):
        _intake(tool, '{"code": "' + "a" * 9_999 + '!"}')
    assert time.monotonic() - started < 1
    from toolhub.tools.linear_patterns import backtracking_patterns  # (new with the fix; the test held before it)

    assert backtracking_patterns(tool.input_model.__pydantic_core_schema__) == []


def test_a_recursive_schema_checks_arguments_nested_to_the_limit() -> None:
    """Holding: a tree schema (``$ref`` under ``items``/``additionalProperties``, an ``allOf`` per level) checks a
    value nested 99 deep (the most the nesting limit lets through) without ``RecursionError``, in well under a second.
    """
    node = {"type": "array", "items": {"allOf": [{"$ref": "#/$defs/node"}, {"not": {"type": "string"}}]}}
    tool = _create({"properties": {"t": {"$ref": "#/$defs/node"}}, "$defs": {"node": node}})
    started = time.monotonic()
    assert _intake(tool, '{"t": ' + "[" * 99 + "]" * 99 + "}")["t"]
    with pytest.raises(ArgumentsRefused, match="nested deeper than 100 levels"):
        _intake(tool, '{"t": ' + "[" * 100 + "]" * 100 + "}")
    with pytest.raises(ArgumentsRefused, match="does not satisfy the schema's 'not' rule"):
        _intake(tool, '{"t": ' + "[" * 98 + '"x"' + "]" * 98 + "}")
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_non_finite_number_from_python_fails_multiple_of(value: float) -> None:
    """Found (no path found carrying one there: JSON intake refuses it first): ``NaN`` checked by a schema's
    ``multipleOf`` from Python raised jsonschema's ``ValueError`` (cannot convert float NaN to integer).

    Expect: a failed check, as a ``ValidationError`` naming the rule.
    """
    with pytest.raises(ValidationError, match="multipleOf 4.0"):
        _number(4.0).validate_arguments({"n": value})
