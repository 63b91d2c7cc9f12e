"""Approvals API: list requests, approve or reject one."""

from typing import Any

import django_filters
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.deciders import ApproverStanding, approvals_in_round, asker_names
from approvals.governing import required_approvals_now
from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from approvals.selectors import approval_requests_visible_to
from approvals.services import approval_approve, approval_reject
from approvals.versions import shown_arguments, shown_diff, shown_original_arguments
from toolhub.api.filters import choice_help
from toolhub.api.schema import CONFLICT
from toolhub.governance import governance_scope
from toolhub.rights_recheck import still_visible_after_running_here


class ApprovalDecisionSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApprovalDecision
        fields = ["decision", "decided_by_name", "comment", "diff", "round", "arguments_hash", "created_at"]


class ApprovalRequestSerializer(serializers.ModelSerializer):
    """A request with the version under approval; approve with its ``round`` or ``arguments_hash``."""

    call = serializers.UUIDField(source="call_id")
    run = serializers.UUIDField(source="call.run_id", allow_null=True, help_text="null: a direct call (no run).")
    arguments = serializers.SerializerMethodField(help_text="The version under approval: what runs once approved.")
    original_arguments = serializers.SerializerMethodField(help_text="The arguments as the model sent them.")
    arguments_diff = serializers.SerializerMethodField(help_text="How the version differs from the model's original.")
    approvals_in_round = serializers.SerializerMethodField()
    required_approvals = serializers.SerializerMethodField(
        help_text="The approvals the call needs: as many as when it was held, or more if governance asks more now."
    )
    requested_by = serializers.CharField(source="requested_by.username", default="")
    asked_by = serializers.SerializerMethodField(
        help_text="Who asked for the call in its user's name (who retried its run; a compensation's: who rolled back, "
        "retried it or chose to compensate its held step); like the requester, none of them may decide it."
    )
    decisions = ApprovalDecisionSerializer(many=True, read_only=True)

    class Meta:
        model = ApprovalRequest
        fields = [
            "id",
            "status",
            "tool_name",
            "risk",
            "reason",
            "call",
            "run",
            "arguments",
            "original_arguments",
            "arguments_diff",
            "round",
            "arguments_hash",
            "approvals_in_round",
            "requested_by",
            "asked_by",
            "agent_name",
            "tenant",
            "required_approvals",
            "expires_at",
            "created_at",
            "decided_at",
            "decisions",
        ]

    def get_arguments(self, request: ApprovalRequest) -> dict[str, Any]:
        return shown_arguments(request)

    def get_original_arguments(self, request: ApprovalRequest) -> dict[str, Any]:
        return shown_original_arguments(request)

    def get_arguments_diff(self, request: ApprovalRequest) -> dict[str, Any]:
        return shown_diff(request)

    def get_asked_by(self, request: ApprovalRequest) -> list[str]:
        return asker_names(request)

    def get_required_approvals(self, request: ApprovalRequest) -> int:
        return required_approvals_now(request)

    def get_approvals_in_round(self, request: ApprovalRequest) -> int:
        # One standing for the whole list (the context is shared by its rows): each approver is read once.
        return approvals_in_round(request, self.context.setdefault("approver_standing", ApproverStanding()))


