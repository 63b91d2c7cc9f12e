"""Agents API: list, read, create and change agents; start, read and retry runs.

Agents are scoped to the caller's tenants (plus the global ones); another tenant's agent answers
exactly like a missing one. Creating and changing agents needs the developers' permissions, and a
request names a model provider: endpoints and credentials are configured by administrators.
"""

from typing import Any

import django_filters
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions, serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents_app.models import TOOL_CHOICE_MODES, Agent, AgentRun, RunStatus
from agents_app.selectors import (
    agents_visible_to,
    run_children,
    run_may_operate,
    run_pending_approval_ids,
    runs_visible_to,
)
from agents_app.services import (
    AGENT_FIELDS,
    agent_create,
    agent_default_tenant,
    agent_update,
    run_cancel_by,
    run_retry,
    run_start_by_reference,
)
from agents_app.subagents import subagent_run_of
from toolhub.api.serializers import CancelInputSerializer
from toolhub.caller_view import caller_view_of
from toolhub.conf import toolhub_settings
from toolhub.models import CallKind, ToolCall
from toolhub.sagas.api import SagaSerializer
from toolhub.sagas.selectors import saga_for_run
from toolhub.sagas.services import saga_rollback_on_demand
from toolhub.selectors import displayed_arguments
from toolhub.tools.context_types import context_type_keys

#: The model settings an API request may give; everything else is the provider's, set by administrators.
MODEL_KEYS = frozenset({"provider", "script"})


class ModelSettingsSerializer(serializers.Serializer):
    provider = serializers.SlugField(
        max_length=100, help_text="The name of a model provider configured by an administrator, e.g. `scripted`."
    )
    script = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="Turns of the scripted model (scripted providers)."
    )

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        extra = sorted(set(data) - MODEL_KEYS) if isinstance(data, dict) else []
        if extra:
            raise serializers.ValidationError(
                f"model.{extra[0]} cannot be set here: endpoints, model names and credentials belong to model "
                "providers, which administrators configure. Name one in model.provider."
            )
        return super().to_internal_value(data)


class AgentInputSerializer(serializers.Serializer):
    name = serializers.SlugField(max_length=100)
    tenant = serializers.SlugField(
        required=False,
        allow_null=True,
        help_text="The agent's tenant (default: your only tenant); null for a global agent (administrators only).",
    )
    description = serializers.CharField(required=False, allow_blank=True, max_length=10_000)
    model = ModelSettingsSerializer()
    system_prompt = serializers.CharField(required=False, allow_blank=True, max_length=100_000)
    tools = serializers.ListField(child=serializers.CharField(max_length=200), required=False, max_length=1000)
    max_tool_calls = serializers.IntegerField(min_value=1, max_value=1000, required=False)
    compensate_on_error = serializers.BooleanField(required=False)
    parallel_tool_calls = serializers.BooleanField(required=False)
    serial_tool_execution = serializers.BooleanField(
        required=False,
        help_text="Execute one turn's calls one after another in the model's order; a held call holds the rest.",
    )
    stream = serializers.BooleanField(
        required=False, help_text="Stream the model's answer; GET /runs/{id}/ shows it in partial_output as it arrives."
    )
    tool_choice = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="auto, required, none, or one of the agent's tools; empty: the server's default.",
    )
    temperature = serializers.FloatField(
        required=False, allow_null=True, min_value=0.0, max_value=2.0, help_text="null: the server's default."
    )
    max_tokens = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=1_000_000,
        help_text="Longest answer per model turn, in tokens; null: the server's default.",
    )
    tool_search = serializers.BooleanField(
        required=False, help_text="Show always-visible tools and tool_search, then each search's hits, not every tool."
    )
    group_switching = serializers.BooleanField(
        required=False, help_text="Give the model reset_equipped_tools to switch among its granted tool groups."
    )
    tool_provider = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="One of the tool provider hooks administrators list in TOOLHUB['TOOL_PROVIDERS']; empty: none.",
    )


