"""The tool model: an immutable ``Tool`` value and the ``@tool`` decorator that makes one."""

import copy
import dataclasses
import hashlib
import inspect
import json
import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from functools import cached_property
from types import MappingProxyType
from typing import Any, overload

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from toolhub.exceptions import ToolDefinitionError, ToolhubError
from toolhub.tools.context import ToolContext
from toolhub.tools.context_types import context_object
from toolhub.tools.jsonschema_args import checked_object_schema, validate_against_schema
from toolhub.tools.presets import resolve_preset
from toolhub.tools.progress import Progress
from toolhub.tools.results import ToolResult
from toolhub.tools.schema import (
    InjectedParameter,
    ParameterSpec,
    _param_description,
    accepts_none,
    build_input_model,
    check_annotation,
    describe_function,
    describe_model,
    fast_json_schema,
    json_schema_of,
)
from toolhub.tools.timeouts import await_with_timeout, call_with_timeout

__all__ = ["Risk", "ReturnBehavior", "CallStyle", "Tool", "tool", "TOOL_ATTRIBUTE", "TOOL_OPTIONS", "ApprovalRule"]

TOOL_ATTRIBUTE = "__toolhub_tool__"
_NAME_PATTERN = re.compile(r"^[a-zA-Z][a-zA-Z0-9_\-]{0,63}$")

#: ``"always"``, ``"never"``, ``"auto"`` (by risk) or ``callable(arguments, ctx) -> bool | str``.
ApprovalRule = str | Callable[[Mapping[str, Any], ToolContext], bool | str | None]


class Risk(StrEnum):
    """How much harm a wrong call can do; ``high`` and ``critical`` need an operator's approval."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def needs_approval(self) -> bool:
        return self in (Risk.HIGH, Risk.CRITICAL)


class ReturnBehavior(StrEnum):
    """Whether a tool's result goes back to the model or ends the run."""

    TO_LLM = "to_llm"
    IMMEDIATE = "immediate"
    IMMEDIATE_IF_LAST = "immediate_if_last"


class CallStyle(StrEnum):
    """How a tool's handler receives its arguments."""

    #: A decorated function: one keyword argument per parameter, plus the injected ones.
    KWARGS = "kwargs"
    #: ``Tool.from_function`` (or ``Tool.create`` with a model): ``handler(input_model[, ctx])``.
    MODEL = "model"
    #: ``Tool.create``: ``handler(arguments_dict[, ctx])``.
    MAPPING = "mapping"
    #: ``Tool.external``: no handler; the result is supplied from outside.
    EXTERNAL = "external"


#: Options ``@tool`` and the ``Tool`` factories accept besides name and description.
TOOL_OPTIONS = frozenset(
    {
        "risk",
        "approval",
        "group",
        "category",
        "tags",
        "timeout",
        "idempotent",
        "sensitive",
        "compensate_with",
        "compensation_mapping",
        "return_behavior",
        "strict",
        "presets",
        "allow_any",
        "one_shot_per_loop",
        "advice",
        "always_visible",
    }
)


