"""Review 2026-12-06 (ey): did this session's changes slow the governed call? (performance A/B, issue 10)

Measured on the shared 2-core machine (load average 2.1-9.4: other sessions' work), 98885c5 (before
the session's hot-path changes) against f7f7cd1 (main as found), each side a checkout of its own, interleaved.

1. The governed call: no slowdown beyond noise. ``python -m benchmarks.ab <98885c5> <f7f7cd1> --processes 5
   --rounds 350`` (876 s, load 2.4-9.1), median of each side's 5 process medians (range):
   governed_vs_bare 2.10x (1.93-2.63) before, 2.01x (1.96-2.09) after; governed_vs_floor 1.19x (1.10-1.42),
   1.20x (1.14-1.24); atomic_vs_floor 1.42x (1.24-1.57), 1.46x (1.26-1.50). Paired process by process (after /
   before), the medians are 0.98 (governed_vs_bare), 1.01 (governed_vs_floor), 1.00 (atomic_vs_floor). Statements
   per call 3 (governed) and 4 (atomic) on both sides, the same text. Again once the machine was quieter (5
   processes, 350 rounds, load 2.8-3.5): governed_vs_bare 2.68x (2.30-2.87), 2.60x (2.18-2.85); governed_vs_floor
   1.47x (1.41-1.55), 1.42x (1.25-1.54); atomic_vs_floor 1.59x (1.56-1.71), 1.50x (1.41-1.70); paired medians
   0.98, 0.97, 0.95. With the fix of finding 3 (4 processes each, load 2.5-3.3): against 98885c5 governed_vs_floor
   1.45x, 1.46x (paired 1.01), atomic_vs_floor 1.62x, 1.63x (paired 1.03); against f7f7cd1 1.49x, 1.49x (paired
   1.01), 1.63x, 1.63x (paired 1.00); a first such run of 3 processes at load 4.0-5.3 read 1.33x/1.44x (paired
   1.08), within either side's range (1.22-1.51, 1.32-1.53) and not seen again. Absolute times followed the
   machine (the bare call's insert 1.1 ms to 18 ms from one process to the next), so only the ratios compare. The
   session's other hot paths are off this call or once per connection: the token stamp is REST/MCP only and read
   with the token (one join, no statement while within its five minutes); ``connection_chunked_reads`` runs once
   per connection and only wraps ``chunked_cursor`` (``iterator()``); metaschema checks are at build time.
2. Argument validation per call, a ``@tool`` function (``benchmarks.bench_tool_layer``'s ``quote``: pydantic, 4
   parameters): unchanged, 2.56 us before, 2.53 us after (CPU time, median of 8 interleaved processes each; paired
   ratio 0.98, and 0.98 and 1.02 in two more series of 8; 0.95 in a quiet series of 6, load 2.1-2.6). No code on
   that path changed.
3. Found (fixed): argument validation per call of a JSON-schema tool (``Tool.create``, a remote MCP tool: six
   arguments, a pattern, a format, a short enum, a short unique array; 24 keywords applied) was 1.20-1.27x slower:
   73.0 us before, 92.3 us after (paired ratio 1.27, range 1.04-1.40, 8 interleaved rounds, load 6.8-9.4; two more
   series 1.27 and 1.20). Counting (cProfile) gave 520 Python calls per check before, 714 after: ``read_units``
   twice per keyword applied (47 calls), each an ``isinstance`` against ``list | tuple | Mapping`` whose ``Mapping``
   ABC check runs for every scalar, and a ``_spend`` call per charge. ``counted_keywords`` now charges the exact types
   JSON decodes to by their type, inline (``read_units`` for anything else: subclasses, other mappings), with the
   same units: 540 calls per check, 1.08x and 1.12x of before in two interleaved series of 8 (from 1.27x and 1.20x
   in the same series); in a quiet series of 6 (load 2.1-2.6) 63.8 us before, 78.6 us as found (1.23x), 68.3 us
   with the fix (1.07x). What is left (about 20 calls) is the walk charges of ``enum``/``uniqueItems`` and the
   pattern match charge, each made once per application; they bound real work and stay.

Seen, since closed by review ev: a token used in turn over REST and MCP was stamped (one upsert) at every change
of channel; a stamp within its five minutes now writes nothing whatever the channel.

Each test states what was found ("Found: ...") and what is expected ("Expect: ...").
"""

from collections import OrderedDict
from typing import Any

import pytest
from pydantic import ValidationError

from toolhub.tools import validation_budget
from toolhub.tools.definition import Tool
from toolhub.tools.validation_budget import UNITS_PER_STEP, counted_keywords, read_units

