"""Serializers of the core's API: the tool catalogue, calls and their audit events."""

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from toolhub.api.fields import CheckedJSONField
from toolhub.caller_view import caller_view_of
from toolhub.models import AuditEvent, CallStatus, ToolCall, ToolCallArtifact, ToolDefinition
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

    def to_representation(self, instance: ToolDefinition) -> dict[str, Any]:
        """The stored row; its schema as the caller sees it when the view gives one (``context["schemas"]``).

        Its group as the caller reads it (``context["groups"]``, ``group_names_read``): one whose rules name only
        other tenants by its kind, as their admin pages name it.
        """
        data = super().to_representation(instance)
        schemas = self.context.get("schemas")
        if schemas is not None and instance.name in schemas:
            data["input_schema"] = schemas[instance.name]
        groups = self.context.get("groups")
        if groups is not None and instance.group:
            data["group"] = groups.get(instance.group, instance.group)
        return data


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
        # null for readers who may not read them (toolhub.caller_view): places, links, and members the id
        extra_kwargs = {name: {"allow_null": True} for name in ("id", "chain", "seq", "prev_hash", "hash")}

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

    def to_representation(self, instance: ToolCall) -> dict[str, Any]:
        """The row as the requesting user reads it (``toolhub.caller_view``): a caller reads the answer they got."""
        view = caller_view_of(self.context)
        return super().to_representation(view.call(instance) if view is not None else instance)


class ToolCallDetailSerializer(ToolCallSerializer):
    audit_events = serializers.SerializerMethodField(
        help_text=(
            "The call's audit events. The hashes and ids for staff; chain and seq for those who cross tenants, "
            "and for a tenant's staff where the event is in its tenant's own chain."
        )
    )

    approval_id = serializers.SerializerMethodField(help_text="The call's approval request, if it has one.")

    class Meta(ToolCallSerializer.Meta):
        fields = [*ToolCallSerializer.Meta.fields, "audit_events", "approval_id"]

    def get_approval_id(self, call: ToolCall) -> int | None:
        from toolhub.direct import call_approval_id

        return call_approval_id(call)

    @extend_schema_field(AuditEventSerializer(many=True))
    def get_audit_events(self, call: ToolCall) -> list[dict[str, Any]]:
        from toolhub.selectors import tool_call_audit_events

        events = AuditEventSerializer(tool_call_audit_events(call), many=True).data
        view = caller_view_of(self.context)
        return view.events(call, events) if view is not None else list(events)


class CallOutcomeSerializer(ToolCallSerializer):
    """A call as ``POST /api/v1/calls/`` answers it: the call, the approval it waits for, whether it was replayed.

    Give ``context["replayed"]``; a 4xx answer adds ``detail`` (why it was refused or how it ended).
    """

    approval_id = serializers.SerializerMethodField(
        help_text="The approval request the call waits for (status pending_approval); null otherwise."
    )
    replayed = serializers.SerializerMethodField(help_text="true when an idempotency key returned an earlier call.")
    detail = serializers.CharField(required=False, help_text="On a refusal (4xx) only: why, or how the call ended.")

    class Meta(ToolCallSerializer.Meta):
        fields = [*ToolCallSerializer.Meta.fields, "approval_id", "replayed", "detail"]

    def get_approval_id(self, call: ToolCall) -> int | None:
        from toolhub.direct import call_approval_id

        return call_approval_id(call) if call.status == CallStatus.PENDING_APPROVAL else None

    def get_replayed(self, call: ToolCall) -> bool:
        return bool(self.context.get("replayed", False))


class CancelInputSerializer(serializers.Serializer):
    """Why something is cancelled: shown to whom it concerns (the model, the run's user) and kept in the audit trail."""

    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class CallResultInputSerializer(serializers.Serializer):
    """The outcome of an external tool's call: a result (any JSON) or an error message, not both."""

    result = CheckedJSONField(required=False, allow_null=True, help_text="The tool's result; any JSON value.")
    error = serializers.CharField(required=False, max_length=10_000, help_text="Why the call failed, for the model.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = [key for key in ("result", "error") if key in self.initial_data]
        if len(given) != 1:
            raise serializers.ValidationError("Send exactly one of 'result' and 'error'.")
        if "result" in given:
            attrs["result"] = self.initial_data["result"]
        return attrs
