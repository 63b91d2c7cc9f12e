"""Reading signatures and docstrings: what a function or an input model says about a tool's parameters.

Some parameters are never shown to the model: they are *injected* when the tool runs (the
``ToolContext``, a ``Progress`` emitter, typed context objects and preset values).
"""

import collections.abc
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

import docstring_parser
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.context import ToolContext
from toolhub.tools.context_types import check_context_class, is_context_type
from toolhub.tools.progress import Progress
from toolhub.tools.specs import InjectedParameter, Param, ParameterSpec
from toolhub.tools.tenant_arguments import is_tenant_argument
from toolhub.tools.typechecks import check_annotation, marked_from_context, unwrap

__all__ = ["FunctionDescription", "describe_function", "describe_model", "param_description", "parse_docstring"]


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
    doc = parse_docstring(inspect.getdoc(fn) or "")
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
        base = unwrap(annotation)
        if base is ToolContext:
            context_parameter = name
            injected.append(InjectedParameter(name, "context", base, param.default))
            continue
        if base is Progress:
            injected.append(InjectedParameter(name, "progress", base, param.default))
            continue
        context_class = _optional_of(base)
        if marked_from_context(annotation):
            check_context_class(context_class, where=f"Tool {tool_name!r}, parameter {name!r}: FromContext")
            injected.append(InjectedParameter(name, "context_object", context_class, param.default))
            continue
        if is_context_type(context_class):
            # The bare spelling, for a class registered before the tool was defined.
            injected.append(InjectedParameter(name, "context_object", context_class, param.default))
            continue
        description = param_description(annotation) or doc_params.get(name)
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
        _check_tenant_alias(tool_name, name, field)
        # Pydantic puts a Field's description in the schema over a Param's (``Param.__get_pydantic_json_schema__``).
        description = field.description or param_description(annotation)
        if require_descriptions and not description:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}, parameter {name!r}: has no description, and TOOLHUB['REQUIRE_PARAMETER_"
                "DESCRIPTIONS'] is on; add Field(description=...) or Annotated[..., Param('...')]."
            )
        default = ... if field.is_required() else field.get_default(call_default_factory=False)
        specs.append(ParameterSpec(field.alias or name, annotation, default, description))
    return tuple(specs)


def _check_tenant_alias(tool_name: str, name: str, field: FieldInfo) -> None:
    """A field named as a tenant argument is checked under the key it is stored by: that key must say so too."""
    stored_as = field.serialization_alias or field.alias or name
    if is_tenant_argument(name) and not is_tenant_argument(stored_as):
        raise ToolDefinitionError(
            f"Tool {tool_name!r}, field {name!r}: its alias {stored_as!r} hides it from the check that a tenant "
            "argument names the caller's own tenant; give it no alias, or a spelling of its name (e.g. camelCase)."
        )


def _optional_of(annotation: Any) -> Any:
    """``X`` for ``X | None`` (``Optional[X]``), else the annotation itself."""
    if get_origin(annotation) is typing.Union or isinstance(annotation, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def parse_docstring(text: str) -> docstring_parser.Docstring:
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


def param_description(annotation: Any) -> str | None:
    if get_origin(annotation) is not Annotated:
        return None
    for extra in get_args(annotation)[1:]:
        if isinstance(extra, Param):
            return extra.description
        if isinstance(extra, FieldInfo) and extra.description:
            return extra.description
    return None
