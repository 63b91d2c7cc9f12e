"""Input schemas of tools: from a function signature to a pydantic model and its JSON Schema.

Everything pydantic validates from JSON is a valid parameter type: primitives, Decimal, date/time,
UUID, Enum, Literal, Optional, list/set/tuple, dict, nested pydantic models, dataclasses, TypedDict
and constraints (``Annotated[int, Field(gt=0)]``). What a model cannot send as JSON (callables,
generators, classes pydantic does not know, bare ``Any`` without ``allow_any=True``) is refused when
the tool is defined, with the tool and the parameter named.

Some parameters are never shown to the model: they are *injected* when the tool runs (the
``ToolContext``, a ``Progress`` emitter, typed context objects and preset values).
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
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic.fields import FieldInfo

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.context import ToolContext
from toolhub.tools.context_types import FromContext, check_context_class, is_context_type
from toolhub.tools.progress import Progress

__all__ = [
    "Param",
    "ParameterSpec",
    "InjectedParameter",
    "FunctionDescription",
    "describe_function",
    "describe_model",
    "build_input_model",
    "json_schema_of",
    "fast_json_schema",
    "check_annotation",
    "accepts_none",
    "context_type_exposures",
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


@dataclass(frozen=True)
class Param:
    """Describes a tool parameter for the model: ``Annotated[str, Param("the customer's id")]``."""

    description: str


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter the model fills in: its name, type, default and description."""

    name: str
    annotation: Any
    default: Any
    description: str | None

    @property
    def required(self) -> bool:
        return self.default is ...


@dataclass(frozen=True)
class InjectedParameter:
    """A parameter toolhub fills in when the tool runs; the model never sees it.

    ``kind`` is ``context`` (the ``ToolContext``), ``progress`` (a ``Progress`` emitter),
    ``context_object`` (a registered context type, built from the context) or ``preset`` (a value
    or secret declared in ``presets=``).
    """

    name: str
    kind: str
    annotation: Any
    default: Any = inspect.Parameter.empty


@dataclass(frozen=True)
class FunctionDescription:
    """What a function signature and docstring say about a tool."""

    summary: str
    parameters: tuple[ParameterSpec, ...]
    context_parameter: str | None
    injected: tuple[InjectedParameter, ...] = ()
    is_method: bool = False


