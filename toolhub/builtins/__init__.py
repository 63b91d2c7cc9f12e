"""Built-in file and shell tools (AgentScope's), confined to a tenant's workspace and off until granted.

Add ``"toolhub.builtins.apps.BuiltinsConfig"`` to ``INSTALLED_APPS`` to register them; a grant then
lets a user, group or tenant use them (README "Built-in tools").
"""

from toolhub.tools.registry import registry

__all__ = ["GROUP", "grants_builtin"]

#: The tool group every built-in tool declares.
GROUP = "builtins"


def grants_builtin(tool_name: str, group_name: str, group_extra_tools: list[str] | None) -> bool:
    """Whether a grant of ``tool_name`` or of the group ``group_name`` (with its added tools) names a built-in."""

    def builtin(name: str) -> bool:
        tool = registry.get(name)
        return tool is not None and tool.group == GROUP

    return group_name == GROUP or builtin(tool_name) or any(builtin(name) for name in group_extra_tools or [])
