"""The tool model: an immutable ``Tool`` value, made by ``@tool`` or by its factories.

A ``Tool`` holds what the pipeline and the model need to know of a tool (name, description, risk,
options) and an ``Inputs`` strategy (``toolhub.tools.inputs``) that gives its schema, validates its
arguments and binds them to the handler. The rules a definition must keep are in
``toolhub.tools.definition_rules``; the factories read their sources in ``toolhub.tools.factories`` and
their options in ``toolhub.tools.options``.
"""

import dataclasses
import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import cached_property
from types import MappingProxyType
from typing import Any, Unpack, overload

from pydantic import BaseModel, ValidationError

from toolhub.exceptions import ToolDefinitionError, ToolhubError
from toolhub.tools.context import ToolContext
from toolhub.tools.definition_rules import TOOL_ATTRIBUTE, refuse_invalid
from toolhub.tools.factories import checked_output, external_fields, fields_of_function, mapping_fields
from toolhub.tools.inputs import Inputs, ModelInputs, SignatureInputs
from toolhub.tools.linear_patterns import backtracking_patterns, backtracking_refusal
from toolhub.tools.options import (
    FUNCTION_TOOL_OPTIONS,
    TOOL_OPTIONS,
    ApprovalRule,
    CompensationMapping,
    FunctionToolOptions,
    NeedsApproval,
    ReturnBehavior,
    Risk,
    ToolOptions,
    read_options,
    warn_deprecated,
)
from toolhub.tools.progress import Progress
from toolhub.tools.results import ToolResult, read_now
from toolhub.tools.specs import InjectedParameter, ParameterSpec
from toolhub.tools.strict import strict_schema
from toolhub.tools.timeouts import await_with_timeout, call_with_timeout

__all__ = [
    "ApprovalRule",
    "Compensation",
    "NeedsApproval",
    "Risk",
    "ReturnBehavior",
    "Tool",
    "TOOL_ATTRIBUTE",
    "TOOL_OPTIONS",
    "ToolOptions",
    "FunctionToolOptions",
]

_APPROVAL_IDENTITY = {None: "auto", True: "always", False: "never"}


class Compensation:
    """Which tool undoes a tool: set by ``compensate_with=`` or ``@fn.compensation``, resolved at freeze.

    A tool and its copies share one; ``@debit.compensation`` sets it in place, so a reference to
    ``debit.tool`` taken before sees the compensation too. Once the registry freezes, it is fixed.
    """

    __slots__ = ("_target", "mapping", "_name", "_frozen")

    def __init__(self, target: Any = None, mapping: CompensationMapping | None = None) -> None:
        self._target = target
        self.mapping = mapping
        self._name: str | None = target if isinstance(target, str) else None
        self._frozen = False

    @property
    def target(self) -> Any:
        """What was declared: a tool's name, a ``Tool``, an ``@tool`` function, or ``None``."""
        return self._target

    def set(self, tool_name: str, target: Any, mapping: CompensationMapping | None) -> None:
        """Point the tool at its compensation (``@fn.compensation``); refused once frozen or set elsewhere."""
        if self._frozen:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: its compensation cannot change once the registry is frozen; declare it in "
                "the app's tools.py."
            )
        if self._target is not None and self._target is not target and self.name(tool_name) != _name_of(target):
            raise ToolDefinitionError(
                f"Tool {tool_name!r} is compensated by {self.name(tool_name)!r} already; a tool has one compensation."
            )
        self._target, self.mapping, self._name = target, mapping, None

    def name(self, tool_name: str) -> str | None:
        """The compensating tool's name; raises ``ToolDefinitionError`` when the target is no tool."""
        if self._name is None and self._target is not None:
            resolved = _name_of(self._target)
            if resolved is None:
                raise ToolDefinitionError(
                    f"Tool {tool_name!r}: compensate_with={self._target!r} is not a tool; pass a tool's name, a Tool "
                    "or a function decorated with @tool."
                )
            if resolved == tool_name:
                raise ToolDefinitionError(f"Tool {tool_name!r} cannot compensate itself; name another tool.")
            self._name = resolved
        return self._name

    def freeze(self, tool_name: str) -> None:
        """Resolve the target for good (the registry calls this when it freezes)."""
        self.name(tool_name)
        self._frozen = True


def _name_of(target: Any) -> str | None:
    if isinstance(target, str):
        return target or None
    if isinstance(target, Tool):
        return target.name
    built = getattr(target, TOOL_ATTRIBUTE, None)
    return built.name if isinstance(built, Tool) else None