def describe_function(
    fn: collections.abc.Callable[..., Any],
    *,
    tool_name: str,
    presets: collections.abc.Iterable[str] = (),
    allow_any: bool = False,
    require_descriptions: bool = False,
) -> FunctionDescription:
    """Read a function's parameters, their types and descriptions; refuse what cannot be a tool input."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"Tool {tool_name!r}: {fn!r} has no readable signature ({exc}).") from exc
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - any failure to resolve hints is a declaration error
        raise ToolDefinitionError(f"Tool {tool_name!r}: cannot resolve its type hints ({exc}).") from exc
    doc = _parse_docstring(inspect.getdoc(fn) or "")
    doc_params = {p.arg_name.lstrip("*"): p.description for p in doc.params}
    summary = "\n\n".join(part for part in (doc.short_description, doc.long_description) if part)
    preset_names = set(presets)

    parameters: list[ParameterSpec] = []
    injected: list[InjectedParameter] = []
    context_parameter: str | None = None
    is_method = False
    for index, (name, param) in enumerate(signature.parameters.items()):
        if index == 0 and name in {"self", "cls"}:
            is_method = True
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"Tool {tool_name!r}, parameter {name!r}: *args/**kwargs cannot be described to a model; "
                "declare each parameter explicitly."
            )
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}, parameter {name!r}: positional-only parameters cannot be passed by name; "
                "remove the '/' from the signature."
            )
        default = param.default if param.default is not inspect.Parameter.empty else ...
        if name in preset_names:
            injected.append(InjectedParameter(name, "preset", hints.get(name, Any), param.default))
            continue
        if name not in hints:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}, parameter {name!r}: has no type hint; annotate it so its schema can be generated."
            )
        annotation = hints[name]
        base = _unwrap(annotation)
        if base is ToolContext:
            context_parameter = name
            injected.append(InjectedParameter(name, "context", base, param.default))
            continue
        if base is Progress:
            injected.append(InjectedParameter(name, "progress", base, param.default))
            continue
        context_class = _optional_of(base)
        if _marked_from_context(annotation):
            check_context_class(context_class, where=f"Tool {tool_name!r}, parameter {name!r}: FromContext")
            injected.append(InjectedParameter(name, "context_object", context_class, param.default))
            continue
        if is_context_type(context_class):
            # The bare spelling, for a class registered before the tool was defined.
            injected.append(InjectedParameter(name, "context_object", context_class, param.default))
            continue
        description = _param_description(annotation) or doc_params.get(name)
        check_annotation(annotation, tool_name=tool_name, param_name=name, allow_any=allow_any)
        if require_descriptions and not description:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}, parameter {name!r}: has no description, and TOOLHUB['REQUIRE_PARAMETER_"
                "DESCRIPTIONS'] is on; add Annotated[..., Param('...')] or document it in the docstring."
            )
        parameters.append(ParameterSpec(name, annotation, default, description))

    unknown_presets = preset_names - set(signature.parameters)
    if unknown_presets:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: presets {sorted(unknown_presets)} are not parameters of the function; "
            "add them to its signature or remove them from presets=."
        )
    documented_unknown = set(doc_params) - set(signature.parameters)
    if documented_unknown:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: the docstring describes {sorted(documented_unknown)}, which are not parameters "
            "of the function; fix the names so the model gets their descriptions."
        )
    return FunctionDescription(summary, tuple(parameters), context_parameter, tuple(injected), is_method)


def describe_model(
    model: type[BaseModel], *, tool_name: str, allow_any: bool = False, require_descriptions: bool = False
) -> tuple[ParameterSpec, ...]:
    """The parameters a pydantic input model declares, checked like a function's parameters."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ToolDefinitionError(f"Tool {tool_name!r}: the input type must be a pydantic model, not {model!r}.")
    specs = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if field.metadata:
            annotation = Annotated[(annotation, *field.metadata)]  # type: ignore[assignment]
        check_annotation(annotation, tool_name=tool_name, param_name=name, allow_any=allow_any)
        if require_descriptions and not field.description:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}, parameter {name!r}: has no description, and TOOLHUB['REQUIRE_PARAMETER_"
                "DESCRIPTIONS'] is on; add Field(description=...)."
            )
        default = ... if field.is_required() else field.get_default(call_default_factory=False)
        specs.append(ParameterSpec(field.alias or name, annotation, default, field.description))
    return tuple(specs)


def build_input_model(tool_name: str, parameters: tuple[ParameterSpec, ...]) -> type[BaseModel]:
    """Build the pydantic model that validates a call's arguments (extra arguments are refused)."""
    fields: dict[str, Any] = {}
    for spec in parameters:
        annotation = _strip_param(spec.annotation)
        fields[spec.name] = (annotation, Field(spec.default, description=spec.description))
    model_name = "".join(part.capitalize() for part in tool_name.replace("-", "_").split("_")) + "Arguments"
    try:
        return create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)
    except Exception as exc:  # noqa: BLE001 - pydantic raises several kinds for unsupported types
        raise ToolDefinitionError(f"Tool {tool_name!r}: its parameters cannot be validated ({exc}).") from exc


