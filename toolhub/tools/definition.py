"""The tool model: an immutable ``Tool`` value and the ``@tool`` decorator that makes one."""

import asyncio
import dataclasses
import hashlib
import inspect
import json
import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from functools import cached_property
from typing import Any, overload

from pydantic import BaseModel, ValidationError

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.context import ToolContext
from toolhub.tools.schema import ParameterSpec, build_input_model, describe_function, json_schema_of

__all__ = ["Risk", "ReturnBehavior", "Tool", "tool", "TOOL_ATTRIBUTE", "ApprovalRule"]

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


@dataclasses.dataclass(frozen=True, eq=False)
class Tool:
    """A registered tool: a handler plus everything the pipeline and the model need to know of it.

    A ``Tool`` is immutable; ``with_description`` and ``with_note`` return modified copies. Its input
    model, JSON Schema and version hash are built on first use and cached.
    """

    name: str
    description: str
    handler: Callable[..., Any]
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

    def __post_init__(self) -> None:
        if not _NAME_PATTERN.fullmatch(self.name):
            raise ToolDefinitionError(
                f"Tool name {self.name!r} is not valid: use letters, digits, '_' or '-', starting with a "
                "letter, at most 64 characters."
            )
        if not self.description.strip():
            raise ToolDefinitionError(f"Tool {self.name!r} has no description: add a docstring or pass description=...")
        if isinstance(self.approval, str) and self.approval not in {"auto", "always", "never"}:
            raise ToolDefinitionError(
                f"Tool {self.name!r}: approval must be 'auto', 'always', 'never' or a callable, not {self.approval!r}."
            )
        names = {p.name for p in self.parameters}
        unknown = set(self.sensitive) - names
        if unknown:
            raise ToolDefinitionError(
                f"Tool {self.name!r}: sensitive names {sorted(unknown)} are not parameters of it."
            )

    def __repr__(self) -> str:
        return f"<Tool {self.name} risk={self.risk}>"

    @cached_property
    def input_model(self) -> type[BaseModel]:
        """The pydantic model that validates this tool's arguments."""
        return build_input_model(self.name, self.parameters)

    @cached_property
    def json_schema(self) -> dict[str, Any]:
        """JSON Schema of the inputs, as shown to the model."""
        return json_schema_of(self.name, self.input_model)

    @cached_property
    def version(self) -> str:
        """A hash of everything that changes what a call means; approvals are bound to it."""
        identity = {
            "name": self.name,
            "description": self.description,
            "schema": self.json_schema,
            "risk": str(self.risk),
            "approval": self.approval if isinstance(self.approval, str) else _qualified(self.approval),
            "handler": _qualified(self.handler),
            "return_behavior": str(self.return_behavior),
        }
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()
        return digest[:16]

    def validate_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate model-supplied arguments; raises ``pydantic.ValidationError`` on any problem."""
        model = self.input_model.model_validate(dict(arguments))
        return {spec.name: getattr(model, spec.name) for spec in self.parameters}

    def invoke(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """Call the handler with validated arguments and the injected context; awaits async tools."""
        kwargs = dict(arguments)
        if self.context_parameter:
            kwargs[self.context_parameter] = ctx
        result = self.handler(**kwargs)
        if inspect.isawaitable(result):
            result = asyncio.run(_await(result))
        return result

    def with_description(self, description: str) -> "Tool":
        """Return a copy with another description."""
        return dataclasses.replace(self, description=description)

    def with_note(self, note: str) -> "Tool":
        """Return a copy whose description ends with ``note``."""
        return dataclasses.replace(self, description=f"{self.description.rstrip()}\n\n{note}")

    @classmethod
    def from_callable(cls, fn: Callable[..., Any], **options: Any) -> "Tool":
        """Build a tool from a function's signature and docstring, with ``options`` as metadata."""
        name = options.pop("name", None) or fn.__name__
        described = describe_function(fn, tool_name=name)
        description = options.pop("description", None) or described.summary
        risk = options.pop("risk", Risk.LOW)
        try:
            risk = Risk(risk)
        except ValueError:
            raise ToolDefinitionError(
                f"Tool {name!r}: risk {risk!r} is not one of {', '.join(r.value for r in Risk)}."
            ) from None
        return cls(
            name=name,
            description=description or "",
            handler=fn,
            parameters=described.parameters,
            context_parameter=described.context_parameter,
            risk=risk,
            tags=frozenset(options.pop("tags", ())),
            sensitive=frozenset(options.pop("sensitive", ())),
            return_behavior=ReturnBehavior(options.pop("return_behavior", ReturnBehavior.TO_LLM)),
            module=fn.__module__,
            **options,
        )

    def is_valid_arguments(self, arguments: Mapping[str, Any]) -> bool:
        """Return whether ``arguments`` validate (for callers that only need a yes or no)."""
        try:
            self.validate_arguments(arguments)
        except ValidationError:
            return False
        return True


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _qualified(obj: Any) -> str:
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
) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...


def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Declare a function as a tool; use bare (``@tool``) or with metadata (``@tool(risk="high")``).

    The function stays callable as it was; the ``Tool`` built from it is its ``tool`` attribute.
    Tools in an installed app's ``tools.py`` are registered by autodiscovery at startup.
    """

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        built = Tool.from_callable(func, **dict(options))
        setattr(func, TOOL_ATTRIBUTE, built)
        func.tool = built  # type: ignore[attr-defined]
        func.compensation = _compensation_decorator(func)  # type: ignore[attr-defined]
        return func

    if fn is not None:
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
