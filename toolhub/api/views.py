"""Core API views: the tool catalogue and governed calls (read side)."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics
from rest_framework.exceptions import ValidationError

from toolhub.api.serializers import ToolCallDetailSerializer, ToolCallSerializer, ToolDefinitionSerializer
from toolhub.models import CallStatus, ToolCall, ToolDefinition
from toolhub.selectors import tool_call_list


class ToolListView(generics.ListAPIView):
    """The tool catalogue with each tool's JSON Schema and the operators' settings."""

    serializer_class = ToolDefinitionSerializer
    queryset = ToolDefinition.objects.filter(present_in_code=True).order_by("name")
    pagination_class = None


class CallListView(generics.ListAPIView):
    """Governed calls, newest first; filter by run, tool and status."""

    serializer_class = ToolCallSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter("run", str, description="A run id."),
            OpenApiParameter("tool", str, description="A tool name."),
            OpenApiParameter("status", str, enum=CallStatus.values),
        ]
    )
    def get(self, request, *args, **kwargs):  # type: ignore[no-untyped-def]
        return super().get(request, *args, **kwargs)

    def get_queryset(self):  # type: ignore[no-untyped-def]
        params = self.request.query_params
        status = params.get("status")
        if status and status not in CallStatus.values:
            raise ValidationError({"status": f"Unknown status; use one of {', '.join(CallStatus.values)}."})
        run = params.get("run")
        if run:
            import uuid

            try:
                uuid.UUID(run)
            except ValueError:
                raise ValidationError({"run": "Not a run id."}) from None
        return tool_call_list(run=run, tool=params.get("tool"), status=status)


class CallDetailView(generics.RetrieveAPIView):
    """One call with its audit events."""

    serializer_class = ToolCallDetailSerializer

    def get_object(self) -> ToolCall:
        return get_object_or_404(ToolCall, pk=self.kwargs["pk"])
