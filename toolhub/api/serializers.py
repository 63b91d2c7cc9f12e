"""Serializers of the core's API: the tool catalogue, calls and their audit events."""

from typing import Any

from django.urls import reverse
from rest_framework import serializers

from toolhub.models import AuditEvent, ToolCall, ToolCallArtifact, ToolDefinition
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


class ToolCallArtifactSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()

    class Meta:
        model = ToolCallArtifact
        fields = ["id", "name", "media_type", "size", "sha256", "created_at", "url"]

    def get_url(self, artifact: ToolCallArtifact) -> str:
        return reverse("call-artifact", kwargs={"pk": artifact.call_id, "artifact_id": artifact.pk})


class ToolCallSerializer(serializers.ModelSerializer):
    tool = serializers.CharField(source="tool_name")
    arguments = serializers.SerializerMethodField()
    progress = serializers.JSONField(
        read_only=True, help_text="Progress updates of a long tool (never sent to the model)."
    )
    artifacts = ToolCallArtifactSerializer(many=True, read_only=True)

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
            "progress",
            "suspension",
            "artifacts",
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


class CallResultInputSerializer(serializers.Serializer):
    """The outcome of an external tool's call: a result (any JSON) or an error message, not both."""

    result = serializers.JSONField(required=False, allow_null=True, help_text="The tool's result; any JSON value.")
    error = serializers.CharField(required=False, max_length=10_000, help_text="Why the call failed, for the model.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = [key for key in ("result", "error") if key in self.initial_data]
        if len(given) != 1:
            raise serializers.ValidationError("Send exactly one of 'result' and 'error'.")
        if "result" in given:
            attrs["result"] = self.initial_data["result"]
        return attrs