@dataclasses.dataclass(frozen=True, eq=False)
class Tool:
    """A registered tool: a handler plus everything the pipeline and the model need to know of it.

    A ``Tool`` is immutable; ``with_description`` and ``with_note`` return modified copies. Its input
    model, JSON Schema and version hash are built on first use and cached (copies share them).
    """

    name: str
    description: str
    handler: Callable[..., Any] | None
    parameters: tuple[ParameterSpec, ...]
    context_parameter: str | None = None
    risk: Risk = Risk.LOW
    approval: ApprovalRule = "auto"
    group: str = ""
    category: str = ""
    tags: frozenset[str] = frozenset()
    timeout: float | None = None
    idempotent: bool = False
    sensitive: frozenset[str] = frozenset()
    compensate_with: str | None = None
    #: ``mapping(arguments, result) -> dict`` of the compensation's arguments; without one they are matched by name.
    compensation_mapping: Callable[[Mapping[str, Any], Any], Mapping[str, Any]] | None = None
    return_behavior: ReturnBehavior = ReturnBehavior.TO_LLM
    strict: bool = False
    module: str = ""
    #: Parameters filled in when the call runs (context, progress, context objects, presets).
    injected: tuple[InjectedParameter, ...] = ()
    #: Parameter name -> constant, ``Secret(...)`` or zero-argument callable, resolved at call time.
    presets: Mapping[str, Any] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    one_shot_per_loop: bool = False
    advice: str = ""
    always_visible: bool = False
    call_style: CallStyle = CallStyle.KWARGS
    #: A hand-written JSON Schema of the inputs (``Tool.create`` / ``Tool.external`` with a schema).
    schema_override: Mapping[str, Any] | None = None
    input_type: type[BaseModel] | None = None
    output_type: Any = None
    handler_takes_context: bool = False
    #: Built from a method that is not bound yet: register ``tools_from_instance(obj)`` instead.
    is_method: bool = False
    #: Whether the developer chose the risk (a system check warns about tools that did not).
    risk_declared: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_PATTERN.fullmatch(self.name):
            raise ToolDefinitionError(
                f"Tool name {self.name!r} is not valid: use letters, digits, '_' or '-', starting with a "
                "letter, at most 64 characters."
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ToolDefinitionError(f"Tool {self.name!r} has no description: add a docstring or pass description=...")
        if isinstance(self.approval, str) and self.approval not in {"auto", "always", "never"}:
            raise ToolDefinitionError(
                f"Tool {self.name!r}: approval must be 'auto', 'always', 'never' or a callable, not {self.approval!r}."
            )
        if not isinstance(self.approval, str) and not callable(self.approval):
            raise ToolDefinitionError(f"Tool {self.name!r}: approval must be a string or a callable.")
        if self.call_style is CallStyle.EXTERNAL:
            if self.handler is not None:
                raise ToolDefinitionError(f"Tool {self.name!r}: an external tool has no handler.")
        elif not callable(self.handler):
            raise ToolDefinitionError(f"Tool {self.name!r}: its handler {self.handler!r} is not callable.")
        names = self._argument_names()
        unknown = set(self.sensitive) - names - set(self.presets)
        if unknown:
            raise ToolDefinitionError(
                f"Tool {self.name!r}: sensitive names {sorted(unknown)} are not parameters of it."
            )
        if self.timeout is not None and (
            isinstance(self.timeout, bool) or not isinstance(self.timeout, int | float) or not self.timeout > 0
        ):
            raise ToolDefinitionError(
                f"Tool {self.name!r}: timeout must be a positive number of seconds, not {self.timeout!r}."
            )
        if self.advice and not self.one_shot_per_loop:
            raise ToolDefinitionError(
                f"Tool {self.name!r}: advice= is what a one-shot tool answers when called again; "
                "it needs one_shot_per_loop=True."
            )
        if self.compensate_with is not None and (not isinstance(self.compensate_with, str) or not self.compensate_with):
            raise ToolDefinitionError(f"Tool {self.name!r}: compensate_with must name a tool.")
        if self.compensate_with == self.name:
            raise ToolDefinitionError(f"Tool {self.name!r} cannot compensate itself; name another tool.")

    def __repr__(self) -> str:
        return f"<Tool {self.name} risk={self.risk}>"

    def _argument_names(self) -> set[str]:
        if self.parameters:
            return {p.name for p in self.parameters}
        if self.schema_override is not None:
            return set(self.schema_override.get("properties", {}))
        return set()

    @property
    def is_external(self) -> bool:
        """Whether calls of this tool are answered from outside (``POST /calls/{id}/result/``)."""
        return self.call_style is CallStyle.EXTERNAL

    @property
    def effective_timeout(self) -> float:
        """The time limit of one call: the tool's own, else ``TOOLHUB['DEFAULT_TOOL_TIMEOUT_SECONDS']``."""
        if self.timeout:
            return float(self.timeout)
        from toolhub.conf import toolhub_settings

        return toolhub_settings().DEFAULT_TOOL_TIMEOUT_SECONDS

    @cached_property
    def input_model(self) -> type[BaseModel]:
        """The pydantic model that validates this tool's arguments."""
        if self.input_type is not None:
            return _closed_model(self.input_type)
        if self.schema_override is not None and not self.parameters:
            raise ToolDefinitionError(f"Tool {self.name!r} is validated by its JSON Schema; it has no input model.")
        return build_input_model(self.name, self.parameters)

    @cached_property
    def json_schema(self) -> dict[str, Any]:
        """JSON Schema of the inputs, as shown to the model."""
        if self.schema_override is not None and not self.parameters:
            return copy.deepcopy(dict(self.schema_override))
        if self.input_type is None:
            # Most tools: assembled from cached per-type schemas, so startup does not build 1,000 models.
            fast = fast_json_schema(self.parameters)
            if fast is not None:
                return fast
        return json_schema_of(self.name, self.input_model)

    @cached_property
    def strict_json_schema(self) -> dict[str, Any]:
        """The inputs' schema under OpenAI's strict rules (closed objects, every property required)."""
        from toolhub.tools.export import strict_schema

        return strict_schema(self.name, self.json_schema)

    @cached_property
    def version(self) -> str:
        """A hash of everything that changes what a call means; approvals are bound to it."""
        identity: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "schema": self.json_schema,
            "risk": str(self.risk),
            "approval": self.approval if isinstance(self.approval, str) else _qualified(self.approval),
            "handler": _qualified(self.handler),
            "return_behavior": str(self.return_behavior),
        }
        if self.is_external:
            identity["external"] = True
        if self.presets:
            identity["presets"] = sorted(self.presets)
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()
        return digest[:16]

    @cached_property
    def _null_means_default(self) -> frozenset[str]:
        """Optional parameters that do not accept ``None``: in strict mode the model sends ``null`` for "unset"."""
        return frozenset(p.name for p in self.parameters if not p.required and not accepts_none(p.annotation))

    def validate_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate model-supplied arguments; raises ``pydantic.ValidationError`` on any problem."""
        if self.schema_override is not None and not self.parameters:
            return validate_against_schema(self.name, self.json_schema, arguments)
        values = dict(arguments)
        if self.strict and self._null_means_default:
            values = {k: v for k, v in values.items() if not (v is None and k in self._null_means_default)}
        model = self.input_model.model_validate(values)
        if self.input_type is not None:
            return model.model_dump(by_alias=True)
        return {spec.name: getattr(model, spec.name) for spec in self.parameters}

    def is_valid_arguments(self, arguments: Mapping[str, Any]) -> bool:
        """Return whether ``arguments`` validate (for callers that only need a yes or no)."""
        try:
            self.validate_arguments(arguments)
        except ValidationError:
            return False
        return True

    def invoke(
        self,
        arguments: Mapping[str, Any],
        ctx: ToolContext | None = None,
        *,
        progress: Progress | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Call the handler with validated arguments and the injected values; awaits async tools.

        ``timeout`` (seconds) stops the tool with ``ToolTimeoutError``; ``None`` means no limit.
        """
        if self.is_external:
            raise ToolhubError(
                f"Tool {self.name!r} is external: its result is supplied by POST /api/v1/calls/{{id}}/result/, "
                "it cannot run here."
            )
        ctx = ctx if ctx is not None else ToolContext()
        bound = self._bound_call(arguments, ctx, progress)
        result = call_with_timeout(bound, seconds=timeout, tool_name=self.name)
        if inspect.isawaitable(result):
            result = await_with_timeout(result, seconds=timeout, tool_name=self.name)
        return self._checked_output(result)

    def _bound_call(
        self, arguments: Mapping[str, Any], ctx: ToolContext, progress: Progress | None
    ) -> Callable[[], Any]:
        handler = self.handler
        assert handler is not None
        if self.call_style is CallStyle.KWARGS:
            kwargs = {**arguments, **self._injected_values(ctx, progress)}
            return lambda: handler(**kwargs)
        if self.call_style is CallStyle.MODEL:
            assert self.input_type is not None
            value: Any = self.input_type.model_validate(dict(arguments))
        else:
            value = dict(arguments)
        if self.handler_takes_context:
            return lambda: handler(value, ctx)
        return lambda: handler(value)

    def _injected_values(self, ctx: ToolContext, progress: Progress | None) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for parameter in self.injected:
            if parameter.kind == "context":
                values[parameter.name] = ctx
            elif parameter.kind == "progress":
                values[parameter.name] = progress if progress is not None else Progress()
            elif parameter.kind == "context_object":
                values[parameter.name] = context_object(
                    parameter.annotation, ctx, tool_name=self.name, parameter=parameter.name, default=parameter.default
                )
            elif parameter.kind == "preset":
                values[parameter.name] = resolve_preset(self.name, parameter.name, self.presets[parameter.name])
        return values

    def _checked_output(self, result: Any) -> Any:
        if self.output_type is None or self.output_type is str or isinstance(result, ToolResult):
            return result
        return _output_adapter(self.output_type).validate_python(result)

    @property
    def needs_progress(self) -> bool:
        """Whether the handler takes a ``Progress`` parameter."""
        return any(parameter.kind == "progress" for parameter in self.injected)

    def with_description(self, description: str) -> "Tool":
        """Return a copy with another description."""
        return self._copy(description=description)

    def with_note(self, note: str) -> "Tool":
        """Return a copy whose description ends with ``note``."""
        return self._copy(description=f"{self.description.rstrip()}\n\n{note}")

    def _copy(self, **changes: Any) -> "Tool":
        """A modified copy that shares the built input model and schemas (they do not depend on the changes)."""
        copied = dataclasses.replace(self, **changes)
        if "parameters" not in changes and "schema_override" not in changes and "input_type" not in changes:
            for key in ("input_model", "json_schema", "strict_json_schema", "_null_means_default"):
                if key in self.__dict__:
                    copied.__dict__[key] = self.__dict__[key]
        return copied

    @classmethod
    def from_callable(cls, fn: Callable[..., Any], **options: Any) -> "Tool":
        """Build a tool from a function's signature and docstring, with ``options`` as metadata."""
        if not callable(fn) or isinstance(fn, type):
            raise ToolDefinitionError(f"@tool decorates a function or a method, not {fn!r}.")
        name = options.pop("name", None) or getattr(fn, "__name__", "")
        presets = _presets(name, options.pop("presets", None))
        described = describe_function(
            fn,
            tool_name=name,
            presets=presets,
            allow_any=bool(options.pop("allow_any", False)),
            require_descriptions=_descriptions_required(),
        )
        description = options.pop("description", None) or described.summary
        return cls._build(
            name=name,
            description=description or "",
            handler=fn,
            parameters=described.parameters,
            context_parameter=described.context_parameter,
            injected=described.injected,
            presets=presets,
            is_method=described.is_method,
            module=getattr(fn, "__module__", "") or "",
            options=options,
        )

    @classmethod
    def create(
        cls,
        name: str,
        description: str,
        parameters: Mapping[str, Any] | type[BaseModel] | None = None,
        handler: Callable[..., Any] | None = None,
        **options: Any,
    ) -> "Tool":
        """Build a tool from a handler and its parameters, without a decorated function.

        ``parameters`` is a JSON Schema of an object, a mapping of names to types
        (``{"a": Annotated[int, Param("First number")], "b": (int, 0)}``), a pydantic model, or
        ``None``. ``handler(arguments)`` or ``handler(arguments, ctx)`` gets the validated arguments
        as a dict (as the model instance when ``parameters`` is a model).
        """
        if handler is None:
            raise ToolDefinitionError(
                f"Tool {name!r}: Tool.create() needs a handler; for a tool answered from outside use Tool.external()."
            )
        takes_context = _handler_takes_context(name, handler)
        specs, schema, input_type = _parameters_of(name, parameters, allow_any=bool(options.pop("allow_any", False)))
        return cls._build(
            name=name,
            description=description,
            handler=handler,
            parameters=specs,
            schema_override=schema,
            input_type=input_type,
            call_style=CallStyle.MODEL if input_type is not None else CallStyle.MAPPING,
            handler_takes_context=takes_context,
            module=getattr(handler, "__module__", "") or "",
            options=options,
        )

    @classmethod
    def from_function(
        cls,
        name: str,
        description: str,
        input_type: type[BaseModel],
        output_type: Any,
        fn: Callable[..., Any],
        **options: Any,
    ) -> "Tool":
        """A typed tool: ``fn(input_model[, ctx]) -> output``; the schema comes from ``input_type``.

        The output is validated as ``output_type`` and serialized to JSON, except that strings pass
        through as they are and a ``ToolResult`` is used as returned.
        """
        if not (isinstance(input_type, type) and issubclass(input_type, BaseModel)):
            raise ToolDefinitionError(f"Tool {name!r}: the input type must be a pydantic model, not {input_type!r}.")
        if output_type is not None and output_type is not str:
            try:
                check_annotation(output_type, tool_name=name, param_name="(output)", allow_any=True)
                _output_adapter(output_type)
            except Exception as exc:  # noqa: BLE001 - pydantic raises several kinds for unsupported types
                raise ToolDefinitionError(f"Tool {name!r}: its output type cannot be serialized ({exc}).") from exc
        takes_context = _handler_takes_context(name, fn)
        specs = describe_model(
            input_type,
            tool_name=name,
            allow_any=bool(options.pop("allow_any", False)),
            require_descriptions=_descriptions_required(),
        )
        return cls._build(
            name=name,
            description=description,
            handler=fn,
            parameters=specs,
            input_type=input_type,
            output_type=output_type,
            call_style=CallStyle.MODEL,
            handler_takes_context=takes_context,
            module=getattr(fn, "__module__", "") or "",
            options=options,
        )

    @classmethod
    def external(
        cls,
        name: str,
        description: str,
        schema: Mapping[str, Any] | type[BaseModel] | None = None,
        **options: Any,
    ) -> "Tool":
        """A schema-only tool: a call waits (the run suspends) until its result is supplied from outside.

        The result (or error) arrives by ``POST /api/v1/calls/{id}/result/``; it is audited and the
        run resumes. Validation, permissions and approvals apply as for any tool.
        """
        specs, json_schema, input_type = _parameters_of(name, schema, allow_any=bool(options.pop("allow_any", False)))
        for forbidden in ("timeout", "presets"):
            if forbidden in options:
                raise ToolDefinitionError(f"Tool {name!r}: an external tool runs nowhere here; {forbidden}= is moot.")
        return cls._build(
            name=name,
            description=description,
            handler=None,
            parameters=specs,
            schema_override=json_schema,
            input_type=input_type,
            call_style=CallStyle.EXTERNAL,
            module=_caller_module(),
            options=options,
        )

    @classmethod
    def _build(cls, *, name: str, options: Mapping[str, Any], **fields: Any) -> "Tool":
        """Check the developer's options and make the tool; every mistake names the tool."""
        options = dict(options)
        unknown = sorted(set(options) - TOOL_OPTIONS)
        if unknown:
            raise ToolDefinitionError(
                f"Tool {name!r}: unknown option(s) {', '.join(unknown)}; "
                f"known options: {', '.join(sorted(TOOL_OPTIONS))}."
            )
        for leftover in ("presets", "allow_any"):
            options.pop(leftover, None)
        risk_declared = "risk" in options
        risk = _choice(Risk, options.pop("risk", Risk.LOW), name, "risk")
        return_behavior = _choice(
            ReturnBehavior, options.pop("return_behavior", ReturnBehavior.TO_LLM), name, "return_behavior"
        )
        tags = options.pop("tags", ())
        sensitive = options.pop("sensitive", ())
        for label, value in (("tags", tags), ("sensitive", sensitive)):
            if isinstance(value, str) or not all(isinstance(item, str) for item in value):
                raise ToolDefinitionError(f"Tool {name!r}: {label}= takes a list of strings, not {value!r}.")
        presets = fields.get("presets") or {}
        if "advice" in options and not isinstance(options["advice"], str):
            raise ToolDefinitionError(f"Tool {name!r}: advice= must be a string.")
        return cls(
            name=name,
            risk=risk,
            risk_declared=risk_declared,
            return_behavior=return_behavior,
            tags=frozenset(tags),
            # Preset values are never shown: treat their names as sensitive wherever arguments are shown.
            sensitive=frozenset(sensitive) | frozenset(presets),
            **fields,
            **options,
        )


