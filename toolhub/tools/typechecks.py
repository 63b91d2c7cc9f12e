"""Checking parameter types: refuse, when a tool is defined, what a model cannot send as JSON.

Everything pydantic validates from JSON is a valid parameter type: primitives, Decimal, date/time,
UUID, Enum, Literal, Optional, list/set/tuple, dict, nested pydantic models, dataclasses, TypedDict
and constraints (``Annotated[int, Field(gt=0)]``). What a model cannot send as JSON (callables,
generators, classes pydantic does not know, bare ``Any`` without ``allow_any=True``) is refused with
the tool and the parameter named.
"""

import collections.abc
import dataclasses
import datetime as dt
import decimal
import enum
import inspect
import ipaddress
import pathlib
import types
import typing
import uuid
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, Secret, SecretBytes, SecretStr

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.context_types import FromContext, is_context_type
from toolhub.tools.specs import ParameterSpec

__all__ = [
    "accepts_none",
    "check_annotation",
    "context_type_exposures",
    "marked_from_context",
    "secret_typed",
    "unwrap",
]

_UNSUPPORTED_ORIGINS = (
    collections.abc.Callable,
    collections.abc.Generator,
    collections.abc.Iterator,
    collections.abc.AsyncGenerator,
    collections.abc.AsyncIterator,
    collections.abc.Coroutine,
)

#: Plain classes pydantic validates from JSON values.
_SCALARS: frozenset[Any] = frozenset(
    {
        str,
        int,
        float,
        bool,
        bytes,
        decimal.Decimal,
        dt.date,
        dt.datetime,
        dt.time,
        dt.timedelta,
        uuid.UUID,
        pathlib.Path,
        ipaddress.IPv4Address,
        ipaddress.IPv6Address,
        ipaddress.IPv4Network,
        ipaddress.IPv6Network,
        type(None),
        None,
    }
)

#: Generic containers pydantic validates from JSON arrays and objects.
_CONTAINERS: frozenset[Any] = frozenset(
    {
        list,
        set,
        frozenset,
        tuple,
        dict,
        collections.abc.Sequence,
        collections.abc.MutableSequence,
        collections.abc.Set,
        collections.abc.MutableSet,
        collections.abc.Mapping,
        collections.abc.MutableMapping,
        collections.deque,
    }
)


def accepts_none(annotation: Any) -> bool:
    """Whether ``None`` is a valid value of ``annotation`` (``Optional[...]``, ``X | None``, ``None``)."""
    base = unwrap(annotation)
    if base is None or base is type(None) or base is Any:
        return True
    if get_origin(base) is typing.Union or isinstance(base, types.UnionType):
        return any(accepts_none(arg) for arg in get_args(base))
    return False


def context_type_exposures(
    parameters: tuple["ParameterSpec", ...], *, extra: type | None = None
) -> list[tuple[str, type]]:
    """Model parameters whose type is, or holds, a registered context type (or ``extra``): (name, class) pairs.

    Such a parameter would let the model set what only the boundary may: it is refused at registration.
    """
    found = []
    for spec in parameters:
        for node in _walk(spec.annotation, set()):
            if isinstance(node, type) and (node is extra or is_context_type(node)):
                found.append((spec.name, node))
                break
    return found


def secret_typed(parameters: tuple["ParameterSpec", ...]) -> list[tuple[str, type]]:
    """Model parameters whose type is, or holds, a pydantic secret (``SecretStr``, ``SecretBytes``, ``Secret[...]``).

    pydantic writes a secret as its mask in JSON, so the call's stored arguments (what an approval binds and a
    worker runs) would hold ``**********``, not the value: such a parameter is refused when the tool is defined.
    """
    found = []
    for spec in parameters:
        for node in _walk(spec.annotation, set()):
            origin = get_origin(node) or node
            if isinstance(origin, type) and issubclass(origin, Secret | SecretStr | SecretBytes):
                found.append((spec.name, origin))
                break
    return found


def marked_from_context(annotation: Any) -> bool:
    return get_origin(annotation) is Annotated and any(extra is FromContext for extra in get_args(annotation)[1:])


#: Annotations already found acceptable (hashable ones), so shared types are walked once per process.
_checked: set[tuple[Any, bool]] = set()


def check_annotation(annotation: Any, *, tool_name: str, param_name: str, allow_any: bool = False) -> None:
    """Walk a type hint (into models, dataclasses and TypedDicts) and refuse what a model cannot send as JSON."""
    try:
        key: tuple[Any, bool] | None = (annotation, allow_any)
        if key in _checked:
            return
    except TypeError:  # unhashable metadata (e.g. Field(...) inside Annotated)
        key = None
    _check_annotation(annotation, tool_name=tool_name, param_name=param_name, allow_any=allow_any)
    if key is not None:
        _checked.add(key)


