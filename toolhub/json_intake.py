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
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

from toolhub.storable import json_storage_problem

__all__ = ["JSONRefused", "RefusalKind", "json_loads_checked", "json_nesting_exceeds", "json_value_problem"]


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


def json_loads_checked(text: str, *, max_depth: int, path: str = "", loads: Callable[[str], Any] = json.loads) -> Any:
    """Decode JSON ``text`` nested at most ``max_depth`` deep, holding only storable text; else ``JSONRefused``.

    The depth is measured on the text first, so ``loads`` never recurses deeper than ``max_depth``;
    ``path`` names where the text sits in a problem's message (``context.correlation_id``); ``loads``
    is the decoder (DRF's, for request bodies; its own errors pass through).
    """
    from toolhub.api.parsers import json_nesting_depth  # the text scanner; that module decodes through this one

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
        raise JSONRefused(RefusalKind.SYNTAX, getattr(exc, "msg", str(exc))) from None
    problem = json_storage_problem(data, path)
    if problem:
        raise JSONRefused(RefusalKind.STORAGE, problem)
    return data


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
