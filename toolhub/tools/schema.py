"""Input schemas of tools: from a function signature to a pydantic model and its JSON Schema."""

import collections.abc
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.context import ToolContext

__all__ = ["Param", "ParameterSpec", "describe_function", "build_input_model", "json_schema_of"]

_UNSUPPORTED_ORIGINS = (
    collections.abc.Callable,
    collections.abc.Generator,
    collections.abc.Iterator,
    collections.abc.AsyncGenerator,
    collections.abc.AsyncIterator,
    collections.abc.Coroutine,
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


@dataclass(frozen=True)
class FunctionDescription:
    """What a function signature and docstring say about a tool."""

    summary: str
    parameters: tuple[ParameterSpec, ...]
    context_parameter: str | None


def describe_function(fn: collections.abc.Callable[..., Any], *, tool_name: str) -> FunctionDescription:
    """Read a function's parameters, their types and descriptions; refuse what cannot be a tool input."""
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - any failure to resolve hints is a declaration error
        raise ToolDefinitionError(f"Tool {tool_name!r}: cannot resolve its type hints ({exc}).") from exc
    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    doc_params = {p.arg_name: p.description for p in doc.params}
    summary = "\n\n".join(part for part in (doc.short_description, doc.long_description) if part)

    parameters: list[ParameterSpec] = []
    context_parameter: str | None = None
    for index, (name, param) in enumerate(signature.parameters.items()):
        if index == 0 and name in {"self", "cls"}:
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"Tool {tool_name!r}, parameter {name!r}: *args/**kwargs cannot be described to a model; "
                "declare each parameter explicitly."
            )
        if name not in hints:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}, parameter {name!r}: has no type hint; annotate it so its schema can be generated."
            )
        annotation = hints[name]
        if _unwrap(annotation) is ToolContext:
            context_parameter = name
            continue
        description = _param_description(annotation) or doc_params.get(name)
        _refuse_unsupported(annotation, tool_name=tool_name, param_name=name)
        default = param.default if param.default is not inspect.Parameter.empty else ...
        parameters.append(ParameterSpec(name, annotation, default, description))
    return FunctionDescription(summary, tuple(parameters), context_parameter)


def build_input_model(tool_name: str, parameters: tuple[ParameterSpec, ...]) -> type[BaseModel]:
    """Build the pydantic model that validates a call's arguments (extra arguments are refused)."""
    fields: dict[str, Any] = {}
    for spec in parameters:
        annotation = _strip_param(spec.annotation)
        fields[spec.name] = (annotation, Field(spec.default, description=spec.description))
    model_name = "".join(part.capitalize() for part in tool_name.split("_")) + "Arguments"
    try:
        return create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)
    except Exception as exc:  # noqa: BLE001 - pydantic raises several kinds for unsupported types
        raise ToolDefinitionError(f"Tool {tool_name!r}: its parameters cannot be validated ({exc}).") from exc


def json_schema_of(tool_name: str, model: type[BaseModel]) -> dict[str, Any]:
    """Return the JSON Schema of a tool's input model, without pydantic's generated titles."""
    try:
        schema = model.model_json_schema()
    except Exception as exc:  # noqa: BLE001
        raise ToolDefinitionError(f"Tool {tool_name!r}: no JSON Schema for its parameters ({exc}).") from exc
    return _drop_titles(schema)


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


def _refuse_unsupported(annotation: Any, *, tool_name: str, param_name: str) -> None:
    """Walk a type hint and refuse what a model cannot send as JSON."""
    for node in _walk(annotation):
        origin = get_origin(node) or node
        problem = None
        if node is Any:
            problem = "bare Any gives the model no schema; use a concrete type"
        elif origin in _UNSUPPORTED_ORIGINS or (
            isinstance(origin, type) and issubclass(origin, _UNSUPPORTED_ORIGINS)  # type: ignore[arg-type]
        ):
            problem = f"{getattr(origin, '__name__', origin)} is not a JSON value"
        elif inspect.isfunction(node) or inspect.isgeneratorfunction(node):
            problem = "a function is not a type"
        if problem:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}, parameter {param_name!r}: unsupported type {annotation!r} ({problem})."
            )


def _walk(annotation: Any) -> collections.abc.Iterator[Any]:
    yield annotation
    origin = get_origin(annotation)
    if origin is Annotated:
        yield from _walk(get_args(annotation)[0])
        return
    if origin is typing.Literal:
        return
    if origin is not None or isinstance(annotation, types.UnionType):
        for arg in get_args(annotation):
            if arg is not Ellipsis:
                yield from _walk(arg)
