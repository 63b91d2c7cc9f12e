"""Preset parameters: values (often secrets) a tool receives that the model never sees or sets.

::

    @tool(presets={"api_key": Secret("EMAIL_API_KEY"), "region": "eu-west-1"})
    def send_email(to: str, subject: str, api_key: str, region: str) -> str: ...

Preset parameters are absent from the schema, so the model cannot send them (an attempt is refused as
an unknown argument, without echoing it). They are resolved when the call runs, never stored in the
call's arguments, the conversation or the audit trail: a ``Secret`` from the Django setting of that
name, else from the environment variable of that name. Whatever a tool outputs (result, error, progress,
artifacts, log lines) has its secrets' values replaced on the way out (``toolhub.tools.secrets``).
"""

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolhub.exceptions import ToolhubError

__all__ = ["Secret", "PresetUnavailable", "resolve_preset"]


class PresetUnavailable(ToolhubError):
    """A preset a tool needs could not be resolved when the call ran (a missing secret)."""


@dataclass(frozen=True)
class Secret:
    """A secret resolved at call time from the Django setting ``name``, else the environment variable ``name``."""

    name: str

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError("Secret() needs the name of a setting or environment variable.")

    def __repr__(self) -> str:
        return f"Secret({self.name!r})"

    def resolve(self) -> str | None:
        """The secret's value now, or ``None`` when neither the setting nor the environment has it."""
        from django.conf import settings

        if settings.configured:
            configured: str | None = getattr(settings, self.name, None)
            if configured not in (None, ""):
                return configured
        value = os.environ.get(self.name)
        return value if value else None


def resolve_preset(tool_name: str, parameter: str, preset: Any) -> Any:
    """The value a preset parameter gets for one call."""
    if isinstance(preset, Secret):
        value = preset.resolve()
        if value is None:
            raise PresetUnavailable(
                f"Tool {tool_name!r}: secret {preset.name!r} for parameter {parameter!r} is not set; define the "
                f"setting or the environment variable {preset.name} on the workers."
            )
        return value
    if callable(preset) and not isinstance(preset, type):
        return _call(preset)
    return preset


def _call(factory: Callable[[], Any]) -> Any:
    return factory()
