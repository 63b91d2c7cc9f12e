"""JSON from outside, decoded and checked one way whatever carried it: a JSON body, a form field, MCP, a model.

``json.loads`` recurses once per level, so text nested thousands deep raises ``RecursionError`` (a 500,
or a crashed task), and it accepts NUL characters and lone surrogates that no PostgreSQL column takes.
Each transport used to guard this itself, and a path that missed a guard (a form field's JSON, MCP's
``_meta``, the idempotency fingerprint) reached ``json.loads`` or the database unchecked. Every path
now goes through :func:`json_loads_checked` (text) or :func:`json_value_problem` (values a library
decoded), which measure the nesting without recursion before anything recurses, then ask
``toolhub.storable``.
"""

import json
import re
import sys
from collections.abc import Callable, Mapping
from enum import StrEnum
from itertools import accumulate, repeat
from operator import sub
from typing import Any

from toolhub.storable import json_storage_problem

__all__ = [
    "JSONRefused",
    "RefusalKind",
    "json_loads_checked",
    "json_nesting_depth",
    "json_nesting_exceeds",
    "json_value_problem",
]

#: A JSON string literal (escapes included); brackets inside one are text, not structure. A string left open
#: runs to the end of the text: ``json.loads`` fails there, so nothing after it can nest. A pattern that needs
#: the closing quote retries from every quote inside an open string and rescans the rest, quadratic in
#: ``"\"\"\"...`` (sent before authentication); this one cannot fail once it has started, and its possessive
#: loops over disjoint alternatives never backtrack, so each character is read once. DOTALL: a backslash
#: takes the character after it along, a newline too.
_STRING = re.compile(r'"(?:[^"\\]++|\\.?)*+"?', re.DOTALL)
#: Opening brackets become 2 and closing ones 0, so that subtracting 1 gives each one's step in depth.
_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")


def json_nesting_depth(text: str) -> int:
    """How deep lists and objects nest in JSON ``text``, counted without decoding it and without recursion."""
    structure = _STRING.sub("", text).encode("ascii", "ignore").translate(_STEPS, _NOT_BRACKETS)
    return max(accumulate(map(sub, structure, repeat(1))), default=0)


class RefusalKind(StrEnum):
    """Why JSON was refused; callers word their answer by it (e.g. how to fix unstorable text)."""

    NESTING = "nesting"
    SYNTAX = "syntax"
    STORAGE = "storage"


class JSONRefused(ValueError):
    """JSON that may not be used; ``about(subject)`` words why as a sentence about it, without a final stop.

    A ``ValueError``, so code that already falls back on text ``json.loads`` rejects keeps doing so.
    """

    def __init__(self, kind: RefusalKind, reason: str) -> None:
        self.kind = kind
        self.reason = reason
        super().__init__(self.about("The JSON"))

    def about(self, subject: str) -> str:
        """The refusal as a sentence about ``subject`` ("The request body", "The value")."""
        if self.kind == RefusalKind.SYNTAX:
            return f"{subject} is not valid JSON ({self.reason})"
        if self.kind == RefusalKind.STORAGE:
            return f"{subject} cannot be stored: {self.reason}"
        return f"{subject} {self.reason}"


def json_loads_checked(
    text: str, *, max_depth: int, path: str = "", loads: Callable[[str], Any] = json.loads, storable: bool = True
) -> Any:
    """Decode JSON ``text`` nested at most ``max_depth`` deep, holding only storable text; else ``JSONRefused``.

    The depth is measured on the text first, so ``loads`` never recurses deeper than ``max_depth``;
    ``path`` names where the text sits in a problem's message (``context.correlation_id``); ``loads``
    is the decoder (DRF's, for request bodies; its own errors pass through). ``storable=False`` leaves the
    storage check to a caller that checks the decoded value itself (``json_value_problem``): its problem
    names where the text is, which the caller may have to scrub (a sensitive mapping's key).
    """
    depth = json_nesting_depth(text)
    if depth > max_depth:
        raise JSONRefused(
            RefusalKind.NESTING, f"nests lists and objects {depth} levels deep; at most {max_depth} are accepted"
        )
    try:
        data = loads(text)
    except RecursionError:  # the scanner and the decoder disagree on malformed text: still never a 500
        raise JSONRefused(RefusalKind.NESTING, f"nests lists and objects deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise JSONRefused(RefusalKind.SYNTAX, _syntax_reason(exc)) from None
    problem = json_storage_problem(data, path) if storable else None
    if problem:
        raise JSONRefused(RefusalKind.STORAGE, problem)
    return data


def _syntax_reason(exc: ValueError) -> str:
    """Why the decoder refused the text, in words for whoever sent it (a model, a client), never the interpreter's.

    An integer past ``sys.get_int_max_str_digits()`` raises ``int()``'s own ``ValueError``, whose text tells the
    reader to call ``sys.set_int_max_str_digits()``: a detail of the server and advice nobody outside can follow.
    """
    if not isinstance(exc, json.JSONDecodeError) and "integer string conversion" in str(exc):
        return f"an integer with more than {sys.get_int_max_str_digits()} digits"
    return str(getattr(exc, "msg", exc))


def json_value_problem(value: Any, *, max_depth: int, path: str = "") -> JSONRefused | None:
    """Why decoded JSON ``value`` may not be used (nested deeper than ``max_depth``, unstorable), or ``None``.

    For values a library decoded (DRF's JSON parser, the MCP SDK): the same limits as for text.
    """
    if json_nesting_exceeds(value, max_depth):
        return JSONRefused(RefusalKind.NESTING, f"nests lists and objects deeper than {max_depth} levels")
    problem = json_storage_problem(value, path)
    return JSONRefused(RefusalKind.STORAGE, problem) if problem else None


def json_nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether lists and objects nest deeper than ``limit`` in ``value`` (counted without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, Mapping) else item if isinstance(item, list | tuple) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
