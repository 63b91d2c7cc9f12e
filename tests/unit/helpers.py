"""Plain helpers shared by the unit and API tests."""

from django.contrib.auth.models import User

from toolhub.audit import verify_audit_chains
from toolhub.authorization import CallPrincipal
from toolhub.models import AuditEvent, ToolCall


def event_types(call: ToolCall) -> list[str]:
    """The call's audit event types, in the order they were appended."""
    return list(AuditEvent.objects.filter(call_id=call.id).order_by("seq").values_list("event_type", flat=True))


def assert_audit_intact() -> int:
    """Verify every chain; return how many events were checked."""
    checked, problems = verify_audit_chains()
    assert problems == []
    return checked


def principal_for(
    user: User | None = None,
    *,
    tenant: str = "",
    agent_name: str = "",
    agent_tools: frozenset[str] | None = None,
) -> CallPrincipal:
    return CallPrincipal(
        user_id=user.pk if user else None,
        username=user.get_username() if user else "",
        tenant=tenant,
        agent_name=agent_name,
        agent_tools=agent_tools,
    )
