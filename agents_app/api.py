"""Agents API: list, read, create and change agents; start, read and retry runs.

Agents are scoped to the caller's tenants (plus the global ones); another tenant's agent answers
exactly like a missing one. Creating and changing agents needs the developers' permissions, and a
request names a model provider: endpoints and credentials are configured by administrators.
"""

from typing import Any

import django_filters
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents_app.models import Agent, AgentRun, RunStatus
from agents_app.rollbacks import run_rollback_with_subagents, run_sagas
from agents_app.selectors import (
    agents_visible_to,
    run_may_operate,
    runs_visible_to,
)
from agents_app.serializers import (
    AgentInputSerializer,
    AgentPatchSerializer,
    AgentSerializer,
    RunInputSerializer,
    RunRollbackSerializer,
    RunSerializer,
    RunSummarySerializer,
)
from agents_app.services import (
    agent_create,
    agent_default_tenant,
    agent_update,
    run_cancel_by,
    run_retry,
    run_start_by_reference,
)
from toolhub.api.governed import request_tenant_named
from toolhub.api.named_tenant import NamesOneOfTheirTenants
from toolhub.api.schema import CONFLICT
from toolhub.api.serializers import CancelInputSerializer
from toolhub.direct import TENANT_HEADER, CallerContextError
from toolhub.rights_recheck import still_visible_after_running_here

#: What the user of a run that proceeded in their request is told when they may no longer read it (403).
NO_LONGER_A_MEMBER_OF_RUN = (
    "You are no longer a member of the tenant this run was started in; its outcome is not shown."
)


class ManagesAgents(permissions.BasePermission):
    """Reading agents needs a login; creating needs ``agents_app.add_agent``, changing ``change_agent``."""

    message = "You may not manage agents; ask an administrator for the developers role."
    _needed = {"POST": "agents_app.add_agent", "PATCH": "agents_app.change_agent", "PUT": "agents_app.change_agent"}

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        needed = self._needed.get(request.method or "")
        return needed is None or request.user.has_perm(needed)


class AgentFilter(django_filters.FilterSet):
    """``?name=<name>&provider=<provider name>``."""

    name = django_filters.CharFilter(help_text="The agent's name (one per tenant, and one among globals).")
    provider = django_filters.CharFilter(field_name="provider__name", help_text="A model provider's name.")

    class Meta:
        model = Agent
        fields = ["name", "provider"]


#: A body with no ``tenant`` key (``null`` there means a global agent).
_UNNAMED = object()


def _agent_tenant(request: Request, body: object) -> str | None:
    """The new agent's tenant: as every write reads it (``request_tenant_named``), ``null`` in the body: global.

    A body's ``null`` with a tenant named by ``?tenant=`` or ``X-Toolhub-Tenant`` is refused rather than read
    as either (an administrator meaning acme made an agent every tenant runs); named nowhere, the caller's only one.
    """
    named = request_tenant_named(request, None if body is _UNNAMED else body)
    if body is None and named is not None:
        raise CallerContextError(
            f"the body's tenant (null: a global agent) and ?tenant= or the {TENANT_HEADER} header name different "
            "tenants; name one."
        )
    if body is None:
        return None
    return named if named is not None else agent_default_tenant(request.user)


class AgentListCreateView(generics.ListAPIView):
    """List the agents of your tenants and the global ones (paginated, filtered by ``AgentFilter``), or create one."""

    permission_classes = [ManagesAgents, NamesOneOfTheirTenants]
    serializer_class = AgentSerializer
    filterset_class = AgentFilter

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return agents_visible_to(self.request.user)

    @extend_schema(request=AgentInputSerializer, responses={201: AgentSerializer})
    def post(self, request: Request) -> Response:
        payload = AgentInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        model = data.pop("model")
        tenant = _agent_tenant(request, data.pop("tenant", _UNNAMED))
        agent = agent_create(
            **data, tenant=tenant, provider=model["provider"], script=model.get("script"), created_by=request.user
        )
        return Response(AgentSerializer(agent, context={"request": request}).data, status=status.HTTP_201_CREATED)