def _choice(enum_type: type[StrEnum], value: Any, tool_name: str, option: str) -> Any:
    try:
        return enum_type(value)
    except ValueError:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: {option} {value!r} is not one of {', '.join(e.value for e in enum_type)}."
        ) from None


def _presets(tool_name: str, presets: Any) -> MappingProxyType[str, Any]:
    if presets is None:
        return MappingProxyType({})
    if not isinstance(presets, Mapping) or not all(isinstance(key, str) for key in presets):
        raise ToolDefinitionError(f"Tool {tool_name!r}: presets= maps parameter names to values or Secret(...).")
    return MappingProxyType(dict(presets))


def _descriptions_required() -> bool:
    from django.conf import settings

    if not settings.configured:
        return False
    from toolhub.conf import toolhub_settings

    return toolhub_settings().REQUIRE_PARAMETER_DESCRIPTIONS


def _handler_takes_context(tool_name: str, handler: Any) -> bool:
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


def _parameters_of(
    tool_name: str, parameters: Any, *, allow_any: bool
) -> tuple[tuple[ParameterSpec, ...], dict[str, Any] | None, type[BaseModel] | None]:
    """Read ``Tool.create``/``Tool.external`` parameters: JSON Schema, name -> type mapping, model, or None."""
    require = _descriptions_required()
    if parameters is None:
        return (), None, None
    if isinstance(parameters, type) and issubclass(parameters, BaseModel):
        return (
            describe_model(parameters, tool_name=tool_name, allow_any=allow_any, require_descriptions=require),
            None,
            parameters,
        )
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
        return (), schema, None
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
        description = _param_description(annotation)
        if require and not description:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}, parameter {name!r}: has no description, and TOOLHUB['REQUIRE_PARAMETER_"
                "DESCRIPTIONS'] is on; use Annotated[..., Param('...')]."
            )
        specs.append(ParameterSpec(name, annotation, default, description))
    return tuple(specs), None, None


