"""``@tool`` and ``@fn.compensation``: declaring tools on functions."""

from collections.abc import Callable
from typing import Any, Protocol, TypeVar, Unpack, overload

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.definition import TOOL_ATTRIBUTE, Tool
from toolhub.tools.options import CompensationMapping, FunctionToolOptions

__all__ = ["tool"]

F = TypeVar("F", bound=Callable[..., Any])


class _Decorator(Protocol):
    def __call__(self, fn: F, /) -> F: ...


@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(**options: Unpack[FunctionToolOptions]) -> _Decorator: ...


def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Declare a function (or a method) as a tool; bare (``@tool``) or with options (``@tool(risk="high")``).

    The function stays callable as it was; the ``Tool`` built from it is its ``tool`` attribute, and
    ``@fn.compensation`` declares the tool that undoes it. Tools in an installed app's ``tools.py``
    are registered by autodiscovery at startup; the tools of an object's methods are made with
    ``tools_from_instance(obj)``. The options are ``FunctionToolOptions``.
    """

    def decorate(func: F) -> F:
        built = Tool.from_function(func, **options)
        setattr(func, TOOL_ATTRIBUTE, built)
        func.tool = built  # type: ignore[attr-defined]
        func.compensation = _compensation_decorator(built)  # type: ignore[attr-defined]
        return func

    if fn is not None:
        if options:
            raise ToolDefinitionError("Use @tool or @tool(option=...), not both at once.")
        return decorate(fn)
    return decorate


def _compensation_decorator(original: Tool) -> Callable[..., Any]:
    """Build ``@original.compensation``: declare the decorated function as the tool that undoes ``original``.

    ``@debit.compensation`` (or ``@debit.compensation(mapping=fn, idempotent=True)``) makes the function a
    tool (unless it is one already) and points the original's compensation at it, in place: every
    reference to the original ``Tool`` sees it (it is resolved to a name when the registry freezes).
    """

    def compensation(
        fn: Callable[..., Any] | None = None,
        /,
        *,
        mapping: CompensationMapping | None = None,
        **options: Any,
    ) -> Any:
        def register(func: F) -> F:
            built = getattr(func, TOOL_ATTRIBUTE, None)
            if built is None:
                built = getattr(tool(**options)(func), TOOL_ATTRIBUTE)
            elif options:
                raise ToolDefinitionError(
                    f"Tool {built.name!r} is already a tool: pass {sorted(options)} to its @tool(...), "
                    "not to .compensation."
                )
            if built.name == original.name:
                raise ToolDefinitionError(f"Tool {original.name!r} cannot compensate itself; name another tool.")
            original.compensation.set(original.name, built, mapping)
            return func

        if fn is not None:
            return register(fn)
        return register

    return compensation
