"""toolhub's error hierarchy; every message says what was wrong and what to do about it."""

__all__ = [
    "ToolhubError",
    "ToolDefinitionError",
    "RegistryFrozenError",
    "ToolError",
    "InvalidTransitionError",
    "ApprovalError",
    "AlreadyDecidedError",
    "DecisionNotAllowedError",
    "ArgumentsChangedError",
    "EditedArgumentsError",
    "ModelError",
    "NotInTenantError",
]


class ToolhubError(Exception):
    """Base class of every error toolhub raises on purpose."""


class ToolDefinitionError(ToolhubError):
    """A tool is declared in a way toolhub cannot register; raised at registration time."""


class RegistryFrozenError(ToolhubError):
    """The tool registry was written to after autodiscovery finished."""


class ToolError(ToolhubError):
    """Raised by a tool to hand the model a message meant for it (the call fails with that text)."""


class InvalidTransitionError(ToolhubError):
    """A state change was asked for from a state that does not allow it."""


class ApprovalError(ToolhubError):
    """An approval decision could not be taken."""


class AlreadyDecidedError(ApprovalError):
    """The approval request was decided (or expired) already."""


class DecisionNotAllowedError(ApprovalError):
    """The user may not decide this approval request."""


class ArgumentsChangedError(ApprovalError):
    """The arguments under approval changed since the decider looked at them; nothing was recorded."""


class EditedArgumentsError(ApprovalError):
    """An operator's edited arguments cannot be used (invalid, unstorable, too large, too deep); nothing recorded."""


class ModelError(ToolhubError):
    """The model endpoint was unreachable or answered something that is not a valid turn."""


class NotInTenantError(ToolhubError):
    """A person asked to read or act on a row outside their tenants; answered exactly like a missing row."""
