"""The tool framework: definitions, schemas, context, results and the registry."""

from toolhub.tools.context import RESERVED_CONTEXT_KEYS, ToolContext
from toolhub.tools.context_types import FromContext, register_context_type
from toolhub.tools.definition import ReturnBehavior, Risk, Tool, tool
from toolhub.tools.instance import tools_from_instance
from toolhub.tools.presets import Secret
from toolhub.tools.progress import Progress
from toolhub.tools.registry import registry
from toolhub.tools.results import ToolResult
from toolhub.tools.schema import Param
from toolhub.tools.timeouts import ToolTimeoutError

__all__ = [
    "RESERVED_CONTEXT_KEYS",
    "FromContext",
    "Param",
    "Progress",
    "ReturnBehavior",
    "Risk",
    "Secret",
    "Tool",
    "ToolContext",
    "ToolResult",
    "ToolTimeoutError",
    "register_context_type",
    "registry",
    "tool",
    "tools_from_instance",
]
