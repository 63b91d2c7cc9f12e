"""Agents API: create and list agents; start, read and retry runs."""

from typing import Any

from django.db import IntegrityError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents_app.models import Agent, AgentRun, Provider
from agents_app.selectors import run_pending_approval_ids, runs_visible_to
from agents_app.services import RunInputError, agent_create, run_retry, run_start
from toolhub.models import CallKind, ToolCall
from toolhub.sagas.api import SagaSerializer
from toolhub.sagas.selectors import saga_for_run
from toolhub.sagas.services import NothingToCompensateError, saga_rollback_on_demand
from toolhub.selectors import displayed_arguments


class ModelSettingsSerializer(serializers.Serializer):
    provider = serializers.ChoiceField(choices=Provider.values)
    base_url = serializers.URLField(required=False, allow_blank=True, default="")
    model = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    api_key_env = serializers.RegexField(
        r"^[A-Za-z_][A-Za-z0-9_]*$",
        required=False,
        allow_blank=True,
        default="",
        max_length=100,
        help_text="The NAME of the environment variable holding the API key; never the key itself.",
    )
    script = serializers.ListField(child=serializers.DictField(), required=False, default=list)


class AgentInputSerializer(serializers.Serializer):
    name = serializers.SlugField(max_length=100)
    model = ModelSettingsSerializer()
    system_prompt = serializers.CharField(required=False, allow_blank=True, default="")
    tools = serializers.ListField(child=serializers.CharField(max_length=200), required=False, default=list)
    max_tool_calls = serializers.IntegerField(min_value=1, max_value=1000, required=False, default=10)
    compensate_on_error = serializers.BooleanField(required=False, default=False)
    parallel_tool_calls = serializers.BooleanField(required=False, default=True)


class AgentSerializer(serializers.ModelSerializer):
    model = serializers.SerializerMethodField()

    class Meta:
        model = Agent
        fields = [
            "id",
            "name",
            "description",
            "model",
            "system_prompt",
            "tools",
            "max_tool_calls",
            "compensate_on_error",
            "parallel_tool_calls",
            "created_at",
        ]

    def get_model(self, agent: Agent) -> dict[str, Any]:
        return {
            "provider": agent.provider,
            "base_url": agent.base_url,
            "model": agent.model_name,
            "api_key_env": agent.api_key_env,
            "script": agent.script,
        }


class RunInputSerializer(serializers.Serializer):
    agent = serializers.CharField(help_text="The agent's name (or id).", max_length=100)
    input = serializers.CharField(max_length=100_000)
    context = serializers.DictField(
        required=False, default=dict, help_text="Custom context keys; `tenant` if you belong to several."
    )


class RunToolCallSerializer(serializers.ModelSerializer):
    tool = serializers.CharField(source="tool_name")
    arguments = serializers.SerializerMethodField()

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
        ]

    def get_arguments(self, call: ToolCall) -> dict:
        return displayed_arguments(call)


class RunSerializer(serializers.ModelSerializer):
    agent = serializers.CharField(source="agent.name")
    tool_calls = serializers.SerializerMethodField()
    pending_approvals = serializers.SerializerMethodField()
    usage = serializers.SerializerMethodField()

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
            "tenant",
            "context",
            "messages",
            "tool_calls",
            "pending_approvals",
            "usage",
            "turn",
            "created_at",
            "finished_at",
        ]

    def get_tool_calls(self, run: AgentRun) -> list[dict[str, Any]]:
        calls = ToolCall.objects.filter(run_id=run.id, kind=CallKind.CALL).order_by("turn", "position")
        return RunToolCallSerializer(calls, many=True).data

    def get_pending_approvals(self, run: AgentRun) -> list[int]:
        return run_pending_approval_ids(run)

    def get_usage(self, run: AgentRun) -> dict[str, int]:
        return {
            "prompt_tokens": run.prompt_tokens,
            "completion_tokens": run.completion_tokens,
            "total_tokens": run.prompt_tokens + run.completion_tokens,
        }


class AgentListCreateView(APIView):
    """List agents, or create one."""

    @extend_schema(responses=AgentSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response(AgentSerializer(Agent.objects.order_by("name"), many=True).data)

    @extend_schema(request=AgentInputSerializer, responses={201: AgentSerializer})
    def post(self, request: Request) -> Response:
        payload = AgentInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        model = data.pop("model")
        try:
            agent = agent_create(
                **data,
                provider=model["provider"],
                base_url=model["base_url"],
                model_name=model["model"],
                api_key_env=model["api_key_env"],
                script=model["script"],
                created_by=request.user,
            )
        except RunInputError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        except IntegrityError:
            return Response({"name": ["An agent with this name exists already."]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(AgentSerializer(agent).data, status=status.HTTP_201_CREATED)


class RunCreateView(APIView):
    """Start a run; it proceeds on workers. Poll ``GET /runs/{id}/`` for its state."""

    throttle_scope = "runs"

    @extend_schema(request=RunInputSerializer, responses={201: RunSerializer})
    def post(self, request: Request) -> Response:
        payload = RunInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        agent = _agent_named(data["agent"])
        if agent is None:
            return Response({"agent": [f"Unknown agent {data['agent'][:100]!r}."]}, status=status.HTTP_400_BAD_REQUEST)
        try:
            run = run_start(agent=agent, user=request.user, input=data["input"], context=data["context"])
        except RunInputError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        run.refresh_from_db()
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)


class RunDetailView(generics.RetrieveAPIView):
    """A run: status, messages, output, tool calls, pending approvals, token usage."""

    serializer_class = RunSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return runs_visible_to(self.request.user).select_related("agent")


class RunRetryView(APIView):
    """Resume a run that failed for a retryable reason (model endpoint down or answering garbage)."""

    @extend_schema(request=None, responses=RunSerializer)
    def post(self, request: Request, pk: str) -> Response:
        run = get_object_or_404(runs_visible_to(request.user), pk=pk)
        try:
            run = run_retry(run=run)
        except RunInputError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        run.refresh_from_db()
        return Response(RunSerializer(run).data)


class RunRollbackView(APIView):
    """Compensate the run's completed steps now, newest first, each by a worker; GET shows how far it got."""

    @extend_schema(request=None, responses={200: SagaSerializer})
    def get(self, request: Request, pk: str) -> Response:
        run = get_object_or_404(runs_visible_to(request.user), pk=pk)
        saga = saga_for_run(run.id)
        if saga is None:
            return Response({"detail": "This run has no compensable step."}, status=status.HTTP_404_NOT_FOUND)
        return Response(SagaSerializer(saga).data)

    @extend_schema(request=None, responses={202: SagaSerializer})
    def post(self, request: Request, pk: str) -> Response:
        run = get_object_or_404(runs_visible_to(request.user), pk=pk)
        try:
            saga = saga_rollback_on_demand(
                saga_key=str(run.id), run_id=run.id, tenant=run.tenant, actor=f"user:{request.user.get_username()}"
            )
        except NothingToCompensateError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        saga.refresh_from_db()
        return Response(SagaSerializer(saga).data, status=status.HTTP_202_ACCEPTED)


def _agent_named(identifier: str) -> Agent | None:
    agent = Agent.objects.filter(name=identifier).first()
    if agent is None and identifier.isdigit():
        agent = Agent.objects.filter(pk=int(identifier)).first()
    return agent
