"""How a tool takes its inputs: one small strategy per way of declaring them.

Each strategy gives the inputs' JSON Schema, validates the model's arguments, and binds validated
arguments to the handler:

- ``SignatureInputs``: a function's parameters; the handler gets one keyword argument each, plus
  the injected ones (context, progress, context objects, presets);
- ``FieldsInputs``: a mapping of names to types (``Tool.create``); the handler gets a dict;
- ``ModelInputs``: a pydantic model; the handler gets the model instance;
- ``SchemaInputs``: a hand-written JSON Schema, validated by ``jsonschema``; the handler gets a dict;
- ``ExternalInputs``: any of those without a handler; the result comes from outside.

The handler of the last three takes ``(arguments)`` or ``(arguments, ctx)``.
"""

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from toolhub.exceptions import ToolDefinitionError, ToolhubError
from toolhub.tools.context import ToolContext
from toolhub.tools.context_types import context_object
from toolhub.tools.jsonschema_args import validate_against_schema
from toolhub.tools.presets import resolve_preset
from toolhub.tools.progress import Progress
from toolhub.tools.schema import (
    build_input_model,
    closed_model,
    fast_json_schema,
    json_schema_of,
    parameter_core_schemas,
)
from toolhub.tools.specs import InjectedParameter, ParameterSpec
from toolhub.tools.typechecks import accepts_none

__all__ = ["ExternalInputs", "FieldsInputs", "Inputs", "ModelInputs", "SchemaInputs", "SignatureInputs"]

Bound = Callable[[], Any]


