"""Tools from an object's ``@tool`` methods, bound to that object.

::

    class Inventory:
        def __init__(self, warehouse: str) -> None:
            self.warehouse = warehouse

        @tool(idempotent=True)
        def stock(self, sku: str) -> int:
            \"\"\"Units of a product in stock.\"\"\"

    INVENTORY_TOOLS = tools_from_instance(Inventory("north"), naming="north_")   # in tools.py

Each method becomes a ``Tool`` whose handler is the bound method; ``naming`` (a prefix, or a
function of the method's tool name) and ``filter`` (a predicate on that name) choose which tools
and under what names. A module-level list of tools in an app's ``tools.py`` is registered by
autodiscovery.
"""

import inspect
from collections.abc import Callable
from typing import Any

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.definition import TOOL_ATTRIBUTE, Tool

__all__ = ["tools_from_instance"]


def tools_from_instance(
    obj: Any,
    *,
    naming: str | Callable[[str], str] | None = None,
    filter: Callable[[str], bool] | None = None,  # noqa: A002 - the name the issue and Embabel use
    required: bool = True,
) -> list[Tool]:
    """The tools of ``obj``'s ``@tool`` methods, bound to it, in the order the class defines them.

    Raises ``ToolDefinitionError`` when ``obj`` has no tool methods (or the filter leaves none) and
    ``required`` is true; with ``required=False`` that is an empty list.
    """
    if isinstance(obj, type):
        raise ToolDefinitionError(
            f"tools_from_instance() takes an object, not the class {obj.__qualname__}; pass {obj.__qualname__}(...)."
        )
    rename = _naming(naming)
    tools: list[Tool] = []
    seen: set[str] = set()
    for attribute, unbound in _tool_methods(type(obj)):
        if filter is not None and not filter(unbound.name):
            continue
        name = rename(unbound.name)
        if name in seen:
            raise ToolDefinitionError(
                f"tools_from_instance({type(obj).__qualname__}): two methods would both be named {name!r}."
            )
        seen.add(name)
        bound = getattr(obj, attribute)
        tools.append(
            unbound._copy(name=name, handler=bound, is_method=False, module=type(obj).__module__)
            if unbound.is_method
            else unbound._copy(name=name, module=type(obj).__module__)
        )
    if not tools and required:
        raise ToolDefinitionError(
            f"{type(obj).__qualname__} has no @tool methods{' that pass the filter' if filter else ''}; "
            "decorate its methods with @tool, or pass required=False."
        )
    return tools


def _tool_methods(cls: type) -> list[tuple[str, Tool]]:
    found: dict[str, Tool] = {}
    for klass in reversed(cls.__mro__):
        for attribute, value in vars(klass).items():
            built = getattr(value, TOOL_ATTRIBUTE, None)
            if built is None and isinstance(value, classmethod | staticmethod):
                built = getattr(value.__func__, TOOL_ATTRIBUTE, None)
            if isinstance(built, Tool):
                found[attribute] = built
            elif attribute in found:
                del found[attribute]  # overridden by a method that is no tool
    return list(found.items())


def _naming(naming: str | Callable[[str], str] | None) -> Callable[[str], str]:
    if naming is None:
        return lambda name: name
    if isinstance(naming, str):
        return lambda name: f"{naming}{name}"
    if callable(naming) and not inspect.isclass(naming):
        return naming
    raise ToolDefinitionError(f"naming= takes a prefix string or a function of the tool name, not {naming!r}.")