class AgentPatchSerializer(AgentInputSerializer):
    name = serializers.SlugField(max_length=100, required=False)
    model = ModelSettingsSerializer(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "tenant" in attrs:
            raise serializers.ValidationError(
                {"tenant": ["An agent's tenant cannot be changed; create the agent in the other tenant instead."]}
            )
        return attrs


class AgentSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True, help_text="null: a global agent.")
    model = serializers.SerializerMethodField()

    class Meta:
        model = Agent
        # The service's fields, its provider and script shown together as ``model``: one list to extend.
        fields = [
            "id",
            "tenant",
            *("model" if name == "provider" else name for name in AGENT_FIELDS if name != "script"),
            "created_at",
        ]

    def get_model(self, agent: Agent) -> dict[str, Any]:
        # The provider's URL, model and credential stay with administrators.
        return {"provider": agent.provider.name, "kind": agent.provider.kind, "script": agent.script}

    def to_representation(self, instance: Agent) -> dict[str, Any]:
        """The agent as the reader sees it: its tools among those they may see (``CallerView.tools_seen``)."""
        data = super().to_representation(instance)
        view = caller_view_of(self.context)
        if view is not None:
            seen = view.tools_seen(instance.tools, tenant=instance.tenant.slug if instance.tenant_id else None)
            data["tools"] = [name for name in data["tools"] if name in seen]
            if data.get("tool_choice") and data["tool_choice"] not in (*TOOL_CHOICE_MODES, *seen):
                data["tool_choice"] = "required"
        return data


class RunInputSerializer(serializers.Serializer):
    agent_id = serializers.IntegerField(required=False, min_value=1, help_text="The agent's id.")
    agent = serializers.CharField(
        required=False,
        max_length=100,
        help_text="The agent's name (unique within your tenant; a tenant's own agent before a global one).",
    )
    input = serializers.CharField(max_length=100_000)
    context = serializers.DictField(
        required=False,
        default=dict,
        help_text="Custom context keys; `tenant` if you belong to several. The reserved keys and the keys typed "
        'context objects are built from (unless in TOOLHUB["CLIENT_CONTEXT_KEYS"]) are refused.',
    )

    def validate_context(self, context: dict[str, Any]) -> dict[str, Any]:
        """A typed context object (``register_context_type``) is for the server to build, never the client to send.

        Tools trust it (``Annotated[UserContext, FromContext]``): a client naming its key would choose who the
        tool acts for. The operators' ``CLIENT_CONTEXT_KEYS`` may let one through, as for direct calls.
        """
        allowed = set(toolhub_settings().CLIENT_CONTEXT_KEYS)
        forged = sorted(str(key) for key in context if key in context_type_keys() and key not in allowed)
        if forged:
            raise serializers.ValidationError(
                f"Context key(s) {', '.join(map(repr, forged))} build typed context objects tools trust; a client "
                "cannot set them (build them on the server: register_context_type(factory=...))."
            )
        return context

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("agent_id" in attrs) == ("agent" in attrs):
            raise serializers.ValidationError(
                {"agent": ["Name the agent by exactly one of agent_id (its id) or agent (its name)."]}
            )
        return attrs


class ManagesAgents(permissions.BasePermission):
    """Reading agents needs a login; creating needs ``agents_app.add_agent``, changing ``change_agent``."""

    message = "You may not manage agents; ask an administrator for the developers role."
    _needed = {"POST": "agents_app.add_agent", "PATCH": "agents_app.change_agent", "PUT": "agents_app.change_agent"}

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        needed = self._needed.get(request.method or "")
        return needed is None or request.user.has_perm(needed)


