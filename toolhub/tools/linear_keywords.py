"""JSON Schema keywords whose jsonschema implementation a hostile value can stall or crash, redone bounded.

``uniqueItems``: jsonschema compares unhashable items (objects, arrays) pair by pair: 3,000 small objects a model
sends (30 KB) took a minute of a web process. Here each item becomes a hashable canonical form, once.

``enum`` and ``const``: jsonschema compares the value with each member in turn and writes the whole enum (or
const) into each error: 10,000 items against an enum of 4,000 names took 42 s and 1.3 GB, one budget step per item.
Here the members' canonical forms are a set, made once per validator; an error names the rule, not the members.

Each walk of the value (its canonical form) is charged to the validation budget, a unit a node (``spend``): one step
per keyword applied was 80 s for 4,000 ``enum`` s of an ``allOf`` applied to one 130 KB array.

``multipleOf``: jsonschema divides in floating point whenever the divisor is a float. An integer past a float's
range (a JSON number of 400 digits, which ``json`` reads exactly) raised ``OverflowError`` out of validation; a
quotient that underflows to 0 passed (``5e-324`` a multiple of ``4.0``, ``1e-30`` of ``1e300``); an integer past
2**53 was rounded first (``9007199254740993``, odd, a multiple of ``2.0``). Here the numbers divide exactly, as the
JSON text writes them (a float as its shortest decimal form): ``0.3`` is a multiple of ``0.1``, as a model reads it.
"""

import math
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from jsonschema.exceptions import ValidationError as SchemaViolation

from toolhub.tools.validation_budget import spend

__all__ = ["bounded_keywords"]


def bounded_keywords(draft: Any) -> dict[str, Any]:
    """``uniqueItems``, ``enum``, ``const``, ``multipleOf`` for ``draft`` (a jsonschema validator class), bounded."""
    draft_multiple_of = draft.VALIDATORS.get("multipleOf")

    def multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Iterator[SchemaViolation]:
        if not validator.is_type(instance, "number"):
            return
        if _is_json_number(instance) and _is_json_number(divisor):
            if not _exact_multiple(instance, divisor):
                yield SchemaViolation(f"the value is not a multiple of {divisor!r}")
            return
        try:  # a number JSON does not decode to (a ``Decimal`` from Python): the draft's own check
            violations = list(draft_multiple_of(validator, divisor, instance, schema))
        except (ArithmeticError, ValueError):  # too large, not finite: no multiple that can be checked
            violations = [SchemaViolation(f"the value is not a multiple of {divisor!r}")]
        yield from violations

    def unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[SchemaViolation]:
        if not unique or not validator.is_type(instance, "array"):
            return
        seen: set[Any] = set()
        for item in instance:
            key = _charged_canonical(item)
            if key in seen:
                yield SchemaViolation("the array has non-unique elements")
                return
            seen.add(key)

    canonical_forms: dict[int, tuple[Any, Any]] = {}

    def canonical_once(value: Any, form: Callable[[Any], Any]) -> Any:
        """``form(value)`` of a schema's own value, computed once per validator (the schema outlives the check)."""
        held = canonical_forms.get(id(value))
        if held is None or held[0] is not value:
            held = canonical_forms[id(value)] = (value, form(value))
        return held[1]

    def enum(validator: Any, members: Any, instance: Any, schema: Any) -> Iterator[SchemaViolation]:
        allowed = canonical_once(members, lambda values: frozenset(_canonical(value) for value in values))
        if _charged_canonical(instance) not in allowed:
            yield SchemaViolation("the value is not one of the schema's 'enum'")

    def const(validator: Any, expected: Any, instance: Any, schema: Any) -> Iterator[SchemaViolation]:
        if _charged_canonical(instance) != canonical_once(expected, _canonical):
            yield SchemaViolation("the value is not the schema's 'const'")

    keywords: dict[str, Any] = {"uniqueItems": unique_items, "enum": enum}
    if "const" in draft.VALIDATORS:
        keywords["const"] = const
    if draft_multiple_of is not None:
        keywords["multipleOf"] = multiple_of
    return keywords


def _is_json_number(value: Any) -> bool:
    """An ``int`` (not a ``bool``) or a finite ``float``: what ``json`` decodes a number to, exact in few digits."""
    kind = type(value)
    return kind is int or (kind is float and math.isfinite(value))


def _exact_multiple(instance: int | float, divisor: int | float) -> bool:
    """Whether ``instance`` divided by ``divisor`` is an integer, exactly, each read as its JSON text reads.

    A float is its shortest decimal form (``repr``: at most 17 digits, exponents within 308), so the fractions
    stay small; an integer holds at most ``sys.get_int_max_str_digits`` digits (``json`` refuses more).
    """
    if type(instance) is int and type(divisor) is int:
        return instance % divisor == 0
    top, bottom = _ratio(instance)
    over, under = _ratio(divisor)
    # (top / bottom) / (over / under) = (top * under) / (bottom * over), each ratio in lowest terms: an integer
    # exactly when ``over`` divides ``top`` and ``bottom`` divides ``under``. No product: 4,299 digits times a
    # float's 324 took 80 us, twice what the step charged for it costs.
    return top % over == 0 and under % bottom == 0


def _ratio(number: int | float) -> tuple[int, int]:
    return (number, 1) if type(number) is int else Decimal(repr(number)).as_integer_ratio()


def _charged_canonical(value: Any) -> Any:
    """``_canonical`` of a checked value, its walk charged to the validation budget (a unit a node)."""
    walked = [0]
    form = _canonical(value, walked)
    spend(walked[0])
    return form


def _canonical(value: Any, walked: list[int] | None = None) -> Any:
    """A hashable form of a JSON value, equal to another's exactly when JSON Schema says the values are equal.

    ``1`` and ``1.0`` are equal (so are their Python hashes); ``true`` and ``1`` are not; key order does not count.
    ``walked``: counts the nodes walked.
    """
    if walked is not None:
        walked[0] += 1
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list | tuple):
        return ("array", tuple(_canonical(item, walked) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _canonical(item, walked)) for key, item in value.items()))
    return ("other", id(value))
