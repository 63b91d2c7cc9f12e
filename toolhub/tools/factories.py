"""Reading what a tool is made from (a function, a mapping of types, a model, a JSON Schema) into its inputs.

``Tool.from_function``, ``Tool.create`` and ``Tool.external`` call these; each returns the
``Tool`` fields that come from the source (handler, inputs, description, module), and the
options are read by ``toolhub.tools.options``.
"""

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.inputs import ExternalInputs, FieldsInputs, Inputs, ModelInputs, SchemaInputs, SignatureInputs
from toolhub.tools.jsonschema_args import checked_object_schema
from toolhub.tools.options import read_presets
from toolhub.tools.signatures import describe_function, describe_model, param_description, parse_docstring
from toolhub.tools.specs import ParameterSpec
from toolhub.tools.typechecks import check_annotation

__all__ = ["external_fields", "fields_of_function", "mapping_fields", "output_adapter"]


def fields_of_function(fn: Callable[..., Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a tool made from ``fn``: its signature, or its explicit ``input_model``."""
    if not callable(fn) or isinstance(fn, type):
        raise ToolDefinitionError(f"@tool decorates a function or a method, not {fn!r}.")
    name = str(options.get("name") or getattr(fn, "__name__", ""))
    allow_any = bool(options.get("allow_any", False))
    input_model = options.get("input_model")
    output_model = options.get("output_model")
    module = getattr(fn, "__module__", "") or ""
    if output_model is not None:
        _check_output(name, output_model)
    if input_model is not None:
        if "presets" in options:
            raise ToolDefinitionError(
                f"Tool {name!r}: presets= fill a function's parameters; with input_model= use ctx."
            )
        inputs: Inputs = _model_inputs(name, input_model, allow_any=allow_any, takes_context=_takes_context(name, fn))
        description = options.get("description") or _summary(fn)
        is_method = False
    else:
        presets = read_presets(name, options.get("presets"))
        described = describe_function(
            fn, tool_name=name, presets=presets, allow_any=allow_any, require_descriptions=descriptions_required()
        )
        inputs = SignatureInputs(
            parameters=described.parameters,
            injected_parameters=described.injected,
            context_name=described.context_parameter,
            presets=presets,
        )
        description = options.get("description") or described.summary
        is_method = described.is_method
    return {
        "name": name,
        "description": description or "",
        "handler": fn,
        "inputs": inputs,
        "output_type": output_model,
        "is_method": is_method,
        "module": module,
    }


def mapping_fields(
    name: str, parameters: Any, handler: Callable[..., Any] | None, options: Mapping[str, Any]
) -> dict[str, Any]:
    """The fields of ``Tool.create``: a handler taking ``(arguments[, ctx])`` and its parameters."""
    if handler is None:
        raise ToolDefinitionError(
            f"Tool {name!r}: Tool.create() needs a handler; for a tool answered from outside use Tool.external()."
        )
    takes_context = _takes_context(name, handler)
    inputs = _parameters_of(
        name, parameters, allow_any=bool(options.get("allow_any", False)), takes_context=takes_context
    )
    return {"handler": handler, "inputs": inputs, "module": getattr(handler, "__module__", "") or ""}


def external_fields(name: str, schema: Any, options: Mapping[str, Any], module: str) -> dict[str, Any]:
    """The fields of ``Tool.external``: a schema and no handler."""
    for forbidden in ("timeout", "presets"):
        if forbidden in options:
            raise ToolDefinitionError(f"Tool {name!r}: an external tool runs nowhere here; {forbidden}= is moot.")
    inner = _parameters_of(name, schema, allow_any=bool(options.get("allow_any", False)), takes_context=False)
    return {"handler": None, "inputs": ExternalInputs(parameters=inner.parameters, inner=inner), "module": module}


def descriptions_required() -> bool:
    """Whether ``TOOLHUB['REQUIRE_PARAMETER_DESCRIPTIONS']`` is on (off before settings are configured)."""
    from django.conf import settings

    if not settings.configured:
        return False
    from toolhub.conf import toolhub_settings

    return bool(toolhub_settings().REQUIRE_PARAMETER_DESCRIPTIONS)


_output_adapters: dict[Any, TypeAdapter[Any]] = {}


def output_adapter(output_type: Any) -> TypeAdapter[Any]:
    """The (cached) adapter that validates and serializes a tool's output type."""
    adapter = _output_adapters.get(output_type)
    if adapter is None:
        adapter = _output_adapters[output_type] = TypeAdapter(output_type)
    return adapter


def checked_output(output_type: Any, result: Any) -> Any:
    """``result`` validated as ``output_type``; a ``ValidationError`` that quotes none of the result's values.

    pydantic quotes each offending value cut in the middle (``'Bearer sk-live-ab...xyz'``): a secret the result
    repeats would come out in pieces, which the secret scrubber (it matches whole values) cannot recognise. The
    error keeps its title, locations and reasons, as the model and the auditors need them.
    """
    try:
        return output_adapter(output_type).validate_python(result)
    except ValidationError as exc:
        raise _without_inputs(exc) from None


def _without_inputs(exc: ValidationError) -> Exception:
    details = [
        {"type": error["type"], "loc": error["loc"], "input": None, **({"ctx": error["ctx"]} if "ctx" in error else {})}
        for error in exc.errors(include_url=False)
    ]
    try:
        return ValidationError.from_exception_data(exc.title, details, hide_input=True)  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError):
        # an error type pydantic cannot rebuild (a custom one): the same title and reasons, as a plain error
        reasons = "; ".join(f"{'.'.join(map(str, error['loc'])) or '(root)'}: {error['msg']}" for error in exc.errors())
        return ValueError(f"{exc.error_count()} validation error(s) for {exc.title}: {reasons}")


def _check_output(name: str, output_type: Any) -> None:
    if output_type is str:
        return
    try:
        check_annotation(output_type, tool_name=name, param_name="(output)", allow_any=True)
        output_adapter(output_type)
    except Exception as exc:  # noqa: BLE001 - pydantic raises several kinds for unsupported types
        raise ToolDefinitionError(f"Tool {name!r}: its output type cannot be serialized ({exc}).") from exc


def _summary(fn: Callable[..., Any]) -> str:
    doc = parse_docstring(inspect.getdoc(fn) or "")
    return "\n\n".join(part for part in (doc.short_description, doc.long_description) if part)


def _model_inputs(name: str, model: Any, *, allow_any: bool, takes_context: bool) -> ModelInputs:
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ToolDefinitionError(f"Tool {name!r}: the input type must be a pydantic model, not {model!r}.")
    specs = describe_model(model, tool_name=name, allow_any=allow_any, require_descriptions=descriptions_required())
    return ModelInputs(parameters=specs, model=model, takes_context=takes_context)


def _takes_context(tool_name: str, handler: Any) -> bool:
    """``handler(arguments)`` or ``handler(arguments, ctx)``; anything else is a declaration error."""
    if not callable(handler):
        raise ToolDefinitionError(f"Tool {tool_name!r}: its handler {handler!r} is not callable.")
    try:
        parameters = [
            p
            for p in inspect.signature(handler).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
    except (TypeError, ValueError):
        return False
    if len(parameters) not in (1, 2):
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: the handler must take (arguments) or (arguments, ctx), "
            f"not {len(parameters)} required positional parameter(s)."
        )
    return len(parameters) == 2


def _parameters_of(tool_name: str, parameters: Any, *, allow_any: bool, takes_context: bool) -> Inputs:
    """Read ``Tool.create``/``Tool.external`` parameters: JSON Schema, name -> type mapping, model, or None."""
    require = descriptions_required()
    if parameters is None:
        return FieldsInputs(takes_context=takes_context)
    if isinstance(parameters, type) and issubclass(parameters, BaseModel):
        return _model_inputs(tool_name, parameters, allow_any=allow_any, takes_context=takes_context)
    if not isinstance(parameters, Mapping):
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: parameters must be a JSON Schema, a mapping of names to types or a pydantic model, "
            f"not {type(parameters).__name__}."
        )
    if "properties" in parameters or isinstance(parameters.get("type"), str) or not parameters:
        schema = checked_object_schema(tool_name, parameters)
        if require:
            bare = [n for n, p in schema["properties"].items() if not (isinstance(p, Mapping) and p.get("description"))]
            if bare:
                raise ToolDefinitionError(
                    f"Tool {tool_name!r}, parameter {bare[0]!r}: has no description, and TOOLHUB['REQUIRE_PARAMETER_"
                    "DESCRIPTIONS'] is on; add a description to its schema."
                )
        return SchemaInputs(schema=schema, takes_context=takes_context)
    specs = []
    for name, declared in parameters.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ToolDefinitionError(f"Tool {tool_name!r}: parameter name {name!r} is not a valid identifier.")
        annotation, default = declared if isinstance(declared, tuple) and len(declared) == 2 else (declared, ...)
        if isinstance(annotation, Mapping | str):
            raise ToolDefinitionError(
                f"Tool {tool_name!r}, parameter {name!r}: give a Python type (or (type, default)); "
                "for a JSON Schema pass the whole object schema with 'properties'."
            )
        check_annotation(annotation, tool_name=tool_name, param_name=name, allow_any=allow_any)
        description = param_description(annotation)
        if require and not description:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}, parameter {name!r}: has no description, and TOOLHUB['REQUIRE_PARAMETER_"
                "DESCRIPTIONS'] is on; use Annotated[..., Param('...')]."
            )
        specs.append(ParameterSpec(name, annotation, default, description))
    return FieldsInputs(parameters=tuple(specs), takes_context=takes_context)
