"""toolhub: administered, audited agent tools for Django.

The public API: ``from toolhub import tool, Tool, ToolOptions, ToolContext, FromContext, Param, Risk,
Secret, ToolSuspend``, and ``UnfoldingTool`` / ``unfolding_tools`` for progressive disclosure.
"""

from toolhub.celery import app as celery_app
from toolhub.disclosure import UnfoldingTool, unfolding_tools
from toolhub.exceptions import ToolError, ToolSuspend
from toolhub.tools import (
    FromContext,
    FunctionToolOptions,
    Param,
    Progress,
    ReturnBehavior,
    Risk,
    Secret,
    Tool,
    ToolContext,
    ToolOptions,
    ToolResult,
    ToolTimeoutError,
    register_context_type,
    registry,
    tool,
    tools_from_instance,
)

__all__ = [
    "FromContext",
    "FunctionToolOptions",
    "Param",
    "Progress",
    "ReturnBehavior",
    "Risk",
    "Secret",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOptions",
    "ToolResult",
    "ToolSuspend",
    "ToolTimeoutError",
    "UnfoldingTool",
    "celery_app",
    "register_context_type",
    "registry",
    "tool",
    "tools_from_instance",
    "unfolding_tools",
]
