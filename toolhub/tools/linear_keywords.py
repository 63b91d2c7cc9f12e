"""JSON Schema keywords whose jsonschema implementation a hostile value can stall or crash, redone bounded.

``uniqueItems``: jsonschema compares unhashable items (objects, arrays) pair by pair: 3,000 small objects a model
sends (30 KB) took a minute of a web process. Here each item becomes a hashable canonical form, once.

``multipleOf`` with a float divisor: jsonschema divides in floating point, and an integer past a float's range
(a JSON number of 400 digits, which ``json`` reads exactly) raised ``OverflowError`` out of validation.
"""

from collections.abc import Iterator
from typing import Any

from jsonschema.exceptions import ValidationError as SchemaViolation

__all__ = ["bounded_keywords"]


def bounded_keywords(draft: Any) -> dict[str, Any]:
    """``uniqueItems`` and ``multipleOf`` for ``draft`` (a jsonschema validator class), bounded as above."""
    draft_multiple_of = draft.VALIDATORS.get("multipleOf")

    def multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Iterator[SchemaViolation]:
        try:
            violations = list(draft_multiple_of(validator, divisor, instance, schema))
        except OverflowError:  # too large to divide in floating point: no multiple that can be checked
            violations = [SchemaViolation(f"the value is not a multiple of {divisor!r}")]
        yield from violations

    def unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[SchemaViolation]:
        if not unique or not validator.is_type(instance, "array"):
            return
        seen: set[Any] = set()
        for item in instance:
            key = _canonical(item)
            if key in seen:
                yield SchemaViolation("the array has non-unique elements")
                return
            seen.add(key)

    keywords: dict[str, Any] = {"uniqueItems": unique_items}
    if draft_multiple_of is not None:
        keywords["multipleOf"] = multiple_of
    return keywords


def _canonical(value: Any) -> Any:
    """A hashable form of a JSON value, equal to another's exactly when JSON Schema says the values are equal.

    ``1`` and ``1.0`` are equal (so are their Python hashes); ``true`` and ``1`` are not; key order does not count.
    """
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list | tuple):
        return ("array", tuple(_canonical(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _canonical(item)) for key, item in value.items()))
    return ("other", id(value))
