"""The agents API's input and output shapes: agents as their reader may see them, runs and their calls."""

import json
from typing import Any

from rest_framework import serializers

from agents_app.disclosure import run_shown_disclosure
from agents_app.models import MAX_TOOL_CALLS_LIMIT, TOOL_CHOICE_MODES, Agent, AgentRun
from agents_app.rollbacks import RunSagas
from agents_app.selectors import run_children, run_pending_approval_ids
from agents_app.services import AGENT_FIELDS, AGENT_TENANT_FIXED
from agents_app.subagents import subagent_run_of
from toolhub.caller_view import caller_view_of
from toolhub.conf import toolhub_settings
from toolhub.models import CallKind, ToolCall
from toolhub.sagas.api import SagaSerializer
from toolhub.sagas.models import SagaStatus
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
    max_tool_calls = serializers.IntegerField(min_value=1, max_value=MAX_TOOL_CALLS_LIMIT, required=False)
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
            raise serializers.ValidationError({"tenant": [AGENT_TENANT_FIXED]})
        return attrs


class AgentSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True, help_text="null: a global agent."
    )
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
            called = _script_tool_names(instance)
            seen = view.tools_seen(
                [*instance.tools, *called], tenant=instance.tenant.slug if instance.tenant_id else None
            )
            data["tools"] = [name for name in data["tools"] if name in seen]
            if data.get("tool_choice") and data["tool_choice"] not in (*TOOL_CHOICE_MODES, *seen):
                data["tool_choice"] = "required"
            unseen = (called | set(instance.tools)) - seen
            script = json.dumps(instance.script, ensure_ascii=False) if unseen else ""
            if any(name in script for name in unseen):
                data["model"]["script"] = None  # its turns name a tool, and its arguments, the reader may not see
        return data


def _script_tool_names(agent: Agent) -> set[str]:
    """The tools a scripted agent's turns call."""
    return {
        str(tool_call.get("name", ""))
        for turn in agent.script or []
        if isinstance(turn, dict)
        for tool_call in turn.get("tool_calls") or []
        if isinstance(tool_call, dict)
    }


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
    disclosure = serializers.SerializerMethodField()

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

    def get_disclosure(self, run: AgentRun) -> dict[str, Any]:
        """What the run can see, naming only tools its principal may use now (``run_shown_disclosure``)."""
        return run_shown_disclosure(run)

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


class RunSummarySerializer(serializers.ModelSerializer):
    """A run as a list shows it: who, where, how far; ``GET /runs/{id}/`` has the conversation and its calls."""

    agent = serializers.CharField(source="agent.name")
    user = serializers.CharField(
        source="user.username", default=None, allow_null=True, help_text="null: a deleted user."
    )

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


class RunRollbackSerializer(SagaSerializer):
    """A run's rollback: its own saga (as ``SagaSerializer``) and, in ``subagent_sagas``, its subagents' runs' sagas.

    A run with no compensable step of its own whose subagents' runs have some shows its saga as an empty one
    (status ``open``, no compensations or rollbacks, ``created_at`` and ``updated_at`` null): follow those of
    ``subagent_sagas``.
    """

    created_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="Null when the run has no saga of its own (only its subagents do)."
    )
    updated_at = serializers.DateTimeField(read_only=True, allow_null=True)
    subagent_sagas = SagaSerializer(
        many=True,
        read_only=True,
        help_text="The sagas of the run's descendant runs (subagents, any depth) that a rollback of the run rolls "
        "back too (GET: those that have one; POST: those rolled back now or still being rolled back), parents first.",
    )

    class Meta(SagaSerializer.Meta):
        fields = [*SagaSerializer.Meta.fields, "subagent_sagas"]

    def to_representation(self, instance: Any) -> dict[str, Any]:
        sagas: RunSagas = instance
        if sagas.saga is not None:
            own = super().to_representation(sagas.saga)
        else:
            run_id = str(sagas.run.id)
            own = {"key": run_id, "tenant": sagas.run.tenant, "run_id": run_id, "status": SagaStatus.OPEN.value}
            own |= {"compensations": [], "rollbacks": [], "created_at": None, "updated_at": None}
        return {**own, "subagent_sagas": SagaSerializer(sagas.subagent_sagas, many=True).data}
