"""toolhub: administered, audited agent tools for Django.

The public API: ``from toolhub import tool, ToolContext, FromContext, Param, Risk, Secret``.
"""

from toolhub.celery import app as celery_app
from toolhub.exceptions import ToolError
from toolhub.tools import (
    FromContext,
    Param,
    Progress,
    ReturnBehavior,
    Risk,
    Secret,
    Tool,
    ToolContext,
    ToolResult,
    ToolTimeoutError,
    register_context_type,
    registry,
    tool,
    tools_from_instance,
)

__all__ = [
    "FromContext",
    "Param",
    "Progress",
    "ReturnBehavior",
    "Risk",
    "Secret",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "ToolTimeoutError",
    "celery_app",
    "register_context_type",
    "registry",
    "tool",
    "tools_from_instance",
]
