"""Decimals in tool schemas: pydantic writes ``Decimal`` as ``anyOf: [number, string]`` and loses its digit limits.

Every profile shows a decimal as a string with a pattern keeping ``max_digits``/``decimal_places``
(``decimal_fragment``); ``is_decimal_union`` and ``has_plain_decimals`` find pydantic's own form. Pure functions.
"""

from decimal import Decimal
from typing import Any

from toolhub.tools.schema_nodes import NULL_SCHEMA, constraint_words, nodes_of

__all__ = ["decimal_fragment", "decimal_pattern", "has_plain_decimals", "is_decimal_union"]


def decimal_pattern(*, max_digits: int | None, decimal_places: int | None, signed: bool = True) -> str:
    """A regular expression for decimals written as strings within the digit limits."""
    sign = "-?" if signed else ""
    if max_digits is None:
        whole = r"\d+"
    elif decimal_places is not None and max_digits - decimal_places <= 0:
        whole = "0"
    else:
        whole = rf"\d{{1,{max_digits - (decimal_places or 0)}}}"
    if decimal_places == 0:
        fraction = ""
    elif decimal_places is None:
        fraction = r"(\.\d+)?"
    else:
        fraction = rf"(\.\d{{1,{decimal_places}}})?"
    return f"^{sign}{whole}{fraction}$"


def decimal_fragment(
    *,
    max_digits: int | None = None,
    decimal_places: int | None = None,
    bounds: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A decimal as every profile can say it: a string with a pattern, its limits in words."""
    bounds = {k: v for k, v in (bounds or {}).items() if v is not None}
    lower = [Decimal(str(bounds[k])) for k in ("minimum", "exclusiveMinimum") if k in bounds]
    signed = not lower or min(lower) < 0
    words = ['a decimal number written as a string, e.g. "12.50"']
    if max_digits is not None:
        words.append(f"at most {max_digits} digits")
    if decimal_places is not None:
        words.append(f"at most {decimal_places} after the point")
    words.extend(constraint_words(bounds))
    return {
        "type": "string",
        "pattern": decimal_pattern(max_digits=max_digits, decimal_places=decimal_places, signed=signed),
        "description": "; ".join(words) + ".",
    }


def has_plain_decimals(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` holds a decimal as pydantic writes it (``anyOf: [number, string]``, limits lost)."""
    return any("anyOf" in node and is_decimal_union(node) for node in nodes_of(schema))


def is_decimal_union(node: dict[str, Any]) -> bool:
    """Pydantic's ``Decimal``: ``anyOf: [number (with bounds), string]`` (maybe or null)."""
    branches = [b for b in node.get("anyOf", ()) if b != NULL_SCHEMA]
    kinds = sorted(b.get("type", "") for b in branches if isinstance(b, dict))
    plain_string = any(b == {"type": "string"} for b in branches)
    return kinds == ["number", "string"] and plain_string
