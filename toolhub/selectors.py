"""Reads of the core's records for the API and the admin."""

from django.db.models import QuerySet

from toolhub.audit import redact
from toolhub.models import AuditEvent, ToolCall
from toolhub.tools.registry import registry

__all__ = ["tool_call_list", "tool_call_audit_events", "displayed_arguments"]


def tool_call_list(*, run: str | None = None, tool: str | None = None, status: str | None = None) -> QuerySet[ToolCall]:
    """Calls filtered as auditors and API clients ask, newest first."""
    calls = ToolCall.objects.all().order_by("-created_at", "-id")
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