#: A typical JSON-schema tool's arguments: scalars, a short enum, a short array of unique strings.
_SCHEMA = {
    "type": "object",
    "properties": {
        "customer_id": {"type": "string", "pattern": "^C-[0-9]+$", "maxLength": 40},
        "amount": {"type": "number", "exclusiveMinimum": 0},
        "day": {"type": "string", "format": "date"},
        "express": {"type": "boolean"},
        "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 10, "uniqueItems": True},
    },
    "required": ["customer_id", "amount", "day"],
    "additionalProperties": False,
}
_ARGUMENTS = {
    "customer_id": "C-1",
    "amount": 12.5,
    "day": "2025-01-31",
    "express": True,
    "currency": "EUR",
    "tags": ["a", "b", "c"],
}


def _tool(name: str, schema: dict[str, Any]) -> Tool:
    return Tool.create(name, "Quotes a price.", schema, lambda arguments, ctx: None, allow_any=True)


def test_a_typical_tools_scalar_arguments_are_charged_without_a_generic_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: charging each keyword for what it reads called ``read_units`` twice per keyword applied, each an
    ``isinstance`` against ``list | tuple | Mapping`` (the ``Mapping`` ABC's check for every scalar): for a typical
    tool (six arguments, 24 keywords applied) 47 calls per check, most of why its argument validation took 1.20-1.27x
    its time before the charge (finding 3 above).

    Expect: the exact types JSON decodes to (object, array, string, number, boolean, null), as instance or as a
    keyword's value, are charged by their type without calling ``read_units``: same units (next test), no call.
    """
    read: list[Any] = []
    original = validation_budget.read_units

    def counting(value: Any, *, strings: bool = True) -> int:
        read.append(value)
        return original(value, strings=strings)

    monkeypatch.setattr(validation_budget, "read_units", counting)
    tool = _tool("typical_quote", _SCHEMA)
    assert tool.validate_arguments(_ARGUMENTS) == _ARGUMENTS
    assert read == []


@pytest.mark.parametrize(
    ("value", "instance"),
    [
        ("string", 7),
        (3, 2.5),
        (True, None),
        (0, False),
        ("^a+$", "a" * 95),
        ("^a+$", type("Text", (str,), {})("b" * 40)),
        (["a", "b", "c"], {"a": 1, "b": 2}),
        ({"x": {}, "y": {}}, [1, 2, 3, 4]),
        ({"x": {}}, OrderedDict(a=1, b=2, c=3)),
        ([1, 2], (1, 2, 3)),
        (type("Count", (int,), {})(4), type("Flag", (float,), {})(1.5)),
    ],
)
@pytest.mark.parametrize("name", ["minimum", "enum"])
def test_each_keyword_is_charged_what_read_units_states(name: str, value: Any, instance: Any) -> None:
    """Found (holds; regression for the fix above): charging by type changes no charge, so the budget refuses
    exactly what it refused.

    Expect: a keyword applied costs a step plus ``read_units`` of its instance and, unless read once per validator
    (``enum``), of its own value without its characters, for every kind of value, subclasses and other
    mappings included.
    """
    keyword = counted_keywords({name: lambda validator, value, instance, schema: iter(())})[name]
    with validation_budget.validation_budget(steps=10):
        remaining = validation_budget._remaining.get()
        assert remaining is not None
        before = remaining[0]
        assert list(keyword(None, value, instance, {})) == []
        spent = before - remaining[0]
    expected = UNITS_PER_STEP + read_units(instance) + (0 if name == "enum" else read_units(value, strings=False))
    assert spent == expected


def test_the_budget_still_refuses_scalar_heavy_checks() -> None:
    """Found: (regression) charging scalars by their type must keep their step: eight keywords applied to each of
    7,000 numbers are 56,000 steps, past the 50,000.

    Expect: that check is refused as spent; the same rule on 1,000 numbers passes.
    """
    item = {
        "type": "number",
        "minimum": 0,
        "maximum": 100,
        "exclusiveMinimum": -1,
        "exclusiveMaximum": 101,
        "multipleOf": 0.5,
        "not": {"type": "string"},
    }
    tool = _tool("scalar_rules", {"type": "object", "properties": {"ns": {"type": "array", "items": item}}})
    with pytest.raises(ValidationError, match="send fewer items"):
        tool.validate_arguments({"ns": [12.5] * 7_000})
    assert tool.validate_arguments({"ns": [12.5] * 1_000}) == {"ns": [12.5] * 1_000}
