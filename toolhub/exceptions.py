"""toolhub's error hierarchy; every message says what was wrong and what to do about it.

Each class says how the API answers it (``status_code``, and ``field`` when the message also belongs
to one request field); ``toolhub.api.exceptions.toolhub_exception_handler`` turns any of them into
that response, so views do not map errors by hand.
"""

from typing import Any

__all__ = [
    "ToolhubError",
    "ToolDefinitionError",
    "RegistryFrozenError",
    "ToolError",
    "ToolSuspend",
    "InvalidTransitionError",
    "CompensationNotAllowedError",
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

    #: The API's answer: this status with ``{"detail": message}`` (and ``{field: [message]}`` when set).
    status_code: int = 400
    field: str | None = None


class ToolDefinitionError(ToolhubError):
    """A tool is declared in a way toolhub cannot register; raised at registration time."""


class RegistryFrozenError(ToolhubError):
    """The tool registry was written to after autodiscovery finished."""


class ToolError(ToolhubError):
    """Raised by a tool to hand the model a message meant for it (the call fails with that text)."""


class ToolSuspend(ToolhubError):  # noqa: N818 - named for what a tool does, as AgentScope's ToolSuspendException
    """Raised by a tool to suspend its call mid-way: the call awaits a result supplied from outside.

    ``reason`` says why (shown to operators and the executor); ``payload`` (JSON) is what the outside
    executor needs. Both are stored with the call and audited, secrets replaced; the result arrives by
    ``POST /api/v1/calls/{id}/result/`` and the run resumes. Such a call expires unanswered after
    ``EXTERNAL_RESULT_TIMEOUT_SECONDS``; ``expires=False`` is for a call toolhub itself settles (a subagent's,
    by its child run), which never expires: cancelling its run withdraws it.
    """

    def __init__(self, reason: str, payload: Any = None, *, expires: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.payload = payload
        self.expires = expires


class InvalidTransitionError(ToolhubError):
    """A state change was asked for from a state that does not allow it."""

    status_code = 409


class CompensationNotAllowedError(ToolhubError):
    """The user may not settle this compensation by hand (not an operator, or it undoes their own step)."""

    status_code = 403


class ApprovalError(ToolhubError):
    """An approval decision could not be taken."""


class AlreadyDecidedError(ApprovalError):
    """The approval request was decided (or expired) already."""

    status_code = 409


class DecisionNotAllowedError(ApprovalError):
    """The user may not decide this approval request."""

    status_code = 403


class ArgumentsChangedError(ApprovalError):
    """The arguments under approval changed since the decider looked at them; nothing was recorded."""

    status_code = 409


class EditedArgumentsError(ApprovalError):
    """An operator's edited arguments cannot be used (invalid, unstorable, too large, too deep); nothing recorded."""

    field = "arguments"


class ModelError(ToolhubError):
    """The model endpoint was unreachable or answered something that is not a valid turn."""

    status_code = 502


class NotInTenantError(ToolhubError):
    """A person asked to read or act on a row outside their tenants; answered exactly like a missing row."""

    status_code = 404  # answered exactly like a missing row (toolhub_exception_handler)
