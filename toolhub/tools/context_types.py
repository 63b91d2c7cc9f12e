"""Typed context objects: classes whose instances are injected into tools, built from the context.

::

    @register_context_type
    @dataclass(frozen=True)
    class UserContext:
        user_id: str
        locale: str = "en"

    @tool
    def my_orders(status: str, user: Annotated[UserContext, FromContext]) -> list[Order]: ...

The model never sees ``user``. ``FromContext`` says so at the use site, so it holds whatever the order of
definition: the class may be registered before or after the tool (it must be by the time a call runs;
``manage.py check`` warns, ``toolhub.W003``, when it is not). The bare spelling ``user: UserContext`` (or
``UserContext | None``) is injected too when the class is registered before the tool is defined. A
registered context type that would reach the model as a parameter (registered after a tool naming it
bare, or inside another parameter's type) is refused: when such a tool is registered or the registry
frozen, when the context type is registered after such a tool, and by the system check ``toolhub.E005``.

When the tool runs, toolhub builds a ``UserContext`` from the call's ``ToolContext``: from ``factory(ctx)``
when one was registered, else by validating the mapping under ``key`` (default: the class name in snake
case, here ``user_context``) into the class with pydantic. Contexts cross the worker boundary as JSON, so
the object is rebuilt on the worker, never pickled.
"""

import inspect
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from pydantic import TypeAdapter, ValidationError

from toolhub.exceptions import ToolDefinitionError, ToolhubError
from toolhub.tools.context import RESERVED_CONTEXT_KEYS, ToolContext
from toolhub.tools.progress import Progress

__all__ = [
    "FromContext",
    "register_context_type",
    "is_context_type",
    "context_type_keys",
    "context_object",
    "ContextObjectUnavailable",
    "ContextTypeSpec",
    "on_register",
]

T = TypeVar("T", bound=type)

_FORBIDDEN = (str, int, float, bool, bytes, list, dict, tuple, set, frozenset)


class ContextObjectUnavailable(ToolhubError):
    """A tool needs a typed context object the call's context cannot provide."""


class _FromContext:
    """Marks a tool parameter as a context object: ``user: Annotated[UserContext, FromContext]``."""

    _instance: "_FromContext | None" = None

    def __new__(cls) -> "_FromContext":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "FromContext"


#: ``Annotated[UserContext, FromContext]``: the parameter is built from the call's context, never shown to the model.
FromContext = _FromContext()


@dataclass(frozen=True)
class ContextTypeSpec:
    """How to build one context type from a ``ToolContext``."""

    cls: type
    key: str
    factory: Callable[[Mapping[str, Any]], Any] | None


_registry: dict[type, ContextTypeSpec] = {}
_adapters: dict[type, TypeAdapter[Any]] = {}
_lock = threading.Lock()
_register_checks: list[Callable[[type], None]] = []


@overload
def register_context_type(cls: T, /) -> T: ...


@overload
def register_context_type(
    cls: None = None, /, *, key: str | None = None, factory: Callable[[Mapping[str, Any]], Any] | None = None
) -> Callable[[T], T]: ...


def register_context_type(
    cls: Any = None, /, *, key: str | None = None, factory: Callable[[Mapping[str, Any]], Any] | None = None
) -> Any:
    """Make ``cls`` injectable into tools by type; use as a call or a class decorator.

    Tools mark its parameters ``Annotated[cls, FromContext]``. A registered tool that already takes
    ``cls`` as a model parameter makes this an error: its model could otherwise set the context.
    Registering the same class again with the same settings is harmless; with other settings it is an error.
    """

    def register(klass: Any) -> Any:
        if not isinstance(klass, type):
            raise ToolDefinitionError(f"register_context_type() takes a class, not {klass!r}.")
        check_context_class(klass, where=f"{klass.__qualname__} cannot be a context type")
        if factory is not None and not callable(factory):
            raise ToolDefinitionError(f"register_context_type({klass.__qualname__}): factory must be callable.")
        spec = ContextTypeSpec(klass, key or _snake(klass.__name__), factory)
        if spec.key in RESERVED_CONTEXT_KEYS and factory is None:
            raise ToolDefinitionError(
                f"register_context_type({klass.__qualname__}): its key {spec.key!r} is a context key toolhub sets "
                f"itself (a plain value, e.g. the caller's {spec.key}), so no {klass.__qualname__} could be built from "
                "it and every call of a tool taking one would fail. Pass key='...' naming a context key of your own, "
                "or factory=lambda ctx: ... building it from the context."
            )
        with _lock:
            existing = _registry.get(klass)
            if existing is not None and existing != spec:
                raise ToolDefinitionError(
                    f"Context type {klass.__qualname__} is registered already with key {existing.key!r}; "
                    "register it once."
                )
            if existing is None:
                _refuse_if_exposed(klass)
            _registry[klass] = spec
        return klass

    if cls is not None:
        return register(cls)
    return register


def check_context_class(klass: Any, *, where: str) -> None:
    """Refuse what cannot be a context type: builtins (model parameters) and toolhub's own injected types."""
    if not isinstance(klass, type) or klass in (ToolContext, Progress) or issubclass(klass, _FORBIDDEN):
        raise ToolDefinitionError(
            f"{where}: builtin and toolhub types are model parameters or are injected already; "
            "use a class of your own (a dataclass or a pydantic model)."
        )


def on_register(check: Callable[[type], None]) -> None:
    """Run ``check(klass)`` before a new context type is registered (the registry refuses tools exposing it).

    A hook, so that this module needs neither the registry nor the type checks (no import cycle).
    """
    if check not in _register_checks:
        _register_checks.append(check)


def _refuse_if_exposed(klass: type) -> None:
    for check in _register_checks:
        check(klass)


def context_type_keys() -> frozenset[str]:
    """The context keys typed context objects are built from: what a client must not set (they are trusted)."""
    with _lock:
        return frozenset(spec.key for spec in _registry.values())


def is_context_type(annotation: Any) -> bool:
    """Whether ``annotation`` is a registered context type."""
    return isinstance(annotation, type) and annotation in _registry


def context_object(cls: type, ctx: Mapping[str, Any], *, tool_name: str, parameter: str, default: Any) -> Any:
    """Build the ``cls`` instance for one call from its context."""
    spec = _registry.get(cls)
    if spec is None:
        raise ContextObjectUnavailable(f"{cls.__qualname__} is not a registered context type.")
    if spec.factory is not None:
        return spec.factory(ctx)
    if spec.key not in ctx:
        if default is not inspect.Parameter.empty:
            return default
        raise ContextObjectUnavailable(
            f"Tool {tool_name!r} needs {cls.__qualname__} (parameter {parameter!r}), but the call's context has no "
            f"{spec.key!r}; set it at the boundary (the run's or the request's context)."
        )
    value = ctx[spec.key]
    if isinstance(value, cls):
        return value
    adapter = _adapters.get(cls)
    if adapter is None:
        adapter = _adapters[cls] = TypeAdapter(cls)
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise ContextObjectUnavailable(
            f"Tool {tool_name!r}: context {spec.key!r} is not a valid {cls.__qualname__} "
            f"({exc.error_count()} problem(s))."
        ) from None


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