class RunToolCallSerializer(serializers.ModelSerializer):
    tool = serializers.CharField(source="tool_name")
    arguments = serializers.SerializerMethodField()
    child_run = serializers.SerializerMethodField()

    class Meta:
        model = ToolCall
        fields = [
            "id",
            "tool",
            "status",
            "arguments",
            "result",
            "error",
            "turn",
            "position",
            "created_at",
            "finished_at",
            "child_run",
        ]

    def get_arguments(self, call: ToolCall) -> dict:
        return displayed_arguments(call)

    def get_child_run(self, call: ToolCall) -> str | None:
        """The subagent run this call started (``agents_app.subagents``), if any."""
        return subagent_run_of(call) or None

    def to_representation(self, instance: ToolCall) -> dict[str, Any]:
        """The row as the requesting user reads it (``toolhub.caller_view``): a caller reads the answer they got."""
        view = caller_view_of(self.context)
        return super().to_representation(view.call(instance) if view is not None else instance)


class RunSerializer(serializers.ModelSerializer):
    agent = serializers.CharField(source="agent.name")
    tool_calls = serializers.SerializerMethodField()
    pending_approvals = serializers.SerializerMethodField()
    usage = serializers.SerializerMethodField()
    parent = serializers.SerializerMethodField()
    children = serializers.SerializerMethodField()

    class Meta:
        model = AgentRun
        fields = [
            "id",
            "agent",
            "status",
            "stop_reason",
            "error",
            "retryable",
            "input",
            "output",
            "partial_output",
            "tenant",
            "context",
            "messages",
            "tool_calls",
            "pending_approvals",
            "usage",
            "turn",
            "disclosure",
            "parent",
            "children",
            "depth",
            "updates",
            "created_at",
            "finished_at",
        ]

    def get_parent(self, run: AgentRun) -> dict[str, Any] | None:
        """The run whose subagent call started this one, and that call."""
        if run.parent_run_id is None:
            return None
        return {"run": str(run.parent_run_id), "call": str(run.parent_call_id) if run.parent_call_id else None}

    def get_children(self, run: AgentRun) -> list[dict[str, Any]]:
        """The subagent runs this run started, oldest first."""
        return [
            {"run": str(c.id), "agent": c.agent.name, "status": c.status, "call": str(c.parent_call_id)}
            for c in run_children(run)
        ]

    def get_tool_calls(self, run: AgentRun) -> list[dict[str, Any]]:
        calls = ToolCall.objects.filter(run_id=run.id, kind=CallKind.CALL).order_by("turn", "position")
        return RunToolCallSerializer(calls, many=True, context=self.context).data

    def get_pending_approvals(self, run: AgentRun) -> list[int]:
        return run_pending_approval_ids(run)

    def get_usage(self, run: AgentRun) -> dict[str, int]:
        return {
            "prompt_tokens": run.prompt_tokens,
            "completion_tokens": run.completion_tokens,
            "total_tokens": run.prompt_tokens + run.completion_tokens,
        }


class AgentFilter(django_filters.FilterSet):
    """``?name=<name>&provider=<provider name>``."""

    name = django_filters.CharFilter(help_text="The agent's name (one per tenant, and one among globals).")
    provider = django_filters.CharFilter(field_name="provider__name", help_text="A model provider's name.")

    class Meta:
        model = Agent
        fields = ["name", "provider"]


class AgentListCreateView(generics.ListAPIView):
    """List the agents of your tenants and the global ones (paginated, filtered by ``AgentFilter``), or create one."""

    permission_classes = [ManagesAgents]
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
        tenant = data.pop("tenant") if "tenant" in data else agent_default_tenant(request.user)
        agent = agent_create(
            **data, tenant=tenant, provider=model["provider"], script=model.get("script"), created_by=request.user
        )
        return Response(AgentSerializer(agent, context={"request": request}).data, status=status.HTTP_201_CREATED)


class AgentDetailView(APIView):
    """One agent of your tenants (or a global one); developers change it with PATCH."""

    permission_classes = [ManagesAgents]

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


