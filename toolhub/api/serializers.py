"""Serializers of the core's API: the tool catalogue, calls and their audit events."""

from typing import Any

from rest_framework import serializers

from toolhub.models import AuditEvent, ToolCall, ToolDefinition
from toolhub.selectors import displayed_arguments


class ToolDefinitionSerializer(serializers.ModelSerializer):
    effective_risk = serializers.CharField(read_only=True)

    class Meta:
        model = ToolDefinition
        fields = [
            "name",
            "description",
            "version",
            "input_schema",
            "risk",
            "risk_override",
            "effective_risk",
            "group",
            "enabled",
            "present_in_code",
        ]


class AuditEventSerializer(serializers.ModelSerializer):
    data = serializers.SerializerMethodField()

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "chain",
            "seq",
            "event_type",
            "status",
            "actor",
            "tenant",
            "created_at",
            "data",
            "prev_hash",
            "hash",
        ]

    def get_data(self, event: AuditEvent) -> Any:
        return event.payload


class ToolCallSerializer(serializers.ModelSerializer):
    tool = serializers.CharField(source="tool_name")
    arguments = serializers.SerializerMethodField()

    class Meta:
        model = ToolCall
        fields = [
            "id",
            "kind",
            "tool",
            "tool_version",
            "status",
            "arguments",
            "result",
            "error",
            "run_id",
            "turn",
            "position",
            "tenant",
            "agent_name",
            "saga_id",
            "attempts",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def get_arguments(self, call: ToolCall) -> dict:
        return displayed_arguments(call)


class ToolCallDetailSerializer(ToolCallSerializer):
    audit_events = serializers.SerializerMethodField()

    class Meta(ToolCallSerializer.Meta):
        fields = [*ToolCallSerializer.Meta.fields, "audit_events"]

    def get_audit_events(self, call: ToolCall) -> list[dict[str, Any]]:
        from toolhub.selectors import tool_call_audit_events

        return AuditEventSerializer(tool_call_audit_events(call), many=True).data
