"""The options a tool is declared with: one typed dict, read and checked in one place.

``ToolOptions`` is what ``Tool.create`` and ``Tool.external`` accept besides name, description and
inputs; ``FunctionToolOptions`` adds what only a function's tool has (``@tool`` and
``Tool.from_function``). Both are used with ``Unpack``, so IDEs and mypy see every option, and
``read_options`` turns them into the ``Tool``'s fields, naming the tool in every mistake.
"""

import sys
import warnings
from collections.abc import Callable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeAlias, TypedDict, TypeVar

from pydantic import BaseModel

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.context import ToolContext

__all__ = [
    "ApprovalRule",
    "CompensationMapping",
    "CompensationTarget",
    "FunctionToolOptions",
    "NeedsApproval",
    "ReturnBehavior",
    "Risk",
    "TOOL_OPTIONS",
    "FUNCTION_TOOL_OPTIONS",
    "ToolOptions",
    "read_options",
    "read_presets",
    "warn_deprecated",
]


class Risk(StrEnum):
    """How much harm a wrong call can do; ``high`` and ``critical`` need an operator's approval."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def needs_approval(self) -> bool:
        return self in (Risk.HIGH, Risk.CRITICAL)

    @property
    def rank(self) -> int:
        """Its place from ``low`` (0) to ``critical`` (3): how risks compare."""
        return list(Risk).index(self)


class ReturnBehavior(StrEnum):
    """Whether a tool's result goes back to the model or ends the run."""

    TO_LLM = "to_llm"
    IMMEDIATE = "immediate"
    IMMEDIATE_IF_LAST = "immediate_if_last"


#: ``True`` (always), ``False`` (never, whatever the risk), or ``rule(arguments, ctx) -> reason or None``.
NeedsApproval: TypeAlias = bool | Callable[[Mapping[str, Any], ToolContext], str | None]
#: The deprecated ``approval=`` spelling: ``"auto"``, ``"always"``, ``"never"`` or ``rule(arguments, ctx)``.
ApprovalRule: TypeAlias = str | Callable[[Mapping[str, Any], ToolContext], bool | str | None]


class NamedTool(Protocol):
    """Anything with a tool's name (a ``Tool``), without importing ``Tool`` here."""

    @property
    def name(self) -> str: ...


#: The tool that undoes this one: its name, the ``Tool``, or the ``@tool`` function itself.
CompensationTarget: TypeAlias = str | NamedTool | Callable[..., Any]
#: ``mapping(arguments, result) -> dict`` of the compensation's arguments.
CompensationMapping: TypeAlias = Callable[[Mapping[str, Any], Any], Mapping[str, Any]]


class ToolOptions(TypedDict, total=False):
    """Every option of a tool besides its name, description and inputs (all optional)."""

    #: How much harm a wrong call can do; ``high`` and ``critical`` wait for an operator.
    risk: Risk | Literal["low", "medium", "high", "critical"]
    #: ``True``/``False`` overrides the risk; a callable returns why a call needs approval, or ``None``.
    needs_approval: NeedsApproval
    #: Deprecated: use ``needs_approval``.
    approval: ApprovalRule
    group: str
    category: str
    tags: tuple[str, ...] | list[str] | frozenset[str]
    #: Seconds one call may run (default ``TOOLHUB['DEFAULT_TOOL_TIMEOUT_SECONDS']``).
    timeout: float
    #: Safe to run twice with the same arguments (retried after a lost worker).
    idempotent: bool
    #: Its effects are writes to toolhub's own database: they commit with the call's outcome or not at all.
    atomic: bool
    #: Arguments whose values never reach the audit trail, the API or the admin.
    sensitive: tuple[str, ...] | list[str] | frozenset[str]
    #: The tool that undoes this one (sagas), resolved when the registry freezes.
    compensate_with: CompensationTarget
    compensation_mapping: CompensationMapping
    return_behavior: ReturnBehavior | Literal["to_llm", "immediate", "immediate_if_last"]
    #: Sent to OpenAI with ``strict``: closed objects, every property required.
    strict: bool
    #: Accept bare ``Any`` parameters (the model gets no schema for them).
    allow_any: bool
    one_shot_per_loop: bool
    #: What a one-shot tool answers when called again in the same loop.
    advice: str
    always_visible: bool


