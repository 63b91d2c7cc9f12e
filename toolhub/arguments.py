"""Arguments as a model sends them, turned into validated values or refused with a message for the model.

The checks run before anything else looks at the values: size, nesting, JSON shape, what a database
column can store, then the tool's own schema.
"""

import inspect
import logging
import traceback
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from toolhub.audit_hash import canonical_json
from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolDefinitionError, ToolhubError
from toolhub.feedback import bounded_model_message, invalid_arguments_message, validator_failure_message
from toolhub.json_intake import JSONRefused, RefusalKind, json_loads_checked, json_value_problem
from toolhub.storable import json_storage_problem, stored_numbers
from toolhub.tools.definition import Tool
from toolhub.tools.results import to_json_value
from toolhub.tools.secrets import SecretScrubber

__all__ = [
    "ArgumentsRefused",
    "MAX_NESTING",
    "parse_arguments",
    "validate_arguments",
    "storable_arguments",
    "without_sensitive_values",
]

logger = logging.getLogger(__name__)

#: Deepest nesting of lists and objects accepted in arguments (far beyond any tool's needs).
MAX_NESTING = 100


class ArgumentsRefused(ToolhubError):
    """The arguments cannot be used; the message says why, for the model, and nothing was executed."""


def parse_arguments(raw: str | Mapping[str, Any] | None, tool: Tool | None = None) -> dict[str, Any]:
    """Parse what the model sent into a mapping of arguments, within the size and nesting limits.

    ``tool``, when known: a refusal naming where a value cannot be stored (``payments.<iban> contains a NUL
    character``) is scrubbed of the tool's withheld values (a sensitive mapping's keys count as its values).
    """
    max_bytes = toolhub_settings().MAX_ARGUMENTS_BYTES
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        if len(raw.encode("utf-8", "surrogatepass")) > max_bytes:
            raise ArgumentsRefused(f"Arguments are larger than {max_bytes} bytes; nothing was executed.")
        try:
            # What can be stored is checked below, on the mapping, where a refusal can be scrubbed.
            parsed = json_loads_checked(raw, max_depth=MAX_NESTING, storable=False)
        except JSONRefused as refused:
            raise _refusal(refused) from None
    else:
        parsed = raw
    if not isinstance(parsed, Mapping):
        raise ArgumentsRefused("Arguments must be a JSON object mapping parameter names to values.")
    # Nesting first: deeper data would exhaust the recursion limit of the serializers and checks below.
    refused = json_value_problem(parsed, max_depth=MAX_NESTING)
    if refused is not None:
        if tool is not None and refused.kind == RefusalKind.STORAGE:
            refused = JSONRefused(refused.kind, without_sensitive_values(refused.reason, tool, parsed))
        raise _refusal(refused)
    if len(canonical_json(parsed).encode("utf-8", "surrogatepass")) > max_bytes:
        raise ArgumentsRefused(f"Arguments are larger than {max_bytes} bytes; nothing was executed.")
    return dict(parsed)