class DecisionInputSerializer(serializers.Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class ApproveInputSerializer(DecisionInputSerializer):
    arguments = serializers.DictField(
        required=False,
        help_text="Edited arguments (changes over the version under approval), validated against the tool's schema. "
        "An edit opens a new round: the other required approvals are given again.",
    )
    expected_arguments_hash = serializers.CharField(
        required=False,
        max_length=64,
        help_text="The arguments_hash of the version you reviewed; a version that is no longer current answers 409.",
    )
    round = serializers.IntegerField(
        required=False, min_value=1, help_text="The round you reviewed; a round that is over answers 409."
    )


class ApprovalFilter(django_filters.FilterSet):
    """``?status=pending`` for the operator's queue; ``?tool=<name>``."""

    status = django_filters.ChoiceFilter(choices=ApprovalStatus.choices, help_text=choice_help(ApprovalStatus.values))
    tool = django_filters.CharFilter(field_name="call__tool_name", help_text="The tool of the held call.")

    class Meta:
        model = ApprovalRequest
        fields = ["status", "tool"]


class ApprovalListView(generics.ListAPIView):
    """Approval requests, newest first; ``?status=pending`` for the operator's queue."""

    serializer_class = ApprovalRequestSerializer

    filterset_class = ApprovalFilter

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return approval_requests_visible_to(self.request.user)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # Each pending row is judged on the governance of now (``approvals.governing``): read once for the page.
        with governance_scope():
            return super().list(request, *args, **kwargs)


class ApprovalDetailView(generics.RetrieveAPIView):
    serializer_class = ApprovalRequestSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return approval_requests_visible_to(self.request.user)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        with governance_scope():  # one read of the governance stamp for the request shown
            return super().retrieve(request, *args, **kwargs)


#: What a decider is told when the work their decision set off ran in their request and they may no longer read it.
NO_LONGER_A_MEMBER_OF_REQUEST = (
    "You are no longer a member of the tenant this approval request belongs to; your decision was recorded, "
    "its request is not shown."
)


class _DecisionView(APIView):
    input_serializer = DecisionInputSerializer
    throttle_scope = "decisions"
    #: A request that left the user's tenants meanwhile answers like a missing one (toolhub_exception_handler).
    not_found_model = ApprovalRequest

    def decide(self, request_id: int, user: Any, data: dict[str, Any]) -> ApprovalRequest:
        raise NotImplementedError

    def post(self, request: Request, pk: int) -> Response:
        # Another tenant's request answers exactly like a missing one, before the body is even read.
        get_object_or_404(approval_requests_visible_to(request.user), pk=pk)
        payload = self.input_serializer(data=request.data)
        payload.is_valid(raise_exception=True)
        # Refusals (403 not allowed, 409 decided or changed, 400 unusable edits) answer by their class.
        decided = self.decide(pk, request.user, payload.validated_data)
        # Released or rejected, the call and its run's next turns ran in the request (eager): a wait, after which the
        # decider's rights are read again.
        if not still_visible_after_running_here(request.user, approval_requests_visible_to, decided.pk):
            return Response({"detail": NO_LONGER_A_MEMBER_OF_REQUEST}, status=status.HTTP_403_FORBIDDEN)
        decided = (
            ApprovalRequest.objects.select_related("call", "requested_by")
            .prefetch_related("decisions", "askers")
            .get(pk=decided.pk)
        )
        return Response(ApprovalRequestSerializer(decided).data)


class ApproveView(_DecisionView):
    """Approve the version under approval, or edit it (which opens a new round).

    Send the ``round`` or ``expected_arguments_hash`` you reviewed. 403 without permission, for the
    requester or for a second approval by the same person in a round (unless it confirms theirs and so releases
    the call: the approvals standing reach ``required_approvals``); 409 when it was already decided or
    the arguments changed since you looked; 400 for arguments that cannot be used.
    """

    input_serializer = ApproveInputSerializer

    @extend_schema(request=ApproveInputSerializer, responses={200: ApprovalRequestSerializer, 409: CONFLICT})
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)

    def decide(self, request_id: int, user: Any, data: dict[str, Any]) -> ApprovalRequest:
        return approval_approve(
            request_id=request_id,
            user=user,
            comment=data["comment"],
            arguments=data.get("arguments"),
            expected_round=data.get("round"),
            expected_arguments_hash=data.get("expected_arguments_hash"),
        )


class RejectView(_DecisionView):
    """Reject a request; the model is told it was rejected by an operator, with the comment."""

    @extend_schema(request=DecisionInputSerializer, responses={200: ApprovalRequestSerializer, 409: CONFLICT})
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)

    def decide(self, request_id: int, user: Any, data: dict[str, Any]) -> ApprovalRequest:
        return approval_reject(request_id=request_id, user=user, comment=data["comment"])
