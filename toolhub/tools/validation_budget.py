"""A bound on the work of checking one value against a schema, whatever the schema and the value.

The schema bounds (``jsonschema_args``) cap the schemas one value is checked against (``MAX_SCHEMA_APPLICATIONS``),
but each item of an array and each property of an object is such a value: an accepted schema checking each item
against 4,000 schemas (a ``$ref`` fan-out within the bound) took 200 s of a web process for 1,000 integers (4 KB of
arguments, far within ``MAX_ARGUMENTS_BYTES``). Here every keyword a validator applies counts one step, and so does
every error a keyword yields; a check stops once it has spent ``MAX_VALIDATION_STEPS`` (a few seconds at most),
failing the value.

A keyword's work may also grow with the value it reads: ``enum`` and ``uniqueItems`` walk the whole instance, a
``pattern`` scans its characters, ``additionalProperties`` its names, ``required`` and ``properties`` their own
lists. One step each, 4,000 ``enum`` s applied to a 130 KB array (an ``allOf`` of a remote ``inputSchema``) took
80 s, 4,000 ``uniqueItems`` 86 s. So a step is ``UNITS_PER_STEP`` units of work, and a keyword is charged, beside
its step, for what it reads (``read_units``) and for any walk of the value (``spend``).
"""

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = [
    "CHARACTERS_PER_UNIT",
    "MAX_VALIDATION_STEPS",
    "UNITS_PER_STEP",
    "BudgetedValidator",
    "ValidationBudgetSpent",
    "counted_keywords",
    "read_units",
    "spend",
    "validation_budget",
]

#: Steps one check may spend (the arguments of one call, one structured result): a keyword applied, an error
#: yielded, ``UNITS_PER_STEP`` units of the work keywords do.
MAX_VALIDATION_STEPS = 50_000

#: Units of work one step stands for. A unit is about half a microsecond: a JSON node walked, a name looked up,
#: ``CHARACTERS_PER_UNIT`` characters scanned (measured: a canonical walk 0.44 us a node, a pattern 35 ns a character).
UNITS_PER_STEP = 100
CHARACTERS_PER_UNIT = 10

#: Keywords whose value is read once per validator, not per application (``linear_keywords``' canonical set).
_READ_ONCE = frozenset({"enum", "const"})

#: Types ``read_units`` reads as nothing, or as nothing when a keyword's own value (a string there is not scanned).
_SCALARS = frozenset({bool, int, float, type(None)})
_UNREAD_VALUES = _SCALARS | {str}

_remaining: ContextVar[list[int] | None] = ContextVar("toolhub_validation_steps", default=None)


class ValidationBudgetSpent(Exception):
    """A check spent ``MAX_VALIDATION_STEPS``: the value is refused, not checked further."""


@contextmanager
def validation_budget(steps: int = MAX_VALIDATION_STEPS) -> Iterator[None]:
    """Checks made inside share ``steps``; past them a keyword raises ``ValidationBudgetSpent``."""
    token = _remaining.set([steps * UNITS_PER_STEP])
    try:
        yield
    finally:
        _remaining.reset(token)


def counted_keywords(keywords: Mapping[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """``keywords`` (a jsonschema validator's), each counting one step of the active budget when applied.

    Outside any ``validation_budget`` nothing is counted: ``BudgetedValidator`` opens one for a check made outside.

    And for what it reads, shallowly (``read_units``): the instance, and its own value unless read once per
    validator (``enum``, ``const``). A deeper walk is charged where it is made (``spend``).
    """

    def counted(name: str, keyword: Callable[..., Any]) -> Callable[..., Any]:
        reads_value = name not in _READ_ONCE

        def apply(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
            remaining = _remaining.get()
            if remaining is not None:
                # ``read_units`` inlined for the exact types JSON decodes to: its ``isinstance`` against the
                # ``Mapping`` ABC, twice a keyword applied, was most of what charging for reading cost a call.
                units = UNITS_PER_STEP
                kind = type(instance)
                if kind is str:
                    units += len(instance) // CHARACTERS_PER_UNIT
                elif kind is dict or kind is list:
                    units += len(instance)
                elif kind not in _SCALARS:
                    units += read_units(instance)
                if reads_value:
                    kind = type(value)
                    if kind is dict or kind is list:
                        units += len(value)
                    elif kind not in _UNREAD_VALUES:
                        units += read_units(value, strings=False)
                remaining[0] -= units  # ``_spend``, inlined as well
                if remaining[0] < 0:
                    raise ValidationBudgetSpent
            errors = keyword(validator, value, instance, schema) or iter(())
            return errors if remaining is None else _counted_errors(errors, remaining)

        return apply

    return {name: counted(name, keyword) for name, keyword in keywords.items()}


def read_units(value: Any, *, strings: bool = True) -> int:
    """The units of reading ``value`` shallowly: its items or names, or its characters (``strings``)."""
    if isinstance(value, str):
        return len(value) // CHARACTERS_PER_UNIT if strings else 0
    if isinstance(value, list | tuple | Mapping):
        return len(value)
    return 0


def spend(units: int) -> None:
    """Charge ``units`` of work to the active budget (``ValidationBudgetSpent`` past it); none active: nothing.

    For work a keyword does beyond reading its instance (``read_units``): a walk of the whole value, a match per name.
    """
    remaining = _remaining.get()
    if remaining is not None:
        _spend(remaining, units)


def _spend(remaining: list[int], units: int = UNITS_PER_STEP) -> None:
    remaining[0] -= units
    if remaining[0] < 0:
        raise ValidationBudgetSpent


def _counted_errors(errors: Iterator[Any], remaining: list[int]) -> Iterator[Any]:
    """``errors``, each costing a step as it passes: one keyword may yield any number of them for one value.

    ``required`` yields one error per missing name: 300 empty objects (1 KB) against a 4,000-name ``required`` were
    1.2 million errors, 49 s and 3 GB, for 300 steps. An error costs a step at each keyword it passes up through.
    """
    for error in errors:
        _spend(remaining)
        yield error


class BudgetedValidator:
    """A validator whose every check is bounded: within the active budget, or its own when none is active.

    ``counted_keywords`` counts nothing outside a budget, and a check opened elsewhere (an approval rule's value,
    a thread that does not inherit the caller's context) ran unbounded against an accepted ``$ref`` fan-out.
    Errors are collected within the budget (a generator would run on outside it); past it
    ``ValidationBudgetSpent`` reaches the caller, which refuses the value.
    """

    def __init__(self, validator: Any) -> None:
        self.validator = validator

    def iter_errors(self, instance: Any) -> Iterator[Any]:
        if _remaining.get() is not None:
            return iter(list(self.validator.iter_errors(instance)))
        with validation_budget():
            return iter(list(self.validator.iter_errors(instance)))

    def is_valid(self, instance: Any) -> bool:
        return next(self.iter_errors(instance), None) is None

    def validate(self, instance: Any) -> None:
        for error in self.iter_errors(instance):
            raise error

    def __getattr__(self, name: str) -> Any:  # the rest of a validator (its schema, its format checker...)
        return getattr(self.validator, name)