def _closed_model(model: type[BaseModel]) -> type[BaseModel]:
    """The model itself when it refuses unknown fields, else a subclass that does."""
    if model.model_config.get("extra") == "forbid":
        return model
    return type(model.__name__, (model,), {"model_config": ConfigDict(**{**model.model_config, "extra": "forbid"})})


_output_adapters: dict[Any, TypeAdapter[Any]] = {}


def _output_adapter(output_type: Any) -> TypeAdapter[Any]:
    adapter = _output_adapters.get(output_type)
    if adapter is None:
        adapter = _output_adapters[output_type] = TypeAdapter(output_type)
    return adapter


def _caller_module() -> str:
    frame = inspect.currentframe()
    try:
        caller = frame.f_back.f_back if frame and frame.f_back else None
        return str(caller.f_globals.get("__name__", "")) if caller else ""
    finally:
        del frame


def _qualified(obj: Any) -> str:
    if obj is None:
        return "external"
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


@overload
def tool(fn: Callable[..., Any], /) -> Callable[..., Any]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    risk: Risk | str = Risk.LOW,
    approval: ApprovalRule = "auto",
    group: str = "",
    category: str = "",
    tags: tuple[str, ...] | frozenset[str] = (),
    timeout: float | None = None,
    idempotent: bool = False,
    sensitive: tuple[str, ...] | frozenset[str] = (),
    compensate_with: str | None = None,
    compensation_mapping: Callable[[Mapping[str, Any], Any], Mapping[str, Any]] | None = None,
    return_behavior: ReturnBehavior | str = ReturnBehavior.TO_LLM,
    strict: bool = False,
    presets: Mapping[str, Any] | None = None,
    allow_any: bool = False,
    one_shot_per_loop: bool = False,
    advice: str = "",
    always_visible: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...


