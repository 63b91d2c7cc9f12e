"""System checks over the registered tools, reported by ``manage.py check`` at startup."""

from typing import Any

from django.core.checks import CheckMessage, Error, register

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.registry import registry


@register("toolhub")
def check_tools(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every tool must have a buildable schema and point its compensation at a real tool."""
    problems: list[CheckMessage] = []
    for tool in registry.all():
        try:
            tool.json_schema  # noqa: B018 - building it is the check
        except ToolDefinitionError as exc:
            problems.append(
                Error(str(exc), hint="Use JSON-compatible parameter types.", obj=tool.name, id="toolhub.E001")
            )
        if tool.compensate_with and tool.compensate_with not in registry:
            problems.append(
                Error(
                    f"Tool {tool.name!r} is compensated by {tool.compensate_with!r}, which is not a registered tool.",
                    hint="Define the compensating tool in a tools.py, or fix the name in compensate_with=.",
                    obj=tool.name,
                    id="toolhub.E002",
                )
            )
    return problems
