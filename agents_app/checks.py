"""The agents app's system checks, reported by ``manage.py check`` at startup.

``agents_app.E001``: ``TOOLHUB["DEFAULT_MAX_TOOL_CALLS"]`` is above ``MAX_TOOL_CALLS_LIMIT``. The default is what an
agent created without a budget gets: the admin's form would refuse every such agent (the field's validator), and
the loop never allows more than the limit whatever a row says, so the setting promises a budget nothing grants.
"""

from typing import Any

from django.core.checks import CheckMessage, Error, register

from agents_app.models import MAX_TOOL_CALLS_LIMIT
from toolhub.conf import toolhub_settings

__all__ = ["check_default_tool_calls"]


@register("toolhub")
def check_default_tool_calls(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The default tool-call budget of an agent must be one an agent may have."""
    default = toolhub_settings().DEFAULT_MAX_TOOL_CALLS
    if default <= MAX_TOOL_CALLS_LIMIT:
        return []
    return [
        Error(
            f"TOOLHUB['DEFAULT_MAX_TOOL_CALLS'] is {default}, above the {MAX_TOOL_CALLS_LIMIT} tool calls per run an "
            "agent may be allowed: agents created without a budget could not be saved in the admin, and the loop "
            f"stops their runs at {MAX_TOOL_CALLS_LIMIT} calls anyway.",
            hint=f"Set TOOLHUB['DEFAULT_MAX_TOOL_CALLS'] to at most {MAX_TOOL_CALLS_LIMIT}.",
            id="agents_app.E001",
        )
    ]