def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Declare a function (or a method) as a tool; bare (``@tool``) or with metadata (``@tool(risk="high")``).

    The function stays callable as it was; the ``Tool`` built from it is its ``tool`` attribute.
    Tools in an installed app's ``tools.py`` are registered by autodiscovery at startup; the tools
    of an object's methods are made with ``tools_from_instance(obj)``.
    """

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        built = Tool.from_callable(func, **dict(options))
        setattr(func, TOOL_ATTRIBUTE, built)
        func.tool = built  # type: ignore[attr-defined]
        func.compensation = _compensation_decorator(func)  # type: ignore[attr-defined]
        return func

    if fn is not None:
        if options:
            raise ToolDefinitionError("Use @tool or @tool(option=...), not both at once.")
        return decorate(fn)
    return decorate


def _compensation_decorator(original: Callable[..., Any]) -> Callable[..., Any]:
    """Build ``@original.compensation``: declare the decorated function as the tool that undoes ``original``.

    ``@debit.compensation`` (or ``@debit.compensation(mapping=fn, idempotent=True)``) makes the function a
    tool (unless it is one already) and sets ``compensate_with`` (and the mapping) on a copy of the
    original's ``Tool``: tools stay immutable, the attribute is set again.
    """

    def compensation(fn: Callable[..., Any] | None = None, /, *, mapping: Any = None, **options: Any) -> Any:
        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            built = getattr(func, TOOL_ATTRIBUTE, None)
            if built is None:
                built = getattr(tool(**options)(func), TOOL_ATTRIBUTE)
            elif options:
                raise ToolDefinitionError(
                    f"Tool {built.name!r} is already a tool: pass {sorted(options)} to its @tool(...), "
                    "not to .compensation."
                )
            current = getattr(original, TOOL_ATTRIBUTE)
            updated = dataclasses.replace(current, compensate_with=built.name, compensation_mapping=mapping)
            setattr(original, TOOL_ATTRIBUTE, updated)
            original.tool = updated  # type: ignore[attr-defined]
            return func

        if fn is not None:
            return register(fn)
        return register

    return compensation
