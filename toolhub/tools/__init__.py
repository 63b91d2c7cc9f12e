"""The tool framework: definitions, schemas, context, results and the registry."""

from toolhub.tools.context import RESERVED_CONTEXT_KEYS, ToolContext
from toolhub.tools.context_types import FromContext, register_context_type
from toolhub.tools.decorators import tool
from toolhub.tools.definition import Tool
from toolhub.tools.instance import tools_from_instance
from toolhub.tools.options import FunctionToolOptions, ReturnBehavior, Risk, ToolOptions
from toolhub.tools.presets import Secret
from toolhub.tools.progress import Progress
from toolhub.tools.registry import registry
from toolhub.tools.results import ToolResult
from toolhub.tools.specs import Param
from toolhub.tools.timeouts import ToolTimeoutError

__all__ = [
    "RESERVED_CONTEXT_KEYS",
    "FromContext",
    "FunctionToolOptions",
    "Param",
    "Progress",
    "ReturnBehavior",
    "Risk",
    "Secret",
    "Tool",
    "ToolContext",
    "ToolOptions",
    "ToolResult",
    "ToolTimeoutError",
    "register_context_type",
    "registry",
    "tool",
    "tools_from_instance",
]
