"""toolhub: administered, audited agent tools for Django.

The public API: ``from toolhub import tool, ToolContext, Param, Risk``.
"""

from toolhub.celery import app as celery_app
from toolhub.exceptions import ToolError
from toolhub.tools import (
    Param,
    ReturnBehavior,
    Risk,
    Tool,
    ToolContext,
    ToolResult,
    registry,
    tool,
)

__all__ = [
    "Param",
    "ReturnBehavior",
    "Risk",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "celery_app",
    "registry",
    "tool",
]