class AgentDetailView(APIView):
    """One agent of your tenants (or a global one); developers change it with PATCH."""

    permission_classes = [ManagesAgents, NamesOneOfTheirTenants]

    @extend_schema(responses=AgentSerializer)
    def get(self, request: Request, pk: int) -> Response:
        agent = get_object_or_404(agents_visible_to(request.user), pk=pk)
        return Response(AgentSerializer(agent, context={"request": request}).data)

    @extend_schema(request=AgentPatchSerializer, responses=AgentSerializer)
    def patch(self, request: Request, pk: int) -> Response:
        agent = get_object_or_404(agents_visible_to(request.user), pk=pk)
        payload = AgentPatchSerializer(data=request.data, partial=True)
        payload.is_valid(raise_exception=True)
        changes = dict(payload.validated_data)
        model = changes.pop("model", None) or {}
        changes.update({key: model[key] for key in ("provider", "script") if key in model})
        agent = agent_update(agent=agent, changes=changes, changed_by=request.user)
        return Response(AgentSerializer(agent, context={"request": request}).data)


class RunFilter(django_filters.FilterSet):
    """``?status=<status>&agent=<agent name>&tenant=<slug>``."""

    status = django_filters.ChoiceFilter(choices=RunStatus.choices, help_text="running, waiting, completed, ...")
    agent = django_filters.CharFilter(field_name="agent__name", help_text="The agent's name.")
    tenant = django_filters.CharFilter(
        method="named_tenant", help_text="One of your tenants (or X-Toolhub-Tenant); another is refused (400)."
    )

    class Meta:
        model = AgentRun
        fields = ["status", "agent", "tenant"]

    def named_tenant(self, queryset: QuerySet[AgentRun], name: str, value: str) -> QuerySet[AgentRun]:
        """Documented here; every list reads it alike (``toolhub.api.named_tenant.NamedTenantFilter``)."""
        return queryset


class RunListCreateView(generics.ListAPIView):
    """List the runs you may see, newest first (yours; staff: every run of their tenants), or start one.

    POST starts a run of an agent named by id or by name; it proceeds on workers. Poll ``GET /runs/{id}/``.
    """

    serializer_class = RunSummarySerializer
    filterset_class = RunFilter
    throttle_scope = "runs"

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return runs_visible_to(self.request.user).select_related("agent", "user")

    def get_throttles(self):  # type: ignore[no-untyped-def]
        # Starting a run is throttled (it spends model turns); reading the list is not.
        return super().get_throttles() if self.request.method == "POST" else []

    @extend_schema(request=RunInputSerializer, responses={201: RunSerializer})
    def post(self, request: Request) -> Response:
        payload = RunInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        context = dict(data["context"])
        named = request_tenant_named(request, context.get("tenant"))  # also ?tenant= and X-Toolhub-Tenant
        if named is not None:
            context["tenant"] = named
        run = run_start_by_reference(
            user=request.user,
            agent_id=data.get("agent_id"),
            agent_name=data.get("agent"),
            input=data["input"],
            context=context,
        )
        return _proceeded(request, run, status.HTTP_201_CREATED)


class RunDetailView(generics.RetrieveAPIView):
    """A run: status, messages, output, tool calls, pending approvals, token usage."""

    serializer_class = RunSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return runs_visible_to(self.request.user).select_related("agent")


class RunRetryView(APIView):
    """Resume a run that failed for a retryable reason (model endpoint down or answering garbage).

    Its own user or an operator of its tenant; other staff who see it get 403. Throttled like starting a run.
    """

    throttle_scope = "runs"

    @extend_schema(request=None, responses={200: RunSerializer, 409: CONFLICT})
    def post(self, request: Request, pk: str) -> Response:
        run = _operable_run(request, pk, "retry it")
        run = run_retry(run=run, user=request.user)  # a run that cannot be retried: 409 (RunStateError)
        return _proceeded(request, run, status.HTTP_200_OK)