@dataclasses.dataclass(frozen=True, eq=False)
class Tool:
    """A registered tool: a handler plus everything the pipeline and the model need to know of it.

    A ``Tool`` is immutable; ``with_description`` and ``with_note`` return modified copies. Its input
    model, JSON Schema and version hash are built on first use and cached (copies share them).
    """

    name: str
    description: str
    handler: Callable[..., Any] | None
    #: How the tool takes its inputs: schema, validation and binding (``toolhub.tools.inputs``).
    inputs: Inputs = dataclasses.field(default_factory=SignatureInputs)
    risk: Risk = Risk.LOW
    #: ``None``: by risk; ``True``/``False``: always/never; a callable: a reason, or ``None`` for no approval.
    needs_approval: NeedsApproval | None = None
    group: str = ""
    category: str = ""
    tags: frozenset[str] = frozenset()
    timeout: float | None = None
    idempotent: bool = False
    #: Its effects are writes to toolhub's database, committed in the transaction of the call's outcome
    #: (``toolhub.execution``): a failed, timed-out or lost call leaves none, so it is retried like an idempotent one.
    atomic: bool = False
    sensitive: frozenset[str] = frozenset()
    compensation: Compensation = dataclasses.field(default_factory=Compensation)
    return_behavior: ReturnBehavior = ReturnBehavior.TO_LLM
    strict: bool = False
    module: str = ""
    one_shot_per_loop: bool = False
    advice: str = ""
    always_visible: bool = False
    #: The result is validated as this type before it is stored (``output_model=``).
    output_type: Any = None
    #: Built from a method that is not bound yet: register ``tools_from_instance(obj)`` instead.
    is_method: bool = False
    #: Whether the developer chose the risk (a system check warns about tools that did not).
    risk_declared: bool = True

    def __post_init__(self) -> None:
        refuse_invalid(self)
        target = self.compensation.target
        if target == "" or (target is not None and not (isinstance(target, str | Tool) or callable(target))):
            raise ToolDefinitionError(
                f"Tool {self.name!r}: compensate_with must be a tool's name, a Tool or an @tool function."
            )
        if _name_of(target) == self.name:
            raise ToolDefinitionError(f"Tool {self.name!r} cannot compensate itself; name another tool.")

    def __repr__(self) -> str:
        return f"<Tool {self.name} risk={self.risk}>"

    # What the inputs strategy knows, for the pipeline, checks and exports.

    @property
    def parameters(self) -> tuple[ParameterSpec, ...]:
        """The parameters the model fills in (empty for a tool described by a hand-written JSON Schema)."""
        return self.inputs.parameters

    @property
    def injected(self) -> tuple[InjectedParameter, ...]:
        """Parameters filled in when the call runs (context, progress, context objects, presets)."""
        return self.inputs.injected

    @property
    def context_parameter(self) -> str | None:
        return self.inputs.context_parameter

    @property
    def presets(self) -> Mapping[str, Any]:
        """Parameter name -> constant, ``Secret(...)`` or zero-argument callable, resolved at call time."""
        inputs = self.inputs
        return inputs.presets if isinstance(inputs, SignatureInputs) else MappingProxyType({})

    @property
    def input_type(self) -> type[BaseModel] | None:
        """The pydantic input model the developer gave (``input_model=``), if any."""
        return self.inputs.model if isinstance(self.inputs, ModelInputs) else None

    @property
    def is_external(self) -> bool:
        """Whether calls of this tool are answered from outside (``POST /calls/{id}/result/``)."""
        return self.inputs.is_external

    @property
    def compensate_with(self) -> str | None:
        """The name of the tool that undoes this one, if any."""
        return self.compensation.name(self.name)

    @property
    def compensation_mapping(self) -> CompensationMapping | None:
        """``mapping(arguments, result) -> dict`` of the compensation's arguments; else matched by name."""
        return self.compensation.mapping

    @property
    def approval(self) -> ApprovalRule:
        """Deprecated: read ``needs_approval``."""
        warn_deprecated("Tool.approval is deprecated; read Tool.needs_approval.")
        rule = self.needs_approval
        return _APPROVAL_IDENTITY[rule] if rule is None or isinstance(rule, bool) else rule

    @property
    def effective_timeout(self) -> float:
        """The time limit of one call: the tool's own, else ``TOOLHUB['DEFAULT_TOOL_TIMEOUT_SECONDS']``."""
        if self.timeout:
            return float(self.timeout)
        from toolhub.conf import toolhub_settings

        return toolhub_settings().DEFAULT_TOOL_TIMEOUT_SECONDS

    @cached_property
    def input_model(self) -> type[BaseModel]:
        """The pydantic model that validates this tool's arguments (its patterns matched in linear time)."""
        model = self.inputs.input_model(self.name)
        # ``^(a+)+$`` against forty characters a model sends would hold the process, and its GIL, for hours.
        refusal = backtracking_refusal(self.name, backtracking_patterns(model.__pydantic_core_schema__))
        if refusal:
            raise ToolDefinitionError(f"{refusal}.")
        return model

    @cached_property
    def json_schema(self) -> dict[str, Any]:
        """JSON Schema of the inputs, as shown to the model."""
        return self.inputs.json_schema(self)

    @cached_property
    def strict_json_schema(self) -> dict[str, Any]:
        """The inputs' schema under OpenAI's strict rules (closed objects, every property required)."""
        return strict_schema(self.name, self.json_schema)

    @cached_property
    def known_json_schema(self) -> dict[str, Any] | None:
        """``json_schema``, or ``None`` when it cannot be built (``ToolDefinitionError``: its calls are refused).

        What reads a call's names against the schema (which values to withhold) must not fail with it: a refused
        call of such a tool is recorded and shown, each name taken for one the schema may not declare.
        """
        try:
            return self.json_schema
        except ToolDefinitionError:
            return None

    @cached_property
    def declared_names(self) -> frozenset[str]:
        """Every property name the inputs' schema declares, nested models' fields included: published words.

        Empty when the schema cannot be built: then no key of a sensitive mapping is taken for a published word.
        """
        names: set[str] = set()

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                properties = node.get("properties")
                if isinstance(properties, dict):
                    names.update(str(name) for name in properties)
                for child in node.values():
                    walk(child)
            elif isinstance(node, list):
                for child in node:
                    walk(child)

        walk(self.known_json_schema)
        return frozenset(names)

    def undeclared(self, names: Iterable[str]) -> frozenset[str]:
        """Those of ``names`` its schema does not declare (a misspelt ``PIN``, a parameter it no longer has).

        All of them when the schema cannot be built: which ones it declares is unknown.
        """
        schema = self.known_json_schema
        return frozenset(names) - frozenset(schema.get("properties", {}) if schema is not None else ())

    def withheld(self, names: Iterable[str]) -> frozenset[str]:
        """Of a call's argument names, those whose values are never kept or shown as sent.

        Its sensitive names and, when it has any, every name it does not declare: a model that misspells
        ``pin`` as ``PIN`` sends the PIN under it.
        """
        return self.sensitive | self.undeclared(names) if self.sensitive else frozenset()

    @cached_property
    def version(self) -> str:
        """A hash of everything that changes what a call means; approvals are bound to it."""
        rule = self.needs_approval
        identity: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "schema": self.json_schema,
            "risk": str(self.risk),
            # Spelled as before needs_approval= existed, so upgrading changes no tool's version.
            "approval": _APPROVAL_IDENTITY[rule] if rule is None or isinstance(rule, bool) else _qualified(rule),
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
        return self.inputs.null_means_default()

    def validate_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate model-supplied arguments; raises ``pydantic.ValidationError`` on any problem."""
        values = dict(arguments)
        if self.strict and self._null_means_default:
            values = {k: v for k, v in values.items() if not (v is None and k in self._null_means_default)}
        return self.inputs.validate(self, values)

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

        ``timeout`` (seconds) stops the tool with ``ToolTimeoutError``; ``None`` means no limit. An atomic
        tool runs on the caller's thread, in the caller's transaction (``call_with_timeout(in_this_thread=)``).
        """
        if self.handler is None:
            raise ToolhubError(
                f"Tool {self.name!r} is external: its result is supplied by POST /api/v1/calls/{{id}}/result/, "
                "it cannot run here."
            )
        bound = self.inputs.bind(self, self.handler, arguments, ctx if ctx is not None else ToolContext(), progress)
        # A returned iterator is read within the limit too (``read_now``): its work is the tool's.
        result = call_with_timeout(
            lambda: read_now(bound()), seconds=timeout, tool_name=self.name, in_this_thread=self.atomic
        )
        if inspect.isawaitable(result):
            result = await_with_timeout(_read_when_awaited(result), seconds=timeout, tool_name=self.name)
        return self._checked_output(result)

    def _checked_output(self, result: Any) -> Any:
        if self.output_type is None or self.output_type is str or isinstance(result, ToolResult):
            return result
        return checked_output(self.output_type, result)

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
        if "inputs" not in changes:
            for key in ("input_model", "json_schema", "strict_json_schema", "_null_means_default"):
                if key in self.__dict__:
                    copied.__dict__[key] = self.__dict__[key]
        return copied

    # Factories: the one way per source. Their options are ``ToolOptions`` (``toolhub.tools.options``).

    @overload
    @classmethod
    def from_function(cls, fn: Callable[..., Any], /, **options: Unpack[FunctionToolOptions]) -> "Tool": ...

    @overload
    @classmethod
    def from_function(
        cls,
        name: str,
        description: str,
        input_type: type[BaseModel],
        output_type: Any,
        fn: Callable[..., Any],
        /,
        **options: Unpack[ToolOptions],
    ) -> "Tool": ...

    @classmethod
    def from_function(cls, fn: Any, /, *legacy: Any, **options: Any) -> "Tool":
        """A tool made from a function: its signature and docstring, or its explicit input and output models.

        ``Tool.from_function(fn)`` reads the parameters from the signature (as ``@tool`` does);
        ``Tool.from_function(fn, input_model=In, output_model=Out)`` calls ``fn(In(...)[, ctx])`` and
        validates the result as ``Out`` (strings pass through; a ``ToolResult`` is used as returned).
        The form ``from_function(name, description, In, Out, fn)`` is deprecated.
        """
        if isinstance(fn, str):
            if len(legacy) != 4:
                raise ToolDefinitionError(
                    f"Tool {fn!r}: use Tool.from_function(fn, input_model=In, output_model=Out, name=..., "
                    "description=...)."
                )
            warn_deprecated(
                "Tool.from_function(name, description, In, Out, fn) is deprecated; use "
                "Tool.from_function(fn, name=..., description=..., input_model=In, output_model=Out)."
            )
            description, input_type, output_type, function = legacy
            if not (isinstance(input_type, type) and issubclass(input_type, BaseModel)):
                raise ToolDefinitionError(f"Tool {fn!r}: the input type must be a pydantic model, not {input_type!r}.")
            options = {**options, "name": fn, "description": description, "input_model": input_type}
            options["output_model"] = output_type
            fn = function
        elif legacy:
            raise ToolDefinitionError("Tool.from_function(fn, ...) takes its options by keyword.")
        source = fields_of_function(fn, options)
        return cls._make(source, options, FUNCTION_TOOL_OPTIONS)

    @classmethod
    def from_callable(cls, fn: Callable[..., Any], **options: Unpack[FunctionToolOptions]) -> "Tool":
        """Deprecated: ``Tool.from_function(fn, ...)``."""
        warn_deprecated("Tool.from_callable(fn) is deprecated; use Tool.from_function(fn).")
        return cls.from_function(fn, **options)

    @classmethod
    def create(
        cls,
        name: str,
        description: str,
        parameters: Mapping[str, Any] | type[BaseModel] | None = None,
        handler: Callable[..., Any] | None = None,
        **options: Unpack[ToolOptions],
    ) -> "Tool":
        """Build a tool from a handler and its parameters, without a decorated function.

        ``parameters`` is a JSON Schema of an object, a mapping of names to types
        (``{"a": Annotated[int, Param("First number")], "b": (int, 0)}``), a pydantic model, or
        ``None``. ``handler(arguments)`` or ``handler(arguments, ctx)`` gets the validated arguments
        as a dict (as the model instance when ``parameters`` is a model).
        """
        source = mapping_fields(name, parameters, handler, options)
        return cls._make({"name": name, "description": description, **source}, options, TOOL_OPTIONS)

    @classmethod
    def external(
        cls,
        name: str,
        description: str,
        schema: Mapping[str, Any] | type[BaseModel] | None = None,
        **options: Unpack[ToolOptions],
    ) -> "Tool":
        """A schema-only tool: a call waits (the run suspends) until its result is supplied from outside.

        The result (or error) arrives by ``POST /api/v1/calls/{id}/result/``; it is audited and the
        run resumes. Validation, permissions and approvals apply as for any tool.
        """
        source = external_fields(name, schema, options, _caller_module())
        return cls._make({"name": name, "description": description, **source}, options, TOOL_OPTIONS)

    @classmethod
    def _make(cls, source: dict[str, Any], options: Mapping[str, Any], known: frozenset[str]) -> "Tool":
        name = source["name"]
        fields = read_options(name, options, known=known)
        compensation = Compensation(fields.pop("compensate_with", None), fields.pop("compensation_mapping", None))
        presets = source["inputs"].presets if isinstance(source["inputs"], SignatureInputs) else {}
        # Preset values are never shown: treat their names as sensitive wherever arguments are shown.
        fields["sensitive"] = fields["sensitive"] | frozenset(presets)
        return cls(**source, **fields, compensation=compensation)


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


async def _read_when_awaited(awaitable: Awaitable[Any]) -> Any:
    """An async tool's result, an iterator read as a sync tool's is (``read_now``), within the same limit."""
    return read_now(await awaitable)
