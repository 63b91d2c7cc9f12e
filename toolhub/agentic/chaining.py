"""Tool chaining (Embabel): the ``@tool`` methods of a domain object a tool returned become tools of the run.

::

    @dataclass
    class Customer:
        id: str
        name: str
        active: bool = True

        @tool(risk=Risk.LOW)
        def profile(self) -> str:
            \"\"\"The customer's profile.\"\"\"
            return f"{self.name} ({self.id})"

    CUSTOMER = ChainedType.of(Customer, name="customer", predicate=lambda c: c.active)   # in tools.py

    @tool(risk=Risk.LOW)
    def find_customer(id: str) -> Customer: ...

Its methods are registered as tools named ``customer_profile``. Once a call of a tool whose return
type is ``Customer`` succeeds (and the object passes the predicate), they are shown to the run's
model; the latest such object wins. Before that, a call of one is answered with the tool that
binds it, and not run. ``discover=True`` (the default) adds the methods to every agent that has a tool
returning the type (auto-discovery); with ``discover=False`` an agent lists the method tools it may use.

The object is stored as the producing call's JSON result under the type's registered name (in the
run's stored state): rebuilding it validates that JSON as the registered class, so the model never
chooses a class, an import or a pickle. Method calls are governed calls like any other: grants on
their tool name, approval rules, audit.
"""

import functools
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from toolhub.exceptions import ToolDefinitionError, ToolError
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Tool
from toolhub.tools.instance import _tool_methods

__all__ = ["ChainedType", "chained_type_named", "chained_type_of", "produced_type", "method_owner"]

_TYPES: dict[str, "ChainedType"] = {}


@dataclass(frozen=True, eq=False)
class ChainedType:
    """A domain class registered for chaining under ``name``, with its method tools."""

    cls: type
    name: str
    predicate: Callable[[Any], bool] | None = None
    discover: bool = True
    methods: tuple[Tool, ...] = field(init=False, repr=False)

    @classmethod
    def of(
        cls, klass: type, *, name: str, predicate: Callable[[Any], bool] | None = None, discover: bool = True
    ) -> "ChainedType":
        """Register ``klass`` (a dataclass or pydantic model with ``@tool`` methods) for chaining."""
        existing = _TYPES.get(name)
        if existing is not None and existing.cls is not klass:
            raise ToolDefinitionError(f"Chained type name {name!r} is taken by {existing.cls.__qualname__}.")
        chained = cls(klass, name, predicate, discover)
        _TYPES[name] = chained
        return chained

    def __post_init__(self) -> None:
        if not isinstance(self.cls, type):
            raise ToolDefinitionError(f"Chained type {self.name!r}: {self.cls!r} is not a class.")
        if not self.name.isidentifier():
            raise ToolDefinitionError(f"Chained type name {self.name!r} must be an identifier, e.g. 'customer'.")
        methods = []
        for attribute, unbound in _tool_methods(self.cls):
            bound = _Method(self, attribute)
            methods.append(
                Tool.create(
                    f"{self.name}_{unbound.name}",
                    f"{unbound.description} (on the latest {self.name} you retrieved)",
                    unbound.json_schema,
                    bound._call,
                    risk=unbound.risk,
                    idempotent=unbound.idempotent,
                    sensitive=unbound.sensitive,
                    category=unbound.category,
                )
            )
        if not methods:
            raise ToolDefinitionError(f"Chained type {self.name!r}: {self.cls.__qualname__} has no @tool methods.")
        object.__setattr__(self, "methods", tuple(methods))

    def __toolhub_tools__(self) -> list[Tool]:
        return list(self.methods)

    def method_names(self) -> set[str]:
        return {tool.name for tool in self.methods}

    def load(self, data: Any) -> Any:
        """The object rebuilt from its stored JSON, validated as the registered class."""
        return TypeAdapter(self.cls).validate_python(data)

    def accepts(self, data: Any) -> bool:
        """Whether a stored result is an object of this type that passes the predicate."""
        try:
            obj = self.load(data)
        except Exception:  # noqa: BLE001 - a result that is not such an object binds nothing
            return False
        if self.predicate is None:
            return True
        try:
            return bool(self.predicate(obj))
        except Exception:  # noqa: BLE001 - a failing predicate binds nothing
            return False


@dataclass(frozen=True, eq=False)
class _Method:
    chained: ChainedType
    attribute: str

    def _call(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        data = bound_data(ctx, self.chained)
        if data is None:
            raise ToolError(f"No {self.chained.name} is retrieved in this run yet; call a tool that returns one first.")
        return getattr(self.chained.load(data), self.attribute)(**arguments)


def bound_data(ctx: ToolContext, chained: ChainedType) -> Any:
    """The latest object of ``chained`` that this call's run retrieved before the call's turn, as stored."""
    from toolhub.models import CallKind, CallStatus, ToolCall
    from toolhub.tools.registry import registry

    call = ToolCall.objects.filter(id=ctx.call_id).values("run_id", "turn", "tenant").first() if ctx.call_id else None
    if call is None or call["run_id"] is None:
        return None
    producers = [tool.name for tool in registry.all() if produced_type(tool) is chained]
    earlier = (
        ToolCall.objects.filter(
            run_id=call["run_id"],
            tenant=call["tenant"],
            kind=CallKind.CALL,
            status=CallStatus.SUCCEEDED,
            tool_name__in=producers,
            turn__lt=call["turn"],
        )
        .order_by("-turn", "-position")
        .values_list("result", flat=True)
    )
    for result in earlier[:50]:
        if chained.accepts(result):
            return result
    return None


def chained_type_named(name: str) -> ChainedType | None:
    return _TYPES.get(name)


def chained_type_of(cls: Any) -> ChainedType | None:
    return next((chained for chained in _TYPES.values() if chained.cls is cls), None)


def produced_type(tool: Tool | None) -> ChainedType | None:
    """The chained type a tool returns (its ``output_model`` or its return annotation), if any."""
    if tool is None:
        return None
    returned = _returned_class(tool)
    return chained_type_of(returned) if returned is not None else None


@functools.lru_cache(maxsize=4096)
def _returned_class(tool: Tool) -> type | None:
    """Read once per tool (tools are immutable): every authorization expands an agent's tools with it."""
    returned = tool.output_type
    if returned is None and tool.handler is not None:
        try:
            returned = typing.get_type_hints(tool.handler).get("return")
        except Exception:  # noqa: BLE001 - unresolvable hints: the tool chains nothing
            return None
    return returned if isinstance(returned, type) else None


def method_owner(tool: Tool | None) -> ChainedType | None:
    """The chained type whose method ``tool`` is."""
    handler = getattr(tool, "handler", None)
    owner = getattr(handler, "__self__", None)
    return owner.chained if isinstance(owner, _Method) else None


def registered_types() -> Mapping[str, ChainedType]:
    return dict(_TYPES)
