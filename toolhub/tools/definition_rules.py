"""What makes a tool definition valid: each rule refuses a mistake when the tool is defined, never at its first call.

``Tool.__post_init__`` asks ``refuse_invalid``; a mistake raises ``ToolDefinitionError`` naming the tool, the
parameter where there is one, and what to write instead. What needs the whole registry (a compensation that
names no tool, two names differing only in case) is checked at startup (``toolhub.checks``); what a
compensation may name, by ``Tool`` itself (``toolhub.tools.definition``).
"""

import inspect
import re
from typing import Any

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.typechecks import secret_typed

__all__ = [
    "NAME_PATTERN",
    "TOOL_ATTRIBUTE",
    "confusable_key",
    "is_async_callable",
    "is_generator_callable",
    "refuse_invalid",
]

#: Where ``@tool`` leaves the ``Tool`` it built on the decorated function.
TOOL_ATTRIBUTE = "__toolhub_tool__"
NAME_PATTERN = re.compile(r"^[a-zA-Z][a-zA-Z0-9_\-]{0,63}$")


def confusable_key(name: str) -> str:
    """The form in which two tool names are one name to a model or a reader: case and ``-``/``_`` do not count.

    Every place that refuses a second name for a tool compares this: the startup check (code tools) and the
    fetch of a remote MCP server's tools.
    """
    return name.casefold().replace("-", "_")


def refuse_invalid(tool: Any) -> None:
    """Raise ``ToolDefinitionError`` for the first rule ``tool`` (a ``Tool`` being built) breaks.

    Typed ``Any``: ``toolhub.tools.definition`` imports this module, never the other way (no import cycle).
    """
    if not isinstance(tool.name, str) or not NAME_PATTERN.fullmatch(tool.name):
        raise ToolDefinitionError(
            f"Tool name {tool.name!r} is not valid: use letters, digits, '_' or '-', starting with a "
            "letter, at most 64 characters."
        )
    if not isinstance(tool.description, str) or not tool.description.strip():
        raise ToolDefinitionError(f"Tool {tool.name!r} has no description: add a docstring or pass description=...")
    if tool.inputs.is_external:
        if tool.handler is not None:
            raise ToolDefinitionError(f"Tool {tool.name!r}: an external tool has no handler.")
    elif not callable(tool.handler):
        raise ToolDefinitionError(f"Tool {tool.name!r}: its handler {tool.handler!r} is not callable.")
    elif is_generator_callable(tool.handler):
        raise ToolDefinitionError(
            f"Tool {tool.name!r}: its function is a generator (it yields), so a call returns before its body "
            "runs: the body would run while the result is stored, past the time limit (an async generator's "
            "calls all fail). Return the values (e.g. a list); report progress with a progress: Progress parameter."
        )
    unknown = set(tool.sensitive) - tool.inputs.argument_names() - set(tool.presets)
    if unknown:
        raise ToolDefinitionError(f"Tool {tool.name!r}: sensitive names {sorted(unknown)} are not parameters of it.")
    shown = sorted(
        name
        for name, default in tool.inputs.published_defaults().items()
        if name in tool.sensitive and default not in (None, "")
    )
    if shown:
        raise ToolDefinitionError(
            f"Tool {tool.name!r}, parameter {shown[0]!r}: it is sensitive, but its default is published in the "
            "tool's schema, which every model, API client and export reads. Give it no default (or None, or ''); "
            f"for a fixed secret the model never chooses, use presets={{{shown[0]!r}: Secret('SETTING_NAME')}}."
        )
    secrets = secret_typed(tool.inputs.parameters)
    if secrets:
        parameter, secret = secrets[0]
        raise ToolDefinitionError(
            f"Tool {tool.name!r}, parameter {parameter!r}: a pydantic {secret.__name__} is stored as its mask "
            "'**********', so a worker would run the call with the mask, not the value. Type the secret as its "
            f"plain value (str) and name the parameter in sensitive=({parameter!r},): toolhub then shows it "
            "nowhere and replaces it by [secret] in whatever the tool outputs."
        )
    if tool.timeout is not None and (
        isinstance(tool.timeout, bool) or not isinstance(tool.timeout, int | float) or not tool.timeout > 0
    ):
        raise ToolDefinitionError(
            f"Tool {tool.name!r}: timeout must be a positive number of seconds, not {tool.timeout!r}."
        )
    if not isinstance(tool.atomic, bool):
        raise ToolDefinitionError(f"Tool {tool.name!r}: atomic must be True or False, not {tool.atomic!r}.")
    if tool.atomic and (tool.is_external or is_async_callable(tool.handler)):
        raise ToolDefinitionError(
            f"Tool {tool.name!r}: atomic=True is for synchronous Python tools whose effects are writes to "
            "toolhub's database (they commit with the call's outcome); an external or async tool cannot be atomic."
        )
    if tool.advice and not tool.one_shot_per_loop:
        raise ToolDefinitionError(
            f"Tool {tool.name!r}: advice= is what a one-shot tool answers when called again; "
            "it needs one_shot_per_loop=True."
        )


def is_async_callable(handler: Any) -> bool:
    """Whether calling ``handler`` gives a coroutine (it would run on an event loop of its own)."""
    call = type(handler).__call__ if not inspect.isroutine(handler) else None
    return inspect.iscoroutinefunction(handler) or (call is not None and inspect.iscoroutinefunction(call))


def is_generator_callable(handler: Any) -> bool:
    """Whether calling ``handler`` gives a generator (sync or async) rather than the call's result."""
    call = type(handler).__call__ if not inspect.isroutine(handler) else None
    return any(
        inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn) for fn in (handler, call) if fn is not None
    )
