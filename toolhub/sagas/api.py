"""API representation of a saga: its status, rollbacks and compensations (used by the run rollback endpoint)."""

from rest_framework import serializers

from toolhub.sagas.models import Compensation, Rollback, Saga

__all__ = ["SagaSerializer", "CompensationSerializer", "RollbackSerializer"]


class CompensationSerializer(serializers.ModelSerializer):
    step_call = serializers.UUIDField(source="step_call_id")
    call = serializers.UUIDField(source="call_id", allow_null=True)
    tool = serializers.CharField(source="tool_name")

    class Meta:
        model = Compensation
        fields = [
            "sequence",
            "step_tool",
            "step_call",
            "tool",
            "call",
            "status",
            "attempts",
            "max_attempts",
            "next_attempt_at",
            "last_error",
            "resolved_by",
            "resolution_note",
            "finished_at",
        ]


class RollbackSerializer(serializers.ModelSerializer):
    failed_call = serializers.UUIDField(source="failed_call_id", allow_null=True)

    class Meta:
        model = Rollback
        fields = ["id", "trigger", "failed_call", "requested_by", "requested_at", "finished_at"]


class SagaSerializer(serializers.ModelSerializer):
    compensations = CompensationSerializer(many=True, read_only=True, help_text="Newest step first.")
    rollbacks = RollbackSerializer(many=True, read_only=True)

    class Meta:
        model = Saga
        fields = ["key", "run_id", "status", "compensations", "rollbacks", "created_at", "updated_at"]