class RunSummarySerializer(serializers.ModelSerializer):
    """A run as a list shows it: who, where, how far; ``GET /runs/{id}/`` has the conversation and its calls."""

    agent = serializers.CharField(source="agent.name")
    user = serializers.CharField(source="user.username", default=None)

    class Meta:
        model = AgentRun
        fields = [
            "id",
            "agent",
            "user",
            "tenant",
            "status",
            "stop_reason",
            "turn",
            "depth",
            "created_at",
            "finished_at",
        ]
        read_only_fields = fields


class RunFilter(django_filters.FilterSet):
    """``?status=<status>&agent=<agent name>&tenant=<slug>``."""

    status = django_filters.ChoiceFilter(choices=RunStatus.choices, help_text="running, waiting, completed, ...")
    agent = django_filters.CharFilter(field_name="agent__name", help_text="The agent's name.")
    tenant = django_filters.CharFilter(help_text="One of your tenants.")

    class Meta:
        model = AgentRun
        fields = ["status", "agent", "tenant"]


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
        run = run_start_by_reference(
            user=request.user,
            agent_id=data.get("agent_id"),
            agent_name=data.get("agent"),
            input=data["input"],
            context=data["context"],
        )
        run.refresh_from_db()
        return Response(RunSerializer(run, context={"request": request}).data, status=status.HTTP_201_CREATED)


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

    @extend_schema(request=None, responses=RunSerializer)
    def post(self, request: Request, pk: str) -> Response:
        run = _operable_run(request, pk, "retry it")
        run = run_retry(run=run)  # a run that cannot be retried: 409 (RunStateError)
        run.refresh_from_db()
        return Response(RunSerializer(run, context={"request": request}).data)


class RunCancelView(APIView):
    """Stop a run still going: no more model turns, its calls not yet started withdrawn, its child runs cancelled.

    Calls already running finish; roll the run back to undo its completed steps. Its own user or an operator of
    its tenant; other staff who see it get 403; a run that has ended answers 409. Throttled like starting a run.
    """

    throttle_scope = "runs"

    @extend_schema(request=CancelInputSerializer, responses=RunSerializer)
    def post(self, request: Request, pk: str) -> Response:
        run = _operable_run(request, pk, "cancel it")
        body = CancelInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = run_cancel_by(run=run, user=request.user, reason=body.validated_data["reason"])
        return Response(RunSerializer(run, context={"request": request}).data)


class RunRollbackView(APIView):
    """Compensate the run's completed steps now, newest first, each by a worker; GET shows how far it got.

    POST: the run's own user or an operator of its tenant; other staff who see it (auditors) get 403.
    POST is throttled like starting a run; GET is not.
    """

    throttle_scope = "runs"

    @extend_schema(request=None, responses={200: SagaSerializer})
    def get(self, request: Request, pk: str) -> Response:
        run = get_object_or_404(runs_visible_to(request.user), pk=pk)
        saga = saga_for_run(run.id)
        if saga is None:
            return Response({"detail": "This run has no compensable step."}, status=status.HTTP_404_NOT_FOUND)
        return Response(SagaSerializer(saga).data)

    @extend_schema(request=None, responses={202: SagaSerializer})
    def post(self, request: Request, pk: str) -> Response:
        run = _operable_run(request, pk, "roll it back")
        saga = saga_rollback_on_demand(  # nothing to compensate: 409 (NothingToCompensateError)
            saga_key=str(run.id), run_id=run.id, tenant=run.tenant, actor=f"user:{request.user.get_username()}"
        )
        saga.refresh_from_db()
        return Response(SagaSerializer(saga).data, status=status.HTTP_202_ACCEPTED)


def _operable_run(request: Request, pk: str, action: str) -> AgentRun:
    """The run to act on: 404 when it is not visible (another tenant's, or missing), 403 when only visible."""
    run = get_object_or_404(runs_visible_to(request.user), pk=pk)
    if not run_may_operate(run, request.user):
        raise PermissionDenied(f"Only the user the run was started for, or an operator of its tenant, may {action}.")
    return run