def fast_json_schema(parameters: tuple[ParameterSpec, ...]) -> dict[str, Any] | None:
    """The inputs' JSON Schema assembled from per-type schemas (cached across tools), without building a model.

    It equals what the input model would give (the tests hold it to that); ``None`` when it cannot
    tell for sure (two different types under one name), and the model is used instead.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    definitions: dict[str, Any] = {}
    for spec in parameters:
        adapter_schema = _type_schema(_strip_param(spec.annotation))
        if adapter_schema is None:
            return None
        fragment = dict(adapter_schema)
        for name, definition in fragment.pop("$defs", {}).items():
            if definitions.setdefault(name, definition) != definition:
                return None
        if spec.description:
            fragment["description"] = spec.description
        if spec.required:
            required.append(spec.name)
        else:
            try:
                fragment["default"] = _type_adapter(_strip_param(spec.annotation)).dump_python(
                    spec.default, mode="json"
                )
            except Exception:  # noqa: BLE001 - let the model path decide
                return None
        properties[spec.name] = fragment
    schema: dict[str, Any] = {"additionalProperties": False, "properties": properties, "type": "object"}
    if required:
        schema["required"] = required
    if definitions:
        schema["$defs"] = definitions
    return _drop_titles(schema)  # type: ignore[no-any-return]


_FORBID = ConfigDict(extra="forbid")
_type_schemas: dict[Any, dict[str, Any]] = {}
_type_adapters: dict[Any, TypeAdapter[Any]] = {}


def _type_adapter(annotation: Any) -> TypeAdapter[Any]:
    try:
        adapter = _type_adapters.get(annotation)
    except TypeError:
        return TypeAdapter(annotation)
    if adapter is None:
        adapter = _type_adapters[annotation] = TypeAdapter(annotation)
    return adapter


def _type_schema(annotation: Any) -> dict[str, Any] | None:
    try:
        cached = _type_schemas.get(annotation)
        hashable = True
    except TypeError:
        cached, hashable = None, False
    if cached is not None:
        return cached
    try:
        # As the items of a list, a class comes out as a $ref to its definition, exactly as in a model's field.
        # The input model's extra="forbid" reaches nested dataclasses and TypedDicts; so must it here.
        as_items = TypeAdapter(list[annotation], config=_FORBID).json_schema()  # type: ignore[valid-type]
    except Exception:  # noqa: BLE001 - the model path reports the problem with the tool's name
        return None
    schema = dict(as_items.get("items", {}))
    if "$defs" in as_items:
        schema["$defs"] = as_items["$defs"]
    if hashable:
        _type_schemas[annotation] = schema
    return schema


def json_schema_of(tool_name: str, model: type[BaseModel]) -> dict[str, Any]:
    """Return the JSON Schema of a tool's input model, without pydantic's generated titles."""
    try:
        schema = model.model_json_schema()
    except Exception as exc:  # noqa: BLE001
        raise ToolDefinitionError(f"Tool {tool_name!r}: no JSON Schema for its parameters ({exc}).") from exc
    schema = _drop_titles(schema)
    schema.setdefault("properties", {})
    return schema


def accepts_none(annotation: Any) -> bool:
    """Whether ``None`` is a valid value of ``annotation`` (``Optional[...]``, ``X | None``, ``None``)."""
    base = _unwrap(annotation)
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


def _marked_from_context(annotation: Any) -> bool:
    return get_origin(annotation) is Annotated and any(extra is FromContext for extra in get_args(annotation)[1:])


def _optional_of(annotation: Any) -> Any:
    """``X`` for ``X | None`` (``Optional[X]``), else the annotation itself."""
    if get_origin(annotation) is typing.Union or isinstance(annotation, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def _parse_docstring(text: str) -> docstring_parser.Docstring:
    """Parse with the style the docstring is written in; trying every style costs 4x as much at startup."""
    if ":param" in text or ":return" in text or ":raises" in text or ":type" in text:
        style = docstring_parser.Style.REST
    elif "\n---" in text:
        style = docstring_parser.Style.NUMPYDOC
    elif "@param" in text or "@return" in text:
        style = docstring_parser.Style.EPYDOC
    else:
        style = docstring_parser.Style.GOOGLE
    try:
        return docstring_parser.parse(text, style=style)
    except docstring_parser.ParseError:
        return docstring_parser.parse(text)


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
    if any(_marked_from_context(node) for node in _walk(annotation, set())):
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
    base = _unwrap(annotation)
    if get_origin(base) is typing.Union or isinstance(base, types.UnionType):
        for arg in get_args(base):
            yield from _top_level_members(arg)
    else:
        yield base


def _drop_titles(node: Any) -> Any:
    if isinstance(node, dict):
        cleaned = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key == "properties" and isinstance(value, dict):
                cleaned[key] = {name: _drop_titles(prop) for name, prop in value.items()}
            else:
                cleaned[key] = _drop_titles(value)
        return cleaned
    if isinstance(node, list):
        return [_drop_titles(item) for item in node]
    return node


def _unwrap(annotation: Any) -> Any:
    if get_origin(annotation) is Annotated:
        return get_args(annotation)[0]
    return annotation


def _param_description(annotation: Any) -> str | None:
    if get_origin(annotation) is not Annotated:
        return None
    for extra in get_args(annotation)[1:]:
        if isinstance(extra, Param):
            return extra.description
        if isinstance(extra, FieldInfo) and extra.description:
            return extra.description
    return None


def _strip_param(annotation: Any) -> Any:
    """Replace toolhub's ``Param`` markers (pydantic does not know them) inside ``Annotated``."""
    if get_origin(annotation) is not Annotated:
        return annotation
    base, *extras = get_args(annotation)
    kept = [extra for extra in extras if not isinstance(extra, Param)]
    if not kept:
        return base
    return Annotated[(base, *kept)]  # type: ignore[return-value]


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
