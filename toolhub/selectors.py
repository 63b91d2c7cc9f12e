"""Reads of the core's records for the API and the admin."""

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from toolhub.audit import redact
from toolhub.models import AuditEvent, ToolCall
from toolhub.tenancy import has_tenant_wide_role, visible_rows
from toolhub.tools.registry import registry

__all__ = [
    "tool_call_list",
    "tool_calls_visible_to",
    "tool_calls_operable_by",
    "call_may_operate",
    "compensation_settle_refusal",
    "OPERATE_CALL_PERMISSION",
    "tool_call_audit_events",
    "audit_events_visible_to",
    "displayed_arguments",
    "withheld_names",
]


def tool_calls_visible_to(user: AbstractBaseUser) -> QuerySet[ToolCall]:
    """Staff (operators, auditors) see every call of their tenants; anyone else the calls made for them."""
    return visible_rows(ToolCall.objects.all(), user, tenant_wide=has_tenant_wide_role(user))


#: Who may act on a call besides the user it was made for (in the call's tenant): supply an external tool's
#: result, withdraw a call that has not started.
OPERATE_CALL_PERMISSION = "toolhub.change_toolcall"


def tool_calls_operable_by(user: AbstractBaseUser) -> QuerySet[ToolCall]:
    """The calls ``user`` may reach to act on: those they see, or their tenants' with the permission.

    Whether they may then act (their own call, or the permission: ``call_may_operate``) is for the caller to ask.
    """
    tenant_wide = has_tenant_wide_role(user, OPERATE_CALL_PERMISSION)
    return visible_rows(ToolCall.objects.all(), user, tenant_wide=tenant_wide)


def call_may_operate(call: ToolCall, user: AbstractBaseUser) -> bool:
    """Whether ``user`` may act on ``call`` (reached through ``tool_calls_operable_by``): theirs, or an operator."""
    return call.user_id == user.pk or user.has_perm(OPERATE_CALL_PERMISSION)


def compensation_settle_refusal(step_user_id: int | None, user: AbstractBaseUser, permission: str) -> str | None:
    """Why ``user`` may not settle a saga's compensation by hand (supply its result, resolve it), or ``None``.

    Settling it decides whether a completed step stays done, so it is for an operator (``permission``) other than
    the user whose step it undoes, operators included: as nobody approves their own call.
    """
    if step_user_id is not None and step_user_id == user.pk:
        return "This compensation undoes your own step; another operator must settle it."
    if not user.has_perm(permission):
        return "Only an operator may settle a saga's compensation."
    return None


def audit_events_visible_to(user: AbstractBaseUser) -> QuerySet[AuditEvent]:
    """Staff see the audit events of their tenants; anyone else those of the calls they may see."""
    events = AuditEvent.objects.all()
    if has_tenant_wide_role(user):
        return visible_rows(events, user, tenant_wide=True)
    return events.filter(call_id__in=tool_calls_visible_to(user).values("id"))


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
    """The call's audit events in the order they were appended.

    By ``id``, not ``chain, seq``: a sequence number orders one chain only, and a call's later events go to another
    chain once ``AUDIT_CHAINS`` is raised.
    """
    return AuditEvent.objects.filter(call_id=call.id).order_by("id")


def displayed_arguments(call: ToolCall) -> dict:
    """A call's arguments as anyone may see them: sensitive values redacted."""
    arguments = call.arguments or {}
    return redact(arguments, withheld_names(call.tool_name, arguments, version=call.tool_version))


def withheld_names(tool_name: str, *arguments: Mapping[str, Any], version: str | None = None) -> frozenset[str]:
    """The argument names whose values are never shown: the tool's sensitive ones and those it no longer has.

    A call is read with the tool as it is now. A name it no longer has (a parameter renamed: ``pin`` to
    ``door_pin``, or dropped), or every name once the tool is no longer registered (renamed, removed, a
    remote server's tool withdrawn, or one whose schema cannot be built), may have been sensitive when the call
    was made: its value is not shown.
    Only for the very ``version`` the call was made with (``ToolCall.tool_version``) is a name the schema
    does not declare known to be an extra argument that a tool with no secret admits (a remote server's).
    """
    names = frozenset(name for mapping in arguments for name in mapping)
    tool = registry.get(tool_name)
    schema = tool.known_json_schema if tool is not None else None
    if tool is None or schema is None:  # no tool, or one whose parameters cannot be read: any name may be a secret
        return names
    admits_others = schema.get("additionalProperties", True) is not False
    if tool.sensitive or (admits_others and version == tool.version):
        return tool.withheld(names)
    return tool.undeclared(names)
