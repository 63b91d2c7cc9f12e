"""The one tool registry: filled by autodiscovery of ``tools.py`` modules, then frozen."""

import contextlib
import importlib
import importlib.util
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from toolhub.exceptions import RegistryFrozenError, ToolDefinitionError
from toolhub.tools.context_types import on_register
from toolhub.tools.definition import TOOL_ATTRIBUTE, Tool
from toolhub.tools.typechecks import context_type_exposures

__all__ = ["ToolProvider", "ToolRegistry", "registry", "autodiscover"]


class ToolProvider(Protocol):
    """A source of tools configured at run time (remote MCP servers), added before the registry freezes.

    The registry consults it for names it does not hold itself; its tools never shadow code tools.
    """

    def names(self) -> list[str]: ...

    def get(self, name: str) -> Tool | None: ...

    def refusal(self, name: str, tenant: str | None) -> str | None:
        """Why a call of one of its tools is refused now for ``tenant``, or ``None``."""
        ...


class ToolRegistry:
    """Name -> ``Tool``; written during startup only, read by the pipeline and the catalogue."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._frozen = False
        self._lock = threading.Lock()
        self._providers: list[ToolProvider] = []

    def add_provider(self, provider: ToolProvider) -> None:
        """Consult ``provider`` for the tools it configures at run time; only before the freeze, like a tool."""
        with self._lock:
            if self._frozen:
                raise RegistryFrozenError("Cannot add a tool provider: the registry is frozen after startup.")
            if provider not in self._providers:
                self._providers.append(provider)

    def register(self, tool: Tool | Callable[..., Any]) -> Tool:
        """Add a tool; refuses duplicates, exposed context types and any write once the registry is frozen.

        A composite (an ``UnfoldingTool``: anything with ``__toolhub_tools__()``) registers each of its
        tools; its facade is returned.
        """
        bundled = _bundled(tool)
        if bundled is not None:
            return [self.register(item) for item in bundled][0]
        resolved = _as_tool(tool)
        _refuse_exposed_context(resolved)
        with self._lock:
            if self._frozen:
                raise RegistryFrozenError(
                    f"Cannot register tool {resolved.name!r}: the registry is frozen after startup. "
                    "Define tools in an installed app's tools.py, or use registry.temporarily() in tests."
                )
            existing = self._tools.get(resolved.name)
            if existing is not None and not _same_definition(existing, resolved):
                raise ToolDefinitionError(
                    f"Duplicate tool name {resolved.name!r}: defined in {existing.module} and "
                    f"{resolved.module}. Give one of them another name=."
                )
            self._tools[resolved.name] = resolved
        return resolved

    def freeze(self) -> None:
        """Refuse further writes; first check every tool again, now that every context type is registered."""
        with self._lock:
            for tool in self._tools.values():
                _refuse_exposed_context(tool)
            for tool in self._tools.values():
                # compensate_with= may name a tool, or be the tool itself: fixed now, as a name.
                tool.compensation.freeze(tool.name)
            self._frozen = True

    @property
    def frozen(self) -> bool:
        return self._frozen

    def get(self, name: str) -> Tool | None:
        tool = self._tools.get(name)
        if tool is not None or not self._providers:
            return tool
        for provider in self._providers:
            provided = provider.get(name)
            if provided is not None:
                return provided
        return None

    def names(self) -> list[str]:
        if not self._providers:
            return sorted(self._tools)
        provided = {name for provider in self._providers for name in provider.names()}
        return sorted(provided | set(self._tools))

    def all(self) -> list[Tool]:
        tools = [self.get(name) for name in self.names()]
        return [tool for tool in tools if tool is not None]

    def code_tools(self) -> list[Tool]:
        """The tools registered at startup only (no provider, no database): for checks and static limits."""
        return [self._tools[name] for name in sorted(self._tools)]

    def refusal(self, name: str, tenant: str | None) -> str | None:
        """Why a provider refuses a call of its tool ``name`` for ``tenant`` now (``None`` for code tools)."""
        if name in self._tools:
            return None
        for provider in self._providers:
            refused = provider.refusal(name, tenant)
            if refused:
                return refused
        return None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __len__(self) -> int:
        return len(self._tools)

    @contextlib.contextmanager
    def temporarily(self, *tools: Tool | Callable[..., Any]) -> Iterator[list[Tool]]:
        """Register ``tools`` for the duration of a block (tests), then restore the previous state."""
        saved = dict(self._tools)
        added: list[Tool] = []
        try:
            with self._lock:
                for item in _flattened(tools):
                    resolved = _as_tool(item)
                    _refuse_exposed_context(resolved)
                    if resolved.name in self._tools and not _same_definition(self._tools[resolved.name], resolved):
                        raise ToolDefinitionError(f"Duplicate tool name {resolved.name!r} in registry.temporarily().")
                    self._tools[resolved.name] = resolved
                    added.append(resolved)
            yield added
        finally:
            with self._lock:
                self._tools = saved


def _bundled(item: Any) -> list[Tool] | None:
    """The tools of a composite such as an ``UnfoldingTool`` (``None`` for a single tool)."""
    tools = getattr(item, "__toolhub_tools__", None)
    return list(tools()) if callable(tools) and not isinstance(item, type) else None


def _flattened(items: Any) -> list[Any]:
    flat: list[Any] = []
    for item in items:
        bundled = _bundled(item)
        flat.extend(bundled if bundled is not None else [item])
    return flat


def _as_tool(item: Tool | Callable[..., Any]) -> Tool:
    built = item if isinstance(item, Tool) else getattr(item, TOOL_ATTRIBUTE, None)
    if built is None:
        raise ToolDefinitionError(f"{item!r} is not a tool: decorate it with @tool or build a Tool.")
    if built.is_method:
        raise ToolDefinitionError(
            f"Tool {built.name!r} is a method that is not bound to an object; register the tools of an instance "
            "instead: tools_from_instance(obj)."
        )
    return built


def _refuse_exposed_context(tool: Tool) -> None:
    """A registered context type must never be a model parameter: the model would set the context."""
    for parameter, context_class in context_type_exposures(tool.parameters):
        name = context_class.__qualname__
        raise ToolDefinitionError(
            f"Tool {tool.name!r}, parameter {parameter!r}: its type holds {name}, a registered context type, "
            f"but the model would fill it in (the class was registered after the tool was defined, or is nested "
            f"in another type). Annotate the parameter Annotated[{name}, FromContext] so it is injected from the "
            "call's context."
        )


def _same_definition(existing: Tool, new: Tool) -> bool:
    """The same tool seen twice (imported in two modules, or copied with a compensation) is no duplicate."""
    if existing is new:
        return True
    if existing.handler is not None:
        return existing.handler is new.handler
    return new.handler is None and existing.version == new.version


registry = ToolRegistry()


def _refuse_tools_exposing(klass: type) -> None:
    """A registered tool taking ``klass`` as a model parameter would let the model set this context: refuse."""
    for tool in registry.code_tools():  # a provider's tools take JSON only: no context type to expose
        for parameter, exposed in context_type_exposures(tool.parameters, extra=klass):
            if exposed is klass:
                raise ToolDefinitionError(
                    f"Cannot register context type {klass.__qualname__}: tool {tool.name!r} already takes it as "
                    f"parameter {parameter!r}, which the model fills in. Annotate that parameter "
                    f"Annotated[{klass.__qualname__}, FromContext] so it is injected from the context."
                )


on_register(_refuse_tools_exposing)


def autodiscover(app_modules: list[str], target: ToolRegistry = registry) -> None:
    """Import ``<app>.tools`` for each app and register the tools defined there, then freeze.

    Found at module level: ``@tool`` functions, ``Tool`` values and lists of them (``tools_from_instance``).
    """
    for app_module in app_modules:
        module_name = f"{app_module}.tools"
        if importlib.util.find_spec(app_module) is None:
            continue
        try:
            spec = importlib.util.find_spec(module_name)
        except ModuleNotFoundError:
            spec = None
        if spec is None:
            continue
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if isinstance(value, Tool) or _bundled(value) is not None:
                target.register(value)
                continue
            if isinstance(value, list | tuple) and value and all(isinstance(item, Tool) for item in value):
                # e.g. ``SHOP_TOOLS = tools_from_instance(Shop())`` at module level
                for item in value:
                    target.register(item)
                continue
            decorated = getattr(value, TOOL_ATTRIBUTE, None)
            if decorated is not None and decorated.module == module_name and not decorated.is_method:
                target.register(decorated)
    target.freeze()
