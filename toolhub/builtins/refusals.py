"""Refusals of the built-in tools: a message for the model and an audit event saying why."""

import uuid
from typing import Any

from django.db import transaction

from toolhub.audit import audit_append
from toolhub.exceptions import ToolError
from toolhub.storable import storable_text
from toolhub.tools.context import ToolContext

__all__ = ["BuiltinRefused", "refuse"]

#: How much of a refused path or argument the audit event keeps.
_QUOTED_CHARS = 300


class BuiltinRefused(ToolError):
    """A built-in tool refused what it was asked; ``code`` names the reason (``traversal``, ``symlink``...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def refuse(ctx: ToolContext, *, tool_name: str, code: str, message: str, subject: Any = None) -> BuiltinRefused:
    """Audit a refusal and return the exception to raise; the call then fails with ``message``.

    The ``builtin.refused`` event holds the tool, the reason's code and text, and the refused input.
    """
    data: dict[str, Any] = {"tool": tool_name, "code": code, "reason": message}
    if subject is not None:
        # repr() keeps a NUL byte or a control character visible, and storable, for the auditor.
        data["subject"] = storable_text(repr(subject)[:_QUOTED_CHARS])
    with transaction.atomic():
        audit_append(
            event_type="builtin.refused",
            actor=f"tool:{tool_name}",
            data=data,
            call_id=_uuid(ctx.call_id),
            run_id=_uuid(ctx.run_id),
            tool_name=tool_name,
            status="running",
            tenant=str(ctx.tenant or ""),
        )
    return BuiltinRefused(code, message)


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None
