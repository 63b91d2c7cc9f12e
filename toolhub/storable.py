"""What the database can store: checks for values that model and tool output may carry but no column takes.

``json.loads`` accepts ``NaN``, ``Infinity``, NUL characters and lone surrogates; PostgreSQL's jsonb and
text columns refuse them all. Finding them first turns a crash into a clear refusal. A tool's own Python
values may also hold an integer too long to write out as JSON (``sys.get_int_max_str_digits``): the write
raised ``ValueError`` after the tool ran, so its outcome was never recorded.
"""

import math
import sys
from collections.abc import Mapping
from decimal import Decimal
from functools import cache
from typing import Any

__all__ = ["json_storage_problem", "storable_text", "storable_value", "stored_numbers"]


def json_storage_problem(value: Any, path: str = "") -> str | None:
    """Why JSON data cannot be stored as it is (naming where in it), or ``None`` when it can."""
    where = path or "a value"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where} is not a finite number"
    if isinstance(value, int) and abs(value) >= _integer_bound(sys.get_int_max_str_digits()):
        return f"{where} is an integer of more than {sys.get_int_max_str_digits() or _NUMERIC_DIGITS} digits"
    if isinstance(value, str):
        return _text_problem(value, where)
    if isinstance(value, Mapping):
        for key, item in value.items():
            problem = (_text_problem(key, "a key") if isinstance(key, str) else None) or json_storage_problem(
                item, f"{path}.{key}" if path else str(key)
            )
            if problem:
                return problem
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            problem = json_storage_problem(item, f"{path}[{index}]")
            if problem:
                return problem
    return None


def storable_text(text: str, *, within: int | None = None) -> str:
    """``text`` with NUL characters and lone surrogates written out as escapes, so any column stores it.

    ``within``: the column's length; the text is cut to it once escaped (each escape is six characters, so a text cut
    to the length first could come out longer than the column, which PostgreSQL refuses).
    """
    kept = text.replace("\x00", "\\u0000").encode("utf-8", "backslashreplace").decode("utf-8")
    return kept if within is None else kept[:within]


def storable_value(value: Any) -> Any:
    """JSON data from outside made storable: texts and keys as ``storable_text``, numbers that are not finite as text.

    For data that must be kept whatever it holds (a remote server's tool definition, shown to an administrator
    as it came), where ``json_storage_problem`` would refuse it.
    """
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {
            storable_text(key) if isinstance(key, str) else key: storable_value(item) for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [storable_value(item) for item in value]
    return value


def stored_numbers(value: Any) -> Any:
    """Storable JSON data with its numbers as the database gives them back: the same value on every database.

    PostgreSQL's jsonb keeps a number as ``numeric``, which has no exponent and no negative zero: ``1e16`` (a float
    Python writes ``1e+16``: 16 digits or more before the point) comes back as the integer ``10000000000000000`` and
    ``-0.0`` as ``0.0``. A binding made over the value as sent (an approval's ``approval_hash``) then no longer
    matched the value read back, and the call could never run. Any other finite float comes back as it went. The
    value is returned itself when no number changes (the usual case: nothing is copied).
    """
    if type(value) is float:
        if value == 0:
            return 0.0 if math.copysign(1.0, value) < 0 else value
        return int(Decimal(repr(value))) if abs(value) >= _EXPONENT_FROM else value
    if isinstance(value, dict):
        changed = {key: stored_numbers(item) for key, item in value.items()}
        return changed if any(changed[key] is not item for key, item in value.items()) else value
    if isinstance(value, list):
        items = [stored_numbers(item) for item in value]
        return items if any(new is not old for new, old in zip(items, value, strict=True)) else value
    return value


#: The least float ``repr`` writes with an exponent above zero (``1e+16``), which jsonb writes out in digits.
_EXPONENT_FROM = 1e16


#: Digits before the decimal point PostgreSQL's ``numeric`` (a jsonb number) holds, when Python sets no limit.
_NUMERIC_DIGITS = 131_072


@cache
def _integer_bound(max_digits: int) -> int:
    """The least integer with more digits than JSON may write out (Python's limit, else PostgreSQL's)."""
    return 10 ** (max_digits or _NUMERIC_DIGITS)


def _text_problem(text: str, where: str) -> str | None:
    if "\x00" in text:
        return f"{where} contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return f"{where} contains an invalid character (a lone surrogate)"
    return None
