"""API of the sagas: their representation (also used by the run rollback endpoint) and the direct sagas' views."""

import uuid

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from toolhub.api.governed import request_tenant_named
from toolhub.api.pagination import NewestFirstCursorPagination
from toolhub.api.schema import CONFLICT
from toolhub.direct import DirectCallError, caller_principal
from toolhub.rights_recheck import still_visible_after_running_here
from toolhub.sagas.models import Compensation, Rollback, Saga
from toolhub.sagas.selectors import OPERATE_PERMISSION, direct_saga_owner, saga_id_problem, sagas_visible_to
from toolhub.sagas.services import NothingToCompensateError, SagaKeyTakenError, saga_open, saga_rollback_on_demand

__all__ = [
    "SagaSerializer",
    "CompensationSerializer",
    "RollbackSerializer",
    "SagaListView",
    "SagaDetailView",
    "SagaRollbackView",
]


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
        fields = ["key", "tenant", "run_id", "status", "compensations", "rollbacks", "created_at", "updated_at"]


#: What the asker of a rollback run in their request is told when they may no longer see the saga afterwards (403).
NO_LONGER_A_MEMBER_OF_SAGA = (
    "You are no longer a member of the tenant this saga belongs to; the rollback was done, its outcome is not shown."
)


# --- direct sagas: POST/GET /api/v1/sagas/, GET /api/v1/sagas/{saga_id}/, POST .../rollback/ ---------------


class SagaOpenSerializer(serializers.Serializer):
    """A direct saga to open: its id (generated when not given), and your tenant when you have several."""

    saga_id = serializers.CharField(
        required=False, max_length=100, help_text="Your id for the saga (default: a UUID); no '/' in it."
    )
    tenant = serializers.SlugField(required=False, help_text="Your tenant, when you belong to several.")

    def validate_saga_id(self, value: str) -> str:
        problem = saga_id_problem(value)
        if problem:
            raise ValidationError(problem)
        return value


class SagaListView(generics.ListAPIView):
    """Sagas you may see, newest first; POST opens a direct saga whose calls then carry its ``saga_id``.

    Direct calls (``POST /api/v1/calls/``) with the same ``saga_id`` are its steps: when one fails, the
    completed compensable steps are rolled back newest first; ``POST /api/v1/sagas/{saga_id}/rollback/``
    rolls them back on demand.
    """

    serializer_class = SagaSerializer
    pagination_class = NewestFirstCursorPagination
    #: Opening writes a saga row: it counts against the rate of the direct calls that are its steps (reads do not).
    throttle_scope = "calls"

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return sagas_visible_to(self.request.user).prefetch_related("compensations", "rollbacks")

    @extend_schema(request=SagaOpenSerializer, responses={201: SagaSerializer, 409: CONFLICT})
    def post(self, request: Request) -> Response:
        payload = SagaOpenSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        try:
            principal = caller_principal(request.user, tenant=request_tenant_named(request, data.get("tenant")))
            saga = saga_open(
                key=data.get("saga_id") or str(uuid.uuid4()),
                tenant=principal.tenant,
                user=request.user,
                actor=f"user:{request.user.get_username()}",
            )
        except DirectCallError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        except SagaKeyTakenError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(SagaSerializer(saga).data, status=status.HTTP_201_CREATED)


#: ``?tenant=``: which of the caller's tenants a saga id is looked up in, when it names a saga in several.
_TENANT_PARAMETER = OpenApiParameter(
    "tenant",
    OpenApiTypes.STR,
    description="Your tenant, when the saga id names a saga in several of yours (saga ids are per tenant).",
)


def visible_saga(request: Request, saga_id: str) -> Saga:
    """The saga ``saga_id`` among those the caller may see, in the tenant ``?tenant=`` or ``X-Toolhub-Tenant`` names.

    Saga ids are per tenant, so someone in several tenants may see two sagas of one id: they are asked which
    tenant they mean (400) rather than answered with either. Another tenant's saga answers as a missing one. The
    tenant is read as every write reads it (``request_tenant_named``): a rollback naming globex in the header
    must not roll back acme's saga of that id.
    """
    sagas = sagas_visible_to(request.user).filter(key=saga_id)
    tenant = request_tenant_named(request)
    if tenant is not None:
        sagas = sagas.filter(tenant=tenant)
    found = list(sagas[:2])
    if not found:
        raise Http404("No saga you may see has this id.")
    if len(found) > 1:
        raise ValidationError(
            {"tenant": "This saga id names a saga in several of your tenants; add ?tenant=<slug> to choose one."}
        )
    return found[0]


class SagaDetailView(generics.RetrieveAPIView):
    """One saga you may see, by its id: its compensations (newest step first) and rollbacks."""

    serializer_class = SagaSerializer

    def get_object(self) -> Saga:
        return visible_saga(self.request, self.kwargs["saga_id"])

    @extend_schema(parameters=[_TENANT_PARAMETER])
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)


class SagaRollbackView(APIView):
    """Roll a direct saga back now: its completed compensable steps are undone, newest first.

    Allowed for its owner (who opened it, else who made its first call: only they may add calls to it)
    and for operators of its tenant (``sagas.operate_saga``); others who see it get 403, another tenant's
    saga answers 404.
    """

    throttle_scope = "runs"

    @extend_schema(request=None, responses={202: SagaSerializer, 409: CONFLICT}, parameters=[_TENANT_PARAMETER])
    def post(self, request: Request, saga_id: str) -> Response:
        saga = visible_saga(request, saga_id)
        if saga.run_id is not None:
            return Response(
                {"detail": "This is a run's saga; roll it back with POST /api/v1/runs/{id}/rollback/."},
                status=status.HTTP_409_CONFLICT,
            )
        user = request.user
        if direct_saga_owner(saga.key, tenant=saga.tenant) != user.pk and not user.has_perm(OPERATE_PERMISSION):
            raise PermissionDenied(
                "Only who opened the saga (or made its first call), or an operator, may roll it back."
            )
        try:
            saga = saga_rollback_on_demand(
                saga_key=saga.key, tenant=saga.tenant, actor=f"user:{user.get_username()}", by=user
            )
        except NothingToCompensateError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        # Compensated in the request (eager): a wait, after which the asker's rights are read again.
        if not still_visible_after_running_here(user, sagas_visible_to, saga.pk):
            return Response({"detail": NO_LONGER_A_MEMBER_OF_SAGA}, status=status.HTTP_403_FORBIDDEN)
        saga.refresh_from_db()
        return Response(SagaSerializer(saga).data, status=status.HTTP_202_ACCEPTED)
