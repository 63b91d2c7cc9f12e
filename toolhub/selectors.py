"""Reads of the core's records for the API and the admin."""

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from toolhub.audit import redact
from toolhub.models import AuditEvent, ToolCall
from toolhub.tools.registry import registry

__all__ = ["tool_call_list", "tool_calls_visible_to", "tool_call_audit_events", "displayed_arguments"]


def tool_calls_visible_to(user: AbstractBaseUser) -> QuerySet[ToolCall]:
    """A user sees the calls made for them; staff (operators, auditors) see all."""
    calls = ToolCall.objects.all()
    if getattr(user, "is_staff", False):
        return calls
    return calls.filter(user_id=user.pk)


def tool_call_list(
    *,
    run: str | None = None,
    tool: str | None = None,
    status: str | None = None,
    visible_to: AbstractBaseUser | None = None,
) -> QuerySet[ToolCall]:
    """Calls filtered as auditors and API clients ask (only those ``visible_to`` may see), newest first."""
    calls = (tool_calls_visible_to(visible_to) if visible_to is not None else ToolCall.objects.all()).order_by(
        "-created_at", "-id"
    )
    if run:
        calls = calls.filter(run_id=run)
    if tool:
        calls = calls.filter(tool_name=tool)
    if status:
        calls = calls.filter(status=status)
    return calls


def tool_call_audit_events(call: ToolCall) -> QuerySet[AuditEvent]:
    """The call's audit events in the order they happened."""
    return AuditEvent.objects.filter(call_id=call.id).order_by("chain", "seq")


def displayed_arguments(call: ToolCall) -> dict:
    """A call's arguments as anyone may see them: sensitive values redacted."""
    tool = registry.get(call.tool_name)
    return redact(call.arguments or {}, tool.sensitive if tool else frozenset())