class Built(Protocol):
    """What a strategy needs of the tool it serves: its name and its cached model and schema."""

    @property
    def name(self) -> str: ...

    @property
    def input_model(self) -> type[BaseModel]: ...

    @property
    def json_schema(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Inputs:
    """The base strategy: parameters described one by one (``parameters``), validated by a built model."""

    parameters: tuple[ParameterSpec, ...] = ()

    @property
    def injected(self) -> tuple[InjectedParameter, ...]:
        """Parameters filled in when the call runs; only a function's signature has them."""
        return ()

    @property
    def context_parameter(self) -> str | None:
        return None

    @property
    def has_model(self) -> bool:
        """Whether a pydantic model validates the arguments (a hand-written JSON Schema has none)."""
        return True

    @property
    def is_external(self) -> bool:
        return False

    def argument_names(self) -> set[str]:
        return {p.name for p in self.parameters}

    def published_defaults(self) -> dict[str, Any]:
        """Argument name -> the default its schema shows every model and client (a sensitive one must show none)."""
        return {p.name: p.default for p in self.parameters if not p.required}

    def input_model(self, tool_name: str) -> type[BaseModel]:
        """The pydantic model that validates the arguments."""
        return build_input_model(tool_name, self.parameters)

    def core_schemas(self) -> list[Any]:
        """The pydantic core schemas of every value the arguments are validated as, without a model built.

        For checks made at startup (``backtracking_patterns``): the per-type ones ``json_schema`` uses already.
        """
        return parameter_core_schemas(self.parameters)

    def json_schema(self, built: Built) -> dict[str, Any]:
        """The inputs' JSON Schema (the tool caches it)."""
        fast = fast_json_schema(self.parameters)
        if fast is not None:
            # Most tools: assembled from cached per-type schemas, so startup does not build 1,000 models.
            return fast
        return json_schema_of(built.name, built.input_model)

    def null_means_default(self) -> frozenset[str]:
        """Optional parameters that do not accept ``None``: in strict mode the model sends ``null`` for "unset"."""
        return frozenset(p.name for p in self.parameters if not p.required and not accepts_none(p.annotation))

    def validate(self, built: Built, values: dict[str, Any]) -> dict[str, Any]:
        """Validate the model's arguments; raises ``pydantic.ValidationError`` on any problem."""
        validated = built.input_model.model_validate(values)
        return {spec.name: getattr(validated, spec.name) for spec in self.parameters}

    def bind(
        self,
        built: Built,
        handler: Callable[..., Any],
        arguments: Mapping[str, Any],
        ctx: ToolContext,
        progress: Progress | None,
    ) -> Bound:
        """A zero-argument call of ``handler`` with validated ``arguments``."""
        raise NotImplementedError


@dataclass(frozen=True)
class SignatureInputs(Inputs):
    """A function's own parameters: ``handler(**arguments, **injected)``."""

    injected_parameters: tuple[InjectedParameter, ...] = ()
    context_name: str | None = None
    presets: Mapping[str, Any] = field(default_factory=dict)

    @property
    def injected(self) -> tuple[InjectedParameter, ...]:
        return self.injected_parameters

    @property
    def context_parameter(self) -> str | None:
        return self.context_name

    def bind(
        self,
        built: Built,
        handler: Callable[..., Any],
        arguments: Mapping[str, Any],
        ctx: ToolContext,
        progress: Progress | None,
    ) -> Bound:
        if not self.injected_parameters:
            kwargs = dict(arguments)
        else:
            kwargs = {**arguments, **self._injected_values(built.name, ctx, progress)}
        return lambda: handler(**kwargs)

    def _injected_values(self, tool_name: str, ctx: ToolContext, progress: Progress | None) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for parameter in self.injected_parameters:
            if parameter.kind == "context":
                values[parameter.name] = ctx
            elif parameter.kind == "progress":
                values[parameter.name] = progress if progress is not None else Progress()
            elif parameter.kind == "context_object":
                values[parameter.name] = context_object(
                    parameter.annotation, ctx, tool_name=tool_name, parameter=parameter.name, default=parameter.default
                )
            elif parameter.kind == "preset":
                values[parameter.name] = resolve_preset(tool_name, parameter.name, self.presets[parameter.name])
        return values


@dataclass(frozen=True)
class FieldsInputs(Inputs):
    """Parameters given as a mapping of names to types: ``handler(arguments_dict[, ctx])``."""

    takes_context: bool = False

    def bind(
        self,
        built: Built,
        handler: Callable[..., Any],
        arguments: Mapping[str, Any],
        ctx: ToolContext,
        progress: Progress | None,
    ) -> Bound:
        return _bind_value(handler, dict(arguments), ctx, self.takes_context)


@dataclass(frozen=True)
class ModelInputs(Inputs):
    """A pydantic input model: ``handler(model_instance[, ctx])``; arguments are validated as the model."""

    model: type[BaseModel] = BaseModel
    takes_context: bool = False

    def input_model(self, tool_name: str) -> type[BaseModel]:
        return closed_model(self.model)

    def core_schemas(self) -> list[Any]:
        return [self.model.__pydantic_core_schema__]

    def json_schema(self, built: Built) -> dict[str, Any]:
        return json_schema_of(built.name, built.input_model)

    def validate(self, built: Built, values: dict[str, Any]) -> dict[str, Any]:
        return built.input_model.model_validate(values).model_dump(by_alias=True)

    def bind(
        self,
        built: Built,
        handler: Callable[..., Any],
        arguments: Mapping[str, Any],
        ctx: ToolContext,
        progress: Progress | None,
    ) -> Bound:
        return _bind_value(handler, self.model.model_validate(dict(arguments)), ctx, self.takes_context)


@dataclass(frozen=True)
class SchemaInputs(Inputs):
    """A hand-written JSON Schema of an object, validated by ``jsonschema``: ``handler(arguments_dict[, ctx])``."""

    schema: Mapping[str, Any] = field(default_factory=dict)
    takes_context: bool = False

    @property
    def has_model(self) -> bool:
        return False

    def argument_names(self) -> set[str]:
        return set(self.schema.get("properties", {}))

    def published_defaults(self) -> dict[str, Any]:
        properties = self.schema.get("properties", {})
        return {
            name: node["default"]
            for name, node in properties.items()
            if isinstance(node, Mapping) and "default" in node
        }

    def input_model(self, tool_name: str) -> type[BaseModel]:
        raise ToolDefinitionError(f"Tool {tool_name!r} is validated by its JSON Schema; it has no input model.")

    def core_schemas(self) -> list[Any]:
        return []  # its patterns are checked when it is built (``jsonschema_args``)

    def json_schema(self, built: Built) -> dict[str, Any]:
        return copy.deepcopy(dict(self.schema))

    def null_means_default(self) -> frozenset[str]:
        return frozenset()

    def validate(self, built: Built, values: dict[str, Any]) -> dict[str, Any]:
        return validate_against_schema(built.name, built.json_schema, values, owner=built)

    def bind(
        self,
        built: Built,
        handler: Callable[..., Any],
        arguments: Mapping[str, Any],
        ctx: ToolContext,
        progress: Progress | None,
    ) -> Bound:
        return _bind_value(handler, dict(arguments), ctx, self.takes_context)


@dataclass(frozen=True)
class ExternalInputs(Inputs):
    """The inputs of a tool answered from outside: validated like ``inner``'s, never bound to a handler."""

    inner: Inputs = field(default_factory=Inputs)

    @property
    def is_external(self) -> bool:
        return True

    @property
    def has_model(self) -> bool:
        return self.inner.has_model

    def argument_names(self) -> set[str]:
        return self.inner.argument_names()

    def published_defaults(self) -> dict[str, Any]:
        return self.inner.published_defaults()

    def input_model(self, tool_name: str) -> type[BaseModel]:
        return self.inner.input_model(tool_name)

    def core_schemas(self) -> list[Any]:
        return self.inner.core_schemas()

    def json_schema(self, built: Built) -> dict[str, Any]:
        return self.inner.json_schema(built)

    def null_means_default(self) -> frozenset[str]:
        return self.inner.null_means_default()

    def validate(self, built: Built, values: dict[str, Any]) -> dict[str, Any]:
        return self.inner.validate(built, values)

    def bind(
        self,
        built: Built,
        handler: Callable[..., Any],
        arguments: Mapping[str, Any],
        ctx: ToolContext,
        progress: Progress | None,
    ) -> Bound:
        raise ToolhubError(
            f"Tool {built.name!r} is external: its result is supplied by POST /api/v1/calls/{{id}}/result/, "
            "it cannot run here."
        )


def _bind_value(handler: Callable[..., Any], value: Any, ctx: ToolContext, takes_context: bool) -> Bound:
    if takes_context:
        return lambda: handler(value, ctx)
    return lambda: handler(value)