def validate_arguments(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    """Check the string limit, then the tool's schema; return the validated values."""
    limit = toolhub_settings().MAX_STRING_LENGTH
    too_long = _first_long_string(arguments, limit)
    if too_long is not None:
        raise _refused(
            tool,
            arguments,
            f"Invalid arguments for tool {tool.name!r}; nothing was executed: {too_long} is longer than "
            f"{limit} characters.",
        )
    try:
        return tool.validate_arguments(arguments)
    except ValidationError as exc:
        raise _refused(tool, arguments, invalid_arguments_message(tool.name, exc)) from None
    except ToolDefinitionError:
        # Its input model cannot be built (or would match a pattern by backtracking): the developer's to fix, and
        # ``manage.py check`` names it. Refused, logged; the message to the model does not explain the code.
        logger.exception("Tool %s cannot validate its arguments; the call is refused.", tool.name)
        raise ArgumentsRefused(
            f"Tool {tool.name!r} cannot validate its arguments (an error in its definition, logged for its "
            "developers); nothing was executed."
        ) from None
    except Exception as exc:  # noqa: BLE001 - a developer's validator raising anything else refuses the arguments
        # Pydantic wraps only ValueError and AssertionError; anything else (a KeyError quoting the card it looked
        # up) would fail the request and reach the log whole. Refused, scrubbed, as a validation error is.
        with SecretScrubber.for_arguments(tool, arguments).scope():
            logger.warning("A validator of tool %s raised; its arguments are refused.", tool.name, exc_info=True)
        where = _parameter_of_validator(tool, exc) or "(arguments)"
        raise _refused(tool, arguments, validator_failure_message(tool.name, where, exc)) from None


def storable_arguments(tool: Tool, validated: dict[str, Any]) -> dict[str, Any]:
    """The validated arguments as JSON, as the database gives them back; what no JSON column stores is refused.

    As given back (``stored_numbers``: ``1e16`` an integer, ``-0.0`` zero): the approval binding is made over these,
    and checked against the row read back.
    """
    try:
        stored = to_json_value(validated)
    except ValueError as exc:  # keys a validator made collide as text (``to_json_value``)
        raise _refused(
            tool, validated, f"Invalid arguments for tool {tool.name!r}; nothing was executed: {exc}."
        ) from None
    problem = json_storage_problem(stored)
    if problem:
        message = f"Invalid arguments for tool {tool.name!r}; nothing was executed: {problem}."
        raise _refused(tool, validated, message)
    return stored_numbers(stored)


def without_sensitive_values(text: str, tool: Tool, arguments: Mapping[str, Any]) -> str:
    """``text`` (kept as the call's error, audited, shown to staff) with the withheld arguments' values replaced.

    ``Tool.withheld``: the sensitive names and, for a tool that has any, the names it does not declare (a
    misspelt ``PIN`` carries the PIN), as the stored arguments withhold them.
    """
    return SecretScrubber.for_arguments(tool, arguments).text(text)


def _refused(tool: Tool, arguments: Mapping[str, Any], message: str) -> ArgumentsRefused:
    """A refusal for the model: a validator may quote the value it refuses ("<card> fails the Luhn check").

    Sensitive values are replaced before the message is bounded: bounding cuts long lines in the middle, and a
    value cut in two is no longer recognised.
    """
    return ArgumentsRefused(bounded_model_message(without_sensitive_values(message, tool, arguments)))


def _parameter_of_validator(tool: Tool, exc: BaseException) -> str | None:
    """The parameter whose own validator raised ``exc`` (one of its traceback's frames runs it), if one can be told.

    Its ``Annotated`` validators (``AfterValidator(fn)``...) and the model's ``@field_validator``s naming it. A
    validator several parameters share (an ``IBAN`` alias for source and target) names none: which one failed
    is not in the traceback, and blaming the wrong one would send the model to fix the wrong value.
    """
    if not tool.inputs.has_model:
        return None
    model = tool.input_model
    ran = {frame.f_code for frame, _ in traceback.walk_tb(exc.__traceback__)}
    decorated = model.__pydantic_decorators__.field_validators.values()
    blamed = []
    for name, field in model.model_fields.items():
        validators = [getattr(item, "func", None) for item in field.metadata]
        validators += [decorator.func for decorator in decorated if name in decorator.info.fields]
        if any(_code_of(validator) in ran for validator in validators):
            blamed.append(field.alias or name)
    return blamed[0] if len(blamed) == 1 else None


def _code_of(function: Any) -> Any:
    """The code object a validator runs (a classmethod's or a wrapper's function's), or ``None``."""
    function = getattr(function, "__func__", function)
    return getattr(inspect.unwrap(function), "__code__", None) if callable(function) else None


def _first_long_string(value: Any, limit: int, path: str = "") -> str | None:
    if isinstance(value, str):
        return path or "a value" if len(value) > limit else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and len(key) > limit:
                return "a key"
            found = _first_long_string(item, limit, f"{path}.{key}" if path else str(key))
            if found:
                return found
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _first_long_string(item, limit, f"{path}[{index}]")
            if found:
                return found
    return None


def _refusal(refused: JSONRefused) -> ArgumentsRefused:
    """What the model reads when its arguments' JSON is refused: how to send it instead."""
    if refused.kind == RefusalKind.SYNTAX:
        return ArgumentsRefused(
            f"Arguments are not valid JSON ({refused.reason}); send a JSON object with the tool's parameters."
        )
    if refused.kind == RefusalKind.NESTING:
        return ArgumentsRefused(f"Arguments are nested deeper than {MAX_NESTING} levels; nothing was executed.")
    return ArgumentsRefused(bounded_model_message(f"Invalid arguments; nothing was executed: {refused.reason}."))