def _check_annotation(annotation: Any, *, tool_name: str, param_name: str, allow_any: bool) -> None:
    if any(marked_from_context(node) for node in _walk(annotation, set())):
        _refuse(
            tool_name,
            param_name,
            annotation,
            "FromContext marks a whole parameter of a @tool function, Annotated[YourContext, FromContext]; "
            "it cannot be nested in a type or used in an input model",
        )
    if not allow_any:
        for member in _top_level_members(annotation):
            if member is Any or member is object:
                _refuse(
                    tool_name,
                    param_name,
                    annotation,
                    "bare Any gives the model no schema; use a concrete type, or pass allow_any=True to @tool",
                )
    seen: set[int] = set()
    for node in _walk(annotation, seen):
        problem = _problem(node)
        if problem:
            _refuse(tool_name, param_name, annotation, problem)


def _refuse(tool_name: str, param_name: str, annotation: Any, problem: str) -> None:
    shown = annotation.__qualname__ if isinstance(annotation, type) else repr(annotation)
    raise ToolDefinitionError(f"Tool {tool_name!r}, parameter {param_name!r}: unsupported type {shown} ({problem}).")


def _problem(node: Any) -> str | None:
    origin = get_origin(node) or node
    if origin is type:
        return "a class is not a JSON value"
    if origin in _UNSUPPORTED_ORIGINS or (
        isinstance(origin, type) and issubclass(origin, _UNSUPPORTED_ORIGINS)  # type: ignore[arg-type]
    ):
        return f"{getattr(origin, '__name__', origin)} is not a JSON value"
    if inspect.isfunction(node) or inspect.isgeneratorfunction(node):
        return "a function is not a type"
    if get_origin(node) is not None or isinstance(node, types.UnionType) or node is Any or node is object:
        return None
    if isinstance(node, typing.TypeVar):
        return "an unbound type variable has no schema"
    if isinstance(node, type):
        if node.__class__.__module__ == "typing" and typing.is_typeddict(node):
            return "typing.TypedDict needs typing_extensions.TypedDict on Python < 3.12"
        if _is_supported_class(node):
            return None
        return (
            f"pydantic cannot validate {node.__qualname__} from JSON; use a pydantic model, a dataclass or a TypedDict"
        )
    return None


def _is_supported_class(cls: type) -> bool:
    return (
        cls in _SCALARS
        or issubclass(cls, enum.Enum | BaseModel)
        or dataclasses.is_dataclass(cls)
        or _is_typeddict(cls)
        or hasattr(cls, "__get_pydantic_core_schema__")
        or (issubclass(cls, tuple) and hasattr(cls, "_fields"))
        or cls in _CONTAINERS
        or issubclass(cls, str | int | float)
    )


def _is_typeddict(cls: Any) -> bool:
    import typing_extensions

    return bool(typing_extensions.is_typeddict(cls))


def _top_level_members(annotation: Any) -> collections.abc.Iterator[Any]:
    base = unwrap(annotation)
    if get_origin(base) is typing.Union or isinstance(base, types.UnionType):
        for arg in get_args(base):
            yield from _top_level_members(arg)
    else:
        yield base


def unwrap(annotation: Any) -> Any:
    if get_origin(annotation) is Annotated:
        return get_args(annotation)[0]
    return annotation


def _walk(annotation: Any, seen: set[int]) -> collections.abc.Iterator[Any]:
    """Yield every type inside a hint, following models, dataclasses and TypedDicts once each."""
    yield annotation
    origin = get_origin(annotation)
    if origin is Annotated:
        yield from _walk(get_args(annotation)[0], seen)
        return
    if origin is typing.Literal:
        return
    if origin is not None or isinstance(annotation, types.UnionType):
        for arg in get_args(annotation):
            if arg is not Ellipsis:
                yield from _walk(arg, seen)
        if isinstance(origin, type) and issubclass(origin, BaseModel):
            yield from _walk(origin, seen)
        return
    if not isinstance(annotation, type) or id(annotation) in seen:
        return
    if issubclass(annotation, BaseModel) or dataclasses.is_dataclass(annotation) or _is_typeddict(annotation):
        seen.add(id(annotation))
        for hint in _field_hints(annotation):
            yield from _walk(hint, seen)


def _field_hints(cls: type) -> list[Any]:
    if issubclass(cls, BaseModel):
        return [field.annotation for field in cls.model_fields.values()]
    try:
        return list(typing.get_type_hints(cls, include_extras=True).values())
    except Exception:  # noqa: BLE001 - unresolvable hints are pydantic's to report when the schema is built
        return []
