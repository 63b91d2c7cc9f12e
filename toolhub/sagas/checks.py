"""System checks of declared compensations, so that a bad mapping fails at startup, not during a failure."""

import inspect
from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register

from toolhub.exceptions import ToolDefinitionError
from toolhub.sagas.mapping import sensitive_parameters_copied, unmatched_parameters
from toolhub.tools.definition_rules import is_async_callable
from toolhub.tools.registry import registry

__all__ = ["check_compensations"]


@register("toolhub")
def check_compensations(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every compensation must be buildable from what the original call knows, and safe to retry."""
    problems: list[CheckMessage] = []
    for tool in registry.code_tools():
        try:
            target = tool.compensate_with
        except ToolDefinitionError:
            target = None  # a target that is no tool is toolhub.E006
        compensation = registry.get(target) if target else None
        if tool.compensation_mapping is not None and not _accepts_two_arguments(tool.compensation_mapping):
            problems.append(
                Error(
                    f"The compensation mapping of tool {tool.name!r} cannot be called as mapping(arguments, result)"
                    + (
                        " and return the arguments: it is async, so it returns a coroutine and every rollback fails."
                        if is_async_callable(tool.compensation_mapping)
                        else "."
                    ),
                    hint="Give it two positional parameters: the original arguments (a dict) and the stored result; "
                    "define it with def, not async def.",
                    obj=tool.name,
                    id="toolhub.E102",
                )
            )
        if compensation is None:
            continue  # a missing compensating tool is toolhub.E002
        missing = unmatched_parameters(tool, compensation)
        if missing:
            problems.append(
                Error(
                    f"Tool {tool.name!r} is compensated by {compensation.name!r}, whose required parameter(s) "
                    f"{', '.join(missing)} are neither fields of {tool.name!r}'s result type nor its arguments.",
                    hint=(
                        "Add the field(s) to the result type, rename the compensation's parameters (names match "
                        "case-, '_'- and camelCase-insensitively), give them defaults, or declare a mapping: "
                        f"@{tool.name}.compensation(mapping=lambda arguments, result: {{...}})."
                    ),
                    obj=tool.name,
                    id="toolhub.E101",
                )
            )
        copied = sensitive_parameters_copied(tool, compensation)
        if copied:
            problems.append(
                Error(
                    f"Tool {compensation.name!r} compensates {tool.name!r} and would receive its sensitive "
                    f"argument(s) in {', '.join(copied)}, which it does not declare sensitive: the value would show "
                    "on the compensation's call. Such a compensation is not planned.",
                    hint=f"Declare @tool(sensitive={tuple(copied)!r}) on "
                    f"{compensation.name!r}, or give {tool.name!r} a mapping that leaves the value out.",
                    obj=tool.name,
                    id="toolhub.E103",
                )
            )
        if not compensation.idempotent:
            problems.append(
                Warning(
                    f"Tool {compensation.name!r} compensates {tool.name!r} but is not declared idempotent; a "
                    "compensation is retried, and after a worker dies mid-way its outcome is left to an operator.",
                    hint="Make it safe to repeat (use ctx.idempotency_key) and declare @tool(idempotent=True).",
                    obj=compensation.name,
                    id="toolhub.W101",
                )
            )
    return problems


def _accepts_two_arguments(mapping: Any) -> bool:
    if not callable(mapping) or is_async_callable(mapping):
        return False
    try:
        inspect.signature(mapping).bind({}, None)
    except TypeError:
        return False
    except ValueError:
        return True  # builtins without a signature: trust them
    return True