class FunctionToolOptions(ToolOptions, total=False):
    """The options of a tool made from a function (``@tool``, ``Tool.from_function``)."""

    #: The tool's name (default: the function's name).
    name: str
    #: What the model reads (default: the docstring's text).
    description: str
    #: Parameter name -> constant, ``Secret(...)`` or zero-argument callable, resolved at call time.
    presets: Mapping[str, Any]
    #: The function takes one validated instance of this model (and optionally ``ctx``).
    input_model: type[BaseModel]
    #: The result is validated as this type (a pydantic model, a dataclass, ...) before it is stored.
    output_model: Any


TOOL_OPTIONS = frozenset(ToolOptions.__optional_keys__)
FUNCTION_TOOL_OPTIONS = frozenset(FunctionToolOptions.__optional_keys__)

_APPROVAL_WORDS: dict[str, bool | None] = {"auto": None, "always": True, "never": False}

E = TypeVar("E", bound=StrEnum)


def read_options(tool_name: str, options: Mapping[str, Any], *, known: frozenset[str] = TOOL_OPTIONS) -> dict[str, Any]:
    """Check the developer's options and return them as ``Tool`` fields; every mistake names the tool."""
    unknown = sorted(set(options) - known)
    if unknown:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: unknown option(s) {', '.join(unknown)}; known options: {', '.join(sorted(known))}."
        )
    values = dict(options)
    fields: dict[str, Any] = {"risk_declared": "risk" in values}
    fields["risk"] = _choice(Risk, values.pop("risk", Risk.LOW), tool_name, "risk")
    fields["return_behavior"] = _choice(
        ReturnBehavior, values.pop("return_behavior", ReturnBehavior.TO_LLM), tool_name, "return_behavior"
    )
    for label in ("tags", "sensitive"):
        value = values.pop(label, ())
        if isinstance(value, str) or not all(isinstance(item, str) for item in value):
            raise ToolDefinitionError(f"Tool {tool_name!r}: {label}= takes a list of strings, not {value!r}.")
        fields[label] = frozenset(value)
    if "approval" in values:
        if "needs_approval" in values:
            raise ToolDefinitionError(f"Tool {tool_name!r}: pass needs_approval= only, not approval= as well.")
        warn_deprecated(
            f"Tool {tool_name!r}: approval= is deprecated; use needs_approval=True, False or a callable "
            "returning a reason (or None). It will be removed in the next release."
        )
        values["needs_approval"] = _from_approval(tool_name, values.pop("approval"))
    fields["needs_approval"] = _needs_approval(tool_name, values.pop("needs_approval", None))
    if "advice" in values and not isinstance(values["advice"], str):
        raise ToolDefinitionError(f"Tool {tool_name!r}: advice= must be a string.")
    for leftover in ("allow_any", "presets", "input_model", "output_model", "name", "description"):
        values.pop(leftover, None)
    fields.update(values)
    return fields


def warn_deprecated(message: str) -> None:
    """A ``DeprecationWarning`` pointing at the developer's line: the first frame outside ``toolhub.tools``."""
    frame = sys._getframe(1)
    level = 2
    while frame.f_back is not None and str(frame.f_globals.get("__name__", "")).startswith("toolhub.tools."):
        frame = frame.f_back
        level += 1
    warnings.warn(message, DeprecationWarning, stacklevel=level)


def read_presets(tool_name: str, presets: Any) -> Mapping[str, Any]:
    """``presets=`` as a read-only mapping of parameter names to values, ``Secret(...)`` or factories."""
    if presets is None:
        return MappingProxyType({})
    if not isinstance(presets, Mapping) or not all(isinstance(key, str) for key in presets):
        raise ToolDefinitionError(f"Tool {tool_name!r}: presets= maps parameter names to values or Secret(...).")
    return MappingProxyType(dict(presets))


def _from_approval(tool_name: str, rule: Any) -> Any:
    if isinstance(rule, str):
        if rule not in _APPROVAL_WORDS:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: approval must be 'auto', 'always', 'never' or a callable, not {rule!r}; "
                "better, use needs_approval=."
            )
        return _APPROVAL_WORDS[rule]
    if not callable(rule):
        raise ToolDefinitionError(f"Tool {tool_name!r}: approval must be a string or a callable; use needs_approval=.")
    return rule


def _needs_approval(tool_name: str, value: Any) -> Any:
    if value is None or isinstance(value, bool) or callable(value):
        return value
    raise ToolDefinitionError(
        f"Tool {tool_name!r}: needs_approval must be True, False or a callable (arguments, ctx) -> reason or None, "
        f"not {value!r}."
    )


def _choice(enum_type: type[E], value: Any, tool_name: str, option: str) -> E:
    try:
        return enum_type(value)
    except ValueError:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: {option} {value!r} is not one of {', '.join(e.value for e in enum_type)}."
        ) from None