class RunCancelView(APIView):
    """Stop a run still going: no more model turns, its calls not yet started withdrawn, its child runs cancelled.

    Calls already running finish; roll the run back to undo its completed steps and its subagents'. Its own user
    or an operator of its tenant; other staff who see it get 403; a run that has ended answers 409. Throttled like
    starting a run.
    """

    throttle_scope = "runs"

    @extend_schema(request=CancelInputSerializer, responses={200: RunSerializer, 409: CONFLICT})
    def post(self, request: Request, pk: str) -> Response:
        run = _operable_run(request, pk, "cancel it")
        body = CancelInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = run_cancel_by(run=run, user=request.user, reason=body.validated_data["reason"])
        # A subagent's run ended settles its parent's call: eager, the parent's next turns ran in the request.
        return _proceeded(request, run, status.HTTP_200_OK)


class RunRollbackView(APIView):
    """Compensate the completed steps of the run and of its subagents' runs now; GET shows how far it got.

    Each saga (the run's own, then each descendant run's: ``subagent_sagas``) compensates its own steps
    newest first, each by a worker; 409 only when none of them has a step left to compensate. GET answers
    404 while none of them has a saga. POST: the run's own user or an operator of its tenant; other staff
    who see it (auditors) get 403. POST is throttled like starting a run; GET is not.
    """

    throttle_scope = "runs"

    @extend_schema(request=None, responses={200: RunRollbackSerializer})
    def get(self, request: Request, pk: str) -> Response:
        run = get_object_or_404(runs_visible_to(request.user), pk=pk)
        sagas = run_sagas(run)
        if sagas.empty:
            return Response({"detail": "This run has no compensable step."}, status=status.HTTP_404_NOT_FOUND)
        return Response(RunRollbackSerializer(sagas).data)

    @extend_schema(request=None, responses={202: RunRollbackSerializer, 409: CONFLICT})
    def post(self, request: Request, pk: str) -> Response:
        run = _operable_run(request, pk, "roll it back")
        sagas = run_rollback_with_subagents(  # nothing to compensate: 409 (NothingToCompensateError)
            run=run, actor=f"user:{request.user.get_username()}", by=request.user
        )
        # Compensated in the request (eager): a wait, after which the asker's rights are read again.
        if not still_visible_after_running_here(request.user, runs_visible_to, run.pk):
            return Response({"detail": NO_LONGER_A_MEMBER_OF_RUN}, status=status.HTTP_403_FORBIDDEN)
        return Response(RunRollbackSerializer(sagas).data, status=status.HTTP_202_ACCEPTED)


def _operable_run(request: Request, pk: str, action: str) -> AgentRun:
    """The run to act on: 404 when it is not visible (another tenant's, or missing), 403 when only visible."""
    run = get_object_or_404(runs_visible_to(request.user), pk=pk)
    if not run_may_operate(run, request.user):
        raise PermissionDenied(f"Only the user the run was started for, or an operator of its tenant, may {action}.")
    return run


def _proceeded(request: Request, run: AgentRun, code: int) -> Response:
    """The run after it was started, resumed or cancelled: the whole run, or a refusal for a reader it outlived.

    A run this process proceeds (eager tasks) ran its model turns and tools in the request, for as long as they took:
    that was a wait, so the user's rights are read again (``tenant_scope_now``), as a follow does after its wait, and
    a run they may no longer read (removed from its tenant, deactivated) answers 403 and nothing of it.
    """
    if not still_visible_after_running_here(request.user, runs_visible_to, run.pk):
        return Response({"detail": NO_LONGER_A_MEMBER_OF_RUN}, status=status.HTTP_403_FORBIDDEN)
    run.refresh_from_db()
    return Response(RunSerializer(run, context={"request": request}).data, status=code)
