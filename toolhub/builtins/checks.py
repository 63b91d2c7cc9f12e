"""System checks of the built-in tools' settings, run by ``manage.py check`` when the app is installed.

toolhub_builtins.W001   ``WORKSPACE_ROOT`` is not set: the file and shell tools refuse every call
toolhub_builtins.E001   a ``SHELL_COMMANDS`` entry is malformed or holds a pattern that does not compile
"""

import re
from typing import Any

from django.core.checks import CheckMessage, Error, Warning

from toolhub.conf import toolhub_settings

__all__ = ["check_builtin_settings"]


def check_builtin_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report settings that would leave the built-in tools unusable or their allow list broken."""
    messages: list[CheckMessage] = []
    if not toolhub_settings().WORKSPACE_ROOT:
        messages.append(
            Warning(
                "TOOLHUB['WORKSPACE_ROOT'] is not set: the built-in file and shell tools refuse every call.",
                hint="Set it to a directory the workers can write; each tenant gets <root>/<tenant slug>/.",
                id="toolhub_builtins.W001",
            )
        )
    for index, entry in enumerate(toolhub_settings().SHELL_COMMANDS):
        problem = _entry_problem(entry)
        if problem:
            messages.append(
                Error(
                    f"TOOLHUB['SHELL_COMMANDS'][{index}]: {problem}",
                    hint='Write {"command": "wc", "arguments": ["-l", "[\\\\w.-]+"], "max_arguments": 5}.',
                    id="toolhub_builtins.E001",
                )
            )
    return messages


def _entry_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str) or not entry["command"]:
        return "each entry is a dict with a non-empty 'command' (a name found on SHELL_PATH)"
    if "/" in entry["command"]:
        return f"command {entry['command']!r} must be a bare name, found on SHELL_PATH"
    if not isinstance(entry.get("arguments", []), list):
        return "'arguments' must be a list of regular expressions"
    for pattern in entry.get("arguments", []):
        try:
            re.compile(pattern)
        except (re.error, TypeError) as exc:
            return f"pattern {pattern!r} does not compile ({exc})"
    if not isinstance(entry.get("max_arguments", 20), int):
        return "'max_arguments' must be an integer"
    return None
