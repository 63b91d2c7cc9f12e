"""The database catalogue of tools: kept in step with the code, read for operator overrides."""

from django.db import transaction
from django.utils import timezone

from toolhub.models import ToolDefinition
from toolhub.tools.definition import Tool
from toolhub.tools.export import listable
from toolhub.tools.registry import ToolRegistry, registry

__all__ = ["tool_catalogue_sync", "effective_risk", "tool_definition_govern"]


@transaction.atomic
def tool_catalogue_sync(*, source: ToolRegistry = registry) -> dict[str, int]:
    """Mirror every registered tool into ``ToolDefinition``; keep operators' fields untouched.

    A tool whose schema cannot be built (``toolhub.E001``; ``migrate --skip-checks`` gets this far) has no version nor
    schema to record: its row, if any, is kept as it was (not marked removed) and operators are told which tool and
    why (``export.listable``); every other tool is synced.
    """
    now = timezone.now()
    existing = {definition.name: definition for definition in ToolDefinition.objects.all()}
    created = updated = 0
    tools = source.code_tools()  # remote MCP tools are governed by their own rows
    described = {tool.name for tool in listable(tools)}
    for tool in tools:
        if tool.name not in described:
            existing.pop(tool.name, None)
            continue
        values = {
            "description": tool.description,
            "module": tool.module,
            "version": tool.version,
            "input_schema": tool.json_schema,
            "risk": str(tool.risk),
            "group": tool.group,
            "present_in_code": True,
            "synced_at": now,
        }
        definition = existing.pop(tool.name, None)
        if definition is None:
            ToolDefinition.objects.create(name=tool.name, **values)
            created += 1
        elif any(getattr(definition, key) != value for key, value in values.items() if key != "synced_at"):
            ToolDefinition.objects.filter(pk=definition.pk).update(**values)
            updated += 1
    removed = ToolDefinition.objects.filter(name__in=list(existing), present_in_code=True).update(
        present_in_code=False, synced_at=now
    )
    return {"created": created, "updated": updated, "removed": removed}


def effective_risk(tool: Tool, definition: ToolDefinition | None) -> str:
    """The risk that governs a call: the operator's override, else the code's declaration."""
    if definition is not None and definition.risk_override:
        return definition.risk_override
    return str(tool.risk)


@transaction.atomic
def tool_definition_govern(
    *, definition: ToolDefinition, actor: str, enabled: bool | None = None, risk_override: str | None = None
) -> ToolDefinition:
    """Apply an operator's change to a catalogue row, recorded in the audit trail with who made it."""
    from toolhub.audit import audit_append

    changes = {}
    stored = ToolDefinition.objects.filter(pk=definition.pk).values("enabled", "risk_override").get()
    for field, value in (("enabled", enabled), ("risk_override", risk_override)):
        current = stored[field]
        if value is not None and value != current:
            changes[field] = {"before": current, "after": value}
            setattr(definition, field, value)
    if changes:
        definition.save(update_fields=list(changes))
        audit_append(event_type="catalogue.changed", actor=actor, tool_name=definition.name, data={"changes": changes})
    return definition
