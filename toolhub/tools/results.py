"""Tool results: explicit result values and the JSON serialization of whatever a tool returns."""

import dataclasses
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import chain, compress, repeat
from operator import is_
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from toolhub.conf import toolhub_settings

__all__ = ["ToolResult", "to_json_value", "result_text_for_model", "artifact_content", "read_now"]


@dataclass(frozen=True)
class ToolResult:
    """An explicit result: plain text for the model, an error message, or an artifact.

    An artifact (a file, a report, a large data set) is stored with the call and listed on it; the
    model reads a short summary (``text``, or one naming the artifact), not the data.
    """

    kind: str
    value: Any = None
    name: str = ""
    media_type: str = ""
    summary: str = ""

    @classmethod
    def text(cls, text: str) -> "ToolResult":
        """Hand the model this text exactly, with no JSON encoding."""
        return cls(kind="text", value=text)

    @classmethod
    def error(cls, message: str) -> "ToolResult":
        """Fail the call with a message meant for the model."""
        return cls(kind="error", value=message)

    @classmethod
    def artifact(cls, data: Any, *, name: str, media_type: str = "application/json", text: str = "") -> "ToolResult":
        """Return data that is stored on the call and summarized, not pasted, to the model.

        ``data`` is ``bytes`` (stored as is), ``str`` (UTF-8) or anything JSON-serializable. ``text``
        is what the model reads; by default a sentence naming the artifact, its type and size.
        """
        if not name or not isinstance(name, str):
            raise ValueError("An artifact needs a name, e.g. name='report.csv'.")
        return cls(kind="artifact", value=data, name=name[:200], media_type=media_type, summary=text)


def read_now(value: Any) -> Any:
    """A lazy iterator in a tool's result (a generator expression, ``map``, a wrapped generator function) as a list.

    Its work runs when it is read: read here, where the tool is called (``Tool.invoke``, within its time limit), not
    when the result is serialized for storage (which reads any iterator as a list), after the limit was lifted.
    Read wherever serialization would reach it through a container (a dict's value, a list, a tuple, a
    ``ToolResult``'s value); a container with none in it is returned as it is, not copied.
    """
    if isinstance(value, Iterator):
        return [read_now(item) for item in value]
    if isinstance(value, ToolResult):
        data = read_now(value.value)
        return value if data is value.value else replace(value, value=data)
    if isinstance(value, dict):
        items = {key: read_now(item) for key, item in value.items()}
        return value if all(items[key] is item for key, item in value.items()) else items
    if isinstance(value, list | tuple):
        read = [read_now(item) for item in value]
        if all(new is old for new, old in zip(read, value, strict=True)):
            return value
        return read if isinstance(value, list) else tuple(read)
    return value


def to_json_value(value: Any) -> Any:
    """Convert a tool's return value (pydantic models, dataclasses, Decimal, dates, enums) to JSON data.

    A dict whose keys become the same text (``1`` and ``"1"``, ``True`` and ``"true"``), wherever it is in the
    value (a model's field, a dataclass's, a list's item), is refused with ``ValueError``: the conversion would
    keep one of the values and drop the others without a word.
    """
    converted = to_jsonable_python(value)
    _check_no_merged_keys(value)
    return converted


#: What holds nothing to walk (most of a large result): ``0`` drops it, in C, before a level is walked.
_SCALARS = {str: 0, int: 0, float: 0, bool: 0, type(None): 0}
_SEQUENCES = (list, tuple, set, frozenset)
_STR = frozenset({str})


def _check_no_merged_keys(value: Any) -> None:
    """Find every dict the conversion reached (through containers, dataclasses and models) whose keys merge as text.

    Walked in the value itself, not beside its conversion: a dataclass or a model converts to a dict of its own,
    which has no entry to pair with. Runs after the conversion succeeded, so the value holds no cycle.

    Walked a level at a time, grouped by type, so that the work per item runs in C (``map``, ``chain``,
    ``compress``): a level's scalars are dropped by their type, its dicts' keys are tested as one set of
    types (all ``str`` or all ``int``: none can merge, no dict is looked at alone), its dicts' and lists' items
    are read together. A large result of plain data costs a fraction of its conversion, not more than it.
    """
    if type(value) is dict and _STR.issuperset(map(type, value)) and not any(_not_scalars(value.values())):
        return  # the usual small result: a dict of text keys and plain values (one pass over each, in C)
    level = [value]
    while level:
        reached: list[Any] = []
        kinds = set(map(type, level))
        types = list(map(type, level)) if len(kinds) > 1 else []
        for kind in kinds:
            items = list(compress(level, map(is_, types, repeat(kind)))) if types else level
            if issubclass(kind, dict):
                if not _one_text_each(set(map(type, chain.from_iterable(items)))):
                    for item in items:
                        _check_keys(item)
                reached.extend(chain.from_iterable(map(dict.values, items)))
            elif issubclass(kind, _SEQUENCES):
                reached.extend(chain.from_iterable(items))
            elif issubclass(kind, BaseModel):
                for item in items:
                    reached.extend(vars(item).values())
                    reached.extend((item.__pydantic_extra__ or {}).values())
            elif dataclasses.is_dataclass(kind):
                for item in items:
                    reached.extend(getattr(item, field.name) for field in dataclasses.fields(item))
        level = list(compress(reached, _not_scalars(reached)))


def _not_scalars(values: Iterable[Any]) -> Iterator[int]:
    """``1`` for each of ``values`` that may hold a dict, ``0`` for a scalar: a selector for ``compress``, in C."""
    return map(_SCALARS.get, map(type, values), repeat(1))


def _one_text_each(key_types: set[type]) -> bool:
    """Keys of these types cannot merge as text: all ``str`` or all ``int`` (distinct ints write distinctly)."""
    return key_types <= _STR or key_types == {int}


def _check_keys(item: dict[Any, Any]) -> None:
    if not _one_text_each(set(map(type, item))) and len(to_jsonable_python(dict.fromkeys(item))) < len(item):
        raise ValueError(
            f"a dict's keys collide once written as JSON text ({len(item)} keys became "
            f"{len(to_jsonable_python(dict.fromkeys(item)))}); return keys that stay distinct as strings"
        )


def result_text_for_model(value: Any) -> str:
    """Render stored JSON result data as the text the model reads.

    ``None`` (a tool that succeeded with nothing to say) reads as ``TOOLHUB["NONE_RESULT_TEXT"]``, not ``null``,
    which a model may take for a failure; the stored result stays ``None``.
    """
    if value is None:
        return toolhub_settings().NONE_RESULT_TEXT
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def artifact_content(result: ToolResult) -> bytes:
    """The bytes stored for an artifact result."""
    data = result.value
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    return json.dumps(to_json_value(data), ensure_ascii=False, sort_keys=True).encode("utf-8")
