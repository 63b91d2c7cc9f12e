"""Agents (model settings, prompt, tools, limits) and their persisted runs."""

import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from toolhub.conf import toolhub_settings
from toolhub.credential_env import credential_env_validator


class ProviderKind(models.TextChoices):
    OPENAI = "openai", "OpenAI-compatible endpoint"
    SCRIPTED = "scripted", "Scripted (deterministic)"


class SchemaProfile(models.TextChoices):
    """The dialect of JSON Schema the provider's server accepts in tool definitions (``toolhub.tools.profiles``)."""

    OPENAI = "openai", "OpenAI-compatible (strict where a tool declares it)"
    OPENAI_STRICT = "openai-strict", "OpenAI with Structured Outputs (strict wherever it is safe)"
    ANTHROPIC = "anthropic", "Anthropic"
    GEMINI = "gemini", "Gemini (OpenAPI subset)"
    COMPACT = "compact", "Compact: llama.cpp, vLLM, Ollama grammar compilers"


#: The profile a provider of each kind uses unless an administrator picks another.
DEFAULT_SCHEMA_PROFILES = {"openai": SchemaProfile.OPENAI, "scripted": SchemaProfile.OPENAI}


class NotePlacement(models.TextChoices):
    """Where notes for the model (a rollback, a policy) go in the conversation it is sent."""

    TOOL_RESULT = "tool_result", "Appended to the latest tool result (works with every chat template)"
    USER = "user", "A user-role note where it happened"
    SYSTEM = "system", "In the leading system message, rebuilt each turn"


#: Tool choices every OpenAI-compatible server knows; an agent may also name one of its tools.
TOOL_CHOICE_MODES = ("auto", "required", "none")


def tool_choice_problem(choice: str, tools: list[str]) -> str | None:
    """Why ``choice`` is not a valid ``tool_choice`` for an agent with ``tools`` (``None``: it is)."""
    if not choice or choice in TOOL_CHOICE_MODES:
        return None
    if choice in tools:
        return None
    return (
        f"tool_choice must be empty, {', '.join(TOOL_CHOICE_MODES)}, or the name of one of the agent's tools, "
        f"not {choice[:100]!r}."
    )


#: Longest overall deadline a provider may give one model call; the agent task's time limits follow it.
MAX_MODEL_DEADLINE_SECONDS = 900

#: The provider every database has (created by a migration): the deterministic scripted model.
SCRIPTED_PROVIDER_NAME = "scripted"


