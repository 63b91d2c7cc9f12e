"""The tool framework: definitions, schemas, context, results and the registry."""

from toolhub.tools.context import RESERVED_CONTEXT_KEYS, ToolContext
from toolhub.tools.definition import ReturnBehavior, Risk, Tool, tool
from toolhub.tools.registry import registry
from toolhub.tools.results import ToolResult
from toolhub.tools.schema import Param

__all__ = [
    "RESERVED_CONTEXT_KEYS",
    "Param",
    "ReturnBehavior",
    "Risk",
    "Tool",
    "ToolContext",
    "ToolResult",
    "registry",
    "tool",
]
