"""What the model is told when a call cannot run: actionable, and never echoing sensitive values."""

import difflib
import traceback
import unicodedata
from collections.abc import Iterable

from django.utils.module_loading import import_string
from pydantic import ValidationError

from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolError
from toolhub.tools.context_types import ContextObjectUnavailable
from toolhub.tools.presets import PresetUnavailable
from toolhub.tools.timeouts import ToolTimeoutError

__all__ = [
    "bounded_model_message",
    "default_unknown_tool_message",
    "unknown_tool_message",
    "unbuildable_tool_message",
    "invalid_arguments_message",
    "validator_failure_message",
    "default_invalid_arguments_message",
    "execution_error",
    "exception_detail",
]


def unknown_tool_message(name: str, available: Iterable[str]) -> str:
    """Name the closest tools so the model can correct itself (``TOOLHUB["UNKNOWN_TOOL_HANDLER"]``).

    ``available`` are the tools the caller may see (``pipeline.visible_tool_names``), never the whole
    catalogue: a suggestion must not reveal a tool the run may not use, nor name one every listing leaves out
    (its schema cannot be built: ``buildable``), whose calls are refused.
    """
    available = _listable(available)
    handler_path = toolhub_settings().UNKNOWN_TOOL_HANDLER
    if handler_path:
        return str(import_string(handler_path)(name, sorted(available)))
    return default_unknown_tool_message(name, available)


def _listable(names: Iterable[str]) -> list[str]:
    """``names`` but those of registered tools whose schema cannot be built (left out of listings: ``buildable``)."""
    from toolhub.tools.export import listable_names

    return listable_names(names)


def unbuildable_tool_message(name: str) -> str:
    """What a page, form or check says of one tool whose schema cannot be built (``export.listed_schema``: ``None``).

    Bounded and the same everywhere: the tool, the check's id and what to do; the builder's own message is only in
    the operators' log (``export.report_unbuildable``).
    """
    shown = name if len(name) <= 80 else name[:77] + "..."
    return (
        f"Tool {shown!r} cannot be described: its schema cannot be built (toolhub.E001), so its parameters are "
        "unknown and its calls are refused. Hint: its developers give its parameters types that validate from JSON "
        "(manage.py check names the problem), or its server fixes its schema and it is accepted again."
    )


def default_unknown_tool_message(name: str, available: Iterable[str]) -> str:
    """``Unknown tool 'x'. Did you mean: y, z?``, or the available tools when none is close."""
    names = sorted(available)
    close = difflib.get_close_matches(name, names, n=toolhub_settings().UNKNOWN_TOOL_SUGGESTIONS, cutoff=0.5)
    shown = name if len(name) <= 80 else name[:77] + "..."
    message = f"Unknown tool {shown!r}."
    if close:
        message += f" Did you mean: {', '.join(close)}?"
    elif names:
        message += f" Available tools: {', '.join(names[:20])}."
    else:
        message += " No tools are available to you here."
    return message


def invalid_arguments_message(tool_name: str, exc: ValidationError) -> str:
    """List each field problem by location and reason (``TOOLHUB["ARGUMENT_ERROR_HANDLER"]``).

    Input values are never repeated back: a handler gets the locations, messages and types only. The
    caller bounds whatever comes back (``bounded_model_message``), a handler's text as the default's.
    """
    errors = [
        {
            "loc": ".".join(str(part) for part in error["loc"]) or "(arguments)",
            "msg": str(error["msg"]),
            "type": str(error["type"]),
        }
        for error in exc.errors(include_url=False, include_input=False)
    ]
    return _arguments_message(tool_name, errors)


def validator_failure_message(tool_name: str, loc: str, exc: Exception) -> str:
    """A validator that raised what pydantic does not turn into a validation error (a ``KeyError`` from a lookup).

    Told as one field problem, through the same handler: the arguments are refused, not the request failed.
    The exception's message may quote the value, as a ``ValueError``'s does: the caller scrubs it.
    """
    error = {"loc": loc, "msg": f"its validator failed: {type(exc).__name__}: {exc}", "type": "validator_failed"}
    return _arguments_message(tool_name, [error])


def _arguments_message(tool_name: str, errors: list[dict[str, str]]) -> str:
    handler_path = toolhub_settings().ARGUMENT_ERROR_HANDLER
    if handler_path:
        return str(import_string(handler_path)(tool_name, errors))
    return default_invalid_arguments_message(tool_name, errors)


def default_invalid_arguments_message(tool_name: str, errors: list[dict[str, str]]) -> str:
    """``Invalid arguments for tool 'x'; nothing was executed. Fix these and call again:`` and one line each."""
    lines = [f"Invalid arguments for tool {tool_name!r}; nothing was executed. Fix these and call again:"]
    lines.extend(f"- {error['loc']}: {error['msg']}" for error in errors)
    return "\n".join(lines)


def default_error_handler(exc: BaseException) -> str:
    """Sanitize an execution error: a ``ToolError`` speaks to the model, anything else is summarized."""
    if isinstance(exc, ToolError | ToolTimeoutError):
        return str(exc)
    if isinstance(exc, PresetUnavailable):
        return (
            "The tool is not configured on this server (a setting it needs is missing); the operators were told. "
            "Do not retry it."
        )
    if isinstance(exc, ContextObjectUnavailable):
        return "The tool cannot run in this conversation (context it needs is missing); do not retry it."
    return (
        f"The tool failed with an internal error ({type(exc).__name__}). "
        "The details were recorded for the operators; do not retry with the same arguments."
    )


def execution_error(exc: BaseException) -> str:
    """The model-facing message for an execution error, through the configured handler."""
    handler_path = toolhub_settings().ERROR_HANDLER
    handler = import_string(handler_path) if handler_path else default_error_handler
    return handler(exc)


def exception_detail(exc: BaseException) -> str:
    """Full detail of an error, kept for auditors only."""
    return "".join(traceback.format_exception(exc))


#: What a refusal tells the model, at most: problem lines, and characters per line (the middle is cut).
_MESSAGE_LINES = 12
_MESSAGE_LINE_CHARS = 150


def bounded_model_message(message: str) -> str:
    """An argument error as the model reads it: printable, a bounded number of short lines.

    These messages quote the model's own keys; a control character, a 10,000-character key or
    thousands of unexpected keys must not come back verbatim.
    """
    lines = [_printable_line(line) for line in message.split("\n")]
    if len(lines) > _MESSAGE_LINES + 1:
        more = len(lines) - 1 - _MESSAGE_LINES
        lines = [*lines[: _MESSAGE_LINES + 1], f"- ... and {more} more problem(s) of the same kind."]
    return "\n".join(lines)


def _printable_line(line: str) -> str:
    line = "".join(repr(ch)[1:-1] if unicodedata.category(ch) in _UNPRINTABLE else ch for ch in line)
    if len(line) <= _MESSAGE_LINE_CHARS:
        return line
    keep = (_MESSAGE_LINE_CHARS - 30) // 2
    return f"{line[:keep]} [...{len(line) - 2 * keep} characters...] {line[-keep:]}"


#: Control and format characters, lone surrogates, line and paragraph separators.
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