class ModelProvider(models.Model):
    """A model endpoint, configured by administrators; agents name it, API users never see its URL or key.

    The API key is never stored: ``credential_env`` names the environment variable of the web and
    worker processes that holds it.
    """

    name = models.SlugField(max_length=100, unique=True, help_text="What agents reference, e.g. openai-prod.")
    kind = models.CharField(max_length=16, choices=ProviderKind.choices, default=ProviderKind.OPENAI)
    tenant = models.ForeignKey(
        "toolhub.Tenant",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Only this tenant's agents may use it; empty: every tenant's agents and global agents.",
    )
    base_url = models.URLField(blank=True, help_text="The OpenAI-compatible endpoint, e.g. https://api.openai.com/v1.")
    model_name = models.CharField(max_length=200, blank=True)
    credential_env = models.CharField(
        max_length=100,
        blank=True,
        validators=[
            RegexValidator(r"^[A-Za-z_][A-Za-z0-9_]*$", "Give the NAME of an environment variable."),
            credential_env_validator,
        ],
        help_text="Name of the environment variable holding the API key (never the key); empty: no key.",
    )
    request_timeout_seconds = models.FloatField(
        default=30.0,
        validators=[MinValueValidator(1.0), MaxValueValidator(MAX_MODEL_DEADLINE_SECONDS)],
        help_text="Longest wait for connecting or for the next bytes of an answer.",
    )
    deadline_seconds = models.FloatField(
        default=120.0,
        validators=[MinValueValidator(1.0), MaxValueValidator(MAX_MODEL_DEADLINE_SECONDS)],
        help_text="Longest time one model call may take in all, however the endpoint drips its answer.",
    )
    schema_profile = models.CharField(
        max_length=16,
        choices=SchemaProfile.choices,
        blank=True,
        help_text="How tool schemas are written for this server; empty: the default of its kind (openai).",
    )
    note_placement = models.CharField(
        max_length=16,
        choices=NotePlacement.choices,
        default=NotePlacement.TOOL_RESULT,
        help_text="Where rollback and policy notes go in what the model is sent; several chat templates "
        "refuse a system message after the first.",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """A base URL reaching a private address (metadata service, broker, database) is refused when saved."""
        from toolhub.outbound_addresses import outbound_url_problem

        if refused := outbound_url_problem(self.base_url):
            raise ValidationError({"base_url": refused})

    @property
    def effective_schema_profile(self) -> str:
        """The chosen schema profile, else the default of the provider's kind."""
        return self.schema_profile or str(DEFAULT_SCHEMA_PROFILES.get(self.kind, SchemaProfile.OPENAI))


#: The most tool calls an agent may be allowed per run, whichever door sets it (admin, API, a row written otherwise:
#: the loop never allows more). One turn's calls are requested in one transaction.
MAX_TOOL_CALLS_LIMIT = 1000


def agent_call_limit(agent: "Agent") -> int:
    """The agent's tool-call budget per run as the loop applies it: never above ``MAX_TOOL_CALLS_LIMIT``."""
    return min(agent.max_tool_calls, MAX_TOOL_CALLS_LIMIT)


def default_max_tool_calls() -> int:
    """``TOOLHUB["DEFAULT_MAX_TOOL_CALLS"]``: an agent's tool-call budget when whoever creates it sets none."""
    return toolhub_settings().DEFAULT_MAX_TOOL_CALLS


def default_provider_id() -> int:
    """The scripted provider, so that an agent created without naming one plays its script."""
    # Only the id is read: migrations call this (as a field default) before later columns exist.
    existing = ModelProvider.objects.filter(name=SCRIPTED_PROVIDER_NAME).values_list("pk", flat=True).first()
    if existing is not None:
        return int(existing)
    provider, _ = ModelProvider.objects.get_or_create(
        name=SCRIPTED_PROVIDER_NAME, defaults={"kind": ProviderKind.SCRIPTED}
    )
    return provider.pk


class Agent(models.Model):
    """An LLM (through a named model provider) with a system prompt and the tools it may use.

    An agent belongs to one tenant, or is global (no tenant; only people who cross the tenant
    boundary create or change those). Names are unique within a tenant and among globals.
    """

    name = models.SlugField(max_length=100)
    tenant = models.ForeignKey(
        "toolhub.Tenant", null=True, blank=True, on_delete=models.PROTECT, related_name="+", help_text="Empty: global."
    )
    description = models.TextField(blank=True)
    provider = models.ForeignKey(
        ModelProvider, on_delete=models.PROTECT, related_name="agents", default=default_provider_id
    )
    script = models.JSONField(default=list, blank=True, help_text="Turns of the scripted model.")
    system_prompt = models.TextField(blank=True)
    tools = models.JSONField(default=list, blank=True, help_text="Names of the tools this agent may call.")
    max_tool_calls = models.PositiveIntegerField(
        default=default_max_tool_calls,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_TOOL_CALLS_LIMIT)],
        help_text=f"Tool calls the agent's model may ask for per run (1 to {MAX_TOOL_CALLS_LIMIT}).",
    )
    compensate_on_error = models.BooleanField(default=False)
    parallel_tool_calls = models.BooleanField(default=True)
    serial_tool_execution = models.BooleanField(
        default=False,
        help_text="Execute the calls of one model turn one after another, in the model's order (AgentScope "
        "parallel(false)): the next is dispatched when the previous settles; a call held for approval holds the "
        "ones after it.",
    )
    stream = models.BooleanField(
        default=False,
        help_text="Stream the model's answer (OpenAI-compatible providers); the run shows it as it arrives.",
    )
    tool_choice = models.CharField(
        max_length=100,
        blank=True,
        help_text="auto, required, none, or one of the agent's tools (the model must call it); empty: the server's "
        "default.",
    )
    temperature = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(2.0)],
        help_text="Sampling temperature sent to the model (0 to 2); empty: the server's default.",
    )
    max_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(1_000_000)],
        help_text="Longest answer the model may give per turn, in tokens; empty: the server's default.",
    )
    tool_search = models.BooleanField(
        default=False,
        help_text="Progressive disclosure by search: the model sees its always-visible tools and tool_search, and "
        "each search's hits on the next turn, instead of every tool.",
    )
    group_switching = models.BooleanField(
        default=False, help_text="Give the model reset_equipped_tools to switch among the tool groups it is granted."
    )
    tool_provider = models.CharField(
        max_length=200,
        blank=True,
        help_text="Dotted path of callable(run, latest_user_message) -> tool names shown on a turn (still filtered "
        "by grants); empty: none.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "name"], condition=models.Q(tenant__isnull=False), name="unique_agent_name_in_tenant"
            ),
            models.UniqueConstraint(
                fields=["name"], condition=models.Q(tenant__isnull=True), name="unique_global_agent_name"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class RunStatus(models.TextChoices):
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class StopReason(models.TextChoices):
    NONE = "", "-"
    ANSWERED = "answered"
    IMMEDIATE_RETURN = "immediate_return", "ended by a tool's immediate return"
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_TOKENS = "max_tokens", "token budget spent"
    MODEL_ERROR = "model_error"
    WORKER_LOST = "worker_lost", "its worker stopped while the model answered"
    CONVERSATION_SIZE = "conversation_size", "conversation too large"
    CANCELLED = "cancelled"


class AgentRun(models.Model):
    """One conversation of an agent, persisted so that it resumes on any worker after any restart."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="runs")
    #: What the admin's delete page says when runs keep their agent from being deleted.
    protected_because = {
        "agent": "Runs are the record of what this agent did and name it: an agent that has run is kept "
        "(take its tools away to stop it).",
    }
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="agent_runs")
    tenant = models.CharField(max_length=100, blank=True)  # indexed with the lists' order: agentrun_tenant_created
    context = models.JSONField(default=dict, blank=True)
    input = models.TextField()
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING, db_index=True)
    stop_reason = models.CharField(max_length=32, choices=StopReason.choices, blank=True)
    error = models.TextField(blank=True)
    retryable = models.BooleanField(default=False)
    messages = models.JSONField(default=list, blank=True)
    output = models.TextField(blank=True)
    turn = models.PositiveIntegerField(default=0, help_text="Number of model turns taken.")
    partial_output = models.TextField(
        blank=True, help_text="The model's answer so far while it streams (agents with stream); empty otherwise."
    )
    deferred_calls = models.JSONField(
        default=list,
        blank=True,
        help_text="Calls of the current turn not yet requested (serial execution), as the model sent them.",
    )
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    step_lease_until = models.DateTimeField(
        null=True, blank=True, help_text="Set while one worker talks to the model for this run."
    )
    step_token = models.UUIDField(
        null=True, blank=True, help_text="Names the model call in flight; an answer carrying another token is dropped."
    )
    lost_steps = models.PositiveIntegerField(
        default=0,
        editable=False,
        help_text="Model steps in a row whose worker stopped before the answer was recorded (their lease lapsed); "
        "back to 0 when an answer is recorded or the run is retried (TOOLHUB['RUN_MAX_LOST_STEPS']).",
    )
    disclosure = models.JSONField(
        default=dict,
        blank=True,
        help_text="What the run can see (toolhub.disclosure.DisclosureState): active groups, unfolded facades, "
        "the latest search hits, exclusive mode, and the tools last shown.",
    )
    parent_run = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="children",
        help_text="The run whose subagent tool call started this one (agents_app.subagents).",
    )
    parent_call_id = models.UUIDField(
        null=True, blank=True, unique=True, help_text="The parent's tool call this run answers."
    )
    depth = models.PositiveSmallIntegerField(default=0, help_text="0 for a run started by a person; +1 per subagent.")
    delegated_by = models.JSONField(
        default=list,
        blank=True,
        editable=False,
        help_text="The names of the agents of the runs that started this one, root first: an explicit deny of a tool "
        "to any of them also holds here (a parent denied a tool does not get it through a subagent).",
    )
    retried_by = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        editable=False,
        related_name="+",
        help_text="Who retried this run, or a run above it, besides its user: they set the model's next calls (and "
        "its subagents') in motion in the user's name, so four eyes bar them from approving those calls.",
    )
    limits = models.JSONField(
        default=dict,
        blank=True,
        help_text="Budget given by the parent: max_tool_calls and max_tokens (empty: the agent's own limits).",
    )
    inner_calls_charged = models.PositiveIntegerField(
        default=0,
        editable=False,
        help_text="Tool calls its agentic tools' inner models were let make against a budget its parent gave.",
    )
    updates = models.JSONField(
        default=list,
        blank=True,
        help_text="What the model told the user with the communicate tool (kept) and its latest progress note.",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        # ``runs_to_wake`` (every 60 s) reads the live few, longest idle first; finished runs pile up for ever.
        indexes = [
            models.Index(
                fields=["updated_at", "id"],
                condition=models.Q(status__in=["running", "waiting"]),
                name="agentrun_to_wake",
            ),
            # The runs list's agent filter: whether a tenant's run names the agent, never walking another
            # tenant's runs of a global agent (``toolhub.admin_choices.key_and_tenant_indexed``).
            models.Index(fields=["agent", "tenant"], name="agentrun_agent_tenant"),
            # A tenant's page of runs (admin and API, newest first) reads its own rows, never a bigger tenant's.
            models.Index(fields=["tenant", "created_at", "id"], name="agentrun_tenant_created"),
        ]

    def __str__(self) -> str:
        return f"{self.agent.name} run {self.id} ({self.status})"


class BlackboardEntry(models.Model):
    """One named object on a run's blackboard: an artifact a tool produced, a subagent's answer, a put value.

    Tenant-scoped like its run and size-bounded (``agents_app.blackboard``); values are stored as
    redacted JSON, never with secrets or sensitive fields.
    """

    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="blackboard")
    tenant = models.CharField(max_length=100, blank=True, db_index=True)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=200, help_text="The object's type, e.g. Invoice or the producing tool.")
    value = models.JSONField(null=True, blank=True)
    size = models.PositiveIntegerField(default=0, help_text="Bytes of the value as JSON.")
    produced_by_call_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "blackboard entries"
        indexes = [models.Index(fields=["run", "kind"], name="blackboard_run_kind")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"
